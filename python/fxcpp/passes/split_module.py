"""fxcpp.passes.split_module: split_module (mirrors the installed torch.fx.passes.split_module).

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
``_fx_partition`` attribute. On torch 2.x the core follows 2.x's semantics and options
(Note [split_module on torch.fx 2.x] in include/fxcpp/passes/split_module.h); a torch.fx
GraphModule, and graphs with grad-mode / autocast nodes or symbolic example values (which 2.x
treats specially), go through torch.fx's own split_module instead (``_needs_torch_fx``).
"""
import operator
from typing import Any, Callable, Dict, Optional

import torch

from .. import _C, _torch_compat
from .._compatibility import compatibility
from ..graph import Graph
from ..graph_module import GraphModule

__all__ = ['split_module']

_UNPARTITIONED = ('placeholder', 'get_attr', 'output')


def _resolve(m, qualname: str, message: str, error=RuntimeError):
    obj = m
    for atom in qualname.split('.'):
        if not hasattr(obj, atom):
            raise error(message)
        obj = getattr(obj, atom)
    return obj


if _torch_compat.FX_API_2:
    def _needs_torch_fx(graph) -> bool:
        """Whether torch.fx 2.x treats this graph in ways the core does not (Note [split_module
        on torch.fx 2.x]): grad-mode or autocast nodes (2.x repeats the state they set at the
        start of every later partition), or nodes whose ``meta['example_value']`` holds symbolic
        sizes (2.x passes the symbols' nodes along to the partitions using them). Index lookups
        plus a C++ scan of the nodes' meta (and a Python check per example value)."""
        for target in _torch_compat.split_module_global_state_targets():
            if graph.find_nodes(op='call_function', target=target):
                return True
        return any(_torch_compat.is_symbolic_example(v) for v in _C._meta_values(graph, 'example_value'))

    def _split_module_torch_fx(m, root_m, split_callback, qualname_map, keep_original_order,
                               keep_original_node_name, keep_original_input_name, partition_affix, tuple_return):
        """torch.fx's own split_module on ``to_torch_fx(m)`` (names and meta kept), with
        ``split_callback`` called on ``m``'s own nodes; the result converted back."""
        from ..interop import from_torch_fx, to_torch_fx
        from torch.fx.passes.split_module import split_module as fx_split_module
        ours = {n.name: n for n in m.graph.nodes} if isinstance(m, GraphModule) else None
        if ours is not None:
            for node in ours.values():  # torch.fx's error, before the conversion meets it
                if node.op in ('call_module', 'get_attr'):
                    _resolve(m, node.target, f"Node target {node.target} not found!", AttributeError)
        fx_m = to_torch_fx(m)
        callback = split_callback if ours is None else (lambda node: split_callback(ours[node.name]))
        out = fx_split_module(fx_m, root_m, callback, qualname_map, keep_original_order, keep_original_node_name,
                              keep_original_input_name, partition_affix=partition_affix, tuple_return=tuple_return)
        for name, child in list(out.named_children()):
            if isinstance(child, torch.fx.GraphModule) and child is not getattr(fx_m, name, None):
                setattr(out, name, from_torch_fx(child))
        return from_torch_fx(out)

    @compatibility(is_backward_compatible=True)
    def split_module(
        m: GraphModule,
        root_m: torch.nn.Module,
        split_callback: Callable[[Any], int],
        qualname_map: Optional[Dict[str, str]] = None,
        keep_original_order: Optional[bool] = False,
        keep_original_node_name: Optional[bool] = False,
        keep_original_input_name: bool = True,
        *,
        partition_affix: Optional[str] = None,
        tuple_return: bool = False,
    ) -> GraphModule:
        """Split ``m`` into one submodule ``submod_<key>`` (``submod_<partition_affix>_<key>``)
        per partition key ``str(split_callback(node))``, called by a new top GraphModule, with
        torch.fx 2.x's semantics and options (Note [split_module on torch.fx 2.x]; the graph
        work runs in the core). ``root_m`` is unused. ``qualname_map`` (optional) receives
        ``{'submod_<key>.<a_b>': 'a.b'}`` for every call_module target. A torch.fx GraphModule,
        or a graph with grad-mode / autocast nodes or symbolic example values, is split by
        torch.fx's own split_module (on the converted module) and converted back."""
        if not isinstance(m, GraphModule) or _needs_torch_fx(m.graph):
            return _split_module_torch_fx(m, root_m, split_callback, qualname_map, keep_original_order,
                                          keep_original_node_name, keep_original_input_name, partition_affix,
                                          tuple_return)
        prefix = 'submod_' if partition_affix is None else f'submod_{partition_affix}_'
        return _split(m, split_callback, qualname_map, keep_original_order, prefix, AttributeError,
                      'Node target {} not found!', 'Node target {} not found!',
                      (True, bool(keep_original_node_name), bool(keep_original_input_name), bool(tuple_return)))


def _split(m, split_callback, qualname_map, keep_original_order, prefix, error, module_message, attr_message,
           fx2_flags=None):
    """The split itself (both torches): partition keys from ``split_callback``, the graphs from the
    core (``fx2_flags``: SplitModuleOptions' fx2, keep_original_node_name, keep_original_input_name,
    tuple_return; None: 1.13), then the attributes and submodules looked up (``error`` with the
    messages when one is missing; 1.13 looks the modules up first, 2.x the attributes)."""
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
    submod_names = [prefix + k for k in keys]
    graphs = [Graph() for _ in keys]
    top = Graph()
    if fx2_flags is None:
        order, module_calls, get_attrs = _C._split_module(graph, ids, submod_names, graphs, top, operator.getitem,
                                                          bool(keep_original_order))
    else:
        order, module_calls, get_attrs, unmapped = _C._split_module(graph, ids, submod_names, graphs, top,
                                                                    operator.getitem, bool(keep_original_order),
                                                                    *fx2_flags)

    base_mod_attrs: Dict[str, Any] = {}

    def attrs():
        for node in get_attrs:
            base_mod_attrs[node.target] = _resolve(m, node.target, attr_message.format(node.target), error)
    if fx2_flags is not None:  # 2.x looks the attributes up first, 1.13 the modules
        attrs()
    targets = [{} for _ in keys]
    for p, node in module_calls:
        target = node.target
        attr = _resolve(m, target, module_message.format(target), error)
        new_target = target.replace('.', '_')
        targets[p][new_target] = attr
        if qualname_map is not None:
            qualname_map[f"{submod_names[p]}.{new_target}"] = target
    if fx2_flags is None:
        attrs()
    elif unmapped is not None:  # a value read before the top graph has it (2.x, keep_original_order)
        raise KeyError(unmapped.name)
    for p in order:
        base_mod_attrs[submod_names[p]] = GraphModule(targets[p], graphs[p])
    return GraphModule(base_mod_attrs, top)


def _split_module_113(
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
    return _split(m, split_callback, qualname_map, keep_original_order, 'submod_', RuntimeError,
                  'Operator target {} not found!', 'Node target {} not found!')


if not _torch_compat.FX_API_2:
    _split_module_113.__name__ = _split_module_113.__qualname__ = 'split_module'
    split_module = compatibility(is_backward_compatible=True)(_split_module_113)
