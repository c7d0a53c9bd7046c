"""fxcpp.config: torch.fx.config itself, where the installed torch has one (2.x).

The settings are process-wide switches that torch's own passes and Dynamo read from
torch.fx.config, so fxcpp keeps no copy: ``fxcpp.config is torch.fx.config``, and a flag
set through either name is the one both libraries see. On a torch whose torch.fx has no
config module (1.13) there is none here either, as there is none in torch.fx.
"""
import importlib.util as _util
import sys as _sys

if _util.find_spec('torch.fx.config') is None:
    del _sys.modules[__name__]
    raise ModuleNotFoundError(f"No module named {__name__!r}", name=__name__)

import torch.fx.config as _config  # noqa: E402

_sys.modules[__name__] = _config
