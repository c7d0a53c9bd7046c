#include <gtest/gtest.h>

#include "fxcpp/passes/split_module.h"
#include "../core/test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

using Names = std::vector<std::string>;

// x, y -> a = x*y -> b = a+y -> c = relu(b) -> d = neg(a) -> out (c, d)
struct Fixture {
  Graph g;
  Node *x, *y, *a, *b, *c, *d;
  Fixture() {
    x = g.placeholder("x");
    y = g.placeholder("y");
    a = g.call_function(F(kMul), {N(x), N(y)});
    b = g.call_function(F(kAdd), {N(a), N(y)});
    c = g.call_function(F(kRelu), {N(b)});
    d = g.call_function(F(kNeg), {N(a)});
    g.output(Argument::tuple({N(c), N(d)}));
  }
};

std::vector<std::string> node_names(const std::vector<const Node*>& v) {
  std::vector<std::string> out;
  for (const Node* n : v) out.emplace_back(n->name());
  return out;
}

}  // namespace

TEST(SplitModule, TwoPartitionsInRuns) {
  Fixture f;
  Graph p0, p1, top;
  SplitModuleResult r = split_module(f.g, {0, 0, 1, 1}, {"submod_0", "submod_1"}, {&p0, &p1}, top, F(kGetitem));
  EXPECT_EQ(r.sorted, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(node_names(r.inputs[0]), (Names{"x", "y"}));
  EXPECT_EQ(node_names(r.outputs[0]), (Names{"add", "mul"}));  // first cross use: b by c, then a by d
  EXPECT_EQ(node_names(r.inputs[1]), (Names{"add", "mul"}));
  EXPECT_EQ(node_names(r.outputs[1]), (Names{"relu", "neg"}));
  EXPECT_EQ(names(p0), (Names{"x", "y", "mul", "add", "output"}));
  EXPECT_EQ(names(p1), (Names{"add", "mul", "relu", "neg", "output"}));
  EXPECT_EQ(names(top), (Names{"x", "y", "submod_0", "getitem", "getitem_1", "submod_1", "getitem_2", "getitem_3",
                               "output"}));
  // placeholders (2 + 2), ops (4) and the top placeholders (2) are copies of originals
  EXPECT_EQ(r.copied.size(), 10u);
}

TEST(SplitModule, SinglePartitionReturnsItsValueDirectly) {
  Fixture f;
  Graph p0, top;
  SplitModuleResult r = split_module(f.g, {0, 0, 0, 0}, {"submod_a"}, {&p0}, top, F(kGetitem));
  EXPECT_EQ(names(top), (Names{"x", "y", "submod_a", "getitem", "getitem_1", "output"}));
  Graph q0, top2;
  Graph g;
  Node* x = g.placeholder("x");
  g.output(N(g.call_function(F(kNeg), {N(x)})));
  split_module(g, {0}, {"submod_0"}, {&q0}, top2, F(kGetitem));
  EXPECT_EQ(names(top2), (Names{"x", "submod_0", "output"}));
  EXPECT_EQ(names(q0), (Names{"x", "neg", "output"}));
}

TEST(SplitModule, TopologicalOrderIsAStackOfRoots) {
  // Partition 1 comes first in the graph but depends on nothing; partition 0 too:
  // roots [1, 0] (first appearance), popped from the end.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kRelu), {N(x)});
  g.output(Argument::tuple({N(a), N(b)}));
  Graph p0, p1, top;
  SplitModuleResult r = split_module(g, {0, 1}, {"submod_1", "submod_0"}, {&p0, &p1}, top, F(kGetitem));
  EXPECT_EQ(r.sorted, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(names(top), (Names{"x", "submod_0", "submod_1", "output"}));
  Graph q0, q1, top2;
  SplitModuleOptions keep;
  keep.keep_original_order = true;
  r = split_module(g, {0, 1}, {"submod_1", "submod_0"}, {&q0, &q1}, top2, F(kGetitem), keep);
  EXPECT_EQ(r.construct_order, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(names(top2), (Names{"x", "submod_1", "submod_0", "output"}));
}

TEST(SplitModule, CycleAndBadAssignmentsThrow) {
  Fixture f;
  {
    Graph p0, p1, top;  // a in 0, b in 1, c in 0 (uses b), d in 1 (uses a): 0 <-> 1
    EXPECT_THROW(split_module(f.g, {0, 1, 0, 1}, {"submod_0", "submod_1"}, {&p0, &p1}, top, F(kGetitem)),
                 std::runtime_error);
  }
  {
    Graph p0, top;
    EXPECT_THROW(split_module(f.g, {0, 0}, {"submod_0"}, {&p0}, top, F(kGetitem)), std::invalid_argument);
    EXPECT_THROW(split_module(f.g, {0, 0, 0, 2}, {"submod_0"}, {&p0}, top, F(kGetitem)), std::invalid_argument);
  }
}

TEST(SplitModule, PartitionWithoutOutputsThrowsOutOfRange) {
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function(F(kRelu), {N(x)});  // dead, alone in partition 1
  g.output(N(g.call_function(F(kNeg), {N(x)})));
  Graph p0, p1, top;
  EXPECT_THROW(split_module(g, {1, 0}, {"submod_1", "submod_0"}, {&p0, &p1}, top, F(kGetitem)), std::out_of_range);
}

TEST(SplitModule, ModuleTargetsAndGetAttrs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("sub.w");
  Node* m = g.call_module("sub.lin", {N(x)});
  g.output(N(g.call_function(F(kAdd), {N(m), N(w)})));
  Graph p0, top;
  SplitModuleResult r = split_module(g, {0, 0}, {"submod_0"}, {&p0}, top, F(kGetitem));
  ASSERT_EQ(r.module_calls.size(), 1u);
  EXPECT_EQ(r.module_calls[0].second, m);
  ASSERT_EQ(r.get_attrs.size(), 1u);
  EXPECT_EQ(r.get_attrs[0], w);
  EXPECT_EQ(split_module_target("sub.lin"), "sub_lin");
  EXPECT_EQ(names(p0), (Names{"x", "sub_w", "sub_lin", "add", "output"}));
  EXPECT_EQ(names(top), (Names{"x", "sub_w", "submod_0", "output"}));
}

// Note [split_module on torch.fx 2.x]: the expectations are torch.fx 2.14's (run side by side).
TEST(SplitModuleFx2, PartitionWithoutOutputsReturnsEmptyTuple) {
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function(F(kRelu), {N(x)});  // dead, alone in partition 1
  g.output(N(g.call_function(F(kNeg), {N(x)})));
  Graph p0, p1, top;
  SplitModuleOptions o;
  o.fx2 = true;
  // ids by first appearance: relu's partition (key 1) is 0, graph p0
  split_module(g, {0, 1}, {"submod_1", "submod_0"}, {&p0, &p1}, top, F(kGetitem), o);
  EXPECT_EQ(names(top), (Names{"x", "submod_0", "submod_1", "output"}));
  EXPECT_EQ(names(p0), (Names{"x", "relu", "output"}));
  const Node* out = p0.root()->prev();
  ASSERT_EQ(out->op(), Op::Output);
  EXPECT_TRUE(out->args()[0].is_sequence() && out->args()[0].items().empty());
}

TEST(SplitModuleFx2, TupleReturnAndNames) {
  Fixture f;
  Graph p0, p1, top;
  SplitModuleOptions o;
  o.fx2 = true;
  o.tuple_return = true;
  o.keep_original_input_name = false;
  o.keep_original_node_name = true;
  split_module(f.g, {0, 0, 1, 0}, {"submod_0", "submod_1"}, {&p0, &p1}, top, F(kGetitem), o);
  // partition 1 returns (relu,), unpacked by getitem; placeholders are arg_<i>
  EXPECT_EQ(names(p1), (Names{"arg_0", "relu", "output"}));
  EXPECT_EQ(names(p0), (Names{"arg_0", "arg_1", "mul", "add", "neg", "output"}));
  EXPECT_EQ(names(top), (Names{"x", "y", "submod_0", "getitem", "getitem_1", "submod_1", "getitem_2", "output"}));
}

TEST(SplitModuleFx2, KeepOriginalOrderCreatesGetAttrsBeforeTheirFirstCall) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* v = g.get_attr("v");
  g.get_attr("unused");
  Node* a = g.call_function(F(kRelu), {N(x)});
  Node* b = g.call_function(F(kAdd), {N(a), N(v)});
  g.output(N(g.call_function(F(kMul), {N(b), N(w)})));
  Graph p0, p1, top;
  SplitModuleOptions o;
  o.fx2 = true;
  o.keep_original_order = true;
  SplitModuleResult r = split_module(g, {0, 1, 1}, {"submod_0", "submod_1"}, {&p0, &p1}, top, F(kGetitem), o);
  EXPECT_EQ(names(top), (Names{"x", "submod_0", "v", "w", "submod_1", "output"}));
  EXPECT_EQ(node_names(r.get_attrs), (Names{"v", "w"}));
  // a get_attr only the output reads: torch.fx 2.x's KeyError
  Graph h;
  Node* y = h.placeholder("y");
  Node* u = h.get_attr("u");
  h.output(Argument::tuple({N(h.call_function(F(kNeg), {N(y)})), N(u)}));
  Graph q0, top2;
  r = split_module(h, {0}, {"submod_0"}, {&q0}, top2, F(kGetitem), o);
  EXPECT_EQ(r.unmapped, u);
  EXPECT_EQ(names(top2), (Names{"y", "submod_0"}));
}
