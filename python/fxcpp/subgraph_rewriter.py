"""fxcpp.subgraph_rewriter: replace_pattern (mirrors the installed torch.fx.subgraph_rewriter).

On torch 1.13, matching and graph surgery run in C++ (``include/fxcpp/passes/subgraph_matcher.h``;
see Note [Subgraph matching semantics] there): iterative, so patterns and
graphs of any size work, and with no quadratic steps. The results -- the
matches, their order and maps, and the rewritten graph -- are torch.fx's.

On torch 2.x, replace_pattern follows torch.fx 2.x: patterns and replacements may be
GraphModules (and Graphs for ``replace_pattern_with_filters``, which adds match filters,
``ignore_literals``, a per-match replacement callback and name matching, and returns
``ReplacedPatterns`` with the inserted nodes); matches come from torch.fx 2.x's matching
semantics (fxcpp.passes.utils.matcher_utils); a match's ``nodes_map`` and placeholders follow
the values earlier replacements substituted; get_attr tensors a Module replacement brings are
copied over like its submodules. The surgery calls the core's graph_copy,
replace_all_uses_with and erase_node.
"""
import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

import torch

from . import _C, _torch_compat
from ._compatibility import compatibility
from ._symbolic_trace import symbolic_trace
from .graph import Graph
from .graph_module import GraphModule
from .node import Node

__all__ = ['Match', 'replace_pattern'] + (['replace_pattern_with_filters', 'ReplacedPatterns']
                                        if _torch_compat.FX_API_2 else [])


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


def _replace_pattern_113(gm: GraphModule, pattern: Callable, replacement: Callable) -> List[Match]:
    original_graph: Graph = gm.graph
    pattern_graph: Graph = symbolic_trace(pattern).graph
    replacement_graph: Graph = symbolic_trace(replacement).graph

    matches: List[Match] = _C._replace_pattern(original_graph, pattern_graph, replacement_graph, Match)

    gm.recompile()

    # submodules referenced by a Module replacement must be copied into ``gm``
    if isinstance(replacement, torch.nn.Module):
        _replace_submodules(gm, replacement)

    return matches


@compatibility(is_backward_compatible=True)
def replace_pattern(gm: GraphModule, pattern: Callable, replacement: Callable) -> List[Match]:
    """Replace every non-overlapping match of ``pattern`` in ``gm.graph`` by ``replacement``.

    ``pattern`` and ``replacement`` are callables (or modules), traced with
    :func:`fxcpp.symbolic_trace` (on torch 2.x a GraphModule's own graph is used as it is).
    Matching follows use-def edges, not names;
    pattern placeholders match any value; the pattern's returned values may be
    used elsewhere, its other values may not. Overlapping matches are resolved
    first-found-first. ``replacement`` must take the same parameters as
    ``pattern``. Returns the list of ``Match(anchor, nodes_map)`` (anchor: a
    node of the pattern graph; nodes_map: pattern node -> graph node), empty
    when nothing matched. ``gm`` is recompiled.

    Same behaviour as the installed ``torch.fx.replace_pattern``.
    """
    if not _torch_compat.FX_API_2:
        return _replace_pattern_113(gm, pattern, replacement)
    fast = _replace_in_core_2(gm, pattern, replacement)
    if fast is not None:
        return fast
    return [Match(anchor=m.anchor, nodes_map=m.nodes_map) for m in _replace_pattern_2(gm, pattern, replacement)]


if _torch_compat.FX_API_2:
    @compatibility(is_backward_compatible=False)
    @dataclass
    class ReplacedPatterns:
        # pattern-graph node the match was anchored at
        anchor: Node
        # pattern node -> matched node of the rewritten graph
        nodes_map: Dict[Node, Node]
        # the nodes the replacement put into the graph
        replacements: List[Node]

    @compatibility(is_backward_compatible=False)
    def replace_pattern_with_filters(
        gm: GraphModule,
        pattern: Union[Callable, Graph, GraphModule],
        replacement: Union[Callable, Graph, GraphModule, None] = None,
        match_filters: Optional[List[Callable[['InternalMatch', Graph, Graph], bool]]] = None,  # noqa: F821
        ignore_literals: bool = False,
        replacement_callback: Optional[Callable[['InternalMatch', Graph, Graph], Graph]] = None,  # noqa: F821
        node_name_match: str = "",
    ) -> List['ReplacedPatterns']:
        """replace_pattern, keeping only the matches every ``match_filters`` function accepts
        (called with the InternalMatch, the searched graph and the pattern graph);
        ``ignore_literals``: literals in the pattern match any value; ``replacement_callback``
        (match, graph, pattern graph) -> the Graph to put in for that match, instead of
        ``replacement``; ``node_name_match``: an anchor also matches nodes whose name contains it.
        Returns a ReplacedPatterns per replaced match."""
        return _replace_pattern_2(gm, pattern, replacement, match_filters, ignore_literals,
                                  replacement_callback, node_name_match)

    def _replace_attributes(gm: GraphModule, replacement: torch.nn.Module) -> None:
        """Copy the submodules and attributes the rewritten graph uses from ``replacement`` (2.x)."""
        gm.delete_all_unused_submodules()
        if isinstance(replacement, GraphModule):
            replacement.graph.lint()

        def try_get_attr(mod: torch.nn.Module, target: str) -> Optional[Any]:
            module_path, _, attr_name = target.rpartition(".")
            try:
                owner: torch.nn.Module = mod.get_submodule(module_path)
            except AttributeError:
                return None
            return getattr(owner, attr_name, None)

        for node in gm.graph.nodes:
            if node.op == "call_module" or node.op == "get_attr":
                if try_get_attr(gm, node.target) is not None:
                    continue  # an existing attribute of `gm` takes precedence
                replacement_attr = try_get_attr(replacement, node.target)
                if replacement_attr is None:
                    raise RuntimeError('Attempted to create a "', node.op,
                                       '" node during subgraph rewriting '
                                       f"with target {node.target}, but "
                                       "the referenced attribute does not "
                                       "exist in the replacement GraphModule")
                new_attr = copy.deepcopy(replacement_attr)
                if isinstance(replacement_attr, torch.nn.Module):
                    gm.add_submodule(node.target, new_attr)
                else:
                    setattr(gm, node.target, new_attr)
        gm.graph.lint()

    def _graph_of(obj, allow_graph: bool):
        if isinstance(obj, GraphModule):
            return obj.graph
        if allow_graph and isinstance(obj, Graph):
            return obj
        return symbolic_trace(obj).graph

    def _replace_in_core_2(gm, pattern, replacement):
        """replace_pattern done by the core's matcher and rewriter in one call (Note [Core matches
        under torch.fx 2.x]), where their 1.13 semantics give torch.fx 2.x's result: the pattern
        suits the core matcher (matcher_utils._pattern_agrees), and the core finds that the graph
        does (agrees_with_fx2_on), that no match reads a value an earlier match returns (2.x then
        points nodes_map at the replacement's node), that every returned value has users (the
        insertion point is then the same) and that the module has no node hooks. None when it does
        not apply (the graph untouched); the
        Python rewriter below (one replace_all_uses_with per returned value, which rebuilds each
        user's argument tuple) then runs."""
        from .passes.utils.matcher_utils import SubgraphMatcher, _pattern_agrees
        if not callable(replacement) and not isinstance(replacement, (Graph, GraphModule)):
            return None
        if not isinstance(gm.graph, Graph):
            return None
        # The core edits the graph without calling the module's node hooks (GraphModule
        # _register_create_node_hook...: GraphTransformObserver's); the Python rewriter calls them.
        if any(getattr(gm, h, None) for h in ('_create_node_hooks', '_erase_node_hooks', '_replace_hooks')):
            return None
        pattern_graph = _graph_of(pattern, False)
        matcher = SubgraphMatcher(pattern_graph)
        if not _pattern_agrees(matcher):
            return None
        replacement_graph = _graph_of(replacement, False)
        # mismatched replacements fail in the Python rewriter, with torch.fx 2.x's messages
        if len([n for n in replacement_graph.nodes if n.op == "placeholder"]) != len(matcher.pattern_placeholder_nodes):
            return None
        try:
            out = replacement_graph.output_node().args[0]
        except (AssertionError, StopIteration, IndexError):
            return None
        if (1 if isinstance(out, Node) else len(out) if isinstance(out, (list, tuple)) else -1) != \
                len(matcher.pattern_returning_nodes):
            return None
        result = _C._replace_pattern(gm.graph, pattern_graph, replacement_graph, Match, True)
        if result is None:
            return None
        gm.recompile()
        if isinstance(replacement, torch.nn.Module):
            _replace_attributes(gm, replacement)
        return result

    def _replace_pattern_2(gm, pattern, replacement=None, match_filters=None, ignore_literals=False,
                           replacement_callback=None, node_name_match=""):
        from .passes.utils.matcher_utils import SubgraphMatcher
        original_graph: Graph = gm.graph
        pattern_graph = _graph_of(pattern, True)
        matcher = SubgraphMatcher(pattern_graph, match_output=False, match_placeholder=False,
                                  remove_overlapping_matches=True, ignore_literals=ignore_literals)
        matches = matcher.match(original_graph, node_name_match=node_name_match)
        matches = [m for m in matches if all(f(m, original_graph, pattern_graph) for f in (match_filters or []))]

        if isinstance(replacement, (GraphModule, Graph)):
            common_replacement = _graph_of(replacement, True)
        elif callable(replacement):
            common_replacement = symbolic_trace(replacement).graph
        else:
            if replacement_callback is None:
                raise AssertionError("Must provide either a replacement GraphModule or a replacement callback")
            common_replacement = None

        # graph node -> the node a replacement substituted for it (later matches read through it)
        changed: Dict[Node, Node] = {}
        results = []
        for match in matches:
            if replacement_callback is not None:
                replacement_graph = replacement_callback(match, original_graph, pattern_graph)
            else:
                if common_replacement is None:
                    raise AssertionError("Must provide either a replacement GraphModule or a replacement callback")
                replacement_graph = common_replacement
            replacement_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
            if len(match.placeholder_nodes) != len(replacement_placeholders):
                raise AssertionError(f"Placeholder count mismatch: {len(match.placeholder_nodes)} vs "
                                     f"{len(replacement_placeholders)}")
            val_map: Dict[Node, Any] = {}
            for rn, gn in zip(replacement_placeholders, match.placeholder_nodes):
                if isinstance(gn, Node):
                    val_map[rn] = changed.get(gn, gn)
                    if gn != val_map[rn]:
                        # the match now reads the replacement's node
                        match.placeholder_nodes[match.placeholder_nodes.index(gn)] = changed[gn]
                        key = list(match.nodes_map.keys())[list(match.nodes_map.values()).index(gn)]
                        match.nodes_map[key] = changed[gn]
                else:
                    val_map[rn] = gn

            users = {}
            for n in match.returning_nodes:
                users.update(dict.fromkeys(n.users))
            if len(users) == 1:
                insert_point = next(iter(users))
            elif users:
                insert_point = next(n for n in original_graph.nodes if n in users)
            else:
                # no users: before the node after the last returned node
                insert_point = None
                after = None
                for n in reversed(original_graph.nodes):
                    if n in match.returning_nodes:
                        insert_point = after
                        break
                    after = n
            if insert_point is None:
                raise AssertionError("The insert point can't be None")
            with original_graph.inserting_before(insert_point):
                copied_returning = original_graph.graph_copy(replacement_graph, val_map)
            if isinstance(copied_returning, Node):
                copied_returning = (copied_returning,)
            replacement_nodes = [v for v in val_map.values() if v not in match.placeholder_nodes]
            if len(match.returning_nodes) != len(copied_returning):
                raise AssertionError(f"Returning nodes count mismatch: {len(match.returning_nodes)} vs "
                                     f"{len(copied_returning)}")
            for gn, copied in zip(match.returning_nodes, copied_returning):
                gn.replace_all_uses_with(copied)
                changed[gn] = copied
            for node in reversed(pattern_graph.nodes):
                if node.op != "placeholder" and node.op != "output":
                    gm.graph.erase_node(match.nodes_map[node])
            results.append(ReplacedPatterns(anchor=match.anchors[0], nodes_map=match.nodes_map,
                                            replacements=replacement_nodes))

        gm.recompile()
        if isinstance(replacement, torch.nn.Module):
            _replace_attributes(gm, replacement)
        return results
