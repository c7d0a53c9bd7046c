"""fxcpp.subgraph_rewriter: replace_pattern (mirrors torch.fx.subgraph_rewriter 1.13).

Matching and graph surgery run in C++ (``include/fxcpp/passes/subgraph_matcher.h``;
see Note [Subgraph matching semantics] there): iterative, so patterns and
graphs of any size work, and with no quadratic steps. The results -- the
matches, their order and maps, and the rewritten graph -- are torch.fx's.
"""
import copy
from typing import Callable, Dict, List, NamedTuple, Optional

import torch

from . import _C
from ._compatibility import compatibility
from ._symbolic_trace import symbolic_trace
from .graph import Graph
from .graph_module import GraphModule
from .node import Node

__all__ = ['Match', 'replace_pattern']


@compatibility(is_backward_compatible=True)
class Match(NamedTuple):
    # pattern-graph node the match was anchored at
    anchor: Node
    # pattern node -> matched node of the rewritten graph
    nodes_map: Dict[Node, Node]


def _replace_submodules(gm: GraphModule, replacement: torch.nn.Module) -> None:
    """Copy the submodules referenced by the rewritten graph from ``replacement``."""
    gm.delete_all_unused_submodules()

    if isinstance(replacement, GraphModule):
        replacement.graph.lint()

    def try_get_submodule(mod: torch.nn.Module, target: str) -> Optional[torch.nn.Module]:
        try:
            return mod.get_submodule(target)
        except AttributeError:
            return None

    for node in gm.graph.nodes:
        if node.op == "call_module" or node.op == "get_attr":
            gm_submod = try_get_submodule(gm, node.target)
            replacement_submod = try_get_submodule(replacement, node.target)
            if gm_submod is not None:
                # an existing submodule of `gm` takes precedence
                continue
            elif replacement_submod is not None:
                new_submod = copy.deepcopy(getattr(replacement, node.target))
                gm.add_submodule(node.target, new_submod)
            else:
                raise RuntimeError("Attempted to create a \"", node.op,
                                   "\" node during subgraph rewriting "
                                   f"with target {node.target}, but "
                                   "the referenced submodule does not "
                                   "exist in either the original "
                                   "GraphModule `gm` or the replacement"
                                   " GraphModule `replacement`")

    gm.graph.lint()


@compatibility(is_backward_compatible=True)
def replace_pattern(gm: GraphModule, pattern: Callable, replacement: Callable) -> List[Match]:
    """Replace every non-overlapping match of ``pattern`` in ``gm.graph`` by ``replacement``.

    ``pattern`` and ``replacement`` are callables (or modules), traced with
    :func:`fxcpp.symbolic_trace`. Matching follows use-def edges, not names;
    pattern placeholders match any value; the pattern's returned values may be
    used elsewhere, its other values may not. Overlapping matches are resolved
    first-found-first. ``replacement`` must take the same parameters as
    ``pattern``. Returns the list of ``Match(anchor, nodes_map)`` (anchor: a
    node of the pattern graph; nodes_map: pattern node -> graph node), empty
    when nothing matched. ``gm`` is recompiled.

    Same behaviour as ``torch.fx.replace_pattern``.
    """
    original_graph: Graph = gm.graph
    pattern_graph: Graph = symbolic_trace(pattern).graph
    replacement_graph: Graph = symbolic_trace(replacement).graph

    matches: List[Match] = _C._replace_pattern(original_graph, pattern_graph, replacement_graph, Match)

    gm.recompile()

    # submodules referenced by a Module replacement must be copied into ``gm``
    if isinstance(replacement, torch.nn.Module):
        _replace_submodules(gm, replacement)

    return matches
