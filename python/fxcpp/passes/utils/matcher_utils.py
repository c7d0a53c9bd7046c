"""fxcpp.passes.utils.matcher_utils: SubgraphMatcher (mirrors torch.fx 1.13's).

The matching runs in C++ (see Note [Subgraph matching semantics] in
include/fxcpp/passes/subgraph_matcher.h); results equal torch.fx's.
"""
from dataclasses import dataclass, field
from typing import Dict, List

from ... import _C
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

    def __init__(self, pattern: Graph, match_output: bool = False, match_placeholder: bool = False,
                 remove_overlapping_matches: bool = True) -> None:
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        if len(pattern.nodes) == 0:
            raise ValueError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in pattern.nodes:
            if node.op != "output":
                assert len(node.users) > 0, \
                    "SubgraphMatcher cannot be initialized with an pattern with dead code"
        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        output_node = next(iter(reversed(pattern.nodes)))
        self.pattern_returning_nodes: List[Node] = output_node.all_input_nodes
        if match_output:
            self.pattern_anchors: List[Node] = [output_node]
        else:
            self.pattern_anchors = [n for n in output_node.all_input_nodes if len(n.users) == 1]

    def match(self, graph: Graph) -> List[InternalMatch]:
        """The matched subgraphs (self-contained; see torch.fx's documentation)."""
        raw = _C._subgraph_match(self.pattern, graph, self.match_output, self.match_placeholder,
                                 self.remove_overlapping_matches)
        return [InternalMatch(anchors, nodes_map, placeholders, returning)
                for anchors, nodes_map, placeholders, returning in raw]
