"""fxcpp.experimental.refinement_types: Equality constraints of the gradual type checker (mirrors torch.fx.experimental.refinement_types).

torch.fx's implementation, re-exported: it reads and annotates nodes (`node.type`) through the
torch.fx `Graph`/`Node` API, which fxcpp's classes implement (and subclass), so it runs on
fxcpp graphs as it is and gives torch.fx's results (tests/python/test_gradual_types.py).
"""
from .._reexport import reexport

reexport(globals(), 'torch.fx.experimental.refinement_types')
