// fxcpp pass: which nodes of two graphs correspond (issue 22, item 5: the graph
// explorer's before/after view of a pass). Nodes are matched by name, then by
// structure; the rest are added or removed, and matched nodes whose content or
// wiring differs are marked changed (Note [Matching two graphs] in
// graph_diff.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// One node as graph_diff sees it. `kind` says what a node does (op and
/// target, e.g. "call_module conv1"): two nodes can only be matched by
/// structure when their kinds are equal. `detail` is everything else that
/// makes a node's content (constant arguments, a called module's parameters):
/// a matched pair whose kind or detail differ is changed. `inputs`: indices
/// (into the same DiffGraph) of the nodes it reads, in argument order,
/// duplicates allowed.
struct DiffNode {
  std::string name;
  std::string kind;
  std::string detail;
  std::vector<uint32_t> inputs;
};

/// A graph as a list of nodes. Any order and any edges are accepted (cycles
/// too); a graph in topological order gets the most structural matches.
struct DiffGraph {
  std::vector<DiffNode> nodes;
};

/// graph_diff's answer, per node of each side.
struct GraphDiffResult {
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  /// Per before-node: its after-node, or kNone when it was removed.
  std::vector<uint32_t> before_to_after;
  /// Per after-node: its before-node, or kNone when it was added.
  std::vector<uint32_t> after_to_before;
  /// Per after-node: 1 when matched and changed (kind or detail differ, or it
  /// reads, at some argument position, a different surviving node than its
  /// before-node read there; an input that was removed is not a change).
  std::vector<uint8_t> changed;
  /// Summary counts.
  uint32_t added = 0;
  uint32_t removed = 0;
  uint32_t num_changed = 0;
  uint32_t matched_by_name = 0;
  uint32_t matched_by_structure = 0;
};

/// Matches the nodes of `before` and `after` (Note [Matching two graphs]):
/// first equal names whose kinds' opcodes (the text before the first space)
/// agree, then, repeatedly, an unmatched after-node with an unmatched
/// before-node of the same kind whose inputs are matched to its inputs
/// position by position (nodes without inputs: same kind, in graph order).
/// The matching is one-to-one and a function of the inputs only. Cost:
/// O((N + E) log N) for N nodes and E inputs on both sides. Throws
/// std::invalid_argument when an input index is out of range.
GraphDiffResult graph_diff(const DiffGraph& before, const DiffGraph& after);

/// The DiffGraph of a live fxcpp graph: nodes in graph order, kind = "op
/// target", detail empty (callers that know more, such as module parameters,
/// build the DiffGraph themselves). Inputs from another graph are dropped.
DiffGraph diff_graph(const Graph& g);

}  // namespace fxcpp
