"""Graphs captured in C++: TorchScript modules to fxcpp graphs.

``from_torchscript`` runs a TorchScript module once in C++ under fxcpp's
capture (Note [Capture by dispatcher mode] in include/fxcpp/torch/capture.h),
writes the graph with the C++ writer (``fxcpp::torch::save``) and reads it
back with :func:`fxcpp.aten.load`, so the result is an ordinary lowered
GraphModule.
"""
import io
import os

import torch

from .. import _C_torch
from ._runtime import _load_bytes, load

__all__ = ['from_torchscript']


def from_torchscript(module, *example_inputs, path=None, runtime: str = 'python',
                     dead_code_elimination: bool = True, execution: str = 'real'):
    """Captures a TorchScript module's forward as an fxcpp GraphModule.

    ``module`` is a ``torch.jit.ScriptModule`` (from ``torch.jit.trace`` or
    ``torch.jit.script``; it is ``torch.jit.save``-d to memory first), or the
    path of a ``.pt`` file saved with ``torch.jit.save``. ``example_inputs``
    are the tensors forward is run on, once, in TorchScript's C++ interpreter:
    every ATen operator it calls through the dispatcher becomes a
    call_function node whose target is the ATen overload
    (``torch.ops.aten._convolution.default``), parameters and buffers are
    get_attr nodes named by their module path, and placeholders are named
    after forward's parameters.

    The graph is **specialised to the example inputs**, as ``torch.jit.trace``
    is: what the interpreter computed without calling an operator (sizes,
    ``aten::Int`` of sizes, list construction, branches taken) is baked in as
    constants, so run it on inputs of the example shapes (a batch size read
    in forward is a constant too). The module's training flag is used as it
    is: call ``.eval()`` before scripting for inference graphs.

    The result prints, transforms, saves (``fxcpp.aten.save``) and runs like
    a lowered GraphModule. ``path``: also keep the .fxpt file the C++ writer
    wrote there. ``runtime='cpp'`` returns the file loaded into the C++
    runtime (``CppModule``) instead. Loading a ``.pt`` file runs TorchScript
    code: pass only files you trust.

    ``dead_code_elimination=False`` keeps every recorded operator call, used
    or not (the order they ran in). ``execution`` is where forward runs:
    ``'real'`` (the example inputs), ``'meta'`` (Meta tensors of their sizes
    and dtypes, with the module's parameters and buffers turned into Meta
    tensors for the run: nothing is computed; an operator without a Meta
    kernel raises RuntimeError naming it) or ``'meta_or_real'`` (Meta, and the
    whole capture again on the real tensors when that fails). In a Python
    process the Meta kernels torch registers from Python
    (``torch._meta_registrations``: convolution, batch norm, relu, ...) count.
    """
    if runtime not in ('python', 'cpp'):
        raise ValueError(f"fxcpp.aten.from_torchscript: runtime must be 'python' or 'cpp', not {runtime!r}")
    if execution not in ('real', 'meta', 'meta_or_real'):
        raise ValueError(f"fxcpp.aten.from_torchscript: execution must be 'real', 'meta' or 'meta_or_real', "
                         f"not {execution!r}")
    if isinstance(module, torch.jit.ScriptModule):
        buf = io.BytesIO()
        torch.jit.save(module, buf)
        source = buf.getvalue()
    elif isinstance(module, (str, bytes, os.PathLike)):
        source = os.fspath(module)
    else:
        raise TypeError(f'fxcpp.aten.from_torchscript: expected a torch.jit.ScriptModule or the path of a '
                        f'TorchScript file, got {type(module).__name__} (torch.jit.trace or torch.jit.script it first)')
    for x in example_inputs:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f'fxcpp.aten.from_torchscript: example inputs must be tensors, got {type(x).__name__}')
    inputs = tuple(x.detach() for x in example_inputs)
    options = dict(dead_code_elimination=bool(dead_code_elimination), execution=execution)
    if path is not None:
        _C_torch.from_torchscript(source, inputs, os.fspath(path), **options)
        return load(path, runtime=runtime, trusted=True)  # captured from the caller's own model
    # No path: the C++ writer's bytes go straight to the loader (no temporary file).
    data = _C_torch.from_torchscript(source, inputs, None, **options)['data']
    return _load_bytes(data, runtime=runtime, trusted=True)
