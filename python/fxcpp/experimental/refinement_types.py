"""fxcpp.experimental.refinement_types: Equality constraints of the gradual type checker (mirrors torch.fx.experimental.refinement_types).

torch.fx's implementation, re-exported: it reads and annotates nodes (`node.type`) through the
torch.fx `Graph`/`Node` API, which fxcpp's classes implement (and subclass), so it runs on
fxcpp graphs as it is and gives torch.fx's results (tests/python/test_gradual_types.py).
"""
import torch.fx.experimental.refinement_types as _impl

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith('__')})
__all__ = [k for k, v in vars(_impl).items()
           if not k.startswith('_') and getattr(v, '__module__', None) == _impl.__name__]
del _impl
