"""fxcpp: torch.fx with a C++ core.

``import fxcpp as fx`` gives torch.fx 1.13's API -- symbolic tracing, the Graph
IR, code generation and GraphModule -- backed by a C++ graph core.
"""
from ._version import __version__
from ._build_check import check as _check_build
_check_build()  # before any extension loads (Note [One torch per build])
del _check_build
from .graph_module import GraphModule
from ._symbolic_trace import symbolic_trace, Tracer, wrap, PH, ProxyableClassMeta
from .graph import Graph, CodeGen
from .node import Node, map_arg, has_side_effect
from .proxy import Proxy
from .interop import from_torch_fx, to_torch_fx

from . import graph as _graph
_graph._install_helpers()
del _graph

from .interpreter import Interpreter, Transformer
from .subgraph_rewriter import replace_pattern

import importlib.util as _util
if _util.find_spec('torch.fx.config') is not None:  # torch.fx.config itself (fxcpp/config.py)
    from . import config
del _util



def _dynamo_backend(gm, example_inputs):
    """torch.compile's backend "fxcpp" (fxcpp.aten._dynamo.fxcpp_backend, imported on first use)."""
    from .aten._dynamo import fxcpp_backend
    return fxcpp_backend(gm, example_inputs)


# torch.compile(backend="fxcpp"): registered now if torch._dynamo is loaded (an installed fxcpp is
# also found through its torch_dynamo_backends entry point; fxcpp.aten._dynamo.register() forces it).
from ._torch_compat import register_dynamo_backend as _register_dynamo_backend
_register_dynamo_backend('fxcpp', _dynamo_backend)
del _register_dynamo_backend

import os as _os

#: The folder to give CMake (-DCMAKE_PREFIX_PATH) so that find_package(fxcpp) finds the C++
#: library, headers and CMake package installed with this Python package (pip install), like
#: torch.utils.cmake_prefix_path: targets fxcpp::fxcpp_core and fxcpp::fxcpp_torch, linked
#: against the torch this package was built for.
cmake_prefix_path = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), 'share', 'cmake')
del _os

# What `from fxcpp import *` binds: what `from torch.fx import *` binds on the installed torch
# (_torch_compat.TORCH_FX_ALL), so that `from fxcpp import *` in place of torch.fx's binds the
# same names; fxcpp's own (from_torch_fx, to_torch_fx, explore, aten, ...) are imported by name.
from ._torch_compat import TORCH_FX_ALL as _TORCH_FX_ALL
__all__ = list(_TORCH_FX_ALL)
del _TORCH_FX_ALL


def explore(obj, name=None, **kwargs):
    """The graph explorer's page for a GraphModule, Graph or ExportedProgram
    (fxcpp.explorer.explore; imported on first use)."""
    from .explorer import explore as _explore
    return _explore(obj, name, **kwargs)


def explore_diff(before, after, name=None, **kwargs):
    """The graph explorer's before/after page (fxcpp.explorer.explore_diff)."""
    from .explorer import explore_diff as _explore_diff
    return _explore_diff(before, after, name, **kwargs)
