"""fxcpp.experimental.merge_matmul: ``merge_matmul`` with fxcpp's tracer (mirrors
torch.fx.experimental.merge_matmul 1.13).

``merge_matmul(module)`` traces ``module`` and merges the ``torch.matmul`` calls that share their
right-hand operand and do not depend on each other into one matmul of the concatenated left-hand
operands, whose result is split back (``split_result_tensors``). torch.fx's traces with
``torch.fx.symbolic_trace`` and so returns a ``torch.fx.GraphModule`` (and, given an fxcpp
GraphModule, re-traces it with torch.fx); this one traces with ``fxcpp.symbolic_trace`` and
returns an fxcpp GraphModule with the code torch.fx's gives.

torch.fx 1.13 re-sorts the graph (``legalize_graph``, which builds a new graph) after each merged
group and then goes on with the next group's nodes from the replaced graph, so a module with two
groups to merge (matmuls by ``w`` and matmuls by ``v``) fails with ``KeyError: 'output'``. Here
the graph is sorted once, after all groups are merged: the same result for one group, a correct
one for several. ``split_result_tensors``,
``may_depend_on`` and ``are_nodes_independent`` are torch.fx's own functions (the generated code
calls ``torch.fx.experimental.merge_matmul.split_result_tensors``, as torch.fx's does).
"""
import operator
from typing import Dict, List, Union

import torch
from torch.fx.experimental.merge_matmul import (  # noqa: F401  (re-exported)
    are_nodes_independent, may_depend_on, split_result_tensors)

from .._symbolic_trace import symbolic_trace
from ..node import Node
from ..passes.tools_common import legalize_graph

__all__ = ['split_result_tensors', 'may_depend_on', 'are_nodes_independent', 'merge_matmul']


def merge_matmul(in_mod: torch.nn.Module):
    """Trace ``in_mod`` and merge the independent ``torch.matmul`` calls sharing a right-hand
    operand (a node, or a ``get_attr`` target: attributes are told apart by name)."""
    gm = symbolic_trace(in_mod)
    graph = gm.graph

    def operand_key(operand) -> Union[Node, str]:
        return operand.target if operand.op == "get_attr" else operand

    by_rhs: Dict[Union[Node, str], List[Node]] = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not torch.matmul:
            continue
        lhs, rhs = node.args
        operand_key(lhs)  # as torch.fx: a non-node operand raises here
        by_rhs.setdefault(operand_key(rhs), []).append(node)

    merged_any = False
    for rhs_key, matmuls in by_rhs.items():
        if len(matmuls) < 2 or not are_nodes_independent(matmuls):
            continue
        merged_any = True
        # New nodes go at the end of the graph (after the output); legalize_graph puts them in
        # order once all groups are merged.
        lhs = [graph.get_attr(a) if isinstance(a, str) else a for a in (mm.args[0] for mm in matmuls)]
        rhs = graph.get_attr(rhs_key) if isinstance(rhs_key, str) else rhs_key
        merged = graph.call_function(torch.matmul, (graph.call_function(torch.cat, (lhs,), {}), rhs), {})
        pieces = graph.call_function(split_result_tensors, (merged, lhs), {})
        results = [graph.call_function(operator.getitem, (pieces, i), {}) for i in range(len(lhs))]
        for old, new in zip(matmuls, results):
            old.replace_all_uses_with(new)
            graph.erase_node(old)
    if merged_any:
        legalize_graph(gm)
    gm.recompile()
    gm.graph.lint()
    return gm
