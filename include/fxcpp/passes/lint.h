// fxcpp pass: lint (torch.fx Graph.lint, structural part).
#pragma once

#include <stdexcept>
#include <string>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// Thrown by lint() with torch.fx's message.
class LintError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LintOptions {
  /// Append the printed graph to messages (torch.fx does).
  bool include_graph_in_message = true;
};

/// Verifies: known opcodes, node ownership, use before definition (and
/// arguments from other graphs), unique names, and that use lists agree with
/// the argument trees. Throws LintError naming the node and the reason.
/// O(graph size).
void lint(const Graph& g, const LintOptions& opts = {});

}  // namespace fxcpp
