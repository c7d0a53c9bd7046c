"""Stack-trace override helpers (mirrors ``torch.fx.traceback`` 1.13)."""
import traceback as _std_traceback
from contextlib import contextmanager
from typing import List, Optional

from ._compatibility import compatibility

__all__ = ['override_stack_trace', 'set_stack_trace', 'append_stack_trace',
           'format_stack', 'is_stack_trace_overridden']

current_stack: List[str] = []
is_overridden = False


@compatibility(is_backward_compatible=False)
@contextmanager
def override_stack_trace():
    global is_overridden
    previous = is_overridden
    is_overridden = True
    try:
        yield
    finally:
        is_overridden = previous


@compatibility(is_backward_compatible=False)
def set_stack_trace(stack: List[str]):
    global current_stack
    if is_overridden and stack:
        current_stack = stack


@compatibility(is_backward_compatible=False)
@contextmanager
def append_stack_trace(stack: Optional[str]):
    """
    Push ``stack`` (one whole formatted trace) onto the override stack for the
    duration of the ``with`` block; no-op unless overriding is active.
    """
    if not (is_overridden and stack):
        yield
        return
    current_stack.append(stack)
    try:
        yield
    finally:
        current_stack.pop()


@compatibility(is_backward_compatible=False)
def format_stack() -> List[str]:
    if is_overridden:
        return list(current_stack)
    # not overridden: the regular Python stack
    return _std_traceback.format_stack()


@compatibility(is_backward_compatible=False)
def is_stack_trace_overridden() -> bool:
    return is_overridden
