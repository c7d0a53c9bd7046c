"""fxcpp.experimental.unify_refinements: infer_symbolic_types and the unification of refinement constraints (mirrors torch.fx.experimental.unify_refinements).

torch.fx's implementation. On torch 1.13 it is re-exported as it is: it reads and annotates
nodes (`node.type`) through the torch.fx `Graph`/`Node` API, which fxcpp's classes implement
(and subclass). On torch 2.x the functions that annotate a graph run on a torch.fx copy of an
fxcpp module or graph and copy the node types back (Note [Type annotations through a torch.fx
copy], _on_torch_fx.py). Either way the results are torch.fx's (tests/python/test_gradual_types.py).
"""
from .._reexport import reexport
from . import _on_torch_fx

reexport(globals(), 'torch.fx.experimental.unify_refinements')

if _on_torch_fx.NEEDED:
    infer_symbolic_types = _on_torch_fx.graph_function(infer_symbolic_types, (0,))  # noqa: F821
    infer_symbolic_types_single_pass = _on_torch_fx.graph_function(  # noqa: F821
        infer_symbolic_types_single_pass, (0,))  # noqa: F821
    substitute_all_types = _on_torch_fx.graph_function(substitute_all_types, (0,))  # noqa: F821
