#include "fxcpp/passes/lint.h"

#include <string_view>
#include <unordered_set>
#include <vector>

namespace fxcpp {

void lint(const Graph& g, const LintOptions& opts) {
  auto fail = [&](const std::string& msg, bool with_graph) {
    throw LintError(with_graph && opts.include_graph_in_message ? msg + "\n" + g.to_string() : msg);
  };
  auto q = [](const Node* n) { return std::string(n->name()); };
  // Side tables by node index: defined earlier in this walk; last node whose
  // unique-input list already holds this value (dedup in O(1)).
  const size_t cap = g.node_capacity();
  std::vector<bool> defined(cap, false);
  // Unique inputs are found by scanning the few seen so far; a node with many
  // inputs switches to a set.  (A per-node side table of 8 bytes was the
  // largest memory stream of this pass at 1e6 nodes.)
  constexpr size_t kScanLimit = 16;
  std::unordered_set<const Node*> many;
  // Names the namespace handed out are unique by construction; only graphs
  // with renamed nodes need the check.
  const bool check_names = !g.names_from_namespace();
  std::unordered_set<std::string_view> seen_names;
  if (check_names) seen_names.reserve(g.size() + 1);
  std::vector<Node*> expect;  // reused: unique inputs in first-appearance order
  size_t input_records = 0;
  size_t user_records = 0;
  for (Node* node : g.nodes()) {
    if (node->graph() != &g) fail("Node '" + q(node) + "' does not belong to this Graph!", false);
    expect.clear();
    if (!many.empty()) many.clear();
    auto check_arg = [&](Node* arg) {
      if (arg->graph() != &g)
        fail("Argument '" + q(arg) + "' of Node '" + q(node) +
                 "' does not belong to this Graph, but was used as an argument! If you are copying nodes from "
                 "another graph, make sure to use ``arg_transform`` on node_copy() to remap values",
             true);
      if (arg->erased() || !defined[arg->index()])
        fail("Argument '" + q(arg) + "' of Node '" + q(node) +
                 "' was used before it has been defined! Please check that Nodes in the graph are topologically "
                 "ordered",
             true);
      if (expect.size() < kScanLimit) {
        for (Node* e : expect)
          if (e == arg) return;
        expect.push_back(arg);
        if (expect.size() == kScanLimit) many.insert(expect.begin(), expect.end());
        return;
      }
      if (many.insert(arg).second) expect.push_back(arg);
    };
    for (auto& a : node->args()) a.for_each_node(check_arg);
    for (auto& kv : node->kwargs()) kv.second.for_each_node(check_arg);
    defined[node->index()] = true;
    if (check_names && !seen_names.insert(node->name()).second) fail("Node redefined name " + q(node) + "!", false);
    // Note [Use lists]: the node's use records mirror its argument tree.
    bool consistent = expect.size() == node->num_inputs();
    for (size_t i = 0; consistent && i < expect.size(); ++i) {
      const Use& u = node->input_use(i);
      consistent = u.value() == expect[i] && u.user() == node;
    }
    if (!consistent)
      fail("Node '" + q(node) + "' has inconsistent input nodes: its use list does not match its arguments", false);
    input_records += expect.size();
    // Every users list is well formed: each record names this node as its
    // value, prev links mirror next links (the head's prev is the tail), and
    // the records add up to the use records of the whole graph. Checked in
    // the same walk: at 1e6 nodes a second pass costs as much as the first.
    const Use* head = node->first_use();
    const Use* tail = head ? head->prev : nullptr;
    bool ok = true;
    for (const Use* r = head; r && ok; r = r->next) {
      ok = r->value() == node && (r == head || r->prev->next == r);
      ++user_records;
      if (!r->next) ok = ok && r == tail;
    }
    if (!ok) fail("Node '" + q(node) + "' has a corrupt users list", false);
  }
  if (user_records != input_records) {
    // Nodes of another graph may use this graph's nodes (that graph's lint
    // reports it; torch.fx's lint of this one passes): recount without them,
    // off the fast path.
    user_records = 0;
    for (Node* node : g.nodes())
      for (const Use* r = node->first_use(); r; r = r->next) user_records += r->user()->graph() == &g;
  }
  if (user_records != input_records)
    fail("The graph's users lists hold " + std::to_string(user_records) + " records but its nodes have " +
             std::to_string(input_records) + " use records",
         false);
}

}  // namespace fxcpp
