"""fxcpp.passes.param_fetch: attach lowering attributes to ``call_module`` nodes (mirrors
torch.fx.passes.param_fetch 1.13).

``module_fetch_book``, ``default_matching`` and ``extract_attrs_for_lowering`` are torch.fx's
own, re-exported (the book is the same dict object, so an entry added to either is seen by
both). ``lift_lowering_attrs_to_nodes`` is fxcpp's: torch.fx's descends into submodules that are
``torch.fx.GraphModule``s only, so on an fxcpp module holding fxcpp GraphModules (the output of
``split_module``) it would ask the book for ``GraphModule`` and raise "not in the
module_fetch_book". This one descends into GraphModules of both libraries.
"""
import torch.fx
from torch.fx.passes.param_fetch import (  # noqa: F401  (re-exported)
    default_matching, extract_attrs_for_lowering, module_fetch_book)

from .._compatibility import compatibility
from ..graph_module import GraphModule

__all__ = ['default_matching', 'extract_attrs_for_lowering', 'lift_lowering_attrs_to_nodes']

_GRAPH_MODULES = (GraphModule, torch.fx.GraphModule)


@compatibility(is_backward_compatible=False)
def lift_lowering_attrs_to_nodes(fx_module) -> None:
    """Set ``node.attrs_for_lowering`` (``extract_attrs_for_lowering`` of the called module) on
    every ``call_module`` node of ``fx_module``, recursing into called GraphModules instead."""
    modules = dict(fx_module.named_modules())
    for node in fx_module.graph.nodes:
        if node.op != "call_module":
            continue
        called = modules[node.target]
        if isinstance(called, _GRAPH_MODULES):
            lift_lowering_attrs_to_nodes(called)
        else:
            node.attrs_for_lowering = extract_attrs_for_lowering(called)
