// Note [Direct bytecode]: the assembler must produce exactly the code object
// CPython 3.11's compile() produces.  The expectations in golden/bytecode.txt
// were recorded from compile() by golden/make_bytecode_golden.py.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "fxcpp/core/bytecode.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The golden script's constant notation.
std::string const_text(const BytecodeConstant& c) {
  using K = BytecodeConstant::Kind;
  switch (c.kind) {
    case K::None: return "None";
    case K::Ellipsis: return "...";
    case K::Bool: return c.boolean ? "True" : "False";
    case K::Int: return "i" + std::to_string(c.integer);
    case K::Float: {
      std::string bits(sizeof(double), '\0');
      std::memcpy(&bits[0], &c.floating, sizeof(double));
      return "f" + hex(bits);
    }
    case K::Str: return "s" + hex(c.text);
    case K::Tuple: {
      std::string s = "(";
      for (size_t i = 0; i < c.items.size(); ++i) s += (i ? "," : "") + const_text(c.items[i]);
      return s + ")";
    }
  }
  return "?";
}

template <class T, class F>
std::string joined(const std::vector<T>& v, F f) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + f(v[i]);
  return s;
}

struct Case {
  std::string kind, name, src;
  std::vector<std::pair<std::string, std::string>> want;  // key, value
};

std::vector<Case> load_cases() {
  std::istringstream in(golden("bytecode.txt"));
  std::vector<Case> cases;
  std::string line;
  Case* cur = nullptr;
  bool in_src = false;
  while (std::getline(in, line)) {
    if (line.rfind("@@ ", 0) == 0) {
      std::istringstream words(line.substr(3));
      std::string tag;
      words >> tag;
      if (tag == "accept" || tag == "refuse") {
        cases.push_back(Case{tag, "", "", {}});
        cur = &cases.back();
        words >> cur->name;
        in_src = true;
      } else if (tag == "want") {
        in_src = false;
      } else if (tag == "reason") {
        in_src = false;
        cur->want.emplace_back("reason", line.substr(std::strlen("@@ reason ")));
      } else {
        in_src = false;  // end
      }
      if (cur && !in_src && !cur->src.empty() && cur->src.back() == '\n') cur->src.pop_back();
      continue;
    }
    if (!cur) continue;
    if (in_src) {
      cur->src += line + "\n";
    } else {
      size_t sp = line.find(' ');
      cur->want.emplace_back(line.substr(0, sp), sp == std::string::npos ? "" : line.substr(sp + 1));
    }
  }
  return cases;
}

}  // namespace

TEST(Bytecode, GoldenFileIsThere) {
  auto cases = load_cases();
  EXPECT_GE(cases.size(), 40u);
}

TEST(Bytecode, MatchesCompileForEveryAcceptedCase) {
  for (const Case& c : load_cases()) {
    if (c.kind != "accept") continue;
    AssembledFunction f;
    std::string why;
    ASSERT_TRUE(assemble_py311_function(c.src, f, &why)) << c.name << ": " << why;
    for (const auto& [key, value] : c.want) {
      std::string got;
      if (key == "code") got = hex(f.code);
      else if (key == "linetable") got = hex(f.linetable);
      else if (key == "consts") got = joined(f.consts, const_text);
      else if (key == "names") got = joined(f.names, [](const std::string& s) { return s; });
      else if (key == "varnames") got = joined(f.varnames, [](const std::string& s) { return s; });
      else if (key == "stacksize") got = std::to_string(f.stacksize);
      else if (key == "first_line") got = std::to_string(f.first_line);
      else if (key == "argcount") got = std::to_string(f.params.size());
      else continue;
      EXPECT_EQ(got, value) << c.name << " " << key;
    }
  }
}

TEST(Bytecode, RefusesWhatCompileMustHandle) {
  int refused = 0;
  for (const Case& c : load_cases()) {
    if (c.kind != "refuse") continue;
    AssembledFunction f;
    std::string why;
    EXPECT_FALSE(assemble_py311_function(c.src, f, &why)) << c.name;
    ASSERT_EQ(c.want.size(), 1u) << c.name;
    EXPECT_NE(why.find(c.want[0].second), std::string::npos) << c.name << ": " << why;
    ++refused;
  }
  EXPECT_GE(refused, 15);
}

TEST(Bytecode, HeaderTextsAndPrologue) {
  AssembledFunction f;
  std::string why;
  const char* src =
      "\nwrap(\"len\")\n\ndef forward(self, x : torch.Tensor, y = (1, 2)) -> torch.Tensor:\n    return len(x)\n";
  ASSERT_TRUE(assemble_py311_function(src, f, &why)) << why;
  EXPECT_EQ(f.prologue, "\nwrap(\"len\")\n\n");
  EXPECT_EQ(f.name, "forward");
  EXPECT_EQ(f.first_line, 4);
  ASSERT_EQ(f.params.size(), 3u);
  EXPECT_EQ(f.params[1].name, "x");
  EXPECT_EQ(f.params[1].annotation, "torch.Tensor");
  EXPECT_EQ(f.params[1].default_value, "");
  EXPECT_EQ(f.params[2].default_value, "(1, 2)");
  EXPECT_EQ(f.return_annotation, "torch.Tensor");
}

TEST(Bytecode, AcceptsWhatCodegenWrites) {
  // The native codegen's output for a chain with frees, method calls, infix
  // operators and a tuple return is inside the subset.
  Graph g;
  Node* x = g.placeholder("x");
  Node* cur = x;
  for (int i = 0; i < 50; ++i) {
    Node* a = g.call_function(F(kAdd), {N(cur), I(i)});
    Node* m = g.call_method("relu", {N(a)}, {{"inplace", Argument::boolean(false)}});
    Node* t = g.call_function(F(kTorchAdd), {N(m), N(x)}, {{"alpha", D(0.5)}});
    cur = g.call_function(F(kNeg), {N(t)});
  }
  g.output(Argument::tuple({N(cur), N(x)}));
  PythonCode code = python_code(g);
  AssembledFunction f;
  std::string why;
  ASSERT_TRUE(assemble_py311_function(code.src, f, &why)) << why << "\n" << code.src;
  EXPECT_EQ(f.params.size(), 2u);
  EXPECT_EQ(f.varnames.size(), 2u + 200u);
  EXPECT_EQ(f.code.substr(0, 2), std::string("\x97\x00", 2));  // RESUME 0
  EXPECT_EQ(static_cast<unsigned char>(f.code[f.code.size() - 2]), 83u);  // RETURN_VALUE
}

TEST(Bytecode, RefusalLeavesNoPartialPromise) {
  AssembledFunction f;
  std::string why;
  EXPECT_FALSE(assemble_py311_function("", f, &why));
  EXPECT_EQ(why, "no def");
  EXPECT_FALSE(assemble_py311_function("def f(:\n    return 1\n", f, &why));
  EXPECT_FALSE(assemble_py311_function("def f(a):\n    return 'unterminated\n", f, &why));
  EXPECT_FALSE(assemble_py311_function("def f(a):\n    return a(\n", f, &why));
  EXPECT_FALSE(assemble_py311_function("def f(a):\n\treturn a\n", f, &why));
  EXPECT_FALSE(assemble_py311_function("def f(a, a):\n    return a\n", f, &why));
  EXPECT_EQ(why, "duplicate parameter");
}
