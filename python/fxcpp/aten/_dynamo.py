"""fxcpp.aten._dynamo: ``torch.compile(model, backend="fxcpp")``.

Dynamo hands the backend each captured FX graph with fake example inputs.
The backend runs AOTAutograd on it (``aot_module_simplified``), which
functionalizes the graph and decomposes it to ATen overloads; the inference
graph AOTAutograd hands its compiler is checked with
:func:`fxcpp.aten.check_lowered`, encoded by the C++ writer
(``_format._to_bytes``) and loaded from those bytes by the C++ runtime
(``_C_torch.load``): no temporary file, and the whole graph then runs with
the GIL released (Note [Runtime and the GIL]).

Inference only. A graph that needs autograd (grad mode on and an input that
requires grad, so AOTAutograd would build a joint forward/backward), or one
the runtime refuses (``check_lowered`` or the loader says no), falls back to
eager PyTorch for that graph, with one line on ``logging.getLogger('fxcpp')``
saying why. Lifted parameters and buffers are graph inputs (AOTAutograd
passes them each call, by reference); Dynamo's symbolic sizes are int inputs
and ``aten.sym_size`` / ``operator`` nodes, which the runtime computes, so a
graph compiled with ``dynamic=True`` serves several batch sizes.

Registered as the ``torch_dynamo_backends`` entry point ``fxcpp`` (an
installed fxcpp needs no import), and by :func:`register` (called on
``import fxcpp`` when torch._dynamo is already loaded; see
``_torch_compat.register_dynamo_backend``).
"""
import logging

import torch

__all__ = ['fxcpp_backend', 'register']

_log = logging.getLogger('fxcpp')


def _eager(gm, why):
    _log.warning('fxcpp backend: running graph %s in eager PyTorch: %s', _graph_name(gm), why)
    return gm.forward


def _graph_name(gm):
    return f'{type(gm).__name__}({sum(1 for _ in gm.graph.nodes)} nodes)'


def _needs_grad(example_inputs) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def _load(aot_gm):
    """The C++ runtime for an AOTAutograd inference graph (a torch.fx GraphModule),
    or raises (LoweringError, ValueError, RuntimeError, TypeError) saying why not."""
    from .. import _C_torch
    from ..interop import from_torch_fx
    from ._format import _to_bytes
    from ._lower import check_lowered
    gm = from_torch_fx(aot_gm)
    check_lowered(gm)
    for node in gm.graph.nodes:
        # Other namespaces' operators (torch.library custom ops) may have Python kernels: the
        # runtime could call them (the kernel takes the GIL back), but the graph is meant to run
        # without Python, and an untrusted file could not name them: kept in PyTorch.
        if node.op == 'call_function' and isinstance(node.target, torch._ops.OpOverload) \
                and node.target.namespace != 'aten':
            raise ValueError(f'node `{node.name}` calls {node.target}, not an ATen operator')
    # The writer reads what node.meta holds; Dynamo's fake values there carry symbolic sizes, and
    # turning one into an int would add a guard that specializes the graph to this size. The
    # converted nodes share the AOT graph's meta dicts (fxcpp.interop): given fresh ones.
    for node in gm.graph.nodes:
        node.meta = {}
    # AOTAutograd calls its compiler with its FakeTensorMode active; the writer detaches the real
    # constants (get_attr tensors), which that mode refuses: it is set aside while they are written.
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        data = _to_bytes(gm)
    # The graph comes from the caller's own model: trusted (docs/fxpt_format.md).
    return _C_torch.load(data, plan_memory=True, trusted=True)


def _inference_compiler(aot_gm, example_inputs):
    """AOTAutograd's compiler for inference graphs: the boxed callable it expects
    (takes a list of inputs and clears it), running the graph in the C++ runtime."""
    from functorch.compile import make_boxed_func
    try:
        runtime = _load(aot_gm)
    except Exception as e:  # noqa: BLE001 -- any refusal means "run it in PyTorch"
        return make_boxed_func(_eager(aot_gm, f'the C++ runtime cannot run it ({type(e).__name__}: '
                                              f'{str(e).splitlines()[0] if str(e) else ""})'))

    def run(args):
        inputs = tuple(args)
        args.clear()
        out = runtime.run(*inputs)
        return out if isinstance(out, (list, tuple)) else (out,)
    run._boxed_call = True
    return run


def _training_compiler(aot_gm, example_inputs):
    from functorch.compile import make_boxed_func
    return make_boxed_func(_eager(aot_gm, 'the graph needs autograd (training)'))


def fxcpp_backend(gm: torch.fx.GraphModule, example_inputs):
    """The Dynamo backend: ``torch.compile(model, backend=fxcpp_backend)`` or
    ``backend="fxcpp"``. Returns a callable running ``gm``'s ATen graph in the
    C++ runtime, or ``gm.forward`` (eager) with a log line when it cannot."""
    if _needs_grad(example_inputs):
        return _eager(gm, 'grad mode is on and an input requires grad (fxcpp runs inference only)')
    from torch._functorch.aot_autograd import aot_module_simplified
    return aot_module_simplified(gm, example_inputs, fw_compiler=_training_compiler,
                                 inference_compiler=_inference_compiler)


def register() -> bool:
    """Registers :func:`fxcpp_backend` as Dynamo's backend ``"fxcpp"`` (idempotent).
    Returns False on a torch without torch._dynamo."""
    from .._torch_compat import register_dynamo_backend
    return register_dynamo_backend('fxcpp', fxcpp_backend, import_dynamo=True)
