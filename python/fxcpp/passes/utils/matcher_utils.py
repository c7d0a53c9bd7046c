"""fxcpp.passes.utils.matcher_utils: SubgraphMatcher (mirrors the installed torch.fx's).

On torch 1.13 the matching runs in C++ (see Note [Subgraph matching semantics] in
include/fxcpp/passes/subgraph_matcher.h); results equal torch.fx 1.13's.

torch.fx 2.x matches differently: arguments are compared position by position with nested
lists and tuples walked in step (a pattern placeholder binds a whole list), keyword arguments
by their ordered keys, operator overloads with different argument counts after filling in their
schema's defaults, get_attr nodes by the kind of attribute they fetch (not its name); patterns
may keep impure nodes without users; ``ignore_literals`` and ``match(node_name_match=)`` are new,
and InternalMatch has a ``name_node_map``. On 2.x, :class:`SubgraphMatcher` implements those
semantics in Python (``_Fx2Matcher``), depth-first on an explicit stack (no recursion limit),
and runs the core's matcher instead wherever both semantics give the same matches
(``_core_matcher_agrees``); moving 2.x's semantics into the core is issue 23's follow-up.
"""
import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch

from ... import _C, _torch_compat
from ..._compatibility import compatibility
from ...graph import Graph
from ...node import Node

__all__ = ['SubgraphMatcher', 'InternalMatch']


@compatibility(is_backward_compatible=False)
@dataclass
class InternalMatch():
    # pattern anchors the match was grown from
    anchors: List[Node]
    # pattern node -> matched node of the searched graph
    nodes_map: Dict[Node, Node] = field(default_factory=dict)
    # graph nodes bound to the pattern's placeholders
    placeholder_nodes: List[Node] = field(default_factory=list)
    # graph nodes corresponding to the pattern's returned values
    returning_nodes: List[Node] = field(default_factory=list)

    if _torch_compat.FX_API_2:
        # (torch.fx 2.x) names of the pattern's returned values -> graph nodes, filled by
        # matcher_with_name_node_map_utils
        name_node_map: Dict[str, Node] = field(default_factory=dict)

    def __copy__(self):
        return InternalMatch(anchors=self.anchors, nodes_map=self.nodes_map.copy(),
                             placeholder_nodes=self.placeholder_nodes.copy(),
                             returning_nodes=self.returning_nodes.copy())


@compatibility(is_backward_compatible=False)
class SubgraphMatcher:
    """Finds the non-overlapping (by default) occurrences of ``pattern`` in a graph.

    Args:
        pattern: the pattern graph.
        match_output: the pattern's output node is part of the pattern.
        match_placeholder: pattern placeholders only match placeholders (else wildcards).
        remove_overlapping_matches: keep only the first of overlapping matches.
    """

    if _torch_compat.FX_API_2:
        def __init__(self, pattern: Graph, match_output: bool = False, match_placeholder: bool = False,
                     remove_overlapping_matches: bool = True, ignore_literals: bool = False) -> None:
            self.ignore_literals = ignore_literals
            self._init(pattern, match_output, match_placeholder, remove_overlapping_matches)

        def match(self, graph: Graph, node_name_match: str = "") -> List[InternalMatch]:
            """The matched subgraphs (self-contained; see torch.fx's documentation)."""
            if not node_name_match and _core_matcher_agrees(self, graph):
                raw = _C._subgraph_match(self.pattern, graph, self.match_output, self.match_placeholder,
                                         self.remove_overlapping_matches)
                return [InternalMatch(anchors, nodes_map, placeholders, returning)
                        for anchors, nodes_map, placeholders, returning in raw]
            return _Fx2Matcher(self, node_name_match).match(graph)
    else:
        def __init__(self, pattern: Graph, match_output: bool = False, match_placeholder: bool = False,
                     remove_overlapping_matches: bool = True) -> None:
            self._init(pattern, match_output, match_placeholder, remove_overlapping_matches)

        def match(self, graph: Graph) -> List[InternalMatch]:
            """The matched subgraphs (self-contained; see torch.fx's documentation)."""
            raw = _C._subgraph_match(self.pattern, graph, self.match_output, self.match_placeholder,
                                     self.remove_overlapping_matches)
            return [InternalMatch(anchors, nodes_map, placeholders, returning)
                    for anchors, nodes_map, placeholders, returning in raw]

    def _init(self, pattern, match_output, match_placeholder, remove_overlapping_matches):
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        if len(pattern.nodes) == 0:
            raise ValueError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in pattern.nodes:
            if node.op == "output":
                continue
            if _torch_compat.FX_API_2:
                # 2.x: impure nodes (an in-place op kept for its effect) may go unused
                if not node.is_impure() and len(node.users) == 0:
                    raise AssertionError("SubgraphMatcher cannot be initialized with a pattern with dead code")
            else:
                assert len(node.users) > 0, \
                    "SubgraphMatcher cannot be initialized with an pattern with dead code"
        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        output_node = next(iter(reversed(pattern.nodes)))
        self.pattern_returning_nodes: List[Node] = output_node.all_input_nodes
        if match_output:
            self.pattern_anchors: List[Node] = [output_node]
        else:
            self.pattern_anchors = [n for n in output_node.all_input_nodes if len(n.users) == 1]


_CONTAINERS = (list, tuple, dict, slice)


def _core_matcher_agrees(matcher: SubgraphMatcher, graph) -> bool:
    """Whether the core's matcher (torch.fx 1.13's semantics, in C++) finds exactly what torch.fx
    2.x's would here, so that it can run instead (same matches, order and maps). The two differ
    only on: get_attr pattern nodes (2.x compares the attributes' kinds), impure pattern nodes
    without users (2.x accepts them), ignore_literals, operator overloads with differing argument
    lists (2.x fills in schema defaults), containers in arguments (1.13 flattens them, 2.x walks
    them in step, and a 2.x placeholder binds a whole list), keyword arguments with the same
    keys in another order (2.x compares the ordered keys) and anchors without candidates (2.x
    drops them). The pattern is checked here (:func:`_pattern_agrees`), the graph in C++
    (Note [Core matches under torch.fx 2.x])."""
    if not isinstance(graph, Graph) or not _pattern_agrees(matcher):
        return False
    return _C._core_matcher_agrees_on(matcher.pattern, graph)


def _pattern_agrees(matcher: SubgraphMatcher) -> bool:
    """The pattern side of :func:`_core_matcher_agrees`: default flags, and no pattern node that
    is dead, a get_attr, an operator overload call, has a container argument or an unhashable
    target. O(pattern)."""
    if matcher.ignore_literals or matcher.match_placeholder or matcher.match_output:
        return False
    if not isinstance(matcher.pattern, Graph):
        return False
    for pn in matcher.pattern.nodes:
        if pn.op == "output":
            continue
        if not pn.users:  # dead code (the core refuses it; 2.x keeps impure nodes and placeholders)
            return False
        if pn.op == "placeholder":
            continue
        if pn.op == "get_attr":
            return False
        if pn.op == "call_function" and isinstance(pn.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return False
        if any(isinstance(a, _CONTAINERS) for a in (*pn.args, *pn.kwargs.values())):
            return False
        try:
            hash(pn.target)
        except TypeError:  # unhashable target
            return False
    return True


def _is_node(x) -> bool:
    return isinstance(x, (Node, torch.fx.Node))


class _MatchFailed(Exception):
    """Raised inside _Fx2Matcher._match_nodes: one failed comparison fails the whole walk."""


class _Fx2Matcher:
    """torch.fx 2.x's matching semantics for one SubgraphMatcher.match call (module docstring)."""

    def __init__(self, matcher: SubgraphMatcher, node_name_match: str):
        self.m = matcher
        self.node_name_match = node_name_match
        self._heights = None
        self._mapped = set()
        self._literal_values = []

    def _attributes_match(self, pn, gn) -> bool:
        def _get_attr(mod, target):
            for atom in target.split('.'):
                mod = getattr(mod, atom)
            return mod
        for n in (pn, gn):
            if not isinstance(n.target, str):
                raise AssertionError(f"{'pn' if n is pn else 'gn'}.target {n.target} must be a string.")
        for n in (pn, gn):
            if n.graph.owning_module is None:
                raise AssertionError(f"{'pn' if n is pn else 'gn'}.graph.owning_module must not be None")
        pv = _get_attr(pn.graph.owning_module, pn.target)
        gv = _get_attr(gn.graph.owning_module, gn.target)
        if type(pv) is not type(gv):
            return False
        if isinstance(pv, torch.Tensor):
            return isinstance(gv, torch.Tensor)
        raise RuntimeError(f"Unsupported type {pv} when matching attributes")

    def nodes_are_equal(self, pn, gn, name_match: str) -> bool:
        if not self.m.match_placeholder and pn.op == "placeholder":
            return True
        if name_match and name_match in gn.name:
            return True
        if pn.op != gn.op:
            return False
        if pn.op in ("placeholder", "output"):
            return True
        if pn.op == "get_attr":
            return self._attributes_match(pn, gn)
        return pn.target == gn.target

    @staticmethod
    def _arg_lists(pn, gn):
        """The argument lists compared for (pn, gn), or None when they cannot match."""
        same_shape = len(pn.args) == len(gn.args) and list(pn.kwargs.keys()) == list(gn.kwargs.keys())
        if (not same_shape and pn.op == "call_function"
                and isinstance(pn.target, torch._ops.OpOverload)):
            schema_args = pn.target._schema.arguments

            def filled(args, kwargs):
                out = []
                for i, a in enumerate(schema_args):
                    if a.name in kwargs:
                        out.append(kwargs[a.name])
                    elif not a.kwarg_only and i < len(args):
                        out.append(args[i])
                    else:
                        out.append(a.default_value)
                return out
            return filled(pn.args, pn.kwargs), filled(gn.args, gn.kwargs)
        if same_shape:
            return [*pn.args, *pn.kwargs.values()], [*gn.args, *gn.kwargs.values()]
        return None

    def _literal(self, pa, ga, nodes_map) -> bool:
        if _is_node(pa):
            if pa.op != "placeholder":
                return False
            if pa in nodes_map:
                return nodes_map[pa] == ga
            nodes_map[pa] = ga
            if _is_node(ga):
                self._mapped.add(id(ga))
            else:
                self._literal_values.append(ga)
            return True
        if _is_node(ga):
            return False
        return type(ga) is type(pa) and ga == pa

    def _enter(self, pn, gn, nodes_map, name_match, stack):
        """The checks and binding at the start of torch.fx's _match_nodes; pushes the argument walk."""
        if pn in nodes_map:
            if nodes_map[pn] != gn:
                raise _MatchFailed
            return
        # torch.fx: `gn in nodes_map.values()`, with a set for the node values (O(1))
        if id(gn) in self._mapped or any(v == gn for v in self._literal_values):
            raise _MatchFailed
        if not self.nodes_are_equal(pn, gn, name_match):
            raise _MatchFailed
        nodes_map[pn] = gn
        self._mapped.add(id(gn))
        if pn.op == "placeholder":
            return
        lists = self._arg_lists(pn, gn)
        if lists is None:
            raise _MatchFailed
        pa, ga = lists
        if len(pa) != len(ga):
            raise _MatchFailed
        stack.append(iter(zip(pa, ga)))

    def match_nodes(self, pn, gn, nodes_map, name_match) -> bool:
        """torch.fx 2.x's _match_nodes(pn, gn), depth first on an explicit stack."""
        stack: List[Any] = []
        self._mapped = {id(v) for v in nodes_map.values() if _is_node(v)}
        self._literal_values = [v for v in nodes_map.values() if not _is_node(v)]
        try:
            self._enter(pn, gn, nodes_map, name_match, stack)
            while stack:
                pair = next(stack[-1], None)
                if pair is None:
                    stack.pop()
                    continue
                pa, ga = pair
                if _is_node(pa) and _is_node(ga):
                    self._enter(pa, ga, nodes_map, "", stack)  # name matching applies to anchors only
                elif isinstance(pa, (list, tuple)) and isinstance(ga, (list, tuple)):
                    if len(pa) != len(ga):
                        raise _MatchFailed
                    stack.append(iter(zip(pa, ga)))
                elif not (self._literal(pa, ga, nodes_map) or self.m.ignore_literals):
                    raise _MatchFailed
        except _MatchFailed:
            return False
        return True

    def _tall_enough(self, anchor, nodes, graph):
        """The candidates of ``anchor`` that can match, by height (the longest chain of node inputs
        above a node): every pattern edge between non-placeholder nodes maps onto a graph edge,
        so a graph node lower than the anchor cannot match it. Leaves torch.fx's results as they
        are; keeps a long chain pattern linear instead of walking up from every candidate. Not
        applied under ignore_literals (a pattern node may then stand for a literal) or on a node
        list that is not in topological order."""
        if self.m.ignore_literals or len(nodes) < 2:
            return nodes
        if self._heights is None:
            heights: Dict[int, int] = {}
            for node in graph.nodes:
                ins = node.all_input_nodes
                if any(id(i) not in heights for i in ins):
                    self._heights = {}
                    return nodes
                heights[id(node)] = 1 + max((heights[id(i)] for i in ins), default=0)
            pheights: Dict[int, int] = {}
            for node in self.m.pattern.nodes:
                if node.op == "placeholder" and not self.m.match_placeholder:
                    pheights[id(node)] = 0
                    continue
                pheights[id(node)] = 1 + max((pheights.get(id(i), 0) for i in node.all_input_nodes), default=0)
            self._heights, self._pheights = heights, pheights
        if not self._heights:
            return nodes
        need = self._pheights.get(id(anchor), 0)
        return [n for n in nodes if self._heights.get(id(n), 0) >= need]

    def _is_contained(self, nodes_map) -> bool:
        lookup = {gn: pn for pn, gn in nodes_map.items() if pn.op != "placeholder"}
        for gn, pn in lookup.items():
            if pn in self.m.pattern_returning_nodes:
                continue
            for user in gn.users:
                if user not in lookup:
                    return False
        return True

    def match(self, graph) -> List[InternalMatch]:
        from .fuser_utils import validate_partition
        m = self.m
        candidates: Dict[Node, List[Node]] = {}
        for anchor in m.pattern_anchors:
            for node in graph.nodes:
                if self.nodes_are_equal(anchor, node, self.node_name_match):
                    candidates.setdefault(anchor, []).append(node)
        levels = [(anchor, self._tall_enough(anchor, nodes, graph)) for anchor, nodes in candidates.items()]
        matches: List[InternalMatch] = []

        # Backtracking over the anchors: each candidate is tried on a copy of the state its
        # level started from (a failed walk leaves nothing behind, as in torch.fx).
        def backtrack(level: int, nodes_map: Dict) -> None:
            if level == len(levels):
                matches.append(InternalMatch(
                    anchors=m.pattern_anchors, nodes_map=nodes_map,
                    placeholder_nodes=[nodes_map[pn] for pn in m.pattern_placeholder_nodes],
                    returning_nodes=[nodes_map[pn] for pn in m.pattern_returning_nodes]))
                return
            anchor, nodes = levels[level]
            for node in nodes:
                trial = dict(nodes_map)
                if self.match_nodes(anchor, node, trial, self.node_name_match):
                    backtrack(level + 1, trial)

        if levels:
            backtrack(0, {})
        matches = [x for x in matches if self._is_contained(x.nodes_map)]
        matches = [x for x in matches
                   if validate_partition([gn for pn, gn in x.nodes_map.items()
                                          if pn.op not in ("placeholder", "output")])]
        if m.remove_overlapping_matches:
            kept, taken = [], set()
            for x in matches:
                compute = [gn for pn, gn in x.nodes_map.items() if pn.op not in ("placeholder", "output")]
                if any(gn in taken for gn in compute):
                    continue
                kept.append(x)
                taken.update(compute)
            matches = kept
        return matches
