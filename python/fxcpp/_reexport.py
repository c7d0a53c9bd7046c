"""One helper for fxcpp modules that are torch.fx's own module under fxcpp's path."""
import importlib
import types
from typing import Any, Dict, List


def reexport(namespace: Dict[str, Any], module_name: str) -> None:
    """Copies every global of ``module_name`` (a torch.fx module whose code runs on fxcpp objects
    as it is) into ``namespace`` (the re-exporting module's ``globals()``), and sets ``__all__``
    to the public names that module defines itself. The objects are torch.fx's, not copies, so
    registries and classes are shared by both libraries."""
    module = importlib.import_module(module_name)
    namespace.update({k: v for k, v in vars(module).items() if not k.startswith('__')})
    namespace['__all__'] = public_names(module)


def public_names(module: types.ModuleType) -> List[str]:
    """The public names ``module`` defines itself (not those it imports), in definition order."""
    return [k for k, v in vars(module).items()
            if not k.startswith('_') and getattr(v, '__module__', None) == module.__name__]
