"""fxcpp.passes.graph_transform_observer: GraphTransformObserver (mirrors
torch.fx.passes.graph_transform_observer, torch 2.x).

Inside ``with GraphTransformObserver(gm, passname, log_url=...)`` the nodes a pass creates,
erases and replaces in ``gm`` (and in deep copies made meanwhile) are recorded through the
GraphModule's node hooks (Note [GraphModule node hooks] in graph.py): their names in
``created_nodes``/``erased_nodes``, their provenance in ``node.meta["from_node"]`` as
``torch.fx.traceback.NodeSource`` records, and with a ``log_url`` the graph before and after is
written as DOT files, the changed nodes filled yellow.

This is torch.fx's class with one method of its own: torch.fx 2.x's replace hook asserts
``isinstance(new, torch.fx.Node)``, which an fxcpp node is not on 2.x (its C base is fxcpp's,
docs/design.md), so the observer refused fxcpp graphs at the first replacement. Here the hook
takes the nodes of either library and records the same provenance. Everything else (the pass
counter shared with torch.fx's observer, Inductor's ``log_url``/provenance settings, the drawing)
is torch.fx's. torch 1.13 has no such module, nor node hooks; neither does this one there.
"""
from typing import Callable

import torch.fx
from torch.fx.passes.graph_transform_observer import GraphTransformObserver as _TorchGraphTransformObserver
from torch.fx.traceback import NodeSource, NodeSourceAction

from .._compatibility import compatibility
from ..node import Node

__all__ = ['GraphTransformObserver']

_NODE_TYPES = (Node, torch.fx.Node)


@compatibility(is_backward_compatible=False)
class GraphTransformObserver(_TorchGraphTransformObserver):
    """Records what a pass does to a GraphModule (torch.fx's or fxcpp's); see the module docstring."""

    def get_node_replace_hook(self) -> Callable[[Node, str, Node], None]:
        def on_node_replace(old: Node, new: str, user: Node) -> None:
            # Called once per use of `old` rewired to the node named `new` (or per rename).
            new_node = self.name_to_node.get(new)
            if new_node is None:
                return  # not a node this pass created
            if not isinstance(new_node, _NODE_TYPES):
                raise AssertionError(f"Expected Node, got {type(new_node)}")
            sources = new_node.meta.get("from_node", [])
            if any(s.name == old.name for s in sources):
                return  # already recorded for an earlier use of `old`
            action = [NodeSourceAction.REPLACE]
            if new_node.name in self.created_nodes:
                action.append(NodeSourceAction.CREATE)
            # the bare CREATE record of this pass is superseded by the REPLACE one
            kept = [s for s in sources
                    if not (s.pass_name == self.passname and s.action == [NodeSourceAction.CREATE])]
            kept.append(NodeSource(old, self.passname, action))
            new_node.meta["from_node"] = kept

        return on_node_replace
