"""fxcpp.experimental.unify_refinements: infer_symbolic_types and the unification of refinement constraints (mirrors torch.fx.experimental.unify_refinements).

torch.fx's implementation, re-exported: it reads and annotates nodes (`node.type`) through the
torch.fx `Graph`/`Node` API, which fxcpp's classes implement (and subclass), so it runs on
fxcpp graphs as it is and gives torch.fx's results (tests/python/test_gradual_types.py).
"""
from .._reexport import reexport

reexport(globals(), 'torch.fx.experimental.unify_refinements')
