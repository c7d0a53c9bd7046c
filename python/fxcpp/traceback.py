"""Stack traces and node metadata while transforming graphs (mirrors ``torch.fx.traceback``).

torch.fx 1.13's module is a stack-trace override that Transformer.transform turns on while
the tracer records nodes; this module implements it (fxcpp's tracer and Interpreter read
``is_overridden`` and ``current_stack``). torch.fx 2.x replaced it by node-metadata
preservation (``preserve_node_meta``, ``set_current_meta``, ``NodeSource``/``from_node``
provenance, ``annotate``...), whose state torch's own tracers, Dynamo and AOTAutograd read in
``torch.fx.traceback``: on 2.x this module binds torch.fx.traceback's public functions and
classes themselves (one state, shared with torch), and keeps the override underneath for
fxcpp's Transformer (format_stack and set_stack_trace act as 1.13's while it is on).
"""
import traceback as _std_traceback
from contextlib import contextmanager
from typing import List, Optional

from . import _torch_compat
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


if _torch_compat.FX_API_2:
    import torch.fx.traceback as _fx_traceback

    __all__ = list(_fx_traceback.__all__)
    _fx_names = {name: getattr(_fx_traceback, name) for name in __all__}
    _override_format_stack, _override_set_stack_trace = format_stack, set_stack_trace

    @compatibility(is_backward_compatible=False)
    def format_stack() -> List[str]:
        if is_overridden:
            return _override_format_stack()
        return _fx_traceback.format_stack()

    @compatibility(is_backward_compatible=False)
    def set_stack_trace(stack: List[str]):
        if is_overridden:
            return _override_set_stack_trace(stack)
        return _fx_traceback.set_stack_trace(stack)

    globals().update({name: obj for name, obj in _fx_names.items() if name not in ('format_stack', 'set_stack_trace')})
    del _fx_names
