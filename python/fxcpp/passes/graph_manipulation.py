"""fxcpp.passes.graph_manipulation: node sizes and target replacement (mirrors
torch.fx.passes.graph_manipulation 1.13).

``replace_target_nodes_with``, ``get_size_of_node``, ``get_tensor_meta`` and ``size_bytes`` are
torch.fx's own, re-exported: they work on fxcpp modules as they are (``replace_target_nodes_with``
builds a ``torch.fx.Graph`` that the fxcpp GraphModule's ``graph`` setter converts).
``get_size_of_all_nodes(gm, args)`` is fxcpp's: torch.fx's runs torch.fx's ``ShapeProp``, whose
``Interpreter`` refuses a module that is not a ``torch.fx.GraphModule``. Here an fxcpp module is
propagated with fxcpp's ``ShapeProp`` (a torch.fx one with torch.fx's), then every node before the
output gets ``node.size_bytes`` from ``get_size_of_node``, as in torch.fx.
"""
from typing import List, Optional

import torch
import torch.fx
from torch.fx.passes.graph_manipulation import (  # noqa: F401  (re-exported)
    get_size_of_node, get_tensor_meta, replace_target_nodes_with, size_bytes)
from torch.fx.passes.shape_prop import ShapeProp as _TorchShapeProp

from .._compatibility import compatibility
from .shape_prop import ShapeProp

__all__ = ['replace_target_nodes_with', 'size_bytes', 'get_size_of_all_nodes', 'get_tensor_meta',
           'get_size_of_node']


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
