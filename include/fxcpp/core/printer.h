// fxcpp core: printing as torch.fx prints -- str(graph), Node.format_node and
// the repr() of argument trees that generated code and graph printing share.
//
// src/core/printer.cpp implements this header and two members declared with
// their classes: Graph::print (graph.h, str(graph)) and Node::format_node
// (node.h). Python source generation is codegen.h.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "fxcpp/core/node.h"

namespace fxcpp {

/// Python repr() of an argument tree, naming nodes with `node_name`.
std::string repr_argument(const Argument& a, const std::function<std::string(const Node*)>& node_name);
/// Names a node for repr_argument_into. The returned view must stay valid
/// until the next call (names owned by a graph or namespace qualify).
using NodeNameFn = std::function<std::string_view(const Node*)>;
/// Appends the Python repr() of `a` to `out` (no intermediate strings).
/// O(size of the tree and its text).
void repr_argument_into(std::string& out, const Argument& a, const NodeNameFn& node_name);
/// torch.fx `_format_arg` (graph printing: str() of leaves, %name for nodes).
std::string format_arg(const Argument& a);

}  // namespace fxcpp
