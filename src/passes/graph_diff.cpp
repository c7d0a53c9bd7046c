#include "fxcpp/passes/graph_diff.h"

#include <deque>
#include <map>
#include <stdexcept>
#include <unordered_map>

// Note [Matching two graphs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A pass keeps most node names (torch.fx never reuses an erased name within a
// graph, and two traces of one model name nodes alike), so names come first:
// a before-node and an after-node with the same name are matched when their
// opcodes agree (a call_module renamed to a call_function is a different
// node). What names miss (a pass that re-creates nodes under fresh names, two
// tracers that number differently) is matched by structure, from the sources
// down: an unmatched node is *ready* once all its inputs are matched; a ready
// before-node is filed under the key (kind, its inputs' after-images), a ready
// after-node under (kind, its inputs); equal keys on both sides are matched
// (first come, first matched: sources in graph order), which makes their
// users' inputs matched in turn. Each side keeps a count of unmatched inputs per node, so a
// match costs O(users) and the whole pass O((N + E) log N), however long a
// chain of renamed nodes is. Nodes without inputs (placeholders, get_attr)
// are ready from the start, keyed by kind alone. A cycle's nodes never become
// ready unless matched by name: they are reported added/removed, never a
// hang.
//
// "Changed" is about a matched node itself: a different kind or detail (its
// constant arguments, a module's parameters), or an argument position that now
// reads another *surviving* node. A node whose input was removed and replaced
// by a pass (the relu after a batch norm folded into its convolution) is not
// changed: the drawing shows that through the removed node and the edges.

namespace fxcpp {

namespace {

constexpr uint32_t kNone = GraphDiffResult::kNone;

std::string_view opcode(const std::string& kind) {
  const size_t sp = kind.find(' ');
  return std::string_view(kind).substr(0, sp == std::string::npos ? kind.size() : sp);
}

void check_inputs(const DiffGraph& g, const char* side) {
  for (const DiffNode& n : g.nodes)
    for (uint32_t i : n.inputs)
      if (i >= g.nodes.size())
        throw std::invalid_argument(std::string("graph_diff: an input of ") + side + " node '" + n.name +
                                    "' is out of range");
}

/// Users of each node (each distinct user once per use).
std::vector<std::vector<uint32_t>> users_of(const DiffGraph& g) {
  std::vector<std::vector<uint32_t>> users(g.nodes.size());
  for (uint32_t v = 0; v < g.nodes.size(); ++v)
    for (uint32_t u : g.nodes[v].inputs) users[u].push_back(v);
  return users;
}

using Key = std::pair<std::string, std::vector<uint32_t>>;

}  // namespace

GraphDiffResult graph_diff(const DiffGraph& before, const DiffGraph& after) {
  check_inputs(before, "before");
  check_inputs(after, "after");
  const size_t nb = before.nodes.size(), na = after.nodes.size();
  GraphDiffResult r;
  r.before_to_after.assign(nb, kNone);
  r.after_to_before.assign(na, kNone);
  r.changed.assign(na, 0);

  // 1. Names.
  std::unordered_map<std::string, uint32_t> after_by_name;
  for (uint32_t v = 0; v < na; ++v) after_by_name.emplace(after.nodes[v].name, v);
  for (uint32_t u = 0; u < nb; ++u) {
    auto it = after_by_name.find(before.nodes[u].name);
    if (it == after_by_name.end() || r.after_to_before[it->second] != kNone) continue;
    if (opcode(before.nodes[u].kind) != opcode(after.nodes[it->second].kind)) continue;
    r.before_to_after[u] = it->second;
    r.after_to_before[it->second] = u;
    ++r.matched_by_name;
  }

  // 2. Structure, from the sources down.
  const auto busers = users_of(before), ausers = users_of(after);
  std::vector<uint32_t> bpending(nb, 0), apending(na, 0);
  for (uint32_t u = 0; u < nb; ++u)
    for (uint32_t i : before.nodes[u].inputs) bpending[u] += r.before_to_after[i] == kNone;
  for (uint32_t v = 0; v < na; ++v)
    for (uint32_t i : after.nodes[v].inputs) apending[v] += r.after_to_before[i] == kNone;
  // Ready unmatched nodes waiting for a partner, by key, in the order they
  // became ready (std::map: the result does not depend on hashing).
  std::map<Key, std::deque<uint32_t>> waiting[2];
  std::vector<std::pair<int, uint32_t>> work;  // (side: 0 before, 1 after; node)
  auto key_of = [&](int side, uint32_t n) {
    const DiffNode& d = side == 0 ? before.nodes[n] : after.nodes[n];
    Key k{d.kind, {}};
    k.second.reserve(d.inputs.size());
    for (uint32_t i : d.inputs) k.second.push_back(side == 0 ? r.before_to_after[i] : i);
    return k;
  };
  for (uint32_t u = 0; u < nb; ++u)
    if (r.before_to_after[u] == kNone && bpending[u] == 0) work.emplace_back(0, u);
  for (uint32_t v = 0; v < na; ++v)
    if (r.after_to_before[v] == kNone && apending[v] == 0) work.emplace_back(1, v);
  // A FIFO of ready nodes: each is filed once; filing finds the partner
  // waiting under the same key on the other side, if any (the earliest).
  for (size_t head = 0; head < work.size(); ++head) {
    const auto [side, n] = work[head];
    Key k = key_of(side, n);
    auto it = waiting[1 - side].find(k);
    if (it == waiting[1 - side].end()) {
      waiting[side][std::move(k)].push_back(n);
      continue;
    }
    const uint32_t m = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) waiting[1 - side].erase(it);
    const uint32_t u = side == 0 ? n : m, v = side == 0 ? m : n;
    r.before_to_after[u] = v;
    r.after_to_before[v] = u;
    ++r.matched_by_structure;
    for (uint32_t w : busers[u])
      if (r.before_to_after[w] == kNone && --bpending[w] == 0) work.emplace_back(0, w);
    for (uint32_t w : ausers[v])
      if (r.after_to_before[w] == kNone && --apending[w] == 0) work.emplace_back(1, w);
  }

  // 3. Changes and counts.
  for (uint32_t v = 0; v < na; ++v) {
    const uint32_t u = r.after_to_before[v];
    if (u == kNone) {
      ++r.added;
      continue;
    }
    const DiffNode& b = before.nodes[u];
    const DiffNode& a = after.nodes[v];
    bool ch = b.kind != a.kind || b.detail != a.detail;
    for (size_t i = 0; !ch && i < b.inputs.size(); ++i) {
      const uint32_t img = r.before_to_after[b.inputs[i]];
      if (img == kNone) continue;  // its input was removed: a replacement is no change
      ch = i >= a.inputs.size() || a.inputs[i] != img;
    }
    r.changed[v] = ch;
    r.num_changed += ch;
  }
  for (uint32_t u = 0; u < nb; ++u) r.removed += r.before_to_after[u] == kNone;
  return r;
}

DiffGraph diff_graph(const Graph& g) {
  DiffGraph d;
  std::unordered_map<const Node*, uint32_t> index;
  for (Node* v : g.nodes()) index.emplace(v, static_cast<uint32_t>(index.size()));
  d.nodes.reserve(index.size());
  for (Node* v : g.nodes()) {
    DiffNode n;
    n.name = std::string(v->name());
    n.kind = std::string(op_name(v->op())) + " " + Graph::target_to_str(v->target());
    for (size_t i = 0, k = v->num_inputs(); i < k; ++i) {
      auto it = index.find(v->input_use(i).value());
      if (it != index.end()) n.inputs.push_back(it->second);
    }
    d.nodes.push_back(std::move(n));
  }
  return d;
}

}  // namespace fxcpp
