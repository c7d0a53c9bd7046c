#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "fxcpp/passes/partition.h"
#include "../core/test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

using Names = std::vector<std::string>;
using Parts = std::vector<std::pair<uint32_t, Names>>;

const NamedNative kView{"view", "torch.ops.aten.view", ""};

Parts summary(const ProposePartitionsResult& r) {
  Parts out;
  for (const auto& p : r.partitions) {
    Names names;
    for (const Node* n : p.nodes) names.emplace_back(n->name());
    out.emplace_back(p.id, names);
  }
  return out;
}

/// Supported flags in graph order: the nodes named in `names`.
std::vector<uint8_t> support(const Graph& g, const std::set<std::string>& names) {
  std::vector<uint8_t> s;
  for (Node* n : g.nodes()) s.push_back(names.count(std::string(n->name())) ? 1 : 0);
  return s;
}

Parts propose(const Graph& g, const std::set<std::string>& names, bool single = false) {
  ProposePartitionsOptions o;
  o.allows_single_node_partition = single;
  return summary(propose_partitions(g, support(g, names), {}, o));
}

}  // namespace

TEST(Partition, ChainIsOnePartition) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  Node* c = g.call_function(F(kAdd), {N(b), N(x)});
  g.output(N(c));
  EXPECT_EQ(propose(g, {"relu", "neg", "add"}), (Parts{{0, {"relu", "neg", "add"}}}));
  // One compute node: dropped unless single-node partitions are allowed.
  EXPECT_EQ(propose(g, {"neg"}), Parts{});
  EXPECT_EQ(propose(g, {"neg"}, true), (Parts{{0, {"neg"}}}));
  // Placeholders and the output count as nodes, not as compute nodes.
  EXPECT_EQ(propose(g, {"x", "relu", "output"}, false), Parts{});
  EXPECT_EQ(propose(g, {"x", "relu", "output"}, true), (Parts{{0, {"output"}}, {1, {"x", "relu"}}}));
}

TEST(Partition, UnsupportedUserOnAPathSplits) {
  // a -> u (unsupported) -> c and a -> c: a cannot join c's partition.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* u = g.call_function(F(kTanh), {N(a)});
  Node* b = g.call_function(F(kNeg), {N(u)});
  Node* c = g.call_function(F(kAdd), {N(a), N(b)});
  Node* d = g.call_function(F(kMul), {N(c), N(c)});
  g.output(N(d));
  // Visited d, c, b, a: b's partition {b, c, d} is reached from u, so a starts id 1.
  EXPECT_EQ(propose(g, {"relu", "neg", "add", "mul"}, true),
            (Parts{{0, {"neg", "add", "mul"}}, {1, {"relu"}}}));
  EXPECT_EQ(propose(g, {"relu", "neg", "add", "mul"}), (Parts{{0, {"neg", "add", "mul"}}}));
}

TEST(Partition, IndependentUserPartitionsMergeIntoTheFirst) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b1 = g.call_function(F(kNeg), {N(a)});
  Node* b2 = g.call_function(F(kTanh), {N(a)});
  Node* c1 = g.call_function(F(kSigmoid), {N(b1)});
  Node* c2 = g.call_function(F(kSigmoid), {N(b2)});
  Node* u = g.call_function(F(kCat), {N(c1), N(c2)});
  g.output(N(u));
  // c2 -> id 0, c1 -> id 1, b2 joins 0, b1 joins 1; a's users b1 (id 1) then b2 (id 0):
  // merged into 1, the order of first appearance; id 0 disappears.
  EXPECT_EQ(propose(g, {"relu", "neg", "tanh", "sigmoid", "sigmoid_1"}),
            (Parts{{1, {"relu", "neg", "tanh", "sigmoid", "sigmoid_1"}}}));
}

TEST(Partition, GetitemsMoveToTheirProducer) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* t = g.call_function(F(kRelu), {N(x)});                 // produces a tuple
  Node* g0 = g.call_function(F(kGetitem), {N(t), I(0)});
  Node* g1 = g.call_function(F(kGetitem), {N(t), I(1)});
  Node* a = g.call_function(F(kNeg), {N(g0)});
  Node* b = g.call_function(F(kTanh), {N(a), N(g1)});
  g.output(N(b));
  // relu unsupported: its getitems leave their partition (id None), which keeps
  // neg and tanh (two compute nodes).
  EXPECT_EQ(propose(g, {"getitem", "getitem_1", "neg", "tanh"}), (Parts{{0, {"neg", "tanh"}}}));
  // relu supported but on its own (the getitems' partition is reached by nothing
  // else, so relu joins it): everything in one.
  EXPECT_EQ(propose(g, {"relu", "getitem", "getitem_1", "neg", "tanh"}),
            (Parts{{0, {"relu", "getitem", "getitem_1", "neg", "tanh"}}}));
  // getitems unsupported, relu and neg supported: the getitems join relu's partition.
  EXPECT_EQ(propose(g, {"relu", "neg"}, true), (Parts{{0, {"neg"}}, {1, {"relu", "getitem", "getitem_1"}}}));
}

TEST(Partition, GetitemReassignmentRecreatesEmptiedPartitionsLast) {
  // relu (unsupported) -> g0 = getitem (alone in id 1) -> h = getitem (unsupported).
  // g0 follows relu out of id 1, which is deleted; h follows g0 (id 1 when read) and
  // re-creates it after id 2.
  Graph g;
  Node* x = g.placeholder("x");
  Node* b = g.call_function(F(kTanh), {N(x)});
  Node* t = g.call_function(F(kRelu), {N(x)});
  Node* g0 = g.call_function(F(kGetitem), {N(t), I(0)});
  Node* h = g.call_function(F(kGetitem), {N(g0), I(0)});
  Node* a = g.call_function(F(kNeg), {N(h)});
  g.output(Argument::tuple({N(a), N(b)}));
  EXPECT_EQ(propose(g, {"tanh", "getitem", "neg"}, true), (Parts{{0, {"neg"}}, {2, {"tanh"}}, {1, {"getitem_1"}}}));
}

TEST(Partition, ViewAndGetitemAreNotComputeNodes) {
  static const NamedNative kNamedGetitem{"getitem", "_operator.getitem", "getitem"};
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* v = g.call_function(F(kView), {N(a), I(-1)});
  Node* i = g.call_function(F(kNamedGetitem), {N(v), I(0)});
  g.output(N(i));
  EXPECT_EQ(propose(g, {"relu", "view", "getitem"}), Parts{});
  EXPECT_EQ(propose(g, {"relu", "view", "getitem"}, true), (Parts{{0, {"relu", "view", "getitem"}}}));
  EXPECT_EQ(partition_op_kind("_operator.getitem"), PartitionOpKind::Getitem);
  EXPECT_EQ(partition_op_kind("operator.getitem"), PartitionOpKind::Getitem);
  EXPECT_EQ(partition_op_kind("torch.ops.aten.view"), PartitionOpKind::View);
  EXPECT_EQ(partition_op_kind("torch.ops.aten.view.default"), PartitionOpKind::Compute);
}

TEST(Partition, UnnamedTargetIsReportedWhereTorchFxWouldAsk) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* n = g.call_function(F(kNeg), {N(a)});
  Node* b = g.call_function(F(kTanh), {N(a)});  // "unnamed"
  g.output(Argument::tuple({N(n), N(b)}));
  std::vector<PartitionOpKind> kinds(5, PartitionOpKind::Compute);
  kinds[3] = PartitionOpKind::Unnamed;
  // a's users: neg (not a getitem: the check stops there), tanh never asked about.
  auto r = propose_partitions(g, support(g, {"relu", "neg"}), kinds);
  EXPECT_EQ(r.unnamed, nullptr);
  EXPECT_EQ(summary(r), (Parts{{0, {"relu", "neg"}}}));
  // tanh in a partition: asked about while counting compute nodes.
  r = propose_partitions(g, support(g, {"relu", "neg", "tanh"}), kinds);
  EXPECT_EQ(r.unnamed, b);
  EXPECT_TRUE(r.partitions.empty());
  ProposePartitionsOptions single;
  single.allows_single_node_partition = true;
  EXPECT_EQ(propose_partitions(g, support(g, {"relu", "neg", "tanh"}), kinds, single).unnamed, nullptr);
  // relu's first user is asked about even when nothing is supported.
  kinds[2] = PartitionOpKind::Unnamed;
  kinds[3] = PartitionOpKind::Compute;
  EXPECT_EQ(propose_partitions(g, support(g, {}), kinds).unnamed, n);
}

TEST(Partition, NotTopologicalAndBadSizes) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kRelu), {N(x)});
  g.output(Argument::tuple({N(a), N(b)}));
  EXPECT_FALSE(propose_partitions(g, support(g, {"neg"}), {}).not_topological);
  a->replace_input_with(x, N(b));  // a uses a later node
  EXPECT_TRUE(propose_partitions(g, support(g, {"neg"}), {}).not_topological);
  EXPECT_THROW(propose_partitions(g, {1, 0}, {}), std::invalid_argument);
  EXPECT_THROW(propose_partitions(g, support(g, {}), {PartitionOpKind::Compute}), std::invalid_argument);
}

TEST(Partition, MutualDependencyDropsTheLaterGroup) {
  // Partitions {a1, a2} and {b1, b2} reach each other (a1 -> x -> b1, b2 -> y -> a2)
  // without either being non-convex. n's users: a1 first, then b2.
  Graph g;
  Node* in = g.placeholder("in");
  Node* n = g.call_function(F(kRelu), {N(in)});
  Node* a1 = g.call_function(F(kNeg), {N(n)});
  Node* b2 = g.call_function(F(kTanh), {N(n)});
  Node* x = g.call_function(F(kCat), {N(a1)});
  Node* y = g.call_function(F(kCat), {N(b2)});
  Node* b1 = g.call_function(F(kSigmoid), {N(x), N(b2)});
  Node* a2 = g.call_function(F(kAdd), {N(y), N(a1)});
  g.output(Argument::tuple({N(a2), N(b1)}));
  // a2 -> 0, b1 -> 1, b2 joins 1, a1 joins 0; relu's groups: [0 (a1), 1 (b2)], each
  // reaching the other: the later one (1) is dropped, relu joins 0.
  EXPECT_EQ(propose(g, {"relu", "neg", "tanh", "sigmoid", "add"}, true),
            (Parts{{0, {"relu", "neg", "add"}}, {1, {"tanh", "sigmoid"}}}));
}

TEST(Partition, LongChainsAndWideGraphsAreFast) {
  // 1e5-node chain, every node supported but every 100th: torch.fx's ancestor sets
  // would need ~5e9 entries.
  Graph g;
  Node* cur = g.placeholder("x");
  std::set<std::string> sup;
  for (int i = 0; i < 100000; ++i) {
    cur = g.call_function(F(i % 100 == 99 ? kTanh : kRelu), {N(cur)});
    if (i % 100 != 99) sup.insert(std::string(cur->name()));
  }
  g.output(N(cur));
  auto r = propose_partitions(g, support(g, sup), {});
  EXPECT_EQ(r.partitions.size(), 1000u);
  EXPECT_EQ(r.partitions.front().nodes.size(), 99u);
  // One node with 10000 users in separate partitions (each a 3-node chain).
  Graph w;
  Node* p = w.placeholder("p");
  Node* root = w.call_function(F(kRelu), {N(p)});
  std::vector<Argument> outs;
  for (int i = 0; i < 10000; ++i) {
    Node* a = w.call_function(F(kNeg), {N(root)});
    Node* b = w.call_function(F(kTanh), {N(a)});
    outs.push_back(N(w.call_function(F(kCat), {N(b)})));
  }
  w.output(Argument::tuple(std::move(outs)));
  std::vector<uint8_t> s;
  for (Node* n : w.nodes()) s.push_back(n->op() == Op::CallFunction && n->name().rfind("cat", 0) != 0);
  r = propose_partitions(w, s, {});
  ASSERT_EQ(r.partitions.size(), 1u);  // all merged into the first user's partition
  EXPECT_EQ(r.partitions[0].nodes.size(), 20001u);
}

// ---- random DAGs against a brute-force model ----------------------------------------

namespace {

/// torch.fx 1.13's propose_partitions with full ancestor sets; a pair of groups that
/// depend on each other both ways drops the later one (fxcpp's choice).
Parts reference(const Graph& g, const std::vector<uint8_t>& sup, bool single) {
  std::vector<Node*> nodes;
  std::map<const Node*, size_t> pos;
  for (Node* n : g.nodes()) {
    pos[n] = nodes.size();
    nodes.push_back(n);
  }
  const size_t n = nodes.size();
  std::vector<std::vector<char>> anc(n, std::vector<char>(n, 0));
  for (size_t i = 0; i < n; ++i)
    for (Node* in : nodes[i]->all_input_nodes()) {
      const size_t j = pos[in];
      anc[i][j] = 1;
      for (size_t k = 0; k < n; ++k) anc[i][k] |= anc[j][k];
    }
  constexpr long kNo = -1;
  std::vector<long> assign(n, kNo);
  std::map<long, std::set<size_t>> parts;
  auto reach = [&](const std::set<size_t>& a, const std::set<size_t>& b) {
    for (size_t x : a)
      for (size_t y : b)
        if (anc[y][x]) return true;
    return false;
  };
  long next_id = 0;
  for (size_t i = n; i-- > 0;) {
    if (!sup[i]) continue;
    std::vector<std::pair<long, std::set<size_t>>> groups;
    std::set<long> seen;
    for (Node* u : nodes[i]->users()) {
      const size_t up = pos[u];
      if (assign[up] == kNo) {
        groups.push_back({kNo, {up}});
      } else if (seen.insert(assign[up]).second) {
        groups.push_back({assign[up], parts[assign[up]]});
      }
    }
    std::vector<char> keep(groups.size(), 1);
    for (size_t a = 0; a < groups.size(); ++a)
      for (size_t b = a + 1; b < groups.size(); ++b) {
        if (reach(groups[a].second, groups[b].second)) {
          keep[b] = 0;
        } else if (reach(groups[b].second, groups[a].second)) {
          keep[a] = 0;
        }
      }
    std::vector<long> ids;
    for (size_t a = 0; a < groups.size(); ++a)
      if (keep[a] && groups[a].first != kNo) ids.push_back(groups[a].first);
    if (ids.empty()) ids.push_back(next_id++);
    parts[ids[0]].insert(i);
    assign[i] = ids[0];
    for (size_t k = 1; k < ids.size(); ++k) {
      for (size_t m : parts[ids[k]]) {
        assign[m] = ids[0];
        parts[ids[0]].insert(m);
      }
      parts.erase(ids[k]);
    }
  }
  // Dict order: by creation; re-created ids go last.
  std::vector<long> order;
  for (auto& [id, _] : parts) order.push_back(id);
  auto move = [&](size_t m, long id) {
    if (assign[m] != kNo) {
      parts[assign[m]].erase(m);
      if (parts[assign[m]].empty()) {
        parts.erase(assign[m]);
        order.erase(std::find(order.begin(), order.end(), assign[m]));
      }
    }
    assign[m] = id;
    if (id != kNo) {
      if (!parts.count(id)) order.push_back(id);
      parts[id].insert(m);
    }
  };
  auto is_getitem = [&](const Node* u) {
    return u->op() == Op::CallFunction && partition_op_kind(u->target().fn().qualified_name()) ==
                                              PartitionOpKind::Getitem;
  };
  std::vector<std::pair<size_t, long>> moves;
  for (size_t i = 0; i < n; ++i) {
    bool all = true;
    for (Node* u : nodes[i]->users()) all = all && is_getitem(u);
    if (!all) continue;
    for (Node* u : nodes[i]->users()) {
      const size_t up = pos[u];
      if (assign[up] == assign[i]) continue;
      auto it = std::find_if(moves.begin(), moves.end(), [&](auto& mv) { return mv.first == up; });
      if (it == moves.end()) {
        moves.push_back({up, assign[i]});
      } else {
        it->second = assign[i];
      }
    }
  }
  for (auto& [m, id] : moves) move(m, id);
  Parts out;
  for (long id : order) {
    size_t compute = 0;
    Names names;
    for (size_t m : parts[id]) {
      names.emplace_back(nodes[m]->name());
      const Node* node = nodes[m];
      if (node->op() == Op::CallFunction &&
          partition_op_kind(node->target().fn().qualified_name()) == PartitionOpKind::Compute)
        ++compute;
    }
    if (single || compute > 1) out.emplace_back(static_cast<uint32_t>(id), names);
  }
  return out;
}

}  // namespace

TEST(Partition, RandomGraphsMatchBruteForceModel) {
  std::mt19937 rng(1234);
  const NamedNative* fns[] = {&kRelu, &kNeg, &kTanh, &kAdd, &kMul, &kGetitem, &kView, &kCat};
  for (int iter = 0; iter < 1500; ++iter) {
    Graph g;
    std::vector<Node*> vals;
    const int nph = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < nph; ++i) vals.push_back(g.placeholder("p" + std::to_string(i)));
    const int nops = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < nops; ++i) {
      const NamedNative* f = fns[rng() % 8];
      auto pick = [&]() {
        // mostly recent values, for depth
        const size_t k = vals.size();
        return rng() % 10 < 7 ? vals[k - 1 - std::min<size_t>(k - 1, rng() % 4)] : vals[rng() % k];
      };
      std::vector<Argument> args;
      const int arity = f == &kAdd || f == &kMul ? 2 : (f == &kCat ? 1 + static_cast<int>(rng() % 3) : 1);
      for (int a = 0; a < arity; ++a) args.push_back(N(pick()));
      if (f == &kGetitem || f == &kView) args.push_back(rng() % 5 == 0 ? N(pick()) : I(0));
      vals.push_back(g.call_function(F(*f), std::move(args)));
    }
    std::vector<Argument> outs;
    for (int k = 0, m = 1 + static_cast<int>(rng() % 3); k < m; ++k) outs.push_back(N(vals[rng() % vals.size()]));
    g.output(Argument::tuple(std::move(outs)));
    const unsigned density = rng() % 11;
    std::vector<uint8_t> sup;
    for (size_t i = 0; i < g.size(); ++i) sup.push_back(rng() % 10 < density ? 1 : 0);
    const bool single = rng() % 3 == 0;
    ProposePartitionsOptions o;
    o.allows_single_node_partition = single;
    auto r = propose_partitions(g, sup, {}, o);
    // Node order inside a partition: graph order in both.
    Parts want = reference(g, sup, single);
    for (auto& [id, names] : want) {
      std::map<std::string, size_t> at;
      size_t i = 0;
      for (Node* n : g.nodes()) at[std::string(n->name())] = i++;
      std::sort(names.begin(), names.end(), [&](auto& a, auto& b) { return at[a] < at[b]; });
    }
    ASSERT_EQ(summary(r), want) << "iteration " << iter << "\n" << g;
  }
}

// ---- validate_partition ----------------------------------------------------------------

TEST(ValidatePartition, OutsideNodeOnAPathIsACycle) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  Node* c = g.call_function(F(kAdd), {N(a), N(b)});
  g.output(N(c));
  EXPECT_TRUE(validate_partition({}));
  EXPECT_TRUE(validate_partition({a, b}));
  EXPECT_TRUE(validate_partition({a, b, c}));
  EXPECT_TRUE(validate_partition({b, a, b}));  // order and repeats do not matter
  EXPECT_FALSE(validate_partition({a, c}));    // a -> b -> c with b outside
  EXPECT_FALSE(validate_partition({x, c}));    // x -> a -> c
  EXPECT_TRUE(validate_partition({x, a, b, c}));
  Graph other;
  Node* y = other.placeholder("y");
  EXPECT_THROW(validate_partition({a, y}), std::invalid_argument);
}

TEST(ValidatePartition, DeepGraphAndUnsortedGraph) {
  Graph g;
  Node* cur = g.placeholder("x");
  std::vector<Node*> chain;
  for (int i = 0; i < 100000; ++i) chain.push_back(cur = g.call_function(F(kRelu), {N(cur)}));
  g.output(N(cur));
  EXPECT_TRUE(validate_partition({chain[0], chain[1]}));
  EXPECT_FALSE(validate_partition({chain[0], chain.back()}));
  // A node appended after the output (as fuse_by_partitions leaves them) still counts.
  Node* late = g.call_function(F(kNeg), {N(chain[0])});
  chain[5]->replace_input_with(chain[4], N(late));
  EXPECT_FALSE(validate_partition({chain[0], chain[5]}));
  EXPECT_TRUE(validate_partition({chain[0], late}));
}

// ---- torch.fx 2.x's algorithm (PartitionerAlgorithm::Torch2) ------------------------------

namespace {

struct Options2 {
  bool single = false;
  bool skip_horizontal_fusion = false;
  std::set<std::string> non_compute, allowed_single;
  std::vector<PartitionOpKind> kinds;
};

std::vector<uint8_t> flags(const Graph& g, const std::set<std::string>& names) {
  return names.empty() ? std::vector<uint8_t>{} : support(g, names);
}

ProposePartitionsResult propose2_result(const Graph& g, const std::set<std::string>& names, const Options2& o = {}) {
  ProposePartitionsOptions opts;
  opts.algorithm = PartitionerAlgorithm::Torch2;
  opts.allows_single_node_partition = o.single;
  opts.skip_horizontal_fusion = o.skip_horizontal_fusion;
  opts.non_compute = flags(g, o.non_compute);
  opts.allowed_single = flags(g, o.allowed_single);
  return propose_partitions(g, support(g, names), o.kinds, opts);
}

Parts propose2(const Graph& g, const std::set<std::string>& names, const Options2& o = {}) {
  return summary(propose2_result(g, names, o));
}

Options2 single2() {
  Options2 o;
  o.single = true;
  return o;
}

}  // namespace

TEST(Partition2, ChainMergesIntoTheLargerPartitionsId) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  Node* c = g.call_function(F(kAdd), {N(b), N(x)});
  g.output(N(c));
  // Reverse walk: add -> 0, neg -> 1 merges with 0 (a tie: the new one keeps its id),
  // relu -> 2 merges into the larger partition 1.
  auto r = propose2_result(g, {"relu", "neg", "add"});
  EXPECT_EQ(summary(r), (Parts{{1, {"relu", "neg", "add"}}}));
  ASSERT_EQ(r.partitions.size(), 1u);
  // node orders: indices in reversed graph order (5 nodes)
  EXPECT_EQ(r.partitions[0].node_orders, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(propose2(g, {"neg"}), Parts{});
  EXPECT_EQ(propose2(g, {"neg"}, single2()), (Parts{{0, {"neg"}}}));
  // output -> 0; relu -> 1 cannot join it (relu -> neg -> add -> output); x -> 2 cannot join
  // 0 either (its user relu's set holds 0), but joins 1 (a tie: keeps 2).
  EXPECT_EQ(propose2(g, {"x", "relu", "output"}, single2()), (Parts{{0, {"output"}}, {2, {"x", "relu"}}}));
}

TEST(Partition2, IndependentPartitionsFuseUnlessSkipped) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  g.output(Argument::tuple({N(a), N(b)}));
  // neg -> 0, relu -> 1 fuses with it horizontally (nothing between them).
  EXPECT_EQ(propose2(g, {"relu", "neg"}), (Parts{{1, {"relu", "neg"}}}));
  Options2 skip;
  skip.skip_horizontal_fusion = true;
  EXPECT_EQ(propose2(g, {"relu", "neg"}, skip), Parts{});
  skip.single = true;
  EXPECT_EQ(propose2(g, {"relu", "neg"}, skip), (Parts{{0, {"neg"}}, {1, {"relu"}}}));
  // skip_horizontal_fusion still merges with the users' partitions
  Graph h;
  Node* y = h.placeholder("y");
  Node* c = h.call_function(F(kRelu), {N(y)});
  Node* d = h.call_function(F(kNeg), {N(c)});
  h.output(N(d));
  skip.single = false;
  EXPECT_EQ(propose2(h, {"relu", "neg"}, skip), (Parts{{1, {"relu", "neg"}}}));
}

TEST(Partition2, UnsupportedNodeBetweenPreventsTheMerge) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* u = g.call_function(F(kTanh), {N(a)});
  Node* b = g.call_function(F(kNeg), {N(u)});
  g.output(N(b));
  EXPECT_EQ(propose2(g, {"relu", "neg"}, single2()), (Parts{{0, {"neg"}}, {1, {"relu"}}}));
  EXPECT_EQ(propose2(g, {"relu", "neg"}), Parts{});
}

TEST(Partition2, UserPartitionsMergeInOrder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b1 = g.call_function(F(kNeg), {N(a)});
  Node* b2 = g.call_function(F(kTanh), {N(a)});
  Node* c1 = g.call_function(F(kSigmoid), {N(b1)});
  Node* c2 = g.call_function(F(kSigmoid), {N(b2)});
  Node* u = g.call_function(F(kCat), {N(c1), N(c2)});
  g.output(N(u));
  // sigmoid_1 -> 0, sigmoid -> 1 (fused, a tie: 1), then tanh, neg, relu each join 1.
  auto r = propose2_result(g, {"relu", "neg", "tanh", "sigmoid", "sigmoid_1"});
  EXPECT_EQ(summary(r), (Parts{{1, {"relu", "neg", "tanh", "sigmoid", "sigmoid_1"}}}));
  EXPECT_EQ(r.partitions.at(0).node_orders, (std::vector<int64_t>{6, 5, 4, 3, 2}));
}

TEST(Partition2, MutuallyReachingCandidatesAreDecidedByTheWalk) {
  // The 1.13 test's graph: a1 -> x -> b1 and b2 -> y -> a2.
  Graph g;
  Node* in = g.placeholder("in");
  Node* n = g.call_function(F(kRelu), {N(in)});
  Node* a1 = g.call_function(F(kNeg), {N(n)});
  Node* b2 = g.call_function(F(kTanh), {N(n)});
  Node* x = g.call_function(F(kCat), {N(a1)});
  Node* y = g.call_function(F(kCat), {N(b2)});
  Node* b1 = g.call_function(F(kSigmoid), {N(x), N(b2)});
  Node* a2 = g.call_function(F(kAdd), {N(y), N(a1)});
  g.output(Argument::tuple({N(a2), N(b1)}));
  // add -> 0, sigmoid -> 1 fuses with it (keeps 1); tanh -> 2 cannot (tanh -> cat_1 -> add);
  // neg -> 3 cannot join 1 (neg -> cat -> sigmoid) but fuses with 2 (keeps 3); relu -> 4
  // cannot join 1 (3's set holds 1), joins 3. {sigmoid, add} and {neg, tanh, relu} then
  // reach each other, so nothing more merges.
  EXPECT_EQ(propose2(g, {"relu", "neg", "tanh", "sigmoid", "add"}, single2()),
            (Parts{{1, {"sigmoid", "add"}}, {3, {"relu", "neg", "tanh"}}}));
}

TEST(Partition2, GetitemsAreAppendedToTheirProducersPartition) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* t = g.call_function(F(kRelu), {N(x)});  // produces a tuple
  Node* g0 = g.call_function(F(kGetitem), {N(t), I(0)});
  Node* g1 = g.call_function(F(kGetitem), {N(t), I(1)});
  Node* a = g.call_function(F(kAdd), {N(g0), N(g1)});
  g.output(N(a));
  // add -> 0; relu -> 1 cannot join it (relu -> getitem -> add): the getitems move into 1,
  // after relu, with no node order.
  auto r = propose2_result(g, {"relu", "add"}, single2());
  EXPECT_EQ(summary(r), (Parts{{0, {"add"}}, {1, {"relu", "getitem", "getitem_1"}}}));
  ASSERT_EQ(r.partitions.size(), 2u);
  EXPECT_EQ(r.partitions[0].node_orders, (std::vector<int64_t>{1}));
  EXPECT_EQ(r.partitions[1].node_orders, (std::vector<int64_t>{4, -1, -1}));
  // Without single-node partitions: one compute node each (getitems do not count).
  EXPECT_EQ(propose2(g, {"relu", "add"}), Parts{});
}

TEST(Partition2, NestedGetitemsFollowInRounds) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* t = g.call_function(F(kRelu), {N(x)});
  Node* g0 = g.call_function(F(kGetitem), {N(t), I(0)});
  Node* h = g.call_function(F(kGetitem), {N(g0), I(0)});
  Node* a = g.call_function(F(kNeg), {N(h)});
  g.output(N(a));
  // All but relu supported: {getitem, getitem_1, neg} is one partition (0, then 1 and 2
  // joining: id 1). Round 1 moves getitem out (relu is in none); round 2 moves getitem_1
  // after it.
  EXPECT_EQ(propose2(g, {"getitem", "getitem_1", "neg"}, single2()), (Parts{{1, {"neg"}}}));
}

TEST(Partition2, GetitemOfTwoProducersInDifferentPartitionsIsReported) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(x)});
  Node* i = g.call_function(F(kGetitem), {N(a), N(b)});
  g.output(N(i));
  // relu in a partition, neg in none: each moves the getitem to its own, forever.
  auto r = propose2_result(g, {"relu"}, single2());
  EXPECT_EQ(r.endless_getitem, i);
  EXPECT_TRUE(r.partitions.empty());
  // both in one partition: both move it there once
  r = propose2_result(g, {"relu", "neg"}, single2());
  EXPECT_EQ(r.endless_getitem, nullptr);
  EXPECT_EQ(summary(r), (Parts{{1, {"relu", "neg", "getitem"}}}));
}

TEST(Partition2, NonComputeAndAllowedSingleOps) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  g.output(N(b));
  EXPECT_EQ(propose2(g, {"relu", "neg"}), (Parts{{1, {"relu", "neg"}}}));
  Options2 o;
  o.non_compute = {"neg"};
  EXPECT_EQ(propose2(g, {"relu", "neg"}, o), Parts{});
  Options2 s;
  s.allowed_single = {"relu"};
  EXPECT_EQ(propose2(g, {"relu"}, s), (Parts{{0, {"relu"}}}));
  s.non_compute = {"relu"};  // not a compute node, but allowed alone: counts once
  EXPECT_EQ(propose2(g, {"relu"}, s), Parts{});
  EXPECT_THROW(propose2(g, {"relu"}, [] {
                 Options2 bad;
                 bad.kinds = {PartitionOpKind::Compute};
                 return bad;
               }()),
               std::invalid_argument);
}

TEST(Partition2, UnnamedTargetAndNotTopological) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* n = g.call_function(F(kNeg), {N(a)});
  Node* b = g.call_function(F(kTanh), {N(a)});
  g.output(Argument::tuple({N(n), N(b)}));
  Options2 o;
  o.kinds.assign(5, PartitionOpKind::Compute);
  o.kinds[3] = PartitionOpKind::Unnamed;
  // relu's users: neg first (not a getitem), so tanh is asked about only when counting.
  EXPECT_EQ(propose2_result(g, {"relu", "neg"}, o).unnamed, nullptr);
  EXPECT_EQ(propose2_result(g, {"relu", "neg", "tanh"}, o).unnamed, b);
  o.single = true;
  EXPECT_EQ(propose2_result(g, {"relu", "neg", "tanh"}, o).unnamed, nullptr);
  n->replace_input_with(a, N(b));  // neg uses tanh, which comes later
  EXPECT_TRUE(propose2_result(g, {"neg"}).not_topological);
}

TEST(Partition2, LongCutChainIsFast) {
  // 2e4 relus with a tanh every 100: 200 partitions that cannot merge. Each partition's id is
  // its second node's (a tie with its first, then the larger keeps its id).
  Graph g;
  Node* cur = g.placeholder("x");
  const int n = 20000, every = 100;
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    cur = g.call_function(F(i % every == every - 1 ? kTanh : kRelu), {N(cur)});
    if (i % every != every - 1) names.insert(std::string(cur->name()));
  }
  g.output(N(cur));
  auto r = propose2_result(g, names);
  ASSERT_EQ(r.partitions.size(), static_cast<size_t>(n / every));
  for (size_t k = 0; k < r.partitions.size(); ++k) {
    // partitions by ascending id: the last segment in the graph was numbered first
    EXPECT_EQ(r.partitions[k].id, k * (every - 1) + 1);
    EXPECT_EQ(r.partitions[k].nodes.size(), static_cast<size_t>(every - 1));
  }
}
