"""fxcpp.experimental.proxy_tensor: ``make_fx`` recording into fxcpp graphs (mirrors
torch.fx.experimental.proxy_tensor's entry point).

``make_fx(f, ...)(*args)`` records what ``f`` runs at the dispatcher, ATen operator by operator
(the graph torch.export and AOTAutograd build on), and returns it as an fxcpp ``GraphModule``.
The recording is torch's own: ``torch.fx.experimental.proxy_tensor.make_fx`` with the same
arguments (decompositions, ``tracing_mode='real'|'fake'|'symbolic'``, ``pre_dispatch``,
``record_module_stack``, ``record_stack_traces``, ...), since it is driven by torch's dispatcher
modes, which call back into Python at every operator and cannot be left. Its result is converted
once with ``from_torch_fx``: one linear pass, node names and generated code unchanged, every
``node.meta`` entry (``val`` FakeTensors and SymInts, ``tensor_meta``, ``nn_module_stack``,
``stack_trace``) kept by reference, submodules and parameters shared, and a lazy module (made
under ``_use_lazy_graph_module(True)``, as torch.fx's make_fx makes it) stays lazy. ``f`` may be
an fxcpp GraphModule. The module's other names (``PythonKeyTracer``, ``dispatch_trace``, ...)
are torch's and build torch.fx graphs: import them from torch.
"""
import functools
from typing import Any, Callable

from torch.fx.experimental import proxy_tensor as _torch_proxy_tensor

from .._compatibility import compatibility
from ..interop import from_torch_fx

__all__ = ['make_fx']


@compatibility(is_backward_compatible=False)
@functools.wraps(_torch_proxy_tensor.make_fx)
def make_fx(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
    trace = _torch_proxy_tensor.make_fx(f, *args, **kwargs)

    @functools.wraps(f)
    def traced(*call_args: Any) -> Any:
        return from_torch_fx(trace(*call_args))

    return traced


make_fx.__doc__ = (
    "torch.fx.experimental.proxy_tensor.make_fx with the same arguments; the function it returns "
    "gives an fxcpp GraphModule (see the module docstring).")
