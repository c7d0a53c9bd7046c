#include "fxcpp/passes/lint.h"

#include <unordered_set>

namespace fxcpp {

void lint(const Graph& g, const LintOptions& opts) {
  auto fail = [&](const std::string& msg, bool with_graph) {
    throw LintError(with_graph && opts.include_graph_in_message ? msg + "\n" + g.to_string() : msg);
  };
  // scratch: 1 = seen (defined) in this walk.
  for (Node* n : g.nodes()) n->set_scratch(0);
  std::unordered_set<std::string> seen_names;
  seen_names.reserve(g.size() * 2);
  for (Node* node : g.nodes()) {
    if (node->graph() != &g) fail("Node '" + node->name() + "' does not belong to this Graph!", false);
    auto check_arg = [&](Node* arg) {
      std::string ctx = " of Node '" + node->name() + "' ";
      if (arg->graph() != &g)
        fail("Argument '" + arg->name() + "'" + ctx +
                 "does not belong to this Graph, but was used as an argument! If you are copying nodes from "
                 "another graph, make sure to use ``arg_transform`` on node_copy() to remap values",
             true);
      if (arg->erased() || arg->scratch() != 1)
        fail("Argument '" + arg->name() + "'" + ctx +
                 "was used before it has been defined! Please check that Nodes in the graph are topologically "
                 "ordered",
             true);
    };
    for (auto& a : node->args()) a.for_each_node(check_arg);
    for (auto& kv : node->kwargs()) kv.second.for_each_node(check_arg);
    node->set_scratch(1);
    if (!seen_names.insert(node->name()).second) fail("Node redefined name " + node->name() + "!", false);
  }
  // Use lists must agree with the argument trees (Note [Use lists]).
  for (Node* node : g.nodes()) {
    std::vector<Node*> expect;
    std::unordered_set<Node*> uniq;
    auto add = [&](Node* n) {
      if (uniq.insert(n).second) expect.push_back(n);
    };
    for (auto& a : node->args()) a.for_each_node(add);
    for (auto& kv : node->kwargs()) kv.second.for_each_node(add);
    if (expect != node->all_input_nodes())
      fail("Node '" + node->name() + "' has inconsistent input nodes: its use list does not match its arguments",
           false);
    for (Node* in : expect) {
      bool found = false;
      for (Node* u : in->users()) found = found || u == node;
      if (!found)
        fail("Node '" + node->name() + "' is missing from the users of its input '" + in->name() + "'", false);
    }
  }
}

}  // namespace fxcpp
