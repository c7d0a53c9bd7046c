"""``annotate`` helper (mirrors ``torch.fx.annotate``)."""
import torch.fx

from ._compatibility import compatibility
from .proxy import Proxy  # noqa: F401  (torch.fx.annotate has the name too)


@compatibility(is_backward_compatible=False)
def annotate(val, type):
    # Only Proxies (i.e. values seen while tracing) get annotated; others pass
    # through. fxcpp's Proxy subclasses torch.fx's, and a torch.fx Proxy (a
    # model traced by torch.fx calling fxcpp.annotate) is annotated as well.
    if not isinstance(val, torch.fx.Proxy):
        return val
    node = val.node
    if node.type:
        raise RuntimeError(f"Tried to annotate a value that already had a type on it!"
                           f" Existing type is {node.type} "
                           f"and new type is {type}. "
                           f"This could happen if you tried to annotate a function parameter "
                           f"value (in which case you should use the type slot "
                           f"on the function signature) or you called "
                           f"annotate on the same value twice")
    node.type = type
    return val


# torch.fx.annotate's __all__ where the installed torch has one (torch.fx 1.13 has none).
import torch.fx.annotate as _torch_module  # noqa: E402
if hasattr(_torch_module, '__all__'):
    __all__ = [n for n in _torch_module.__all__ if n in globals()]
del _torch_module
