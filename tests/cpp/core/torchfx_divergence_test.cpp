// Core regressions for divergences from torch.fx found by the Python fuzzers
// (tests/python/test_fuzz_diff.py, tests/python/test_fuzz_api.py).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fxcpp/passes/dce.h"
#include "fxcpp/passes/lint.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;


TEST(TorchFxDivergence, ReplaceAllUsesWithItselfAssertsAfterTheEdit) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kAdd), {N(x), I(1)});
  g.output(N(a));
  EXPECT_THROW(x->replace_all_uses_with(x), AssertionFailure);
  EXPECT_EQ(x->num_users(), 1u);
  // Filtered-out users may remain; a node without users may replace itself.
  EXPECT_TRUE(x->replace_all_uses_with(x, [](Node*) { return false; }).empty());
  Node* lone = g.call_function(F(kNeg), {N(x)});
  EXPECT_TRUE(lone->replace_all_uses_with(lone).empty());
}

TEST(TorchFxDivergence, GraphCopyOfAUseBeforeItsDefinitionNamesTheNode) {
  Graph src;
  src.placeholder("x");
  Node* y = src.placeholder("y");
  Node* z;
  {
    auto guard = src.inserting_before(y);
    z = src.call_function(F(kAdd), {N(y), I(1)});
  }
  src.output(N(z));
  Graph dst;
  std::unordered_map<const Node*, Argument> val_map;
  try {
    dst.graph_copy(src, val_map);
    FAIL() << "graph_copy did not throw";
  } catch (const UnmappedNode& e) {
    EXPECT_EQ(e.node, y);
  }
  EXPECT_EQ(val_map.size(), 1u);  // x was copied before the failure, as in torch.fx
  EXPECT_EQ(names(dst), std::vector<std::string>{"x"});
}

TEST(TorchFxDivergence, DceAsksTheModuleImpurityHookBeforeTheUsersCheck) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* m = g.call_module("m", {N(x)});
  g.call_function(F(kAdd), {N(m), I(1)});  // dead, after the throwing node
  g.output(N(m));
  std::vector<std::string> asked;
  DceOptions opts;
  opts.module_is_impure = [&](const Node& n) {
    asked.emplace_back(n.name());
    throw std::runtime_error("no owning module");
    return false;
  };
  EXPECT_THROW(eliminate_dead_code(g, opts), std::runtime_error);
  EXPECT_EQ(asked, (std::vector<std::string>{"m"}));  // m has users: asked anyway
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "m", "output"}));  // the dead add went first
}

TEST(TorchFxDivergence, SliceNodesAreMappedStartStopStep) {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  Argument s = Argument::slice(N(a), N(b), N(c));
  std::vector<std::string> seen;
  s.map_nodes([&](Node* n) {
    seen.emplace_back(n->name());
    return Argument::node(n);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(TorchFxDivergence, OutputWithoutArgsIsAnIndexError) {
  Graph g;
  g.placeholder("x");
  g.create_node(Op::Output, Target(InternedString("output")), {}, {}, std::nullopt, {});
  EXPECT_THROW(g.to_string(), std::out_of_range);
  EXPECT_THROW(python_code(g), std::out_of_range);
  Graph dst;
  std::unordered_map<const Node*, Argument> val_map;
  EXPECT_THROW(dst.graph_copy(g, val_map), std::out_of_range);
}

TEST(TorchFxDivergence, GetattrCallWithFewerThanTwoArgsIsAnIndexError) {
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function(F(kGetattr), {N(x)});
  EXPECT_THROW(python_code(g), std::out_of_range);
}

TEST(TorchFxDivergence, LintIgnoresUsersInOtherGraphs) {
  Graph a;
  Node* x = a.placeholder("x");
  a.output(N(x));
  Graph b;
  b.call_function(F(kNeg), {N(x)});  // b is lint-invalid, a is not
  EXPECT_NO_THROW(lint(a));
  EXPECT_THROW(lint(b), LintError);
}

TEST(TorchFxDivergence, ForeignNodesKeepTheirNamesInCodegen) {
  Graph a;
  Node* y = a.placeholder("y");
  Graph b;
  b.placeholder("y");
  b.call_function(F(kNeg), {N(y)});
  std::string src = python_code(b).src;
  EXPECT_NE(src.find("neg = -y;  y = None"), std::string::npos) << src;
}

TEST(TorchFxDivergence, MovingAnErasedNodeIsRefused) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* dead = g.call_function(F(kNeg), {N(x)});
  auto it = g.nodes().begin();  // keeps `dead` as a tombstone right after `a`
  g.erase_node(dead);
  EXPECT_THROW(a->append(dead), std::invalid_argument);
  EXPECT_THROW(x->prepend(dead), std::invalid_argument);
  (void)it;
}

TEST(TorchFxDivergence, BusyGraphsRefuseEdits) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  {
    Graph::BusyScope busy(g);
    EXPECT_THROW(g.call_function(F(kNeg), {N(x)}), GraphBusyError);
    EXPECT_THROW(g.erase_node(a), GraphBusyError);
    EXPECT_THROW(a->set_args({I(1)}), GraphBusyError);
    EXPECT_THROW(a->prepend(x), GraphBusyError);
    EXPECT_THROW(a->set_name("b"), GraphBusyError);
    EXPECT_NO_THROW(g.to_string());  // reading is fine (and nests)
  }
  EXPECT_NO_THROW(g.erase_node(a));
  EXPECT_EQ(names(g), std::vector<std::string>{"x"});
}
