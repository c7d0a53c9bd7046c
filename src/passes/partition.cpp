#include "fxcpp/passes/partition.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_set>

// Note [Which user groups are dropped]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx 1.13's propose_partitions visits the supported nodes n in reverse
// graph order. n's users form a list of groups, in users order: the partition
// of each assigned user (once per partition) and each unassigned user on its
// own. For every pair i < j of the list it computes
// __partition_depends_on(g_i, g_j): the answer of the first pair of nodes
// (a in g_i, b in g_j), in set iteration order, of which one is an ancestor of
// the other -- 1 when a is b's ancestor (g_j is dropped), -1 when b is a's
// (g_i is dropped) -- and it drops groups whether or not the other one of the
// pair was dropped already. n then joins the first surviving partition, the
// other surviving partitions merge into it, or n starts a new partition.
//
// So "g_i reaches g_j" (some node of g_i is an ancestor of some node of g_j)
// decides each pair, except when g_i and g_j reach each other. That happens
// (e.g. a1 -> x -> b1 and b2 -> y -> a2 with x, y unsupported: two partitions
// {a1, a2}, {b1, b2} can each be convex), and then torch.fx's answer depends
// on set iteration order, that is on the nodes' memory addresses: it varies
// from run to run. fxcpp answers such a pair as if the first node pair found
// had a in g_i (result 1: the later group g_j is dropped), one of torch.fx's
// possible answers. Hence a partition group g_k is dropped when
//   * some earlier group reaches it, or
//   * some later group g_j reaches it and g_k does not reach g_j.
// The first is one search from the earlier groups together; the second is
// one search from the later groups together and, only when that finds a path,
// pair by pair. Unassigned users' own fate does not matter (they never join).
// Without mutual dependencies (as long as every partition is convex, which
// holds until the first such pair, so nearly always) each partition group
// costs at most three searches.
//
// Note [Lockstep search]
// ~~~~~~~~~~~~~~~~~~~~~~
// reaches(sources, target) looks for a path from a node of the source groups
// to a node of the target group. Every such path lies between the sources'
// first position and the target's last, since paths go forward in graph
// order. It expands one node forward (users of the sources' nodes, up to the
// target's last position) and then one node backward (inputs of the target's
// nodes, down to the sources' first position), alternately, and answers yes
// when the two sides meet (or one steps into the other's group) and no as
// soon as either side runs out: an exhausted side has seen all that matters at
// its end. So the work is at most about twice the smaller side: a small group
// next to a huge partition costs little, whichever of the two is the small
// one. Seeds (the groups' nodes) are consumed lazily, one per step, so a large
// partition is never listed up front.

namespace fxcpp {

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

class Proposer {
 public:
  Proposer(const Graph& g, const std::vector<uint8_t>& supported, const std::vector<PartitionOpKind>& kinds,
           const ProposePartitionsOptions& options)
      : g_(g), options_(options) {
    pos_of_.assign(g.node_capacity(), kNone);
    for (Node* n : g.nodes()) {
      pos_of_[n->index()] = static_cast<uint32_t>(order_.size());
      order_.push_back(n);
    }
    const size_t n = order_.size();
    if (supported.size() != n) throw std::invalid_argument("propose_partitions: one supported flag per node expected");
    if (!kinds.empty() && kinds.size() != n)
      throw std::invalid_argument("propose_partitions: one kind per node expected");
    supported_ = &supported;
    kinds_.resize(n, PartitionOpKind::Compute);
    for (size_t p = 0; p < n; ++p) {
      if (order_[p]->op() != Op::CallFunction) continue;
      kinds_[p] = kinds.empty() ? partition_op_kind(order_[p]->target().fn().qualified_name()) : kinds[p];
    }
    for (size_t p = 0; p < n && topological_; ++p) {
      const Node* v = order_[p];
      for (size_t i = 0, k = v->num_inputs(); i < k && topological_; ++i)
        if (pos(v->input_use(i).value()) >= p) topological_ = false;  // later, or another graph's
      for (Node* u : v->users())
        if (pos(u) == kNone) topological_ = false;
    }
    cell_of_.assign(n, kNone);
    next_.assign(n, kNone);
    fmark_.assign(n, 0);
    bmark_.assign(n, 0);
    node_group_stamp_.assign(n, 0);
    node_group_idx_.assign(n, 0);
  }

  ProposePartitionsResult run() {
    ProposePartitionsResult r;
    if (!topological_) {
      r.not_topological = true;
      return r;
    }
    for (size_t p = order_.size(); p-- > 0;)
      if ((*supported_)[p]) visit(static_cast<uint32_t>(p));
    post_process(r);
    return r;
  }

 private:
  // ---- partitions: union-find over ids ------------------------------------------
  // A partition id is torch.fx's counter value. Merged partitions share a root
  // (union by size); label_[root] is the id the merged partition goes by.

  uint32_t find(uint32_t c) {
    while (parent_[c] != c) {
      parent_[c] = parent_[parent_[c]];
      c = parent_[c];
    }
    return c;
  }
  uint32_t root_of_pos(uint32_t p) { return cell_of_[p] == kNone ? kNone : find(cell_of_[p]); }

  uint32_t new_partition(uint32_t p) {
    const uint32_t id = static_cast<uint32_t>(parent_.size());
    parent_.push_back(id);
    size_.push_back(1);
    label_.push_back(id);
    head_.push_back(p);
    tail_.push_back(p);
    min_.push_back(p);
    max_.push_back(p);
    group_stamp_.push_back(0);
    group_idx_.push_back(0);
    cell_of_[p] = id;
    return id;
  }

  void add_to(uint32_t root, uint32_t p) {
    cell_of_[p] = root;
    next_[p] = head_[root];
    head_[root] = p;
    ++size_[root];
    min_[root] = std::min(min_[root], p);
    max_[root] = std::max(max_[root], p);
  }

  // Merges the partition rooted at `other` into the one rooted at `root`, which
  // keeps its id; returns the new root.
  uint32_t merge(uint32_t root, uint32_t other) {
    const uint32_t id = label_[root];
    uint32_t big = root, small = other;
    if (size_[big] < size_[small]) std::swap(big, small);
    parent_[small] = big;
    size_[big] += size_[small];
    min_[big] = std::min(min_[big], min_[small]);
    max_[big] = std::max(max_[big], max_[small]);
    next_[tail_[big]] = head_[small];
    tail_[big] = tail_[small];
    label_[big] = id;
    return big;
  }

  // ---- the groups of a node's users -------------------------------------------------
  struct Group {
    uint32_t root;    // partition root, or kNone for an unassigned user
    uint32_t pos;     // the unassigned user's position
    uint32_t lo, hi;  // first and last position of a node of the group
  };

  // The group index of the node at position p for the node being visited, or -1.
  int64_t group_of(uint32_t p) {
    const uint32_t r = root_of_pos(p);
    if (r != kNone) return group_stamp_[r] == step_ ? static_cast<int64_t>(group_idx_[r]) : -1;
    return node_group_stamp_[p] == step_ ? static_cast<int64_t>(node_group_idx_[p]) : -1;
  }

  uint32_t pos(const Node* n) const { return n->graph() == &g_ ? pos_of_[n->index()] : kNone; }

  void visit(uint32_t p) {
    ++step_;
    groups_.clear();
    for (Node* u : order_[p]->users()) {
      const uint32_t up = pos(u);
      if (up == kNone) continue;  // a node of another graph: no dependencies here
      const uint32_t r = root_of_pos(up);
      if (r != kNone) {
        if (group_stamp_[r] == step_) continue;
        group_stamp_[r] = step_;
        group_idx_[r] = static_cast<uint32_t>(groups_.size());
        groups_.push_back({r, kNone, min_[r], max_[r]});
      } else {
        node_group_stamp_[up] = step_;
        node_group_idx_[up] = static_cast<uint32_t>(groups_.size());
        groups_.push_back({kNone, up, up, up});
      }
    }
    // torch.fx first drops the dependent groups, then assigns: decide all first
    // (Note [Which user groups are dropped]).
    const size_t m = groups_.size();
    dropped_.assign(m, 0);
    if (m > 1) {
      // First positions of the groups before / from each index.
      prefix_lo_.assign(m + 1, kNone);
      suffix_lo_.assign(m + 1, kNone);
      for (size_t i = 0; i < m; ++i) prefix_lo_[i + 1] = std::min(prefix_lo_[i], groups_[i].lo);
      for (size_t i = m; i-- > 0;) suffix_lo_[i] = std::min(suffix_lo_[i + 1], groups_[i].lo);
      for (size_t k = 0; k < m; ++k) {
        if (groups_[k].root == kNone) continue;
        if (k > 0 && reaches(0, k, prefix_lo_[k], k)) {
          dropped_[k] = 1;
        } else if (k + 1 < m && reaches(k + 1, m, suffix_lo_[k + 1], k)) {
          for (size_t j = k + 1; j < m && !dropped_[k]; ++j)
            if (reaches(j, j + 1, groups_[j].lo, k) && !reaches(k, k + 1, groups_[k].lo, j)) dropped_[k] = 1;
        }
      }
    }
    uint32_t target = kNone;  // root of the partition n joins
    for (size_t i = 0; i < m; ++i) {
      if (groups_[i].root == kNone || dropped_[i]) continue;
      const uint32_t root = find(groups_[i].root);
      if (target == kNone) {
        target = root;
        add_to(target, p);
      } else {
        target = merge(target, root);
      }
    }
    if (target == kNone) new_partition(p);
  }

  // Whether a node of groups [first, last) (whose first position is `lo`)
  // reaches a node of group `t` (not in that range): Note [Lockstep search].
  bool reaches(size_t first, size_t last, uint32_t lo, size_t t) {
    const uint32_t hi = groups_[t].hi;
    if (lo >= hi) return false;  // every source node comes after every target node
    if (++epoch_ == 0) {         // wrapped: clear the marks
      std::fill(fmark_.begin(), fmark_.end(), 0);
      std::fill(bmark_.begin(), bmark_.end(), 0);
      epoch_ = 1;
    }
    const int64_t target = static_cast<int64_t>(t), src_first = static_cast<int64_t>(first),
                  src_last = static_cast<int64_t>(last);
    auto is_source = [&](int64_t gw) { return gw >= src_first && gw < src_last; };
    fstack_.clear();
    bstack_.clear();
    // Seeds, consumed one per step: the source groups' nodes, then the target's.
    size_t seed_group = first;
    uint32_t seed_cursor = kNone;
    bool in_group = false;
    auto next_forward_seed = [&]() -> uint32_t {
      while (seed_group < last) {
        const Group& gr = groups_[seed_group];
        if (gr.root == kNone) {
          ++seed_group;
          return gr.pos;
        }
        seed_cursor = in_group ? next_[seed_cursor] : head_[find(gr.root)];
        in_group = true;
        if (seed_cursor != kNone) return seed_cursor;
        ++seed_group;
        in_group = false;
      }
      return kNone;
    };
    const Group& tg = groups_[t];
    uint32_t back_cursor = tg.root == kNone ? tg.pos : head_[find(tg.root)];
    auto next_backward_seed = [&]() -> uint32_t {
      const uint32_t v = back_cursor;
      if (v != kNone) back_cursor = tg.root == kNone ? kNone : next_[v];
      return v;
    };
    for (;;) {
      // One step forward: users, up to the target's last position.
      uint32_t v;
      if (!fstack_.empty()) {
        v = fstack_.back();
        fstack_.pop_back();
      } else {
        v = next_forward_seed();
        if (v == kNone) return false;
        if (v >= hi) v = kNone;  // reaches nothing of the target
      }
      if (v != kNone) {
        for (Node* w : order_[v]->users()) {
          const uint32_t wp = pos(w);
          if (wp == kNone || wp > hi || fmark_[wp] == epoch_) continue;
          const int64_t gw = group_of(wp);
          if (gw == target || bmark_[wp] == epoch_) return true;
          if (is_source(gw)) continue;  // a seed anyway
          fmark_[wp] = epoch_;
          fstack_.push_back(wp);
        }
      }
      // One step backward: inputs, down to the sources' first position.
      if (!bstack_.empty()) {
        v = bstack_.back();
        bstack_.pop_back();
      } else {
        v = next_backward_seed();
        if (v == kNone) return false;
        if (v <= lo) v = kNone;  // reached by nothing of the sources
      }
      if (v != kNone) {
        const Node* n = order_[v];
        for (size_t i = 0, k = n->num_inputs(); i < k; ++i) {
          const uint32_t wp = pos(n->input_use(i).value());
          if (wp == kNone || wp < lo || bmark_[wp] == epoch_) continue;
          const int64_t gw = group_of(wp);
          if (is_source(gw) || fmark_[wp] == epoch_) return true;
          if (gw == target) continue;  // a seed anyway
          bmark_[wp] = epoch_;
          bstack_.push_back(wp);
        }
      }
    }
  }

  // ---- after the main loop: getitems, filtering, the result ----------------------------

  // Fills r (or r.unnamed).
  void post_process(ProposePartitionsResult& r) {
    const size_t n = order_.size();
    const size_t ids = parent_.size();
    // Current id of every node; live ids and their sizes. Dict order of torch.fx's
    // partitions_by_id: by id, then re-created ids in re-creation order.
    std::vector<uint32_t> id_of(n, kNone);
    std::vector<uint32_t> count(ids, 0);
    for (size_t p = 0; p < n; ++p) {
      if (cell_of_[p] == kNone) continue;
      id_of[p] = label_[find(cell_of_[p])];
      ++count[id_of[p]];
    }
    std::vector<uint64_t> order_key(ids);
    for (size_t i = 0; i < ids; ++i) order_key[i] = i;
    uint64_t next_key = ids;

    // torch.fx: for a node all of whose users are getitems, each user whose id
    // differs is re-assigned to the node's id (None too), applied afterwards in
    // first-insertion order with the last value written.
    std::vector<uint32_t> reassign_to(n, kNone);
    std::vector<char> reassigned(n, 0);
    std::vector<uint32_t> reassign_order;
    for (size_t p = 0; p < n; ++p) {
      bool tuple_output = true;
      for (Node* u : order_[p]->users()) {
        if (u->op() != Op::CallFunction) {
          tuple_output = false;
          break;
        }
        const uint32_t up = pos(u);
        const PartitionOpKind k = up == kNone ? partition_op_kind(u->target().fn().qualified_name()) : kinds_[up];
        if (k == PartitionOpKind::Unnamed) {
          r.unnamed = u;
          return;
        }
        if (k != PartitionOpKind::Getitem) {
          tuple_output = false;
          break;
        }
      }
      if (!tuple_output) continue;
      const uint32_t id = id_of[p];
      for (Node* u : order_[p]->users()) {
        const uint32_t up = pos(u);
        if (up == kNone || id_of[up] == id) continue;
        if (!reassigned[up]) {
          reassigned[up] = 1;
          reassign_order.push_back(up);
        }
        reassign_to[up] = id;
      }
    }
    for (uint32_t up : reassign_order) {
      const uint32_t id = reassign_to[up];
      if (id_of[up] != kNone && --count[id_of[up]] == 0) order_key[id_of[up]] = kNone;  // deleted
      id_of[up] = id;
      if (id != kNone && count[id]++ == 0) order_key[id] = next_key++;  // (re-)created at the end
    }

    std::vector<std::vector<Node*>> members(ids);
    for (size_t p = 0; p < n; ++p)
      if (id_of[p] != kNone) members[id_of[p]].push_back(order_[p]);
    std::vector<uint32_t> live;
    for (uint32_t i = 0; i < ids; ++i)
      if (count[i] > 0) live.push_back(i);
    std::sort(live.begin(), live.end(), [&](uint32_t a, uint32_t b) { return order_key[a] < order_key[b]; });

    // Drop partitions with at most one compute node (call_function, not view/getitem).
    if (!options_.allows_single_node_partition) {
      std::vector<uint32_t> kept;
      for (uint32_t id : live) {
        size_t compute = 0;
        for (Node* m : members[id]) {
          if (m->op() != Op::CallFunction) continue;
          const PartitionOpKind k = kinds_[pos(m)];
          if (k == PartitionOpKind::Unnamed) {
            r.unnamed = m;
            return;
          }
          if (k == PartitionOpKind::Compute) ++compute;
        }
        if (compute > 1) kept.push_back(id);
      }
      live.swap(kept);
    }
    r.partitions.reserve(live.size());
    for (uint32_t id : live) r.partitions.push_back({id, std::move(members[id]), {}});
  }

  const Graph& g_;
  const ProposePartitionsOptions& options_;
  const std::vector<uint8_t>* supported_ = nullptr;
  std::vector<Node*> order_;      // position -> node
  std::vector<uint32_t> pos_of_;  // Node::index() -> position
  std::vector<PartitionOpKind> kinds_;
  // Per position.
  std::vector<uint32_t> cell_of_, next_, fmark_, bmark_, node_group_stamp_, node_group_idx_;
  // Per partition id (union-find cell).
  std::vector<uint32_t> parent_, size_, label_, head_, tail_, min_, max_, group_stamp_, group_idx_;
  std::vector<Group> groups_;
  std::vector<char> dropped_;
  std::vector<uint32_t> prefix_lo_, suffix_lo_;
  std::vector<uint32_t> fstack_, bstack_;
  uint32_t step_ = 0, epoch_ = 0;
  bool topological_ = true;
};

// ---- torch.fx 2.x -------------------------------------------------------------------------
//
// Note [propose_partitions on torch.fx 2.x]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What torch.fx 2.14 does (found by running it; this is our own model of it):
// * It walks all nodes in reverse graph order (step k: the node's "node order"
//   is k) and asks is_node_supported about each. A supported node gets a new
//   partition whose id is a counter over supported nodes (0 for the last one)
//   and whose "order" is that id.
// * Each partition P keeps its users (nodes outside P using a node of P) and a
//   reachability set map(P) of partition ids: when P is created or merged,
//   the ids of all partitions with a node downstream of (or among) P's users,
//   and their own reachability sets, as they are at that moment. Ids never come
//   back to life, so an id that died in a merge just never matches again.
// * Then a merge loop: the candidates are the new partition (if any) and then
//   every live partition by ascending order (with skip_horizontal_fusion: the
//   new partition and its users' partitions, in users order, and nothing for a
//   node that made none). The first candidate S tries to absorb every other
//   O in turn; a merge fails when, walking everything downstream of (and
//   including) the users of S and O outside S and O, it meets a node of S or
//   O, or a node of a partition C whose map(C) holds S or O. Otherwise the
//   larger partition (S on a tie) keeps its id, the order is the smaller one,
//   and map gets the union of both maps and of the walk's partitions and their
//   maps. S then stands for the merged partition.
//   A loop that merged nothing leaves everything as it was, so the next
//   unsupported node's loop (the same loop) is skipped until a partition is
//   created again.
// * After the walk each partition's nodes are in graph order. Then getitems
//   are moved, in rounds until a round moves nothing: in graph order, for
//   every node all of whose users are _operator.getitem calls, each user in
//   another partition than the node (None counts) is moved to the node's
//   (the last such writer wins; moves are applied in first-write order,
//   appending the getitem to the partition's nodes, or leaving it in none).
//   A round only needs the nodes moved by the previous one and their inputs.
//   A getitem of two tuple producers in different partitions moves back and
//   forth forever there; fxcpp reports it (endless_getitem) instead.
// * Unless single-node partitions are allowed, partitions with at most one
//   compute node are dropped (call_function nodes whose target is not view,
//   getitem or in non_compute_ops count; those in
//   allowed_single_node_partition_ops count once more). The result: the live
//   partitions with nodes, by ascending id.

// Note [Fresh reachability sets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx's walks go over every node downstream of the users, and its sets go
// stale (a merged-away id stays in the sets that held it; the merged partition
// is not added), so its answers are not plain reachability and must be
// followed as they are. Still, a walk need not go below a node w of a
// partition C whose set is fresh: no partition in it merged since it was
// computed. Everything below w is in C or below C's users; when C's set was
// computed it took every partition met below C's users, with their sets, and
// none of those has changed since (a set changes only when its partition
// merges, and a node's partition only when it merges). So what lies below w
// adds nothing to what C and its set add, which the walk takes at w anyway: a
// cycle there would be a node of S or O below C's users, or a partition whose
// set holds S or O, and either put S or O in C's set. Each partition records
// which sets hold it (watchers_), and a merge marks those stale.
// Two shortcuts follow while a step's new partition N = {p} has not merged
// yet (so no set holds N, and nothing below any user reaches p):
// * an O in N's set that holds none of p's users fails: the walk from p's
//   users meets what N's walk met, at its creation in this step;
// * a fresh O's own users need no walk: nothing below them is in O (O is
//   convex: its merges checked that), and no partition below them had O's id
//   in its set when O's set was computed (O's id then was new, or the merge
//   that made O checked exactly that), nor has since; and what they would add
//   to the merged set is in O's set already.
// When every other live partition but those of p's users is in N's set, only the
// users' partitions are tried (new_partition_step). And when N's walk met just
// one partition C, fresh, N's set is {C} and C's set, kept as a reference
// (Part::lazy_from) until N merges into C (nothing to copy) or anything else
// happens. With these a chain cut into pieces is near-linear. A partition with
// many users still goes stale, and is walked again, whenever a partition below
// them merges: quadratic in such graphs, where torch.fx is quadratic (or worse)
// in every graph.

class Proposer2 {
 public:
  Proposer2(const Graph& g, const std::vector<uint8_t>& supported, const std::vector<PartitionOpKind>& kinds,
            const ProposePartitionsOptions& options)
      : options_(options) {
    pos_of_.assign(g.node_capacity(), kNone);
    for (Node* n : g.nodes()) {
      pos_of_[n->index()] = static_cast<uint32_t>(order_.size());
      order_.push_back(n);
    }
    const size_t n = order_.size();
    if (supported.size() != n) throw std::invalid_argument("propose_partitions: one supported flag per node expected");
    if (!kinds.empty() && kinds.size() != n)
      throw std::invalid_argument("propose_partitions: one kind per node expected");
    if (!options.non_compute.empty() && options.non_compute.size() != n)
      throw std::invalid_argument("propose_partitions: one non_compute flag per node expected");
    if (!options.allowed_single.empty() && options.allowed_single.size() != n)
      throw std::invalid_argument("propose_partitions: one allowed_single flag per node expected");
    supported_ = &supported;
    kinds_.resize(n, PartitionOpKind::Compute);
    for (size_t p = 0; p < n; ++p) {
      if (order_[p]->op() != Op::CallFunction) continue;
      kinds_[p] = kinds.empty() ? partition_op_kind(order_[p]->target().fn().qualified_name()) : kinds[p];
    }
    // Users as positions (CSR, in users order); topological order check.
    user_start_.assign(n + 1, 0);
    for (size_t p = 0; p < n && topological_; ++p) {
      const Node* v = order_[p];
      for (size_t i = 0, k = v->num_inputs(); i < k && topological_; ++i) {
        const Node* in = v->input_use(i).value();
        if (in->graph() != &g || pos_of_[in->index()] >= p) topological_ = false;
      }
      for (Node* u : v->users()) {
        if (u->graph() != &g || pos_of_[u->index()] == kNone) {
          topological_ = false;
          break;
        }
        users_.push_back(pos_of_[u->index()]);
      }
      user_start_[p + 1] = static_cast<uint32_t>(users_.size());
    }
    assign_.assign(n, kNone);
    mark_.assign(n, 0);
  }

  ProposePartitionsResult run() {
    ProposePartitionsResult r;
    if (!topological_) {
      r.not_topological = true;
      return r;
    }
    const size_t n = order_.size();
    bool dirty = false;
    std::vector<uint32_t> cands;
    for (size_t p = n; p-- > 0;) {
      const auto pp = static_cast<uint32_t>(p);
      bool created = false;
      cands.clear();
      ++cand_epoch_;
      if ((*supported_)[p]) {
        const uint32_t id = new_partition(pp);
        cands.push_back(id);
        cand_stamp_[id] = cand_epoch_;
        created = true;
      }
      if (options_.skip_horizontal_fusion) {
        if (created)
          for (uint32_t u : users(pp)) {
            const uint32_t a = assign_[u];
            if (a != kNone && cand_stamp_[a] != cand_epoch_) {
              cand_stamp_[a] = cand_epoch_;
              cands.push_back(a);
            }
          }
      } else {
        if (!created && !dirty) continue;
        if (created && new_partition_step(pp, cands[0])) {
          dirty = true;
          if (parts_[cands[0]].live) materialize(cands[0]);
          continue;
        }
        for (const auto& e : by_order_)
          if (cand_stamp_[e.second] != cand_epoch_) cands.push_back(e.second);
      }
      bool merged = false;
      if (cands.size() > 1) {
        uint32_t self = cands[0];
        // Until the new partition N = {p} has merged, an O in N's fresh reachability set that
        // holds none of p's users fails for sure: the walk from p's users meets what N's did.
        if (created)
          for (uint32_t u : users(pp))
            if (assign_[u] != kNone) user_part_stamp_[assign_[u]] = cand_epoch_;
        for (size_t i = 1; i < cands.size(); ++i) {
          const uint32_t o = cands[i];
          if (created && !merged && reach_has(self, o) && user_part_stamp_[o] != cand_epoch_) continue;
          const uint32_t m = maybe_merge(self, o, created && !merged);
          if (m != kNone) {
            self = m;
            merged = true;
          }
        }
      }
      dirty = created || merged;
      if (created && parts_[cands[0]].live) materialize(cands[0]);
    }
    post_process(r);
    return r;
  }

 private:
  struct Part {
    bool live = true;
    uint32_t order = 0;
    std::vector<uint32_t> members;  // positions, any order
    std::vector<uint32_t> users;    // positions outside the partition (distinct)
    std::unordered_set<uint32_t> reach;  // torch.fx's partition_map entry (dead ids may stay)
    // No partition in `reach` has merged since `reach` was computed: Note [Fresh reachability sets].
    bool fresh = true;
    // Not kNone: `reach` is {lazy_from} and lazy_from's set (fresh, unchanged since),
    // not written out yet (materialize).
    uint32_t lazy_from = kNone;
    // How many ids in `reach` are dead (they stay there).
    size_t dead = 0;
  };

  struct Span {
    const uint32_t* b;
    const uint32_t* e;
    const uint32_t* begin() const { return b; }
    const uint32_t* end() const { return e; }
  };
  Span users(uint32_t p) const { return {users_.data() + user_start_[p], users_.data() + user_start_[p + 1]}; }

  uint32_t new_partition(uint32_t p) {
    const auto id = static_cast<uint32_t>(parts_.size());
    parts_.emplace_back();
    cand_stamp_.push_back(0);
    part_stamp_.push_back(0);
    user_part_stamp_.push_back(0);
    watchers_.emplace_back();
    watch_cap_.push_back(16);
    Part& part = parts_.back();
    part.order = id;
    part.members.push_back(p);
    assign_[p] = id;
    by_order_.emplace(id, id);
    // users (distinct) and the reachability set of the partitions downstream of them
    begin_walk();
    for (uint32_t u : users(p)) seed(u);
    part.users = stack_;
    walk(kNone, kNone);
    if (reached_.size() == 1 && parts_[reached_[0]].fresh)
      parts_[id].lazy_from = reached_[0];  // usually merged into it at once: no copy
    else
      absorb_reached(id);
    return id;
  }

  void begin_walk() {
    if (++epoch_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      std::fill(part_stamp_.begin(), part_stamp_.end(), 0);
      epoch_ = 1;
    }
    stack_.clear();
    reached_.clear();
  }
  void seed(uint32_t u) {
    if (mark_[u] == epoch_) return;
    mark_[u] = epoch_;
    stack_.push_back(u);
  }

  // Walks everything downstream of (and including) the seeded nodes, noting the
  // partitions met in reached_. Returns true (and stops) at a node of s or t, or
  // of a partition whose reachability set holds s or t (none when kNone).
  bool walk(uint32_t s, uint32_t t) {
    walk_stack_.assign(stack_.begin(), stack_.end());
    while (!walk_stack_.empty()) {
      const uint32_t w = walk_stack_.back();
      walk_stack_.pop_back();
      const uint32_t a = assign_[w];
      if (a != kNone) {
        if (a == s || a == t) return true;
        if (part_stamp_[a] != epoch_) {
          part_stamp_[a] = epoch_;
          reached_.push_back(a);
          if (s != kNone && (reach_has(a, s) || reach_has(a, t))) return true;
        }
        if (parts_[a].fresh) continue;  // what lies below w adds nothing: Note [Fresh reachability sets]
      }
      for (uint32_t y : users(w))
        if (mark_[y] != epoch_) {
          mark_[y] = epoch_;
          walk_stack_.push_back(y);
        }
    }
    return false;
  }

  // The merge loop of a step that created partition id = {p}, when N's set holds
  // every other live partition but those of p's users: the others fail for sure
  // (Note [Fresh reachability sets]), so only the users' partitions are tried, in
  // order, until one merges; then every later one. Returns false (nothing done)
  // when N's set does not hold all those others.
  bool new_partition_step(uint32_t p, uint32_t id) {
    ups_.clear();
    size_t in_reach = 0;
    // N's set holds only live ids: nothing merged since it was made
    for (uint32_t u : users(p)) {
      const uint32_t a = assign_[u];
      if (a == kNone || a == id || user_part_stamp_[a] == cand_epoch_) continue;
      user_part_stamp_[a] = cand_epoch_;
      ups_.push_back(a);
      in_reach += reach_has(id, a) ? 1 : 0;
    }
    if (reach_size(id) - in_reach != by_order_.size() - 1 - ups_.size()) return false;
    std::sort(ups_.begin(), ups_.end(), [&](uint32_t a, uint32_t b) { return parts_[a].order < parts_[b].order; });
    for (uint32_t u : ups_) {
      const uint32_t key = parts_[u].order;
      uint32_t self = maybe_merge(id, u, true);
      if (self == kNone) continue;
      tail_.clear();
      for (auto it = by_order_.upper_bound({key, kNone}); it != by_order_.end(); ++it)
        if (it->second != self) tail_.push_back(it->second);
      for (uint32_t o : tail_) {
        const uint32_t m = maybe_merge(self, o, false);
        if (m != kNone) self = m;
      }
      break;
    }
    return true;
  }

  // Adds x to id's reachability set (a live id only: dead ones never match).
  bool reach_has(uint32_t id, uint32_t x) const {
    const Part& p = parts_[id];
    if (p.lazy_from != kNone) return x == p.lazy_from || parts_[p.lazy_from].reach.count(x) != 0;
    return p.reach.count(x) != 0;
  }
  size_t reach_size(uint32_t id) const {
    const Part& p = parts_[id];
    // the live ids in the set
    if (p.lazy_from == kNone) return p.reach.size() - p.dead;
    const Part& c = parts_[p.lazy_from];
    return 1 + c.reach.size() - c.dead;
  }
  // Writes out a lazy set (Part::lazy_from).
  void materialize(uint32_t id) {
    const uint32_t c = parts_[id].lazy_from;
    if (c == kNone) return;
    parts_[id].lazy_from = kNone;
    add_reach(id, c);
    for (uint32_t x : parts_[c].reach) add_reach(id, x);
  }

  // watchers_[x] drops the partitions that died whenever it has doubled since.
  void add_reach(uint32_t id, uint32_t x) {
    if (x == id || !parts_[x].live || !parts_[id].reach.insert(x).second) return;
    auto& w = watchers_[x];
    w.push_back(id);
    if (w.size() >= watch_cap_[x]) {
      w.erase(std::remove_if(w.begin(), w.end(), [&](uint32_t c) { return !parts_[c].live; }), w.end());
      watch_cap_[x] = std::max<size_t>(16, 2 * w.size());
    }
  }

  // Adds the reached partitions and their reachability sets to id's; id's set is fresh then.
  void absorb_reached(uint32_t id) {
    for (uint32_t c : reached_) {
      materialize(c);
      add_reach(id, c);
      for (uint32_t x : parts_[c].reach) add_reach(id, x);
    }
    parts_[id].fresh = true;
  }

  // torch.fx's maybe_merge_partition(s, o): the merged partition's id, or kNone
  // when the merge would make a cycle. s_is_new: s is the step's new partition {p},
  // not merged yet; then a fresh o's own users need no walk (Note [Fresh reachability sets]).
  // when the merge would make a cycle.
  uint32_t maybe_merge(uint32_t s, uint32_t o, bool s_is_new) {
    const bool skip_o = s_is_new && parts_[o].fresh;
    begin_walk();
    for (uint32_t u : parts_[s].users)
      if (assign_[u] != o) seed(u);
    if (!skip_o)
      for (uint32_t u : parts_[o].users)
        if (assign_[u] != s) seed(u);
    if (walk(s, o)) return kNone;
    // the merged partition's users: the seeds, and o's (none of them is p) when not walked
    std::vector<uint32_t> merged_users;
    if (skip_o) merged_users.swap(parts_[o].users);
    merged_users.insert(merged_users.end(), stack_.begin(), stack_.end());
    uint32_t m = s, r = o;
    if (parts_[s].members.size() < parts_[o].members.size()) std::swap(m, r);
    if (parts_[r].lazy_from == m) {
      parts_[r].lazy_from = kNone;  // r's set is {m} and m's: nothing to add
    } else {
      materialize(m);
      materialize(r);
    }
    Part& pm = parts_[m];
    Part& pr = parts_[r];
    for (uint32_t p : pr.members) assign_[p] = m;
    pm.members.insert(pm.members.end(), pr.members.begin(), pr.members.end());
    by_order_.erase({pm.order, m});
    by_order_.erase({pr.order, r});
    pm.order = std::min(pm.order, pr.order);
    by_order_.emplace(pm.order, m);
    pr.live = false;
    for (uint32_t c : watchers_[m]) parts_[c].fresh = false;
    for (uint32_t c : watchers_[r]) {
      parts_[c].fresh = false;
      ++parts_[c].dead;
    }
    std::vector<uint32_t>().swap(watchers_[r]);
    std::unordered_set<uint32_t> old;
    old.swap(pr.reach);
    for (uint32_t x : old) add_reach(m, x);
    if (pm.reach.erase(r)) --pm.dead;
    pm.users.swap(merged_users);
    absorb_reached(m);
    std::vector<uint32_t>().swap(pr.members);
    std::vector<uint32_t>().swap(pr.users);
    return m;
  }

  // ---- after the walk: getitems, filtering, the result -----------------------------------

  void post_process(ProposePartitionsResult& r) {
    const size_t n = order_.size();
    const auto none = kNone;
    // Each partition's nodes in torch.fx's dict order; kNone marks a removed slot.
    std::vector<std::vector<uint32_t>> dict(parts_.size());
    std::vector<uint32_t> slot(n, kNone), count(parts_.size(), 0);
    std::vector<int64_t> node_order(n, -1);
    for (size_t id = 0; id < parts_.size(); ++id) {
      if (!parts_[id].live) continue;
      auto& d = dict[id];
      d = parts_[id].members;
      std::sort(d.begin(), d.end());
      for (size_t i = 0; i < d.size(); ++i) {
        slot[d[i]] = static_cast<uint32_t>(i);
        node_order[d[i]] = static_cast<int64_t>(n - 1 - d[i]);
      }
      count[id] = static_cast<uint32_t>(d.size());
    }
    // Nodes all of whose users are getitems (torch.fx's lookups raise on an unnamed target).
    std::vector<char> tuple_out(n, 0);
    for (size_t p = 0; p < n; ++p) {
      bool t = true;
      for (uint32_t u : users(static_cast<uint32_t>(p))) {
        if (order_[u]->op() != Op::CallFunction) {
          t = false;
          break;
        }
        if (kinds_[u] == PartitionOpKind::Unnamed) {
          r.unnamed = order_[u];
          return;
        }
        if (kinds_[u] != PartitionOpKind::Getitem) {
          t = false;
          break;
        }
      }
      tuple_out[p] = t;
    }
    std::vector<uint32_t> cands(n), write_order, next;
    for (size_t p = 0; p < n; ++p) cands[p] = static_cast<uint32_t>(p);
    std::vector<uint32_t> write_val(n, none), write_round(n, 0), cand_round(n, 0);
    const size_t max_rounds = 2 * n + 4;
    for (uint32_t round = 1;; ++round) {
      write_order.clear();
      for (uint32_t p : cands) {
        if (!tuple_out[p]) continue;
        const uint32_t id = assign_[p];
        for (uint32_t u : users(p)) {
          if (assign_[u] == id) continue;
          if (write_round[u] != round) {
            write_round[u] = round;
            write_order.push_back(u);
          }
          write_val[u] = id;
        }
      }
      if (write_order.empty()) break;
      if (round > max_rounds) {
        r.endless_getitem = order_[write_order.front()];
        return;
      }
      next.clear();
      auto add = [&](uint32_t q) {
        if (cand_round[q] != round) {
          cand_round[q] = round;
          next.push_back(q);
        }
      };
      for (uint32_t u : write_order) {
        const uint32_t old = assign_[u], id = write_val[u];
        if (old != none) {
          dict[old][slot[u]] = none;
          --count[old];
        }
        assign_[u] = id;
        node_order[u] = -1;
        if (id != none) {
          slot[u] = static_cast<uint32_t>(dict[id].size());
          dict[id].push_back(u);
          ++count[id];
        }
        add(u);
        const Node* v = order_[u];
        for (size_t i = 0, k = v->num_inputs(); i < k; ++i) add(pos_of_[v->input_use(i).value()->index()]);
      }
      std::sort(next.begin(), next.end());
      cands.swap(next);
    }
    const bool has_nc = !options_.non_compute.empty(), has_as = !options_.allowed_single.empty();
    for (size_t id = 0; id < parts_.size(); ++id) {
      if (!parts_[id].live) continue;
      if (!options_.allows_single_node_partition) {
        size_t compute = 0;
        for (uint32_t p : dict[id]) {
          if (p == none || order_[p]->op() != Op::CallFunction) continue;
          const PartitionOpKind k = kinds_[p];
          if (k == PartitionOpKind::Unnamed) {
            r.unnamed = order_[p];
            r.partitions.clear();
            return;
          }
          if (k == PartitionOpKind::Compute && !(has_nc && options_.non_compute[p])) ++compute;
          if (has_as && options_.allowed_single[p]) ++compute;
        }
        if (compute <= 1) continue;
      }
      if (count[id] == 0) continue;
      ProposedPartition out;
      out.id = static_cast<uint32_t>(id);
      for (uint32_t p : dict[id]) {
        if (p == none) continue;
        out.nodes.push_back(order_[p]);
        out.node_orders.push_back(node_order[p]);
      }
      r.partitions.push_back(std::move(out));
    }
  }

  const ProposePartitionsOptions& options_;
  const std::vector<uint8_t>* supported_ = nullptr;
  std::vector<Node*> order_;
  std::vector<uint32_t> pos_of_;
  std::vector<PartitionOpKind> kinds_;
  std::vector<uint32_t> user_start_, users_;
  std::vector<uint32_t> assign_, mark_;
  std::vector<Part> parts_;
  std::vector<uint32_t> cand_stamp_, part_stamp_, user_part_stamp_;
  std::vector<std::vector<uint32_t>> watchers_;  // per id: the partitions whose reach holds it
  std::vector<size_t> watch_cap_;
  std::set<std::pair<uint32_t, uint32_t>> by_order_;  // (order, id) of the live partitions
  std::vector<uint32_t> stack_, walk_stack_, reached_, ups_, tail_;
  uint32_t epoch_ = 0, cand_epoch_ = 0;
  bool topological_ = true;
};

}  // namespace

PartitionOpKind partition_op_kind(std::string_view qualified_name) {
  if (qualified_name == "_operator.getitem" || qualified_name == "operator.getitem") return PartitionOpKind::Getitem;
  if (qualified_name == "torch.ops.aten.view") return PartitionOpKind::View;
  return PartitionOpKind::Compute;
}

ProposePartitionsResult propose_partitions(const Graph& g, const std::vector<uint8_t>& supported,
                                           const std::vector<PartitionOpKind>& kinds,
                                           const ProposePartitionsOptions& options) {
  if (options.algorithm == PartitionerAlgorithm::Torch2) return Proposer2(g, supported, kinds, options).run();
  return Proposer(g, supported, kinds, options).run();
}

bool validate_partition(const std::vector<const Node*>& partition) {
  if (partition.empty()) return true;
  const Graph* g = partition.front()->graph();
  for (const Node* n : partition)
    if (n->graph() != g || n->erased())
      throw std::invalid_argument("validate_partition: the nodes must be live nodes of one graph");
  // 1: in the partition, 2: outside, reached from it.
  std::vector<uint8_t> state(g->node_capacity(), 0);
  for (const Node* n : partition) state[n->index()] = 1;
  std::vector<const Node*> stack;
  for (const Node* n : partition)
    for (Node* u : n->users())
      if (u->graph() == g && state[u->index()] == 0) {
        state[u->index()] = 2;
        stack.push_back(u);
      }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (Node* u : n->users()) {
      if (u->graph() != g) continue;
      uint8_t& s = state[u->index()];
      if (s == 1) return false;
      if (s == 0) {
        s = 2;
        stack.push_back(u);
      }
    }
  }
  return true;
}

}  // namespace fxcpp
