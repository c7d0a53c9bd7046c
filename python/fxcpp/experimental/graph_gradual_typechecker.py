"""fxcpp.experimental.graph_gradual_typechecker: the gradual type checker (GraphTypeChecker, Refine, broadcast_types and the inference rules; mirrors torch.fx.experimental.graph_gradual_typechecker).

torch.fx's implementation. On torch 1.13 it is re-exported as it is: it reads and annotates
nodes (`node.type`) through the torch.fx `Graph`/`Node` API, which fxcpp's classes implement
(and subclass). On torch 2.x, `GraphTypeChecker` and `Refine` are subclasses of torch.fx's that
run on a torch.fx copy of an fxcpp module and copy the node types back (Note [Type annotations
through a torch.fx copy], _on_torch_fx.py). Either way the results are torch.fx's
(tests/python/test_gradual_types.py).
"""
from .._reexport import reexport
from . import _on_torch_fx

reexport(globals(), 'torch.fx.experimental.graph_gradual_typechecker')

if _on_torch_fx.NEEDED:
    GraphTypeChecker = _on_torch_fx.analysis_class(  # noqa: F821 -- bound by reexport
        GraphTypeChecker, ('type_check', 'type_check_node'), 1, __name__)  # noqa: F821
    Refine = _on_torch_fx.analysis_class(  # noqa: F821
        Refine, ('refine', 'symbolic_relations', 'refine_node', 'infer_symbolic_relations'), 0, __name__)  # noqa: F821
