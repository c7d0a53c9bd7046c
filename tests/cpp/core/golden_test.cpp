// Golden text: printing and codegen must equal torch.fx's output for the
// equivalent graphs built in tests/cpp/core/golden/make_golden.py, in each
// dialect (Note [Dialect]): torch.fx 1.13.1's text in golden/, 2.14.1's in
// golden/fx2/. Each test builds its graph once per dialect, with it in force.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fxcpp/core/dialect.h"
#include "fxcpp/passes/dce.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

// The golden file of the dialect in force.
std::string dialect_golden(const std::string& file) {
  return golden(dialect() == Dialect::fx_2 ? "fx2/" + file : file);
}

void expect_golden(const Graph& g, const std::string& name) {
  EXPECT_EQ(g.to_string(), dialect_golden(name + ".graph.txt")) << name;
  EXPECT_EQ(python_code(g).src, dialect_golden(name + ".code.txt")) << name;
}

// Runs `check` once with each dialect in force.
template <class F>
void for_each_dialect(F&& check) {
  for (Dialect d : {Dialect::fx_1_13, Dialect::fx_2}) {
    ScopedDialect in_force(d);
    SCOPED_TRACE(std::string("torch.fx ") + dialect_name(d));
    check();
  }
}

}  // namespace

TEST(Golden, Basic) {
  for_each_dialect([&] {
    Graph g;
    Node* x = g.placeholder("x");
    Node* y = g.placeholder("y", {}, I(3));
    Node* p = g.get_attr("layer1.0.weight");
    Node* a = g.call_function(F(kAdd), {N(x), N(p)});
    Node* r = g.call_method("relu", {N(a)});
    Node* s = g.call_method("sum", {N(r)}, {{"dim", I(-1)}, {"keepdim", Argument::boolean(true)}});
    Node* c = g.call_function(F(kCat), {Argument::list({N(a), N(s), N(x)})}, {{"dim", I(0)}});
    Object ellipsis;  // Ellipsis is a foreign value in Python; use a native stand-in
    static const NamedNative kEllipsis{"Ellipsis", "Ellipsis", ""};
    Node* gi = g.call_function(
        F(kGetitem), {N(c), Argument::tuple({Argument::foreign(F(kEllipsis)), Argument::slice({}, I(4), {})})});
    Node* m = g.call_module("layer1.0.conv", {N(gi)});
    Node* mu = g.call_function(F(kMul), {N(m), D(2.5)});
    Node* e = g.call_function(F(kTorchAdd), {N(mu), D(1e-05)}, {{"alpha", I(2)}});
    Node* n = g.call_function(F(kNeg), {N(e)});
    Node* sh = g.call_function(F(kGetattr), {N(x), S("shape")});
    Node* s0 = g.call_function(F(kGetitem), {N(sh), I(0)});
    g.output(Argument::dict({{S("out"), Argument::tuple({N(e), N(n)})},
                             {S("l"), Argument::list({N(s0), Argument(), Argument::slice(I(1), I(2), {})})},
                             {S("y"), N(y)},
                             {S("s"), S("it's")}}));
    // The native Ellipsis stand-in prints through its repr; patch the golden.
    std::string code = python_code(g).src;
    std::string want = dialect_golden("basic.code.txt");
    auto fix = [](std::string t) {
      const std::string from = "<native function Ellipsis>";
      for (size_t p; (p = t.find(from)) != std::string::npos;) t.replace(p, from.size(), "Ellipsis");
      return t;
    };
    EXPECT_EQ(fix(code), want);
    EXPECT_EQ(fix(g.to_string()), dialect_golden("basic.graph.txt"));
  });
}

TEST(Golden, Names) {
  for_each_dialect([&] {
    Graph g;
    Node* x = g.placeholder("x");
    Node* prev = x;
    for (int i = 0; i < 5; ++i) prev = g.call_function(F(kAdd), {N(prev), I(i)});
    Node* kw = g.create_node(Op::CallFunction, F(kMul), {N(x), I(2)}, {}, std::string("for"));
    Node* bi = g.create_node(Op::CallFunction, F(kMul), {N(x), I(3)}, {}, std::string("list"));
    Node* sn = g.call_function(F(kMyFunction), {N(x), N(kw)});
    Node* mg = g.call_method("__add__", {N(sn), N(bi)});
    Node* dt = g.call_module("seq.1", {N(mg)});
    Node* a3 = g.create_node(Op::CallFunction, F(kAdd), {N(dt), I(1)}, {}, std::string("add_3"));
    Node* a3b = g.create_node(Op::CallFunction, F(kAdd), {N(a3), I(1)}, {}, std::string("add_3"));
    Node* nl = g.create_node(Op::CallFunction, F(kAdd), {N(a3b), I(1)}, {}, std::string("9lives"));
    Node* ab = g.create_node(Op::CallFunction, F(kAdd), {N(nl), I(1)}, {}, std::string("a.b-c"));
    Node* tc = g.create_node(Op::CallFunction, F(kAdd), {N(ab), I(1)}, {}, std::string("torch"));
    Node* ln = g.call_function(F(kLen), {N(tc)});
    g.output(Argument::tuple({N(prev), N(ln)}));
    expect_golden(g, "names");
  });
}

TEST(Golden, InplaceAndSetitem) {
  for_each_dialect([&] {
    Graph g;
    Node* x = g.placeholder("x");
    Node* c = g.call_method("clone", {N(x)});
    g.call_function(F(kSetitem), {N(c), I(0), D(5.0)});
    Node* i = g.call_function(F(kIadd), {N(c), I(1)});
    Node* pw = g.call_function(F(kPow), {N(i), I(2)});
    Node* inv = g.call_function(F(kInvert), {N(pw)});
    Node* ga = g.call_function(F(kGetattr), {N(x), S("dtype"), Argument()});
    g.output(Argument::list({N(inv), N(ga)}));
    expect_golden(g, "inplace");
  });
}

TEST(Golden, EditsThenDce) {
  for_each_dialect([&] {
    Graph g;
    Node* x = g.placeholder("x");
    Node* y = g.placeholder("y");
    Node* a = g.call_function(F(kAdd), {N(x), N(y)});
    Node* b = g.call_function(F(kMul), {N(a), N(x)});
    Node* c = g.call_function(F(kSub), {N(b), N(a)});
    g.call_function(F(kRelu), {N(c)});
    g.output(N(c));
    Node *t1, *t2;
    {
      InsertGuard at = g.inserting_after(a);
      t1 = g.call_function(F(kTanh), {N(a)});
      t2 = g.call_function(F(kSigmoid), {N(a)});
    }
    a->replace_all_uses_with(t1, [&](Node* u) { return u != t1 && u != t2; });
    c->update_arg(1, N(t2));
    EXPECT_TRUE(eliminate_dead_code(g));
    expect_golden(g, "edits");
  });
}

TEST(Golden, EmptyBodyIsPass) {
  for_each_dialect([&] {
    Graph g;
    g.placeholder("x");
    expect_golden(g, "empty");
  });
}

TEST(Golden, FloatRepr) {
  std::ifstream in(std::string(FXCPP_GOLDEN_DIR) + "/floats.txt");
  std::string hex, want;
  int count = 0;
  while (in >> hex >> want) {
    double d = std::strtod(hex.c_str(), nullptr);
    if (hex == "nan") d = std::nan("");
    if (hex == "inf") d = HUGE_VAL;
    if (hex == "-inf") d = -HUGE_VAL;
    EXPECT_EQ(py_repr_double(d), want) << hex;
    ++count;
  }
  EXPECT_GE(count, 15);
}

TEST(Golden, StringRepr) {
  std::ifstream in(std::string(FXCPP_GOLDEN_DIR) + "/strings.txt");
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    std::string escaped = line.substr(0, tab), want = line.substr(tab + 1);
    // unicode_escape -> raw bytes (ASCII escapes plus \xNN / \\ / \n / \t / \uNNNN)
    std::string raw;
    for (size_t i = 0; i < escaped.size(); ++i) {
      if (escaped[i] != '\\') {
        raw.push_back(escaped[i]);
        continue;
      }
      char k = escaped[++i];
      if (k == 'n') raw.push_back('\n');
      else if (k == 't') raw.push_back('\t');
      else if (k == '\\') raw.push_back('\\');
      else if (k == '\'') raw.push_back('\'');
      else if (k == 'x') {
        int v = std::stoi(escaped.substr(i + 1, 2), nullptr, 16);
        i += 2;
        if (v < 0x80) raw.push_back(static_cast<char>(v));
        else { raw.push_back(static_cast<char>(0xC0 | (v >> 6))); raw.push_back(static_cast<char>(0x80 | (v & 0x3F))); }
      }
    }
    EXPECT_EQ(py_repr_string(raw), want) << escaped;
    ++count;
  }
  EXPECT_GE(count, 8);
}

// Note [Codegen naming fast path]: a global whose name a node already has.
// The fast path must notice (veto), fall back, and print what torch.fx does.
TEST(Golden, GlobalClashesWithNodeName) {
  for_each_dialect([&] {
    static const NamedNative kFoo{"foo", "m.foo", ""};
    auto build = [] {
      auto g = std::make_unique<Graph>();
      Node* x = g->placeholder("x");
      Node* a = g->create_node(Op::CallFunction, Target(F(kRelu)), {N(x)}, {}, std::string("m_foo"));
      Node* b = g->call_function(F(kFoo), {N(a)});
      Node* c = g->create_node(Op::CallFunction, Target(F(kRelu)), {N(b)}, {}, std::string("m_foo_1"));
      Node* d = g->call_function(F(kLen), {N(c)});
      g->output(N(d));
      return g;
    };
    auto g = build();
    ASSERT_TRUE(g->names_from_namespace());
    expect_golden(*g, "global_clash");
    // torch.fx (both): globals {'m_foo_1': foo, 'len': len}.
    PythonCode pc = python_code(*g);
    ASSERT_EQ(pc.globals.size(), 2u);
    EXPECT_EQ(pc.globals[0].first, "m_foo_1");
    EXPECT_TRUE(pc.globals[0].second.is(F(kFoo)));
    EXPECT_EQ(pc.globals[1].first, "len");
  });
}
