// fxcpp pass: dead-code elimination (torch.fx Graph.eliminate_dead_code).
#pragma once

#include <functional>

#include "fxcpp/core/graph.h"

namespace fxcpp {

struct DceOptions {
  /// Extra impurity test; a node is kept if node.is_impure() or is_impure(node).
  /// Called for every node, in reverse order, before its users are looked at
  /// (torch.fx's order), so an exception it throws leaves torch.fx's state.
  std::function<bool(const Node&)> is_impure;
  /// Run lint() first (torch.fx does).
  bool lint_first = true;
};

/// Erases, in reverse order, every pure node without users. Returns whether
/// the graph changed. O(graph size).
bool eliminate_dead_code(Graph& g, const DceOptions& opts = {});

}  // namespace fxcpp
