"""fxcpp.passes.utils.common: ``HolderModule``, ``lift_subgraph_as_module``, ``compare_graphs``
(mirrors torch.fx.passes.utils.common 1.13).

``HolderModule`` is torch.fx's. ``lift_subgraph_as_module(gm, subgraph)`` is fxcpp's: for an fxcpp
``subgraph`` it returns an fxcpp GraphModule (torch.fx's always builds a ``torch.fx.GraphModule``);
a torch.fx graph goes to torch.fx's. ``compare_graphs`` uses fxcpp's C++ ``SubgraphMatcher`` for
two fxcpp graphs and torch.fx's function otherwise.
"""
from torch.fx.passes.utils import common as _torch_common
from torch.fx.passes.utils.common import HolderModule

from ..._compatibility import compatibility
from ...graph import Graph
from ...graph_module import GraphModule
from .matcher_utils import SubgraphMatcher

__all__ = ['HolderModule', 'lift_subgraph_as_module', 'compare_graphs']


@compatibility(is_backward_compatible=False)
def lift_subgraph_as_module(gm, subgraph, class_name: str = 'GraphModule'):
    """A GraphModule of class ``class_name`` running ``subgraph``, whose ``call_module`` and
    ``get_attr`` targets are taken from ``gm`` and held, at the same dotted paths, by
    ``HolderModule``s."""
    if not isinstance(subgraph, Graph):
        return _torch_common.lift_subgraph_as_module(gm, subgraph, class_name)
    root = HolderModule({})
    for node in subgraph.nodes:
        if node.op not in ("call_module", "get_attr"):
            continue
        assert isinstance(node.target, str)
        *path, leaf = node.target.split(".")
        holder, source = root, gm
        for atom in path:
            if not hasattr(holder, atom):
                holder.add_module(atom, HolderModule({}))
            holder = getattr(holder, atom)
            source = getattr(source, atom)
        # nn.Module.__setattr__ registers a module or parameter as such
        setattr(holder, leaf, getattr(source, leaf))
    return GraphModule(root, subgraph, class_name)


@compatibility(is_backward_compatible=False)
def compare_graphs(left, right) -> bool:
    """Whether ``left`` and ``right`` have the same inputs and outputs in the same order, the
    same nodes and the same connectivity."""
    if not (isinstance(left, Graph) and isinstance(right, Graph)):
        return _torch_common.compare_graphs(left, right)
    return len(SubgraphMatcher(left, match_output=True, match_placeholder=True).match(right)) > 0
