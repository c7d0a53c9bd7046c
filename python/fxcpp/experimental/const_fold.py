"""fxcpp.experimental.const_fold: constant folding over fxcpp GraphModules.

``split_const_subgraphs(module)`` finds the nodes whose inputs are all constant (``get_attr``s
or other such nodes, and pure), moves them into a separate constant subgraph, and returns a
:class:`FoldedGraphModule` that runs that subgraph once, on its first call or on
``run_folding()``, and from then on reads the folded values from attributes.

The partitioning is torch.fx's own ``torch.fx.experimental.const_fold.split_const_subgraphs``,
run on a torch.fx view of the module (``fxcpp.to_torch_fx``: ``meta`` dicts are shared, the
submodules/parameters are the same objects); its result is converted back with
``fxcpp.from_torch_fx``, so the caller gets fxcpp objects and ``node.meta`` survives as it does
in torch.fx. (Passing an fxcpp GraphModule straight to torch.fx's function re-traces it with
torch.fx, since it is not a ``torch.fx.GraphModule``, which drops ``node.meta``.)
``skip_folding_node_fn`` is called with the caller's own nodes.
"""
from typing import Callable, Optional, Union

import torch
import torch.fx
from torch.fx.experimental import const_fold as _torch_const_fold
from torch.fx.experimental.const_fold import get_unique_attr_name_in_module  # noqa: F401

from ..graph import Graph
from ..graph_module import GraphModule
from ..interop import from_torch_fx, to_torch_fx
from ..node import Node

__all__ = ['FoldedGraphModule', 'get_unique_attr_name_in_module', 'split_const_subgraphs']


class FoldedGraphModule(GraphModule):
    """A GraphModule with a second module, ``const_subgraph_module``, whose outputs are the folded
    constants. On the first call (or ``run_folding()``) that module is run once and its result is
    stored as parameter(s) under ``fx_const_folded_attrs_name``, which ``graph`` reads with a
    ``get_attr``."""

    def __init__(self, root: torch.nn.Module, graph: Graph, const_subgraph: Optional[Graph] = None,
                 fx_const_folded_attrs_name: Optional[str] = None,
                 device_for_folded_attrs: str = "cuda"):
        super().__init__(root, graph)
        self.const_subgraph_module = (None if const_subgraph is None
                                      else GraphModule(root, const_subgraph))
        self.has_folding_been_run = False
        self.fx_const_folded_attrs_name = fx_const_folded_attrs_name
        self.device_for_folded_attrs = device_for_folded_attrs

    def __call__(self, *args, **kwargs):
        if not self.has_folding_been_run:
            self.run_folding()
        return super().__call__(*args)

    def run_folding(self):
        """Run the constant subgraph and store its outputs (once)."""
        if self.const_subgraph_module is None or self.fx_const_folded_attrs_name is None:
            return
        assert not self.has_folding_been_run
        self.has_folding_been_run = True
        values = self.const_subgraph_module()
        device = self.device_for_folded_attrs

        def as_param(v):
            if isinstance(v, int):
                v = torch.Tensor([v]).to(device=device)
            grad = v.requires_grad if isinstance(v, torch.Tensor) else False
            return torch.nn.Parameter(v, requires_grad=grad)

        if isinstance(values, tuple):
            folded = torch.nn.ParameterList([as_param(v) for v in values])
        else:
            folded = as_param(values)
        setattr(self, self.fx_const_folded_attrs_name, folded)


def split_const_subgraphs(
    module: Union[torch.nn.Module, GraphModule, torch.fx.GraphModule],
    skip_folding_node_fn: Optional[Callable[[Node], bool]] = None,
    device_for_folded_attrs: str = "cpu",
) -> FoldedGraphModule:
    """Split ``module``'s constant subgraph out (see the module docstring). ``module`` is an
    fxcpp or torch.fx GraphModule, or an ``nn.Module`` (traced with ``fxcpp.symbolic_trace``)."""
    if isinstance(module, (GraphModule, torch.fx.GraphModule)):
        traced = module
    else:
        from .._symbolic_trace import symbolic_trace
        traced = symbolic_trace(module)
    view = to_torch_fx(traced)
    skip = skip_folding_node_fn
    if skip is not None and view is not traced:
        theirs_to_ours = dict(zip(view.graph.nodes, traced.graph.nodes))

        def skip(node):
            return skip_folding_node_fn(theirs_to_ours.get(node, node))
    folded = _torch_const_fold.split_const_subgraphs(view, skip, device_for_folded_attrs)
    out = FoldedGraphModule(folded, from_torch_fx(folded.graph), None,
                            folded.fx_const_folded_attrs_name, folded.device_for_folded_attrs)
    if folded.const_subgraph_module is not None:
        # its get_attrs name attributes of the split module, which ``folded`` lacks
        out.const_subgraph_module = from_torch_fx(folded.const_subgraph_module)
    return out
