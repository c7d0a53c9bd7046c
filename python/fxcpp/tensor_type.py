"""fxcpp.tensor_type: TensorType and Dyn, the gradual types of the type checker (mirrors torch.fx.tensor_type; the same classes, so annotations made with either module are one type).

torch.fx's implementation, re-exported: it reads and annotates nodes (`node.type`) through the
torch.fx `Graph`/`Node` API, which fxcpp's classes implement (and subclass), so it runs on
fxcpp graphs as it is and gives torch.fx's results (tests/python/test_gradual_types.py).
"""
from ._reexport import reexport

reexport(globals(), 'torch.fx.tensor_type')
