// Note [Strings in generated code]: no string of a graph reaches the
// generated source as code unless it is a plain name. Placeholder targets and
// keyword argument names that are not are refused (std::invalid_argument
// naming the node); attribute names that are not are written as escaped
// string literals. torch.fx writes all of them verbatim (a deliberate
// divergence where that code does not compile or would run the text).
#include <gtest/gtest.h>

#include <stdexcept>

#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

// The error python_code raises, or "" when it generates code.
std::string refusal(const Graph& g) {
  try {
    python_code(g);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CodegenStrings, PlaceholderTargetMustBeAName) {
  for (const char* bad : {"x=__import__('os').system('touch MARKER')", "x, y", "a.b", "x\n", "1x", "class",
                          "*", "***x", "x:int"}) {
    Graph g;
    Node* x = g.placeholder(bad);
    g.output(N(x));
    std::string err = refusal(g);
    EXPECT_NE(err.find("cannot generate code for node '" + std::string(x->name()) + "'"), std::string::npos)
        << bad << ": " << err;
    EXPECT_NE(err.find("placeholder target"), std::string::npos) << err;
  }
  // What torch.fx generates for a name, *name and **name (with a default) stays.
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("*b");
  Node* c = g.placeholder("**c", {}, I(3));
  g.output(Argument::tuple({N(a), N(b), N(c)}));
  PythonCode pc = python_code(g);
  EXPECT_NE(pc.src.find("def forward(self, a, *b, **c = 3):"), std::string::npos) << pc.src;
}

TEST(CodegenStrings, KeywordNamesMustBeNames) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.call_function(F(kTorchAdd), {N(x)}, {{"a=__import__('os'),b", I(1)}});
  g.output(N(y));
  std::string err = refusal(g);
  EXPECT_NE(err.find("cannot generate code for node 'add'"), std::string::npos) << err;
  EXPECT_NE(err.find("keyword argument name"), std::string::npos) << err;
}

TEST(CodegenStrings, AttributeNamesAreEscapedLiterals) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.get_attr("a.b\"); __import__('os'); (\"\nc\\d");
  Node* k = g.get_attr("def.0.w");
  Node* m = g.call_method("q\"uote", {N(x)});
  Node* n = g.call_function(F(kGetattr), {N(x), S("class")});
  g.output(Argument::tuple({N(a), N(k), N(m), N(n)}));
  PythonCode pc = python_code(g);
  EXPECT_NE(pc.src.find(R"(getattr(self.a, "b\"); __import__('os'); (\"\nc\\d"))"), std::string::npos)
      << pc.src;
  EXPECT_NE(pc.src.find(R"(getattr(getattr(self, "def"), "0").w)"), std::string::npos) << pc.src;
  EXPECT_NE(pc.src.find(R"(getattr(x, "q\"uote")())"), std::string::npos) << pc.src;
  EXPECT_NE(pc.src.find(R"(getattr(x, 'class'))"), std::string::npos) << pc.src;
  // Nothing of the name is left outside a literal: one line per node.
  EXPECT_EQ(pc.src.find("\nc\\d"), std::string::npos) << pc.src;
  // Ordinary names are unchanged: torch.fx's text.
  EXPECT_EQ(format_target("self", "layer1.0.conv"), R"(getattr(self.layer1, "0").conv)");
  EXPECT_EQ(format_target("self", "a-b"), R"(getattr(self, "a-b"))");
}

TEST(CodegenStrings, RefusalComesAfterTorchFxsOwnErrors) {
  // torch.fx raises at a later node (an output without args); it wins.
  Graph g;
  g.placeholder("a.b");
  g.create_node(Op::Output, Target(std::string("output")), {});
  EXPECT_THROW(python_code(g), std::out_of_range);
}
