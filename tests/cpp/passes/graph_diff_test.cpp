#include <gtest/gtest.h>

#include <random>
#include <string>

#include "fxcpp/passes/graph_diff.h"
#include "../core/test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

constexpr uint32_t kNone = GraphDiffResult::kNone;

DiffNode dn(std::string name, std::string kind, std::vector<uint32_t> inputs = {}, std::string detail = "") {
  return DiffNode{std::move(name), std::move(kind), std::move(detail), std::move(inputs)};
}

/// x -> conv -> bn -> relu -> output, and the same with bn folded into conv
/// (conv's detail, its parameters, changes; relu now reads conv).
TEST(GraphDiff, ConvBnFolding) {
  DiffGraph before{{dn("x", "placeholder x"), dn("conv", "call_module conv", {0}, "w1"),
                    dn("bn", "call_module bn", {1}, "bn"), dn("relu", "call_module relu", {2}),
                    dn("output", "output output", {3})}};
  DiffGraph after{{dn("x", "placeholder x"), dn("conv", "call_module conv", {0}, "w2"),
                   dn("relu", "call_module relu", {1}), dn("output", "output output", {2})}};
  GraphDiffResult r = graph_diff(before, after);
  EXPECT_EQ(r.before_to_after, (std::vector<uint32_t>{0, 1, kNone, 2, 3}));
  EXPECT_EQ(r.after_to_before, (std::vector<uint32_t>{0, 1, 3, 4}));
  EXPECT_EQ(r.changed, (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.added, 0u);
  EXPECT_EQ(r.num_changed, 1u);
  EXPECT_EQ(r.matched_by_name, 4u);
  EXPECT_EQ(r.matched_by_structure, 0u);
}

/// Names differ everywhere (another tracer's numbering): structure matches a
/// chain of any length in linear rounds, and a renamed node with another
/// kind is added/removed.
TEST(GraphDiff, StructureMatchesRenamedChain) {
  const uint32_t n = 2000;
  DiffGraph before, after;
  before.nodes.push_back(dn("x", "placeholder x"));
  after.nodes.push_back(dn("x", "placeholder x"));
  for (uint32_t i = 1; i < n; ++i) {
    before.nodes.push_back(dn("b" + std::to_string(i), i % 2 ? "call_function relu" : "call_function neg", {i - 1}));
    after.nodes.push_back(dn("a" + std::to_string(i), i % 2 ? "call_function relu" : "call_function neg", {i - 1}));
  }
  after.nodes.back().kind = "call_function sigmoid";
  GraphDiffResult r = graph_diff(before, after);
  for (uint32_t i = 0; i + 1 < n; ++i) EXPECT_EQ(r.before_to_after[i], i);
  EXPECT_EQ(r.before_to_after[n - 1], kNone);
  EXPECT_EQ(r.after_to_before[n - 1], kNone);
  EXPECT_EQ(r.matched_by_name, 1u);
  EXPECT_EQ(r.matched_by_structure, n - 2);
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.num_changed, 0u);
}

/// A surviving input swapped for another surviving node is a change; so is a
/// different kind under the same name. Same opcode is required for a name
/// match.
TEST(GraphDiff, RewiringAndKindChanges) {
  DiffGraph before{{dn("x", "placeholder x"), dn("y", "placeholder y"), dn("add", "call_function add", {0, 1}),
                    dn("f", "call_function relu", {2}), dn("g", "call_module g", {2})}};
  DiffGraph after{{dn("x", "placeholder x"), dn("y", "placeholder y"), dn("add", "call_function add", {1, 0}),
                   dn("f", "call_function sigmoid", {2}), dn("g", "call_function g", {2})}};
  GraphDiffResult r = graph_diff(before, after);
  EXPECT_EQ(r.changed, (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(r.before_to_after[4], kNone);  // call_module g vs call_function g
  EXPECT_EQ(r.after_to_before[4], kNone);
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.removed, 1u);
}

/// Identical graphs match completely with nothing changed, in both
/// directions, whatever the names (random DAGs with duplicate kinds).
TEST(GraphDiff, IdenticalRandomGraphs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    DiffGraph g;
    const uint32_t n = 1 + rng() % 60;
    for (uint32_t i = 0; i < n; ++i) {
      std::vector<uint32_t> in;
      for (uint32_t k = 0, m = i ? rng() % 3 : 0; k < m; ++k) in.push_back(rng() % i);
      g.nodes.push_back(dn("n" + std::to_string(i), "call_function f" + std::to_string(rng() % 3), in));
    }
    DiffGraph renamed = g;
    for (auto& d : renamed.nodes) d.name = "r_" + d.name;
    for (const DiffGraph* other : {&g, &renamed}) {
      GraphDiffResult r = graph_diff(g, *other);
      EXPECT_EQ(r.added + r.removed + r.num_changed, 0u) << "trial " << trial;
      // One-to-one, and every match is of equal kinds.
      for (uint32_t i = 0; i < n; ++i) {
        ASSERT_NE(r.before_to_after[i], kNone);
        EXPECT_EQ(r.after_to_before[r.before_to_after[i]], i);
        EXPECT_EQ(g.nodes[i].kind, other->nodes[r.before_to_after[i]].kind);
      }
    }
  }
}

/// A cycle made by hand: nodes in it never become ready, so they are
/// added/removed (or matched by name), never a hang; bad indices throw.
TEST(GraphDiff, CyclesAndBadInput) {
  DiffGraph before{{dn("a", "call_function f", {1}), dn("b", "call_function f", {0})}};
  DiffGraph after{{dn("c", "call_function f", {1}), dn("d", "call_function f", {0})}};
  GraphDiffResult r = graph_diff(before, after);
  EXPECT_EQ(r.removed, 2u);
  EXPECT_EQ(r.added, 2u);
  GraphDiffResult same = graph_diff(before, before);
  EXPECT_EQ(same.matched_by_name, 2u);
  EXPECT_EQ(same.num_changed, 0u);
  DiffGraph bad{{dn("a", "call_function f", {5})}};
  EXPECT_THROW(graph_diff(bad, after), std::invalid_argument);
  EXPECT_THROW(graph_diff(before, bad), std::invalid_argument);
}

/// diff_graph of a real graph: graph order, kinds, inputs; an erased node is
/// gone and the diff against the original reports it removed.
TEST(GraphDiff, FromGraph) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kNeg), {N(a)});
  g.output(N(b));
  DiffGraph d1 = diff_graph(g);
  ASSERT_EQ(d1.nodes.size(), 4u);
  EXPECT_EQ(d1.nodes[1].kind, "call_function relu");
  EXPECT_EQ(d1.nodes[2].inputs, (std::vector<uint32_t>{1}));
  b->replace_all_uses_with(a);
  g.erase_node(b);
  DiffGraph d2 = diff_graph(g);
  ASSERT_EQ(d2.nodes.size(), 3u);
  GraphDiffResult r = graph_diff(d1, d2);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.before_to_after[2], kNone);
  EXPECT_EQ(r.added, 0u);
  EXPECT_EQ(r.num_changed, 0u);  // output read the removed neg: a replacement
}

}  // namespace
