"""fxcpp: torch.fx with a C++ core.

``import fxcpp as fx`` gives torch.fx 1.13's API -- symbolic tracing, the Graph
IR, code generation and GraphModule -- backed by a C++ graph core.
"""
from .graph_module import GraphModule
from ._symbolic_trace import symbolic_trace, Tracer, wrap, PH, ProxyableClassMeta
from .graph import Graph, CodeGen
from .node import Node, map_arg
from .proxy import Proxy
from .interop import from_torch_fx, to_torch_fx

from . import graph as _graph
_graph._install_helpers()
del _graph

try:  # transformation toolkit (separate issue); optional until present
    from .interpreter import Interpreter as Interpreter, Transformer as Transformer
    from .subgraph_rewriter import replace_pattern
except ImportError:  # pragma: no cover
    pass

__all__ = ["PythonCode", "CodeGen", "Graph"]
