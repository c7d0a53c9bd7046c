"""fxcpp.passes.graph_manipulation: node sizes and target replacement (mirrors
torch.fx.passes.graph_manipulation 1.13).

``get_size_of_node``, ``get_tensor_meta`` and ``size_bytes`` are torch.fx's own, re-exported:
they only read a node's ``meta`` and the module's parameters. ``replace_target_nodes_with`` is
fxcpp's for fxcpp modules: torch.fx's rebuilds the graph with torch.fx's ``map_arg``, which on
torch 2.x sees fxcpp nodes as constants (they are no ``torch.fx.Node`` there), so the rebuilt
graph would point at the old graph's nodes. A torch.fx module is handed to torch.fx's.
``get_size_of_all_nodes(gm, args)`` is fxcpp's: torch.fx's runs torch.fx's ``ShapeProp``, whose
``Interpreter`` refuses a module that is not a ``torch.fx.GraphModule``. Here an fxcpp module is
propagated with fxcpp's ``ShapeProp`` (a torch.fx one with torch.fx's), then every node before the
output gets ``node.size_bytes`` from ``get_size_of_node``, as in torch.fx.
"""
from typing import List, Optional

import torch
import torch.fx
from torch.fx.passes import graph_manipulation as _torch_graph_manipulation
from torch.fx.passes.graph_manipulation import (  # noqa: F401  (re-exported)
    get_size_of_node, get_tensor_meta, size_bytes)
from torch.fx.passes.shape_prop import ShapeProp as _TorchShapeProp

from .._compatibility import compatibility
from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Target, map_arg
from .shape_prop import ShapeProp

__all__ = ['replace_target_nodes_with', 'size_bytes', 'get_size_of_all_nodes', 'get_tensor_meta',
           'get_size_of_node']


@compatibility(is_backward_compatible=False)
def replace_target_nodes_with(fx_module: GraphModule, old_op: str, old_target: Target, new_op: str,
                              new_target: Target) -> None:
    """Give every ``old_op`` node calling ``old_target`` the op ``new_op`` and target
    ``new_target``, keeping its name, args and kwargs: ``fx_module.graph`` becomes a rebuilt graph
    where the other nodes are copies (``meta`` included) and the replaced ones new nodes (no
    ``meta``, no type), as torch.fx's. Linear in the graph."""
    if not isinstance(fx_module, GraphModule):
        return _torch_graph_manipulation.replace_target_nodes_with(fx_module, old_op, old_target, new_op, new_target)
    new_graph = Graph()
    env = {}
    for node in fx_module.graph.nodes:
        if node.op == old_op and node.target == old_target:
            args, kwargs = map_arg((node.args, node.kwargs), env.__getitem__)
            env[node] = new_graph.create_node(new_op, new_target, args, kwargs, node.name)
        else:
            env[node] = new_graph.node_copy(node, env.__getitem__)
    fx_module.graph = new_graph


@compatibility(is_backward_compatible=False)
def get_size_of_all_nodes(fx_module, args: Optional[List[torch.Tensor]] = None) -> None:
    """Set ``node.size_bytes`` (output size, and output plus parameter size) on every node
    before the output. With ``args``, shapes are propagated first; without, the nodes must
    already carry ``meta['tensor_meta']``."""
    if args is not None:
        prop = _TorchShapeProp if isinstance(fx_module, torch.fx.GraphModule) else ShapeProp
        prop(fx_module).propagate(*args)
    for node in fx_module.graph.nodes:
        if node.op == "output":
            break
        node.size_bytes = get_size_of_node(fx_module, node)
