"""fxcpp.passes.utils.fuser_utils: fuse groups of nodes into submodules (mirrors
torch.fx.passes.utils.fuser_utils 1.13).

``topo_sort``, ``insert_subgm`` and ``erase_nodes`` are torch.fx's own, re-exported (they only
walk and edit the caller's graph, which works on fxcpp graphs). ``validate_partition`` is
fxcpp's, with torch.fx's answer: torch.fx's searches depth-first by recursion, one Python frame
per node downstream of the partition, so a partition with more than about a thousand nodes
after it (any fusion in a deep model) raised RecursionError; this one searches in the C++ core
(``fxcpp::validate_partition``, an explicit stack; for nodes of other graphs, the same search in
Python).
``fuse_as_graphmodule`` and ``fuse_by_partitions`` are fxcpp's: torch.fx's build the fused
subgraph as a ``torch.fx.Graph`` inside a ``torch.fx.GraphModule``, so an fxcpp module would end
up holding torch.fx submodules. These build fxcpp ones, with torch.fx's node names, order,
placeholders (``meta`` shallow-copied from the outside input, as torch.fx) and outputs, so the
fused module's code is torch.fx's. Membership tests use a set (torch.fx scans the node list per
argument). A torch.fx GraphModule is handed to torch.fx's functions.
"""
import copy
from typing import Dict, List, Tuple

import torch.fx
from torch.fx.passes.utils import fuser_utils as _torch_fuser_utils
from torch.fx.passes.utils.fuser_utils import erase_nodes, insert_subgm, topo_sort  # noqa: F401

from ... import _C, _torch_compat
from ...graph import Graph
from ...node import Node
from ..tools_common import NodeList, _stable_topological_sort, legalize_graph
from .common import lift_subgraph_as_module

__all__ = ['topo_sort', 'validate_partition', 'fuse_as_graphmodule', 'insert_subgm', 'erase_nodes',
           'fuse_by_partitions']


def validate_partition(partition: NodeList) -> bool:
    """Whether fusing ``partition`` keeps the graph acyclic: False when a node of the partition
    can be reached from a user outside it (that user would have to run both after and before
    the fused module). Runs in the C++ core (``fxcpp::validate_partition``) for fxcpp nodes."""
    nodes = partition if isinstance(partition, (list, tuple)) else list(partition)
    answer = _C._validate_partition(nodes)
    if answer is not None:
        return answer
    inside = set(nodes)
    stack = [user for node in inside for user in node.users if user not in inside]
    seen = set(stack)
    while stack:
        node = stack.pop()
        for user in node.users:
            if user in inside:
                return False
            if user not in seen:
                seen.add(user)
                stack.append(user)
    return True


def fuse_as_graphmodule(gm, nodes: NodeList, module_name: str) -> Tuple[object, Tuple[Node, ...], Tuple[Node, ...]]:
    """Copy ``nodes`` (of ``gm``, in topological order) into a new GraphModule of class
    ``module_name``.

    Returns the new module, the nodes of ``gm`` it takes as inputs (one placeholder each, in
    first-use order) and the nodes of ``nodes`` used outside them (its outputs, in node order).
    """
    if isinstance(gm, torch.fx.GraphModule):
        return _torch_fuser_utils.fuse_as_graphmodule(gm, nodes, module_name)
    for node in nodes:
        assert node.graph.owning_module is gm, f"{node} doesn't belong to passed in graph module {gm._get_name()}"
        assert not node._erased, f"{node} has been removed from owning graph"
        assert node.graph is gm.graph, f"{node} is not found in graph module {gm._get_name()}"
    assert validate_partition(nodes), "Invalid partition, found dependency cycles"

    inside = set(nodes)
    subgraph = Graph()
    copies: Dict[Node, Node] = {}       # node of gm in `nodes` -> its copy
    placeholders: Dict[Node, Node] = {}  # node of gm outside `nodes` -> placeholder standing for it

    def remap(arg: Node) -> Node:
        if arg in inside:
            return copies[arg]
        ph = placeholders.get(arg)
        if ph is None:
            ph = placeholders[arg] = subgraph.placeholder(arg.name, type_expr=arg.type)
            ph.meta = copy.copy(arg.meta)
        return ph

    for node in nodes:
        copies[node] = subgraph.node_copy(node, remap)

    escaping = [node for node in nodes if any(user not in inside for user in node.users)]
    outs = tuple(copies[node] for node in escaping)
    subgraph.output(outs[0] if len(outs) == 1 else outs)
    subgraph.lint()
    fused = lift_subgraph_as_module(gm, subgraph, class_name=module_name)
    return fused, tuple(placeholders), tuple(escaping)


def fuse_by_partitions(gm, partitions: List[NodeList], prefix: str = "fused_"):
    """Replace each partition (a list of nodes of ``gm``) with a call to a new submodule
    ``<prefix><i>`` holding its nodes, then re-sort ``gm``'s graph topologically (``prefix``:
    torch.fx 2.x's option)."""
    if isinstance(gm, torch.fx.GraphModule):
        if prefix != "fused_":
            return _torch_fuser_utils.fuse_by_partitions(gm, partitions, prefix=prefix)
        return _torch_fuser_utils.fuse_by_partitions(gm, partitions)
    if _torch_compat.FUSE_BY_PARTITIONS_2X:
        # torch.fx 2.x: each call goes right after the partition's last node, and the graph is
        # re-sorted stably (the getitems of a call's outputs stay where its users were)
        for index, partition in enumerate(partitions):
            ordered = topo_sort(list(partition))
            fused, inputs, outputs = fuse_as_graphmodule(gm, ordered, f"{prefix}{index}")
            insert_subgm(gm, fused, inputs, outputs, ordered[-1])
            erase_nodes(gm, ordered)
        _stable_topological_sort(gm)
        gm.graph.lint()
        return gm
    for index, partition in enumerate(partitions):
        ordered = topo_sort(list(partition))
        fused, inputs, outputs = fuse_as_graphmodule(gm, ordered, f"{prefix}{index}")
        insert_subgm(gm, fused, inputs, outputs)
        erase_nodes(gm, ordered)
    legalize_graph(gm)
    return gm
