"""torch.fx modules whose code only misses fxcpp's nodes in ``map_arg``, run with a ``map_arg``
that sees them.

Note [torch.fx code with a map_arg for both libraries]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Some torch.fx modules (the accelerator partitioner and its ``partitioner_utils``) work on the
caller's own nodes, keyed in the caller's dicts, and touch the graph only through attributes
and ``torch.fx.node.map_arg``. On torch 2.x that ``map_arg`` is C code (``_fx_map_arg``) that maps
``torch._C._NodeBase`` instances only, so fxcpp's nodes (no torch.fx Nodes there, docs/design.md)
pass through unmapped and the module silently loses every edge: inputs are not counted, sizes
and latencies come out wrong, the generated split code names values nobody defined. A run on a
``to_torch_fx`` copy does not fit either, because the caller hands in and reads back its own
nodes (``partition.nodes``, a latency table keyed by node).

``instance(name, replace)`` makes a private instance of such a module: the installed torch's own
file, executed as a new module object named after fxcpp's counterpart (the shared
``sys.modules`` entry and torch.fx's behaviour are untouched), after which every module-level name
bound to an object in ``replace`` is rebound to its replacement. The functions look their globals
up at call time, so they then call ``map_any_arg`` (torch.fx's ``map_arg`` for nodes of either
library) and fxcpp's ``split_module``/``get_size_of_all_nodes``. Nothing is copied into fxcpp's
source; what the module computes stays torch.fx's. On torch 1.13 fxcpp's nodes are torch.fx
Nodes and ``map_arg`` stays torch.fx's; an instance there only swaps in fxcpp's functions that
build fxcpp objects (``split_module``).
"""
import importlib.util
import types
from typing import Any, Callable, Dict

import torch.fx

from .. import _torch_compat
from ..node import map_aggregate, Node

#: Whether torch.fx's map_arg misses fxcpp nodes (torch.fx 2.x's C Node base).
NEEDED = _torch_compat.FX_NODE_HAS_C_BASE

_NODE_TYPES = (Node, torch.fx.Node)


def map_any_arg(a: Any, fn: Callable[[Any], Any]) -> Any:
    """torch.fx's ``map_arg`` for nodes of fxcpp and of torch.fx alike."""
    assert callable(fn), "torch.fx.map_arg(a, fn): fn must be a callable"
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, _NODE_TYPES) else x)


def instance(name: str, as_name: str, replace: Dict[int, Any]) -> types.ModuleType:
    """A private instance of torch module ``name`` (named ``as_name``) whose module-level names
    bound to an object with id in ``replace`` are rebound to ``replace[id]``."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.loader is None:
        raise ImportError(f"fxcpp: cannot find the source of {name} in the installed torch")
    mine = importlib.util.spec_from_file_location(as_name, spec.origin)
    module = importlib.util.module_from_spec(mine)
    mine.loader.exec_module(module)
    for key, value in list(vars(module).items()):
        if id(value) in replace:
            setattr(module, key, replace[id(value)])
    return module
