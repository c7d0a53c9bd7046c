#include "fxcpp/passes/lint.h"

#include <string_view>
#include <unordered_set>

namespace fxcpp {

void lint(const Graph& g, const LintOptions& opts) {
  auto fail = [&](const std::string& msg, bool with_graph) {
    throw LintError(with_graph && opts.include_graph_in_message ? msg + "\n" + g.to_string() : msg);
  };
  // scratch = 1: defined earlier in this walk.
  for (Node* n : g.nodes()) n->set_scratch(0);
  // Names the namespace handed out are unique by construction; only graphs
  // with renamed nodes need the check.
  const bool check_names = !g.names_from_namespace();
  std::unordered_set<std::string_view> seen_names;
  if (check_names) seen_names.reserve(g.size() + 1);
  std::vector<Node*> expect;  // reused: unique inputs in first-appearance order
  for (Node* node : g.nodes()) {
    if (node->graph() != &g) fail("Node '" + node->name() + "' does not belong to this Graph!", false);
    expect.clear();
    auto check_arg = [&](Node* arg) {
      if (arg->graph() != &g)
        fail("Argument '" + arg->name() + "' of Node '" + node->name() +
                 "' does not belong to this Graph, but was used as an argument! If you are copying nodes from "
                 "another graph, make sure to use ``arg_transform`` on node_copy() to remap values",
             true);
      if (arg->erased() || arg->scratch() != 1)
        fail("Argument '" + arg->name() + "' of Node '" + node->name() +
                 "' was used before it has been defined! Please check that Nodes in the graph are topologically "
                 "ordered",
             true);
      for (Node* e : expect)
        if (e == arg) return;
      expect.push_back(arg);
    };
    for (auto& a : node->args()) a.for_each_node(check_arg);
    for (auto& kv : node->kwargs()) kv.second.for_each_node(check_arg);
    node->set_scratch(1);
    if (check_names && !seen_names.insert(node->name()).second) fail("Node redefined name " + node->name() + "!", false);
    // Note [Use lists]: the node's use records mirror its argument tree.
    bool consistent = expect.size() == node->num_inputs();
    for (size_t i = 0; consistent && i < expect.size(); ++i) {
      const Use& u = node->input_use(i);
      consistent = u.value == expect[i] && u.user == node;
    }
    if (!consistent)
      fail("Node '" + node->name() + "' has inconsistent input nodes: its use list does not match its arguments",
           false);
  }
  // Every users list is well formed: each record names this node as its value.
  for (Node* node : g.nodes()) {
    size_t count = 0;
    for (Node* u : node->users()) {
      (void)u;
      ++count;
    }
    if (count != node->num_users())
      fail("Node '" + node->name() + "' has a corrupt users list (" + std::to_string(count) + " records, " +
               std::to_string(node->num_users()) + " counted)",
           false);
  }
}

}  // namespace fxcpp
