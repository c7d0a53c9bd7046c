#include <gtest/gtest.h>

#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

TEST(Graph, BuildAndPrint) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y", {}, I(3));
  Node* a = g.call_function(native_object(&kAdd), {N(x), N(y)});
  Node* r = g.call_method("relu", {N(a)});
  Node* s = g.call_method("sum", {N(r)}, {{"dim", I(-1)}, {"keepdim", Argument::boolean(true)}});
  g.output(N(s));
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %y : [#users=1] = placeholder[target=y](default=3)\n"
            "    %add : [#users=1] = call_function[target=operator.add](args = (%x, %y), kwargs = {})\n"
            "    %relu : [#users=1] = call_method[target=relu](args = (%add,), kwargs = {})\n"
            "    %sum_1 : [#users=1] = call_method[target=sum](args = (%relu,), kwargs = {dim: -1, keepdim: True})\n"
            "    return sum_1");
  EXPECT_EQ(g.size(), 6u);
}

TEST(Graph, EraseWithUsersFails) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(native_object(&kNeg), {N(x)});
  g.output(N(a));
  try {
    g.erase_node(a);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "Tried to erase Node neg but it still had 1 users in the graph: {output: None}!");
  }
}
