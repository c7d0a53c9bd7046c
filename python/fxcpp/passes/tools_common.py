"""fxcpp.passes.tools_common: helpers shared by the partitioning passes (mirrors
torch.fx.passes.tools_common 1.13).

``get_acc_ops_name``, ``get_node_target``, ``is_node_output_tensor`` and
``FxNetAccFusionsFinder`` are torch.fx's own, re-exported: they only read ``node.op``,
``target``, ``meta``, ``users`` and ``all_input_nodes``, which fxcpp nodes (a subclass of
``torch.fx.Node``) provide, and give torch.fx's answers on fxcpp graphs.

``legalize_graph(gm)`` (re-order ``gm``'s graph topologically, in place) is fxcpp's for an fxcpp
module: torch.fx's builds a ``torch.fx.Graph`` (which the fxcpp ``graph`` setter would then
convert, more than half of ``fuse_partitions``' time on fxcpp modules); this one builds the
fxcpp graph directly, in torch.fx's order (Kahn's algorithm: ready nodes first-in first-out,
starting from the source nodes in graph order, users in ``node.users`` order; torch.fx 2.x puts
the ready runtime-assert and symbolic-arithmetic nodes first and keeps the graph's CodeGen,
``_torch_compat.LEGALIZE_GRAPH_*``), with its node names and ``meta`` copies. A torch.fx module
goes to torch.fx's.
"""
import collections
import heapq
from typing import Dict

import torch.fx
from torch.fx.passes import tools_common as _torch_tools_common
from torch.fx.passes.tools_common import (  # noqa: F401  (re-exported)
    CALLABLE_NODE_OPS, FxNetAccFusionsFinder, Names, NodeList, NodeSet, TensorOrTensors, Tensors,
    get_acc_ops_name, get_node_target, is_node_output_tensor)

from .. import _torch_compat
from .._compatibility import compatibility
from ..graph import Graph
from ..node import Node

__all__ = ['get_acc_ops_name', 'get_node_target', 'is_node_output_tensor', 'FxNetAccFusionsFinder',
           'legalize_graph']


@compatibility(is_backward_compatible=False)
def legalize_graph(gm):
    """Replace ``gm.graph`` by a copy holding the same nodes in topological order and return
    ``gm`` (RuntimeError if the graph has a cycle)."""
    if isinstance(gm, torch.fx.GraphModule):
        return _torch_tools_common.legalize_graph(gm)
    nodes = gm.graph.nodes
    pending: Dict[Node, int] = dict.fromkeys(nodes, 0)  # node -> inputs not yet placed
    for node in nodes:
        for user in node.users:
            pending[user] += 1
    ready = collections.deque(node for node, count in pending.items() if count == 0)
    new_graph = Graph()
    copies: Dict[Node, Node] = {}
    first = _torch_compat.LEGALIZE_GRAPH_PRIORITIZED_OPS
    while ready:
        node = ready.popleft()
        copies[node] = new_graph.node_copy(node, copies.__getitem__)
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0:
                if first and user.op == 'call_function' and user.target in first:
                    ready.appendleft(user)
                else:
                    ready.append(user)
    if len(copies) < len(pending):
        raise RuntimeError(f"Input graph has cycles, unable to add {[n for n in pending if pending[n] != 0]}")
    if _torch_compat.LEGALIZE_GRAPH_KEEPS_CODEGEN:
        new_graph._codegen = gm.graph._codegen
    gm.graph = new_graph
    return gm


def _stable_topological_sort(gm):
    """torch.fx 2.x's ``stable_topological_sort`` for an fxcpp module: replace ``gm.graph`` by a
    copy holding the same nodes in topological order, taking among the ready nodes always the one
    earliest in the old order (Kahn's algorithm over a min-heap of old positions); the new graph
    keeps the old one's CodeGen. AssertionError if the graph has a cycle."""
    if isinstance(gm, torch.fx.GraphModule):
        return _torch_tools_common.stable_topological_sort(gm)
    nodes = gm.graph.nodes
    position = {node: i for i, node in enumerate(nodes)}
    pending: Dict[Node, int] = dict.fromkeys(nodes, 0)
    for node in nodes:
        for user in node.users:
            pending[user] += 1
    ready = [(position[node], node) for node, count in pending.items() if count == 0]
    heapq.heapify(ready)
    new_graph = Graph()
    copies: Dict[Node, Node] = {}
    while ready:
        _, node = heapq.heappop(ready)
        copies[node] = new_graph.node_copy(node, copies.__getitem__)
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(copies) != len(pending):
        raise AssertionError(f"Input graph has cycles, unable to add {[n for n in pending if pending[n] != 0]}")
    new_graph._codegen = gm.graph._codegen
    gm.graph = new_graph
    return gm


if hasattr(_torch_tools_common, 'stable_topological_sort'):  # torch.fx 2.x
    stable_topological_sort = compatibility(is_backward_compatible=False)(_stable_topological_sort)
    stable_topological_sort.__name__ = stable_topological_sort.__qualname__ = 'stable_topological_sort'
    __all__.append('stable_topological_sort')
