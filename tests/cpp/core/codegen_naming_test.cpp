// Note [Codegen naming fast path]: python_code must name exactly as the plain
// algorithm does (every node re-named in a fresh namespace shared with the
// globals). Each graph here is generated twice: as built (fast path: its
// names all came from the namespace) and after a no-op rename, which turns
// the fast path off. The two texts and globals tables must be equal.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

void expect_same_as_plain(Graph& g) {
  ASSERT_TRUE(g.names_from_namespace());
  PythonCode fast = python_code(g);
  Node* first = g.nodes().begin() == g.nodes().end() ? nullptr : *g.nodes().begin();
  ASSERT_NE(first, nullptr);
  first->set_name(std::string(first->name()));  // same name, but now "renamed"
  ASSERT_FALSE(g.names_from_namespace());
  PythonCode plain = python_code(g);
  EXPECT_EQ(fast.src, plain.src);
  ASSERT_EQ(fast.globals.size(), plain.globals.size());
  for (size_t i = 0; i < fast.globals.size(); ++i) {
    EXPECT_EQ(fast.globals[i].first, plain.globals[i].first);
    EXPECT_TRUE(fast.globals[i].second.is(plain.globals[i].second));
  }
}

const NamedNative kFoo{"foo", "m.foo", ""};        // global hint "m_foo"
const NamedNative kBar{"m_foo_3", "m_foo_3", ""};  // global hint "m_foo_3"

}  // namespace

TEST(CodegenNaming, NoGlobalsStaysFast) {
  Graph g;
  Node* prev = g.placeholder("x");
  for (int i = 0; i < 50; ++i) prev = g.call_function(F(i % 2 ? kAdd : kRelu), {N(prev), I(i)});
  g.output(N(prev));
  expect_same_as_plain(g);
}

TEST(CodegenNaming, GlobalTakesANodeNameFirst) {
  // The global is named before the node that owns "m_foo" is mentioned.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kFoo), {N(x)});
  Node* b = g.create_node(Op::CallFunction, Target(F(kRelu)), {N(a)}, {}, std::string("m_foo"));
  Node* c = g.create_node(Op::CallFunction, Target(F(kRelu)), {N(b)}, {}, std::string("m_foo_1"));
  g.output(N(c));
  PythonCode pc = python_code(g);
  // torch.fx: the global takes "m_foo"; the nodes then become m_foo_1, m_foo_2.
  EXPECT_NE(pc.src.find("foo = m_foo(x)"), std::string::npos) << pc.src;
  EXPECT_NE(pc.src.find("m_foo_1 = torch.relu(foo)"), std::string::npos) << pc.src;
  EXPECT_NE(pc.src.find("m_foo_2 = torch.relu(m_foo_1)"), std::string::npos) << pc.src;
  expect_same_as_plain(g);
}

TEST(CodegenNaming, GlobalsAfterManyNodes) {
  // Suffix searches on both sides of the switch from fast to plain naming.
  Graph g;
  Node* prev = g.placeholder("x");
  for (int i = 0; i < 6; ++i)
    prev = g.create_node(Op::CallFunction, Target(F(kRelu)), {N(prev)}, {}, std::string("m_foo"));
  prev = g.call_function(F(kFoo), {N(prev)});
  prev = g.call_function(F(kBar), {N(prev)});
  prev = g.call_function(F(kFoo), {N(prev)});
  g.output(N(prev));
  expect_same_as_plain(g);
}

TEST(CodegenNaming, KeywordsBuiltinsAndCustomBuiltins) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("len", {N(x)});     // "len_1": builtins are avoided
  Node* b = g.call_method("torch", {N(a)});   // "torch_1": a custom builtin
  Node* c = g.call_method("class", {N(b)});   // "class_1": a keyword
  Node* d = g.call_function(F(kLen), {N(c)});  // the global "len" is the builtin itself
  g.output(N(d));
  expect_same_as_plain(g);
  EXPECT_NE(python_code(g).src.find("len_2 = len(class_1)"), std::string::npos) << python_code(g).src;
}

TEST(CodegenNaming, ErasedAndReinsertedNodes) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kFoo), {N(x)});
  Node* b = g.call_function(F(kAdd), {N(a), I(1)});
  Node* c = g.call_function(F(kAdd), {N(b), I(2)});
  g.output(N(c));
  c->replace_all_uses_with(b);
  g.erase_node(c);  // "add_1" stays taken in the graph namespace
  {
    auto guard = g.inserting_before(b);
    Node* n = g.call_function(F(kFoo), {N(a)});
    b->replace_input_with(a, N(n));
  }
  expect_same_as_plain(g);
}
