// fxcpp passes: subgraph matcher and rewriter. See Note [Subgraph matching semantics].
#include "fxcpp/passes/subgraph_matcher.h"

#include <algorithm>
#include <unordered_set>

namespace fxcpp {

namespace {

/// pytree.tree_flatten leaves: tuples (named or not), lists and dict values
/// are traversed; everything else is a leaf. Depth = literal nesting depth.
void flatten(const Argument& a, std::vector<const Argument*>& out) {
  switch (a.kind()) {
    case ArgKind::Tuple:
    case ArgKind::List:
      for (const Argument& x : a.items()) flatten(x, out);
      return;
    case ArgKind::Dict:
      for (const auto& kv : a.pairs()) flatten(kv.second, out);
      return;
    default: out.push_back(&a);
  }
}

/// Python `type(a) == type(b) and a == b` for two non-Node leaves.
bool same_type_equal(const Argument& p, const Argument& g) {
  if (p.kind() != g.kind()) return false;
  if (p.kind() == ArgKind::Tuple && !p.tuple_type().is(g.tuple_type())) return false;
  return p == g;
}

}  // namespace

const Argument* InternalMatch::find(const Node* pn) const {
  for (const auto& kv : nodes_map)
    if (kv.first == pn) return &kv.second;
  return nullptr;
}

// ---------------------------------------------------------------------------
// SubgraphMatcher

SubgraphMatcher::SubgraphMatcher(const Graph& pattern, SubgraphMatcherOptions options)
    : pattern_(pattern), options_(options) {
  if (pattern.size() == 0) throw std::invalid_argument("SubgraphMatcher cannot be initialized with an empty pattern");
  for (Node* n : pattern.nodes()) {
    if (n->op() != Op::Output && n->num_users() == 0)
      throw SubgraphAssertion("SubgraphMatcher cannot be initialized with an pattern with dead code");
  }
  info_.reserve(pattern.size());
  for (Node* n : pattern.nodes()) {
    index_.emplace(n, info_.size());
    PatternInfo pi;
    for (const Argument& a : n->args()) flatten(a, pi.leaves);
    for (const auto& kv : n->kwargs()) {
      pi.kw_keys.push_back(kv.first);
      pi.leaves.push_back(&kv.second);
    }
    info_.push_back(std::move(pi));
    if (n->op() == Op::Placeholder) placeholders_.push_back(n);
  }
  const Node* output = *pattern.nodes().reversed().begin();
  std::vector<Node*> outs = output->all_input_nodes();
  returning_.assign(outs.begin(), outs.end());
  for (const Node* r : returning_) info_[index_.at(r)].is_returning = true;
  if (options_.match_output) {
    anchors_ = {output};
  } else {
    for (const Node* r : returning_)
      if (r->num_users() == 1) anchors_.push_back(r);
  }
}

bool SubgraphMatcher::nodes_are_equal(const Node* pn, const Node* gn) const {
  if (!options_.match_placeholder && pn->op() == Op::Placeholder) return true;
  if (pn->op() != gn->op()) return false;
  if (pn->op() == Op::Placeholder || pn->op() == Op::Output) return true;
  const Target& a = pn->target();
  const Target& b = gn->target();
  if (a.is_object() != b.is_object()) return false;
  if (a.is_object()) return a.fn().equals(b.fn());
  return a.str() == b.str();
}

/// The state of one (partial) match, with O(1) undo to a saved size.
struct MatchState {
  const SubgraphMatcher& m;
  std::vector<std::pair<const Node*, Argument>> map;  // insertion order
  std::vector<int64_t> slot;                          // pattern index -> position in map, -1
  std::unordered_set<const Node*> graph_nodes;        // mapped graph nodes (node values only)

  struct Frame {
    size_t pidx;
    size_t gstart;  ///< this frame's graph leaves: gbuf[gstart, gstart + pattern leaf count)
    size_t i = 0;
  };
  std::vector<Frame> stack;
  std::vector<const Argument*> gbuf;  // graph leaves of all frames, LIFO

  explicit MatchState(const SubgraphMatcher& matcher) : m(matcher), slot(matcher.info_.size(), -1) {}

  const Argument* mapped(size_t pidx) const {
    int64_t s = slot[pidx];
    return s < 0 ? nullptr : &map[static_cast<size_t>(s)].second;
  }
  void bind(const Node* pn, size_t pidx, Argument v) {
    slot[pidx] = static_cast<int64_t>(map.size());
    if (v.is_node()) graph_nodes.insert(v.as_node());
    map.emplace_back(pn, std::move(v));
  }
  void truncate(size_t n) {
    while (map.size() > n) {
      auto& kv = map.back();
      slot[m.index_.at(kv.first)] = -1;
      if (kv.second.is_node()) graph_nodes.erase(kv.second.as_node());
      map.pop_back();
    }
  }

  /// torch.fx _match_args for a leaf pair that is not (Node, Node).
  bool match_args(const Argument& p, const Argument& g) {
    if (p.is_node() && !g.is_node()) {
      const Node* pn = p.as_node();
      if (pn->op() != Op::Placeholder) return false;
      size_t pidx = m.index_.at(pn);
      if (const Argument* v = mapped(pidx)) return *v == g;
      bind(pn, pidx, g);
      return true;
    }
    if (!p.is_node() && g.is_node()) return false;
    return same_type_equal(p, g);
  }

  /// First step of torch.fx _match_nodes: 0 = fail, 1 = matched (nothing to
  /// walk), 2 = matched so far, frame pushed for the argument walk.
  int enter(const Node* pn, const Node* gn) {
    size_t pidx = m.index_.at(pn);
    if (const Argument* v = mapped(pidx)) return (v->is_node() && v->as_node() == gn) ? 1 : 0;
    if (graph_nodes.count(gn)) return 0;
    if (!m.nodes_are_equal(pn, gn)) return 0;
    bind(pn, pidx, Argument::node(const_cast<Node*>(gn)));
    if (pn->op() == Op::Placeholder) return 1;
    const auto& pi = m.info_[pidx];
    Frame f;
    f.pidx = pidx;
    f.gstart = gbuf.size();
    for (const Argument& a : gn->args()) flatten(a, gbuf);
    // kwargs: same key set, then values in the pattern's key order.
    const KwArgs& gkw = gn->kwargs();
    if (gkw.size() != pi.kw_keys.size()) return 0;
    for (const std::string& k : pi.kw_keys) {
      auto it = std::find_if(gkw.begin(), gkw.end(), [&](const auto& kv) { return kv.first == k; });
      if (it == gkw.end()) return 0;
      gbuf.push_back(&it->second);
    }
    if (gbuf.size() - f.gstart != pi.leaves.size()) return 0;
    stack.push_back(f);
    return 2;
  }

  /// torch.fx _match_nodes(pn, gn), iteratively. On failure the state is
  /// partially extended; callers undo with truncate().
  bool match_nodes(const Node* pn, const Node* gn) {
    stack.clear();
    gbuf.clear();
    int r = enter(pn, gn);
    if (r != 2) return r == 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& pleaves = m.info_[f.pidx].leaves;
      if (f.i == pleaves.size()) {
        gbuf.resize(f.gstart);
        stack.pop_back();
        continue;
      }
      const Argument& p = *pleaves[f.i];
      const Argument& g = *gbuf[f.gstart + f.i];
      ++f.i;
      if (p.is_node() && g.is_node()) {
        if (enter(p.as_node(), g.as_node()) == 0) return false;
      } else if (!match_args(p, g)) {
        return false;
      }
    }
    return true;
  }
};

std::vector<InternalMatch> SubgraphMatcher::match(const Graph& graph) const {
  // Is the node list a topological order? (Then the cycle search can stop at
  // a match's last node, and heights can be computed in one pass.)
  bool topo = true;
  for (Node* n : graph.nodes()) {
    for (Node* in : n->all_input_nodes())
      if (in->graph() != &graph || in->order_key() >= n->order_key()) topo = false;
    if (!topo) break;
  }
  // Height filter (sound, so results are unchanged): a pattern compute node
  // whose longest chain of compute-node inputs has length h can only match a
  // graph node with a chain of inputs at least that long, since the matched
  // pattern edges map injectively onto graph edges. This keeps e.g. a long
  // chain pattern linear instead of walking up from every candidate.
  std::unordered_map<const Node*, size_t> gheight;
  if (topo && !anchors_.empty()) {
    gheight.reserve(graph.size() * 2);
    for (Node* n : graph.nodes()) {
      size_t h = 0;
      for (Node* in : n->all_input_nodes()) h = std::max(h, gheight[in]);
      gheight[n] = h + 1;
    }
  }
  std::vector<size_t> pheight(info_.size(), 0);
  for (Node* n : pattern_.nodes()) {
    if (n->op() == Op::Placeholder && !options_.match_placeholder) continue;
    size_t h = 0;
    for (Node* in : n->all_input_nodes()) h = std::max(h, pheight[index_.at(in)]);
    pheight[index_.at(n)] = h + 1;
  }

  // Candidates per anchor; anchors without candidates are left out (torch.fx's defaultdict).
  std::vector<std::pair<const Node*, std::vector<const Node*>>> cands;
  for (const Node* a : anchors_) {
    std::vector<const Node*> c;
    size_t need = pheight[index_.at(a)];
    bool any = false;
    for (Node* n : graph.nodes()) {
      if (!nodes_are_equal(a, n)) continue;
      any = true;
      if (!gheight.empty() && gheight[n] < need) continue;
      c.push_back(n);
    }
    // torch.fx keeps an anchor whose candidates all fail (no match results);
    // only an anchor without any equal node is dropped.
    if (any) cands.emplace_back(a, std::move(c));
  }
  const size_t k = cands.size();

  std::vector<InternalMatch> found;
  MatchState st(*this);
  auto record = [&]() {
    InternalMatch im;
    im.anchors = anchors_;
    im.nodes_map = st.map;
    for (const Node* p : placeholders_) {
      const Argument* v = st.mapped(index_.at(p));
      if (!v) throw UnmatchedPatternNode(p);
      im.placeholder_nodes.push_back(*v);
    }
    for (const Node* p : returning_) {
      const Argument* v = st.mapped(index_.at(p));
      if (!v) throw UnmatchedPatternNode(p);
      im.returning_nodes.push_back(*v);
    }
    found.push_back(std::move(im));
  };
  // Iterative backtracking over anchors.
  if (k == 0) {
    record();
  } else {
    // (resize, not the sized constructor: GCC 12 cannot bound k there and
    // warns about a 2^64-byte allocation)
    std::vector<size_t> saved, next;
    saved.resize(k + 1);
    next.resize(k);
    size_t level = 0;
    while (true) {
      if (level == k) {
        record();
        --level;
        continue;
      }
      st.truncate(saved[level]);
      if (next[level] == cands[level].second.size()) {
        next[level] = 0;
        if (level == 0) break;
        --level;
        continue;
      }
      const Node* cand = cands[level].second[next[level]++];
      if (st.match_nodes(cands[level].first, cand)) {
        saved[level + 1] = st.map.size();
        ++level;
        if (level < k) next[level] = 0;
      }
    }
  }

  std::vector<InternalMatch> result;
  std::unordered_set<const Node*> matched_all;  // overlap removal
  std::unordered_set<const Node*> in_match, partition, visited;
  std::vector<const Node*> work;
  for (InternalMatch& im : found) {
    // _is_contained
    in_match.clear();
    for (const auto& kv : im.nodes_map)
      if (kv.second.is_node()) in_match.insert(kv.second.as_node());
    bool contained = true;
    for (const auto& kv : im.nodes_map) {
      const Node* pn = kv.first;
      if (pn->op() == Op::Placeholder || info_[index_.at(pn)].is_returning || !kv.second.is_node()) continue;
      for (Node* u : kv.second.as_node()->users())
        if (!in_match.count(u)) {
          contained = false;
          break;
        }
      if (!contained) break;
    }
    if (!contained) continue;
    // validate_partition: no path leaves the matched compute nodes and re-enters them.
    partition.clear();
    uint64_t last = 0;
    for (const auto& kv : im.nodes_map) {
      if (kv.first->op() == Op::Placeholder || kv.first->op() == Op::Output || !kv.second.is_node()) continue;
      partition.insert(kv.second.as_node());
      last = std::max(last, kv.second.as_node()->order_key());
    }
    visited.clear();
    work.clear();
    for (const Node* p : partition)
      for (Node* u : p->users())
        if (!partition.count(u)) work.push_back(u);
    bool cycle = false;
    while (!work.empty() && !cycle) {
      const Node* n = work.back();
      work.pop_back();
      if (partition.count(n)) {
        cycle = true;
        break;
      }
      if (!visited.insert(n).second) continue;
      if (topo && n->order_key() > last) continue;
      for (Node* u : n->users())
        if (!visited.count(u)) work.push_back(u);
    }
    if (cycle) continue;
    // _remove_overlapping_matches
    if (options_.remove_overlapping_matches) {
      bool overlap = false;
      for (const auto& kv : im.nodes_map) {
        Op op = kv.first->op();
        if (op == Op::Placeholder || op == Op::Output || !kv.second.is_node()) continue;
        if (matched_all.count(kv.second.as_node())) {
          overlap = true;
          break;
        }
      }
      if (overlap) continue;
      for (const auto& kv : im.nodes_map) {
        Op op = kv.first->op();
        if (op == Op::Placeholder || op == Op::Output || !kv.second.is_node()) continue;
        matched_all.insert(kv.second.as_node());
      }
    }
    result.push_back(std::move(im));
  }
  return result;
}

// ---------------------------------------------------------------------------
// Note [Core matches under torch.fx 2.x]

bool agrees_with_fx2_on(const SubgraphMatcher& matcher, const Graph& graph) {
  auto container = [](const Argument& a) {
    const ArgKind k = a.kind();
    return k == ArgKind::Tuple || k == ArgKind::List || k == ArgKind::Dict || k == ArgKind::Slice;
  };
  for (const Node* a : matcher.anchors())
    if (a->op() != Op::Placeholder && graph.find_nodes(a->op(), &a->target()).empty()) return false;
  std::unordered_set<const Node*> checked;  // graph nodes already scanned for containers
  for (Node* pn : matcher.pattern().nodes()) {
    if (pn->op() == Op::Placeholder || pn->op() == Op::Output) continue;
    const KwArgs& pkw = pn->kwargs();
    for (Node* gn : graph.find_nodes(pn->op(), &pn->target())) {
      if (checked.insert(gn).second) {
        for (const Argument& a : gn->args())
          if (container(a)) return false;
        for (const auto& kv : gn->kwargs())
          if (container(kv.second)) return false;
      }
      const KwArgs& gkw = gn->kwargs();
      if (gkw.size() != pkw.size() || gkw.empty()) continue;
      bool same_order = true;
      for (size_t i = 0; i < gkw.size() && same_order; ++i) same_order = gkw[i].first == pkw[i].first;
      if (same_order) continue;
      bool same_set = true;  // kwargs keys are unique: same size and each key found
      for (const auto& kv : gkw) {
        same_set = std::any_of(pkw.begin(), pkw.end(), [&](const auto& p) { return p.first == kv.first; });
        if (!same_set) break;
      }
      if (same_set) return false;
    }
  }
  return true;
}

bool replace_agrees_with_fx2(const std::vector<InternalMatch>& matches) {
  std::unordered_set<const Node*> returned;
  for (const InternalMatch& im : matches)
    for (const Argument& v : im.returning_nodes) {
      if (!v.is_node() || !v.as_node()->has_users()) return false;
      returned.insert(v.as_node());
    }
  for (const InternalMatch& im : matches)
    for (const Argument& v : im.placeholder_nodes)
      if (v.is_node() && returned.count(v.as_node())) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Rewriting

void replace_matches(Graph& graph, const SubgraphMatcher& matcher, const Graph& replacement,
                     const std::vector<InternalMatch>& matches, const ReplacePatternHooks& hooks) {
  std::vector<const Node*> rph;
  for (Node* n : replacement.nodes())
    if (n->op() == Op::Placeholder) rph.push_back(n);
  std::vector<const Node*> pattern_rev;
  for (Node* n : matcher.pattern().nodes().reversed())
    if (n->op() != Op::Placeholder && n->op() != Op::Output) pattern_rev.push_back(n);

  std::unordered_map<const Node*, Argument> changed;
  std::unordered_map<const Node*, const Argument*> pmap;
  for (const InternalMatch& im : matches) {
    if (im.placeholder_nodes.size() != rph.size()) throw SubgraphAssertion("");
    std::unordered_map<const Node*, Argument> val_map;
    for (size_t i = 0; i < rph.size(); ++i) {
      const Argument& gv = im.placeholder_nodes[i];
      auto it = gv.is_node() ? changed.find(gv.as_node()) : changed.end();
      val_map[rph[i]] = it != changed.end() ? it->second : gv;
    }
    Node* first_user = nullptr;
    for (const Argument& rv : im.returning_nodes) {
      if (!rv.is_node()) throw std::runtime_error("a returned pattern value is bound to a literal");
      for (Node* u : rv.as_node()->users())
        if (!first_user || u->order_key() < first_user->order_key()) first_user = u;
    }
    if (!first_user) throw SubgraphAssertion("The returning_nodes should have at least one user node");

    std::optional<Argument> out;
    {
      InsertGuard guard = graph.inserting_before(first_user);
      std::unordered_map<const Node*, bool> preset;
      if (hooks.on_copy)
        for (auto& kv : val_map) preset.emplace(kv.first, true);
      out = graph.graph_copy(replacement, val_map);
      if (hooks.on_copy) {
        for (Node* s : replacement.nodes()) {
          if (s->op() == Op::Output) break;
          if (preset.count(s)) continue;
          auto it = val_map.find(s);
          if (it != val_map.end() && it->second.is_node()) hooks.on_copy(*s, *it->second.as_node());
        }
      }
    }
    std::vector<Argument> copied;
    if (!out) throw std::runtime_error("the replacement graph has no output");
    if (out->is_node()) copied.push_back(*out);
    else if (out->is_sequence()) copied = out->items();
    else throw std::runtime_error("the replacement returns a value that is neither a Node nor a sequence");
    if (copied.size() != im.returning_nodes.size()) throw SubgraphAssertion("");
    for (size_t i = 0; i < copied.size(); ++i) {
      Node* gn = im.returning_nodes[i].as_node();
      gn->replace_all_uses_with(copied[i]);
      changed[gn] = copied[i];
    }
    pmap.clear();
    for (const auto& kv : im.nodes_map) pmap[kv.first] = &kv.second;
    for (const Node* pn : pattern_rev) {
      auto it = pmap.find(pn);
      if (it == pmap.end()) throw UnmatchedPatternNode(pn);
      if (!it->second->is_node()) throw std::runtime_error("a matched compute node is bound to a literal");
      graph.erase_node(it->second->as_node());
    }
  }
}

}  // namespace fxcpp
