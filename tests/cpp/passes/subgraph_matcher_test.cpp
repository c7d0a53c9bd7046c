#include <gtest/gtest.h>

#include "fxcpp/passes/lint.h"
#include "fxcpp/passes/subgraph_matcher.h"
#include "../core/test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

// pattern(a, b) = relu(add(a, b))
std::unique_ptr<Graph> relu_add_pattern() {
  auto p = std::make_unique<Graph>();
  Node* a = p->placeholder("a");
  Node* b = p->placeholder("b");
  Node* s = p->call_function(F(kAdd), {N(a), N(b)});
  p->output(N(p->call_function(F(kRelu), {N(s)})));
  return p;
}

std::vector<std::string> map_names(const InternalMatch& m) {
  std::vector<std::string> out;
  for (auto& kv : m.nodes_map)
    out.push_back(std::string(kv.first->name()) + "=" + (kv.second.is_node() ? std::string(kv.second.as_node()->name()) : std::string("lit")));
  return out;
}

}  // namespace

TEST(SubgraphMatcher, FindsMatchesInGraphOrderWithTorchFxMapOrder) {
  auto p = relu_add_pattern();
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a1 = g.call_function(F(kAdd), {N(x), N(y)});
  Node* r1 = g.call_function(F(kRelu), {N(a1)});
  Node* a2 = g.call_function(F(kAdd), {N(r1), I(1)});
  Node* r2 = g.call_function(F(kRelu), {N(a2)});
  g.output(N(r2));
  SubgraphMatcher m(*p);
  auto ms = m.match(g);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(map_names(ms[0]), (std::vector<std::string>{"relu=relu", "add=add", "a=x", "b=y"}));
  EXPECT_EQ(map_names(ms[1]), (std::vector<std::string>{"relu=relu_1", "add=add_1", "a=relu", "b=lit"}));
  EXPECT_EQ(ms[1].placeholder_nodes[1], I(1));
}

TEST(SubgraphMatcher, InjectiveLeakingAndOverlapping) {
  auto p = relu_add_pattern();
  Graph g;
  Node* x = g.placeholder("x");
  Node* same = g.call_function(F(kAdd), {N(x), N(x)});  // a and b cannot both map to x
  Node* r1 = g.call_function(F(kRelu), {N(same)});
  Node* y = g.placeholder("y");
  Node* leak = g.call_function(F(kAdd), {N(r1), N(y)});
  Node* r2 = g.call_function(F(kRelu), {N(leak)});
  Node* use = g.call_function(F(kNeg), {N(leak)});  // the add leaks out of the match
  g.output(Argument::tuple({N(r2), N(use)}));
  EXPECT_TRUE(SubgraphMatcher(*p).match(g).empty());

  // relu(relu(x)) on a chain of 5 relus: overlapping matches dropped greedily.
  Graph pp;
  Node* a = pp.placeholder("a");
  pp.output(N(pp.call_function(F(kRelu), {N(pp.call_function(F(kRelu), {N(a)}))})));
  Graph c;
  Node* cur = c.placeholder("x");
  for (int i = 0; i < 5; ++i) cur = c.call_function(F(kRelu), {N(cur)});
  c.output(N(cur));
  auto ms = SubgraphMatcher(pp).match(c);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].nodes_map[0].second.as_node()->name(), "relu_1");
  EXPECT_EQ(ms[1].nodes_map[0].second.as_node()->name(), "relu_3");
  SubgraphMatcherOptions keep;
  keep.remove_overlapping_matches = false;
  EXPECT_EQ(SubgraphMatcher(pp, keep).match(c).size(), 4u);
}

TEST(SubgraphMatcher, DeadCodeAndMissingCandidates) {
  Graph dead;
  Node* a = dead.placeholder("a");
  dead.placeholder("unused");
  dead.output(N(dead.call_function(F(kNeg), {N(a)})));
  EXPECT_THROW(SubgraphMatcher{dead}, SubgraphAssertion);

  auto p = relu_add_pattern();
  Graph g;
  g.output(N(g.call_function(F(kNeg), {N(g.placeholder("x"))})));
  EXPECT_THROW(SubgraphMatcher(*p).match(g), UnmatchedPatternNode);  // torch.fx: KeyError
}

TEST(SubgraphMatcher, LongChainsAreIterative) {
  const int L = 100000;
  Graph p;
  Node* cur = p.placeholder("x");
  for (int i = 0; i < L; ++i) cur = p.call_function(F(i % 2 ? kNeg : kRelu), {N(cur)});
  p.output(N(cur));
  Graph g;
  Node* gc = g.call_function(F(kTanh), {N(g.placeholder("x"))});
  for (int i = 0; i < L; ++i) gc = g.call_function(F(i % 2 ? kNeg : kRelu), {N(gc)});
  g.output(N(g.call_function(F(kSigmoid), {N(gc)})));
  SubgraphMatcher m(p);
  auto ms = m.match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].nodes_map.size(), static_cast<size_t>(L + 1));

  Graph rep;
  rep.output(N(rep.call_function(F(kTanh), {N(rep.placeholder("y"))})));
  replace_matches(g, m, rep, ms);
  lint(g);
  EXPECT_EQ(g.size(), 5u);
}

TEST(SubgraphMatcher, ReplaceMatchesRewritesLikeTorchFx) {
  auto p = relu_add_pattern();
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a1 = g.call_function(F(kAdd), {N(x), N(y)});
  Node* r1 = g.call_function(F(kRelu), {N(a1)});
  Node* a2 = g.call_function(F(kAdd), {N(r1), N(y)});
  Node* r2 = g.call_function(F(kRelu), {N(a2)});
  g.output(N(r2));
  Graph rep;
  Node* ra = rep.placeholder("a");
  Node* rb = rep.placeholder("b");
  rep.output(N(rep.call_function(F(kMul), {N(ra), N(rb)})));
  SubgraphMatcher m(*p);
  auto ms = m.match(g);
  int copies = 0;
  ReplacePatternHooks hooks;
  hooks.on_copy = [&](const Node&, Node&) { ++copies; };
  replace_matches(g, m, rep, ms, hooks);
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %y : [#users=2] = placeholder[target=y]\n"
            "    %mul : [#users=1] = call_function[target=operator.mul](args = (%x, %y), kwargs = {})\n"
            "    %mul_1 : [#users=1] = call_function[target=operator.mul](args = (%mul, %y), kwargs = {})\n"
            "    return mul_1");
}


// Note [Core matches under torch.fx 2.x]: the graph-side conditions.
TEST(SubgraphMatcherFx2, AgreesWithFx2OnGraphSideConditions) {
  auto p = relu_add_pattern();
  SubgraphMatcher m(*p);
  {
    Graph g;  // plain matches
    Node* x = g.placeholder("x");
    g.output(N(g.call_function(F(kRelu), {N(g.call_function(F(kAdd), {N(x), I(1)}))})));
    EXPECT_TRUE(agrees_with_fx2_on(m, g));
  }
  {
    Graph g;  // no candidate for the anchor: 2.x drops it, 1.13 fails
    Node* x = g.placeholder("x");
    g.output(N(g.call_function(F(kAdd), {N(x), N(x)})));
    EXPECT_FALSE(agrees_with_fx2_on(m, g));
  }
  {
    Graph g;  // a container among a candidate's arguments
    Node* x = g.placeholder("x");
    Node* a = g.call_function(F(kAdd), {N(x), Argument::list({N(x)})});
    g.output(N(g.call_function(F(kRelu), {N(a)})));
    EXPECT_FALSE(agrees_with_fx2_on(m, g));
  }
  {
    Graph g;  // a container in a node the pattern cannot match: irrelevant
    Node* x = g.placeholder("x");
    Node* n = g.call_function(F(kNeg), {Argument::tuple({N(x)})});
    g.output(N(g.call_function(F(kRelu), {N(g.call_function(F(kAdd), {N(n), I(1)}))})));
    EXPECT_TRUE(agrees_with_fx2_on(m, g));
  }
  // keyword names in another order than the pattern's
  Graph pk;
  Node* pa = pk.placeholder("a");
  Node* pb = pk.placeholder("b");
  pk.output(N(pk.call_function(F(kAdd), {}, KwArgs{{"input", N(pa)}, {"other", N(pb)}})));
  SubgraphMatcher mk(pk);
  for (bool swapped : {false, true}) {
    Graph g;
    Node* x = g.placeholder("x");
    KwArgs kw{{"input", N(x)}, {"other", I(2)}};
    if (swapped) std::swap(kw[0], kw[1]);
    g.output(N(g.call_function(F(kAdd), {}, kw)));
    EXPECT_EQ(agrees_with_fx2_on(mk, g), !swapped);
  }
}

TEST(SubgraphMatcherFx2, ReplaceAgreesWithFx2) {
  auto p = relu_add_pattern();
  SubgraphMatcher m(*p);
  Graph g;  // two chained matches: the second reads the value the first returns
  Node* x = g.placeholder("x");
  Node* r1 = g.call_function(F(kRelu), {N(g.call_function(F(kAdd), {N(x), I(1)}))});
  Node* r2 = g.call_function(F(kRelu), {N(g.call_function(F(kAdd), {N(x), I(2)}))});
  g.output(Argument::tuple({N(r1), N(r2)}));
  auto matches = m.match(g);
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_TRUE(replace_agrees_with_fx2(matches));
  Graph h;
  Node* y = h.placeholder("y");
  Node* s1 = h.call_function(F(kRelu), {N(h.call_function(F(kAdd), {N(y), I(1)}))});
  Node* s2 = h.call_function(F(kRelu), {N(h.call_function(F(kAdd), {N(s1), I(2)}))});
  h.output(N(s2));
  matches = m.match(h);
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_FALSE(replace_agrees_with_fx2(matches));
  Graph d;  // a returned value without users
  Node* z = d.placeholder("z");
  d.call_function(F(kRelu), {N(d.call_function(F(kAdd), {N(z), I(1)}))});
  d.output(N(z));
  matches = m.match(d);
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_FALSE(replace_agrees_with_fx2(matches));
}
