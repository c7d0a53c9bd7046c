"""fxcpp.experimental.const_fold: constant folding over fxcpp GraphModules.

``split_const_subgraphs(module)`` finds the nodes whose inputs are all constant (``get_attr``s
or other such nodes, and pure), moves them into a separate constant subgraph, and returns a
:class:`FoldedGraphModule` that runs that subgraph once, on its first call or on
``run_folding()``, and from then on reads the folded values from attributes.

The installed torch.fx's results (same code, same ``node.meta`` copies, ``skip_folding_node_fn``
called on the same nodes in the same order; on 2.x the getitems of the inlined submodule's tuple
read its elements and a module whose every op is constant is folded whole, where 1.13 raises
AttributeError: ``_torch_compat.CONST_FOLD_*``), computed by fxcpp: one pass marks the constant ops, the split
is the core's ``split_module`` pass (``_C._split_module``), the constant graph reads its inputs
with ``get_attr`` and the live partition is inlined with the core's ``graph_copy``. A torch.fx
GraphModule is converted with ``fxcpp.from_torch_fx`` (``meta`` shared); its
``skip_folding_node_fn`` sees the caller's torch.fx nodes.
"""
import operator
from typing import Callable, List, Optional, Union

import torch
import torch.fx
from torch.fx.experimental.const_fold import get_unique_attr_name_in_module

from .. import _C, _torch_compat
from ..graph import Graph
from ..graph_module import GraphModule, _assign_attr
from ..interop import from_torch_fx
from ..node import Node
from ..passes.split_module import _resolve

__all__ = ['FoldedGraphModule', 'get_unique_attr_name_in_module', 'split_const_subgraphs']


class FoldedGraphModule(GraphModule):
    """A GraphModule with a second module, ``const_subgraph_module``, whose outputs are the folded
    constants. On the first call (or ``run_folding()``) that module is run once and its result is
    stored as parameter(s) under ``fx_const_folded_attrs_name``, which ``graph`` reads with a
    ``get_attr``."""

    def __init__(self, root: torch.nn.Module, graph: Graph, const_subgraph: Optional[Graph] = None,
                 fx_const_folded_attrs_name: Optional[str] = None,
                 device_for_folded_attrs: str = "cuda"):
        graph._owners = 0  # as torch.fx: this module owns `graph` even if another one did
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


def _constant_ops(graph: Graph, skip: Optional[Callable[[Node], bool]]) -> Optional[List[int]]:
    """0 (constant) or 1 for every op that is not a placeholder, get_attr or output, in graph
    order; None when no such op is constant."""
    const = set()
    ids = []
    found = False
    for node in graph.nodes:
        op = node.op
        if op == 'placeholder' or op == 'output':
            continue
        if ((op == 'get_attr' or const.issuperset(node.all_input_nodes))
                and not (skip is not None and skip(node)) and not node.is_impure()):
            const.add(node)
            if op != 'get_attr':
                found = True
                ids.append(0)
        elif op != 'get_attr':
            ids.append(1)
    return ids if found else None


def split_const_subgraphs(
    module: Union[torch.nn.Module, GraphModule, torch.fx.GraphModule],
    skip_folding_node_fn: Optional[Callable[[Node], bool]] = None,
    device_for_folded_attrs: str = "cpu",
) -> FoldedGraphModule:
    """Split ``module``'s constant subgraph out (see the module docstring). ``module`` is an
    fxcpp or torch.fx GraphModule, or an ``nn.Module`` (traced with ``fxcpp.symbolic_trace``)."""
    skip = skip_folding_node_fn
    if isinstance(module, GraphModule):
        gm = module
    elif isinstance(module, torch.fx.GraphModule):
        gm = from_torch_fx(module)
        if skip is not None:
            ours_to_theirs = dict(zip(gm.graph.nodes, module.graph.nodes))

            def skip(node):
                return skip_folding_node_fn(ours_to_theirs.get(node, node))
    else:
        from .._symbolic_trace import symbolic_trace
        gm = symbolic_trace(module)
    graph = gm.graph

    # 1. which ops are constant (torch.fx's rules, in graph order): a get_attr, or an op all of
    #    whose inputs are constant; not one the caller skips, not an impure one.
    ids = _constant_ops(graph, skip)
    if ids is None:  # nothing but get_attrs is constant: nothing to fold
        return FoldedGraphModule(gm, graph)

    # 2. split into the constant partition ('0') and the rest ('1'), numbered by first appearance
    first = ids[0] if ids else 0
    keys = ['0', '1'] if first == 0 else ['1', '0']
    all_constant = len(set(ids)) < 2
    if all_constant:
        if not _torch_compat.CONST_FOLD_ALL_CONSTANT:
            # torch.fx 1.13 reads split.submod_1, which does not exist when every op is constant
            raise AttributeError("'GraphModule' object has no attribute 'submod_1'")
        keys = ['0']
    if first != 0:
        ids = [1 - i for i in ids]
    names = ['submod_' + k for k in keys]
    const_p, live_p = keys.index('0'), (None if all_constant else keys.index('1'))
    parts = [Graph() for _ in keys]
    top = Graph()
    _, module_calls, get_attrs = _C._split_module(graph, ids, names, parts, top, operator.getitem, False)

    # the module the new graphs read their attributes from (torch.fx's `split`)
    # (the partition modules themselves are not needed: stand-ins keep its attribute names)
    root = torch.nn.Module()
    for name in names:
        setattr(root, name, torch.nn.Module())
    for node in get_attrs:
        _assign_attr(_resolve(gm, node.target, f"Node target {node.target} not found!"), root, node.target)
    for _, node in module_calls:
        target = node.target
        _assign_attr(_resolve(gm, target, f"Operator target {target} not found!"), root, target.replace('.', '_'))

    # 3. the constant graph reads its inputs with get_attr instead of taking them as arguments
    const_graph = parts[const_p]
    call_const = call_live = None
    for node in top.nodes:
        if node.op == 'call_module':
            if node.target == names[const_p]:
                call_const = node
            else:
                call_live = node
    by_name = {n.name: n for n in call_const.args}
    for node in list(const_graph.nodes):
        if node.op == 'output':
            multiple_outputs = isinstance(node.args[0], tuple)
            continue
        if node.op != 'placeholder':
            continue
        in_node = by_name[node.target]
        assert in_node.op == 'get_attr'
        with const_graph.inserting_before(node):
            new_node = const_graph.get_attr(in_node.target)
        new_node.meta = node.meta.copy()
        node.replace_all_uses_with(new_node)
        const_graph.erase_node(node)

    # 4. the top graph reads the folded values from one attribute; the call is dropped
    attrs_name = get_unique_attr_name_in_module(root, "_FX_CONST_FOLDED_ATTRS")
    setattr(root, attrs_name, torch.nn.ParameterList() if multiple_outputs else torch.nn.Parameter())
    with top.inserting_before(call_const):
        folded_attrs = top.get_attr(attrs_name)
    folded_attrs.meta = call_const.meta.copy()
    call_const.replace_all_uses_with(folded_attrs)
    top.erase_node(call_const)
    for node in reversed(list(top.nodes)):  # what was only used by the call (the rest is used)
        if node.op == 'get_attr' and not node.users:
            top.erase_node(node)

    # 5. inline the live partition where the top graph calls it
    if call_live is not None:
        _inline(top, parts[live_p], call_live)
    top._owning_module = root  # for the purity of call_module nodes; FoldedGraphModule owns it
    try:
        top.eliminate_dead_code()
    finally:
        top._owning_module = None
    return FoldedGraphModule(root, top, const_graph, attrs_name, device_for_folded_attrs)


def _inline(top: Graph, live_graph: Graph, call_live: Node) -> None:
    """Replace ``call_live`` in ``top`` by a copy of ``live_graph`` (torch.fx's _inline_module)."""
    val_map = {}
    placeholders = []
    for node, arg in zip(live_graph.nodes, call_live.args):
        if node.op != 'placeholder':
            break
        val_map[node] = arg
        placeholders.append((node, arg))
    with top.inserting_before(call_live):
        result = top.graph_copy(live_graph, val_map)
    for node, arg in placeholders:  # torch.fx's inlining gives the argument the input's meta
        arg.meta = node.meta.copy()
    getitems = []
    if _torch_compat.CONST_FOLD_INLINES_GETITEMS and isinstance(result, (list, tuple)):
        getitems = [u for u in call_live.users
                    if u.op == 'call_function' and u.target is operator.getitem and isinstance(u.args[1], int)]
    call_live.replace_all_uses_with(result)
    for user in getitems:  # x = (a, b)[i] reads the element itself
        user.replace_all_uses_with(result[user.args[1]])
        top.erase_node(user)
