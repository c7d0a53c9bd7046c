"""The C++ runtime's argument guards for a GraphModule loaded with runtime='python'.

Note [Argument guards in Python]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Some allowed kernels crash, hang or return uninitialised memory on arguments a
crafted file can give them (Note [Argument guards] in include/fxcpp/torch/policy.h).
The C++ runtime runs each such operator's guard before every call. A module loaded
from an untrusted file for the Python runtime runs the same guards, the same C++
functions (``_C_torch.check_arguments``), so both runtimes refuse the same calls
with the same message, and put back the geometry of the tensors a failed call
wrote (a failed out= resize). Its ``forward`` runs under a TorchFunctionMode that sees each
operator the generated code calls (an ``OpOverload``, which dispatches
``__torch_function__`` through the active mode on every supported torch) and checks
the guarded ones. The mode is installed only where the graph calls a guarded
operator, so other modules run exactly as before; the generated code (``gm.code``)
is unchanged. The guarded forward is an instance attribute, a callable that
follows its module through ``copy.deepcopy``; pickling a module gives the
caller's own program back, without guards (as any GraphModule).
"""
import torch
from torch.overrides import TorchFunctionMode

from fxcpp import _C_torch

__all__ = ['install']


def _qualified(op) -> str:
    schema = op._schema
    return schema.name + (f'.{schema.overload_name}' if schema.overload_name else '')


def _positional(op, args, kwargs):
    """args and kwargs in schema order, defaults filled in where an argument is left out
    (as the C++ runtime binds them: its guards read every argument)."""
    kwargs = kwargs or {}
    out = list(args)
    for a in op._schema.arguments[len(args):]:
        if a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.default_value is not None or a.type.kind() == 'OptionalType':
            out.append(a.default_value)
        else:
            break
    return tuple(out)


class _ArgumentGuards(TorchFunctionMode):
    """Checks the guarded operators' arguments before each call."""

    def __init__(self, guarded):
        super().__init__()
        self.guarded = guarded

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.guarded.get(func)
        if name is None:
            return func(*args, **(kwargs or {}))
        saved = _C_torch.check_arguments(name, _positional(func, args, kwargs))
        if saved is None:
            return func(*args, **(kwargs or {}))
        try:
            return func(*args, **(kwargs or {}))
        except BaseException:
            # Note [A failed call leaves its written tensors as they were] (policy.h)
            _C_torch.restore_written(saved)
            raise


class _GuardedForward:
    """gm.forward with the guards of the operators its graph calls."""

    def __init__(self, module, guarded):
        self.module = module
        self.guarded = guarded

    def __call__(self, *args, **kwargs):
        with _ArgumentGuards(self.guarded):
            return type(self.module).forward(self.module, *args, **kwargs)


def install(gm) -> bool:
    """Makes ``gm`` run the C++ runtime's argument guards of the operators its graph
    calls; returns whether any needs one."""
    guarded = {}
    for node in gm.graph.nodes:
        target = node.target
        if node.op == 'call_function' and isinstance(target, torch._ops.OpOverload) and target not in guarded:
            name = _qualified(target)
            if _C_torch.argument_guarded(name):
                guarded[target] = name
    if guarded:
        gm.forward = _GuardedForward(gm, guarded)
    return bool(guarded)
