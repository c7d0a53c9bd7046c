#include <gtest/gtest.h>

#include <random>

#include "fxcpp/core/last_uses.h"
#include "../core/test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

std::vector<std::string> names(LastUses::Range r) {
  std::vector<std::string> out;
  for (Node* n : r) out.emplace_back(n->name());
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST(LastUses, ChainFreesEachValueAtItsOnlyUser) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kRelu), {N(a)});
  Node* out = g.output(N(b));
  LastUses lu = last_uses(g);
  EXPECT_TRUE(lu.freed_after(*x).empty());
  EXPECT_EQ(names(lu.freed_after(*a)), Names{"x"});
  EXPECT_EQ(names(lu.freed_after(*b)), Names{"neg"});
  EXPECT_EQ(names(lu.freed_after(*out)), Names{"relu"});  // the output frees its inputs like any user
  EXPECT_EQ(lu.last_user(*x), a);
  EXPECT_EQ(lu.last_user(*b), out);
  EXPECT_EQ(lu.last_user(*out), nullptr);
}

TEST(LastUses, FanOutIsFreedByTheLastUserInGraphOrder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kAdd), {N(x), N(y)});
  Node* c = g.call_function(F(kMul), {N(a), N(x)});
  Node* out = g.output(Argument::tuple({N(b), N(c)}));
  LastUses lu = last_uses(g);
  EXPECT_TRUE(lu.freed_after(*a).empty());
  EXPECT_EQ(names(lu.freed_after(*b)), Names{"y"});
  EXPECT_EQ(names(lu.freed_after(*c)), (Names{"neg", "x"}));
  EXPECT_EQ(names(lu.freed_after(*out)), (Names{"add", "mul"}));
  EXPECT_EQ(lu.last_user(*x), c);
}

TEST(LastUses, ValueUsedTwiceBySameUserIsListedOnce) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* sq = g.call_function(F(kMul), {N(x), N(x)});
  Node* out = g.output(Argument::list({N(sq), N(sq)}));
  LastUses lu = last_uses(g);
  EXPECT_EQ(names(lu.freed_after(*sq)), Names{"x"});
  EXPECT_EQ(names(lu.freed_after(*out)), Names{"mul"});
}

TEST(LastUses, UnusedValuesAreFreedByNoOne) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* unused_in = g.placeholder("unused");
  Node* dead = g.call_function(F(kNeg), {N(x)});
  Node* out = g.output(N(x));
  LastUses lu = last_uses(g);
  EXPECT_EQ(lu.last_user(*unused_in), nullptr);
  EXPECT_EQ(lu.last_user(*dead), nullptr);
  EXPECT_EQ(lu.last_user(*x), out);  // the dead user comes first in graph order
  EXPECT_TRUE(lu.freed_after(*dead).empty());
  EXPECT_EQ(names(lu.freed_after(*out)), Names{"x"});
}

TEST(LastUses, KwargsComeAfterArgs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* add = g.call_function(F(kTorchAdd), {N(y)}, KwArgs{{"other", N(z)}, {"alpha", N(x)}});
  g.output(N(add));
  LastUses lu = last_uses(g);
  EXPECT_EQ(names(lu.freed_after(*add)), (Names{"y", "z", "x"}));
  EXPECT_EQ(lu.last_user(*z), add);
}

TEST(LastUses, NestedContainersAndSlices) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* w = g.placeholder("w");
  Node* cat = g.call_function(
      F(kCat), {Argument::list({N(x), Argument::tuple({N(y), Argument::list({N(x)})})})},
      KwArgs{{"dim", Argument::dict({{S("k"), Argument::tuple({N(z)})}})}});
  Node* item = g.call_function(F(kGetitem), {N(cat), Argument::slice(Argument::none(), N(w), I(1))});
  g.output(N(item));
  LastUses lu = last_uses(g);
  EXPECT_EQ(names(lu.freed_after(*cat)), (Names{"x", "y", "z"}));
  EXPECT_EQ(names(lu.freed_after(*item)), (Names{"cat", "w"}));
}

TEST(LastUses, TracksEditsOnlyWhenRecomputedAndSkipsErasedNodes) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kNeg), {N(x)});
  Node* b = g.call_function(F(kRelu), {N(x)});
  Node* out = g.output(N(b));
  EXPECT_EQ(last_uses(g).last_user(*x), b);
  g.erase_node(a);
  b->set_args({N(x), N(x)});
  LastUses lu = last_uses(g);
  EXPECT_EQ(names(lu.freed_after(*b)), Names{"x"});
  EXPECT_EQ(names(lu.freed_after(*out)), Names{"relu"});
}

// Against a direct definition: a value's last use is its user latest in graph
// order, and each user frees exactly the values whose last use it is, in its
// input order.
TEST(LastUses, MatchesTheDefinitionOnRandomGraphs) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Graph g;
    std::vector<Node*> values{g.placeholder("x"), g.placeholder("y")};
    for (int i = 0; i < 200; ++i) {
      auto pick = [&] { return N(values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)]); };
      std::vector<Argument> args{pick(), Argument::list({pick(), I(i)})};
      KwArgs kw;
      if (rng() % 3 == 0) kw.emplace_back("k", pick());
      values.push_back(g.call_function(F(kAdd), std::move(args), std::move(kw)));
    }
    g.output(Argument::tuple({N(values.back()), N(values[values.size() / 2])}));
    LastUses lu = last_uses(g);
    for (Node* v : g.nodes()) {
      Node* latest = nullptr;
      for (Node* u : v->users())
        if (!latest || u->order_key() > latest->order_key()) latest = u;
      ASSERT_EQ(lu.last_user(*v), latest) << v->name();
      std::vector<Node*> expect;
      for (Node* in : v->all_input_nodes())
        if (lu.last_user(*in) == v) expect.push_back(in);
      LastUses::Range r = lu.freed_after(*v);
      ASSERT_EQ(std::vector<Node*>(r.begin(), r.end()), expect) << v->name();
    }
  }
}

// Inputs owned by another graph (lint-invalid, as torch.fx allows building
// them): left out by default, listed once after their last use with
// include_foreign (codegen frees them by name, as torch.fx's code does).
TEST(LastUses, ForeignInputsOnlyWhenAsked) {
  Graph other;
  Node* y = other.placeholder("y");
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kAdd), {N(x), N(y)});
  Node* b = g.call_function(F(kMul), {N(a), N(y)});
  g.output(N(b));
  LastUses plain = last_uses(g);
  EXPECT_EQ(names(plain.freed_after(*a)), Names{"x"});
  EXPECT_EQ(names(plain.freed_after(*b)), Names{"add"});
  LastUses with = last_uses(g, /*include_foreign=*/true);
  EXPECT_EQ(names(with.freed_after(*a)), Names{"x"});
  EXPECT_EQ(names(with.freed_after(*b)), (Names{"add", "y"}));
}
