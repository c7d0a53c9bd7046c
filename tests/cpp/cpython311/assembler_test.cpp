// Note [Direct bytecode]: the CPython 3.11 backend must produce exactly the
// code object CPython 3.11's compile() produces.  The expectations in
// golden/bytecode.txt were recorded from compile() by
// golden/make_bytecode_golden.py.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "../core/test_util.h"
#include "cpython311/assembler.h"

using namespace fxcpp;
using namespace fxcpp::cpython311;
using namespace fxcpp::testing;

namespace {

std::string golden_file(const std::string& name) {
  std::ifstream in(std::string(FXCPP_CPYTHON311_GOLDEN_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
std::string const_text(const Constant& c) {
  using K = Constant::Kind;
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
  std::istringstream in(golden_file("bytecode.txt"));
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
    Refusal r = assemble_function(c.src, f, &why);
    ASSERT_EQ(r, Refusal::kNone) << c.name << ": " << refusal_name(r) << ": " << why;
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

// The entry codes of a 3.11 location table (Objects/locations.md): the first
// byte of an entry has its top bit set and the code in bits 3-6.
std::set<int> location_codes(const std::string& table) {
  std::set<int> codes;
  for (unsigned char b : table)
    if (b & 0x80) codes.insert((b >> 3) & 15);
  return codes;
}

TEST(Bytecode, GoldenCasesCoverEveryLocationForm) {
  // short forms 0-9, one-line forms 10-12 and the long form 14 are all
  // checked against compile() by the accepted cases (13, no column, and 15,
  // no location, are never emitted for this subset).
  std::set<int> seen;
  for (const Case& c : load_cases()) {
    if (c.kind != "accept") continue;
    AssembledFunction f;
    ASSERT_EQ(assemble_function(c.src, f), Refusal::kNone) << c.name;
    for (int code : location_codes(f.linetable)) seen.insert(code);
  }
  for (int code = 0; code <= 12; ++code) EXPECT_TRUE(seen.count(code)) << code;
  EXPECT_TRUE(seen.count(14));
  EXPECT_FALSE(seen.count(13));
  EXPECT_FALSE(seen.count(15));
}

TEST(Bytecode, RefusesWhatCompileMustHandle) {
  int refused = 0;
  for (const Case& c : load_cases()) {
    if (c.kind != "refuse") continue;
    AssembledFunction f;
    std::string why;
    Refusal r = assemble_function(c.src, f, &why);
    ASSERT_EQ(c.want.size(), 1u) << c.name;
    EXPECT_EQ(refusal_name(r), c.want[0].second) << c.name << ": " << why;
    EXPECT_FALSE(why.empty()) << c.name;
    ++refused;
  }
  EXPECT_GE(refused, 15);
}

TEST(Bytecode, RefusalNamesAreDistinct) {
  std::set<std::string> names;
  for (int i = 0; i < kRefusalCount; ++i) {
    std::string n = refusal_name(static_cast<Refusal>(i));
    EXPECT_NE(n, "unknown") << i;
    EXPECT_TRUE(names.insert(n).second) << n;
  }
  EXPECT_STREQ(refusal_name(Refusal::kNone), "none");
}

TEST(Bytecode, HeaderTextsAndPrologue) {
  AssembledFunction f;
  std::string why;
  const char* src =
      "\nwrap(\"len\")\n\ndef forward(self, x : torch.Tensor, y = (1, 2)) -> torch.Tensor:\n    return len(x)\n";
  ASSERT_EQ(assemble_function(src, f, &why), Refusal::kNone) << why;
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
  ASSERT_EQ(assemble_function(code.src, f, &why), Refusal::kNone) << why << "\n" << code.src;
  EXPECT_EQ(f.params.size(), 2u);
  EXPECT_EQ(f.varnames.size(), 2u + 200u);
  EXPECT_EQ(f.code.substr(0, 2), std::string("\x97\x00", 2));  // RESUME 0
  EXPECT_EQ(static_cast<unsigned char>(f.code[f.code.size() - 2]), 83u);  // RETURN_VALUE
}

TEST(Bytecode, RefusalLeavesNoPartialPromise) {
  AssembledFunction f;
  std::string why;
  EXPECT_EQ(assemble_function("", f, &why), Refusal::kNoFunction);
  EXPECT_EQ(why, "no def");
  EXPECT_EQ(assemble_function("def f(:\n    return 1\n", f, &why), Refusal::kSyntax);
  EXPECT_EQ(assemble_function("def f(a):\n    return 'unterminated\n", f, &why), Refusal::kLiteral);
  EXPECT_EQ(assemble_function("def f(a):\n    return a(\n", f, &why), Refusal::kSyntax);
  EXPECT_EQ(assemble_function("def f(a):\n\treturn a\n", f, &why), Refusal::kWhitespace);
  EXPECT_EQ(assemble_function("def f(a, a):\n    return a\n", f, &why), Refusal::kBadParameters);
  EXPECT_EQ(why, "duplicate parameter");
  EXPECT_EQ(assemble_function("def f(a):\n    return a\n", f, nullptr), Refusal::kNone);
}
