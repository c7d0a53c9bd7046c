"""fxcpp.passes.split_module: split_module (mirrors torch.fx.passes.split_module 1.13).

``split_module(m, root_m, split_callback)`` calls ``split_callback(node)`` once per node
that is not a placeholder, get_attr or output (in graph order, as torch.fx does), and
partitions the graph by ``str()`` of the results. The work that grows with the graph --
each partition's inputs and outputs, the topological order of the partitions, the
partition graphs and the top graph calling them, ``node.meta`` copies -- runs in the C++
core (``fxcpp::split_module``, ``src/passes/split_module.cpp``); this module looks up
the submodules and attributes and builds the GraphModules.

The result is what torch.fx gives on the same graph: the same ``str(graph)`` and code
for the top module and every ``submod_<key>``, the same outputs, as an fxcpp
GraphModule. Unlike torch.fx, the original nodes are not tagged with a
``_fx_partition`` attribute.
"""
import operator
from typing import Any, Callable, Dict, Optional

import torch

from .. import _C
from .._compatibility import compatibility
from ..graph import Graph
from ..graph_module import GraphModule

__all__ = ['split_module']

_UNPARTITIONED = ('placeholder', 'get_attr', 'output')


def _resolve(m, qualname: str, message: str):
    obj = m
    for atom in qualname.split('.'):
        if not hasattr(obj, atom):
            raise RuntimeError(message)
        obj = getattr(obj, atom)
    return obj


@compatibility(is_backward_compatible=True)
def split_module(
    m: GraphModule,
    root_m: torch.nn.Module,
    split_callback: Callable[[Any], Any],
    qualname_map: Optional[Dict[str, str]] = None,
    keep_original_order: Optional[bool] = False,
) -> GraphModule:
    """Split ``m`` into one submodule ``submod_<key>`` per partition key
    ``str(split_callback(node))``, called in topological order of the partitions by a
    new top GraphModule (torch.fx 1.13's semantics; ``root_m`` is unused, as there).
    ``qualname_map`` (optional) receives ``{'submod_<key>.<a_b>': 'a.b'}`` for every
    call_module target; ``keep_original_order`` calls the partitions in the order their
    first nodes appear instead. Raises ``RuntimeError`` on a cycle between partitions."""
    if isinstance(m, torch.fx.GraphModule):
        from ..interop import from_torch_fx
        m = from_torch_fx(m)
    graph = m.graph
    keys: Dict[str, int] = {}
    ids = []
    append = ids.append
    for node in graph.nodes:
        if node.op in _UNPARTITIONED:
            continue
        key = str(split_callback(node))
        i = keys.get(key)
        if i is None:
            i = keys[key] = len(keys)
        append(i)
    submod_names = ['submod_' + k for k in keys]
    graphs = [Graph() for _ in keys]
    top = Graph()
    order, module_calls, get_attrs = _C._split_module(graph, ids, submod_names, graphs, top, operator.getitem,
                                                      bool(keep_original_order))

    targets = [{} for _ in keys]
    for p, node in module_calls:
        target = node.target
        attr = _resolve(m, target, f"Operator target {target} not found!")
        new_target = target.replace('.', '_')
        targets[p][new_target] = attr
        if qualname_map is not None:
            qualname_map[f"{submod_names[p]}.{new_target}"] = target

    base_mod_attrs: Dict[str, Any] = {}
    for node in get_attrs:
        base_mod_attrs[node.target] = _resolve(m, node.target, f"Node target {node.target} not found!")
    for p in order:
        base_mod_attrs[submod_names[p]] = GraphModule(targets[p], graphs[p])
    return GraphModule(base_mod_attrs, top)
