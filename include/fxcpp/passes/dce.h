// fxcpp pass: dead-code elimination (torch.fx Graph.eliminate_dead_code).
#pragma once

#include "fxcpp/core/graph.h"

namespace fxcpp {

struct DceOptions {
  /// Decides call_module purity (passed to Node::is_impure, the one impurity
  /// decision). Empty: call_module nodes are pure. As in torch.fx, it is
  /// consulted for every call_module node, users or not, so a hook that
  /// raises (torch.fx asserts an owning module) raises from the pass with
  /// the nodes after the failing one already eliminated.
  Node::ModuleImpurityFn module_is_impure;
  /// Run lint() first (torch.fx does).
  bool lint_first = true;
};

/// Erases, in reverse order, every node without users that Node::is_impure
/// (with `opts.module_is_impure`) calls pure. Returns whether the graph
/// changed. O(graph size) plus the hook's calls.
bool eliminate_dead_code(Graph& g, const DceOptions& opts = {});

}  // namespace fxcpp
