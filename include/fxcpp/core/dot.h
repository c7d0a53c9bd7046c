// fxcpp core: Graphviz DOT export of a Graph.
//
// Note [DOT export]
// ~~~~~~~~~~~~~~~~~
// to_dot() renders a Graph as a Graphviz `digraph`, in the spirit of torch.fx's
// FxGraphDrawer (torch/fx/passes/graph_drawer.py) but without pydot: one
// `record` node per live graph node, labelled
//     {name=%conv1|op_code=call_module\l|target=conv1\l|...|num_users=1\l}
// and filled with the drawer's per-op colours (call_function / call_method get
// a colour derived from a stable hash of their target). Edges run from each
// node to each of its users, in users order, one edge per (value, user) pair.
//
// Every identifier is emitted as a quoted DOT string and every label field is
// record-escaped, so arbitrary node names and targets (braces, bars, quotes,
// backslashes, non-ASCII) yield valid DOT. The output is deterministic: nodes
// in graph order, edges grouped by their source node. O(graph size).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

struct DotOptions {
  /// The digraph's name (`digraph "<name>" {`).
  std::string graph_name = "fxcpp";
  /// Graphviz rankdir: "TB" (top to bottom, the default) or "LR".
  std::string rankdir = "TB";
  /// Show non-node positional/keyword arguments (like FxGraphDrawer with
  /// skip_node_names_in_args=True: entries mentioning a node are dropped).
  bool show_args = true;
  /// Longest argument text shown per entry; longer text is cut with "...".
  size_t max_arg_chars = 48;
  /// Extra label fields for a node (e.g. the module type of a call_module,
  /// supplied by the Python layer). Each string becomes one `|field\l`.
  std::function<std::vector<std::string>(const Node&)> extra_fields;
};

/// The Graphviz DOT text for `g`.
std::string to_dot(const Graph& g, const DotOptions& opts = {});
void write_dot(std::ostream& os, const Graph& g, const DotOptions& opts = {});

/// Quotes `s` as a DOT string ID: `"..."` with `"` and `\` escaped and
/// control characters replaced by spaces.
std::string dot_quote(std::string_view s);
/// Escapes text for one field of a `record` label (`{ } | < > "` and `\`
/// get a backslash; newlines and other control characters become spaces).
std::string dot_record_escape(std::string_view s);

}  // namespace fxcpp
