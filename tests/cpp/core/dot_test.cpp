// DOT export (Note [DOT export]): exact text for a small graph, escaping, and a
// structural validity check with a tiny DOT-subset parser.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fxcpp/core/dot.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

// A minimal parser for the DOT subset to_dot() emits:
//   digraph ID { stmt* }   stmt := ID attrs? ';' | ID '->' ID attrs? ';' | (graph|node|edge) attrs ';'
// IDs are quoted strings or bare identifiers. Collects node ids and edges and
// checks record labels for balanced braces. Fails the test on any syntax error.
struct MiniDot {
  std::set<std::string> nodes;
  std::vector<std::pair<std::string, std::string>> edges;
  std::map<std::string, std::map<std::string, std::string>> attrs;
  std::string name;

  explicit MiniDot(const std::string& text) : s_(text) { parse(); }

 private:
  const std::string& s_;
  size_t i_ = 0;

  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(const std::string& tok) {
    ws();
    if (s_.compare(i_, tok.size(), tok) == 0) {
      i_ += tok.size();
      return true;
    }
    return false;
  }
  void expect(const std::string& tok) {
    if (!eat(tok)) throw std::runtime_error("expected '" + tok + "' at offset " + std::to_string(i_));
  }
  std::string id() {
    ws();
    if (i_ >= s_.size()) throw std::runtime_error("unexpected end");
    std::string out;
    if (s_[i_] == '"') {
      ++i_;
      while (true) {
        if (i_ >= s_.size()) throw std::runtime_error("unterminated string");
        char c = s_[i_++];
        if (c == '"') break;
        if (c == '\\' && i_ < s_.size()) {
          out += c;
          out += s_[i_++];
          continue;
        }
        if (c == '\n') throw std::runtime_error("raw newline in string");
        out += c;
      }
      return out;
    }
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '#'))
      out += s_[i_++];
    if (out.empty()) throw std::runtime_error("expected an ID at offset " + std::to_string(i_));
    return out;
  }
  std::map<std::string, std::string> attr_list() {
    std::map<std::string, std::string> a;
    if (!eat("[")) return a;
    while (!eat("]")) {
      std::string k = id();
      expect("=");
      a[k] = id();
      eat(",");
    }
    return a;
  }
  static void check_record(const std::string& label) {
    int depth = 0;
    for (size_t k = 0; k < label.size(); ++k) {
      if (label[k] == '\\') {
        ++k;
        continue;
      }
      if (label[k] == '{') ++depth;
      if (label[k] == '}' && --depth < 0) throw std::runtime_error("unbalanced record label: " + label);
    }
    if (depth != 0) throw std::runtime_error("unbalanced record label: " + label);
  }
  void parse() {
    expect("digraph");
    name = id();
    expect("{");
    while (!eat("}")) {
      std::string a = id();
      if (a == "graph" || a == "node" || a == "edge") {
        attr_list();
      } else if (eat("->")) {
        std::string b = id();
        attr_list();
        edges.emplace_back(a, b);
      } else {
        auto at = attr_list();
        if (!nodes.insert(a).second) throw std::runtime_error("duplicate node " + a);
        if (at.count("label")) check_record(at["label"]);
        attrs[a] = at;
      }
      expect(";");
    }
    ws();
    if (i_ != s_.size()) throw std::runtime_error("trailing text");
    for (auto& e : edges)
      if (!nodes.count(e.first) || !nodes.count(e.second)) throw std::runtime_error("edge to undeclared node");
  }
};

}  // namespace

TEST(Dot, SmallGraphExactText) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(native_object(&kAdd), {N(x), I(1)});
  Node* r = g.call_method("relu", {N(a)}, {{"inplace", Argument::boolean(false)}});
  g.output(N(r));
  DotOptions o;
  o.graph_name = "small";
  std::string text = to_dot(g, o);
  MiniDot d(text);
  // call_function / call_method colours come from a stable hash of the target.
  const std::set<std::string> palette = {"CadetBlue1", "Coral", "DarkOliveGreen1", "DarkSeaGreen1", "GhostWhite",
                                         "Khaki1", "LavenderBlush1", "LightSkyBlue", "MistyRose1", "MistyRose2",
                                         "PaleTurquoise2", "PeachPuff1", "Salmon", "Thistle1", "Thistle3", "Wheat1"};
  const std::string add_color = d.attrs["add"]["fillcolor"], relu_color = d.attrs["relu"]["fillcolor"];
  EXPECT_EQ(palette.count(add_color), 1u);
  EXPECT_EQ(palette.count(relu_color), 1u);
  EXPECT_EQ(text, to_dot(g, o));  // deterministic
  EXPECT_EQ(text,
            "digraph \"small\" {\n"
            "  graph [rankdir=\"TB\"];\n"
            "  node [shape=record, style=\"filled,rounded\", fontcolor=\"#000000\", fontname=\"Helvetica\"];\n"
            "  \"x\" [label=\"{name=%x|op_code=placeholder\\l|target=x\\l|num_users=1\\l}\", fillcolor=\"AliceBlue\"];\n"
            "  \"add\" [label=\"{name=%add|op_code=call_function\\l|target=operator.add\\l|args=(\\l1,\\l)\\l"
            "|num_users=1\\l}\", fillcolor=\"" + add_color +
                "\"];\n"
                "  \"relu\" [label=\"{name=%relu|op_code=call_method\\l|target=relu\\l|kwargs=\\{\\linplace: "
                "False,\\l\\}\\l|num_users=1\\l}\", fillcolor=\"" + relu_color +
                "\"];\n"
                "  \"output\" [label=\"{name=%output|op_code=output\\l|target=output\\l|num_users=0\\l}\", "
                "fillcolor=\"PowderBlue\"];\n"
                "  \"x\" -> \"add\";\n"
                "  \"add\" -> \"relu\";\n"
                "  \"relu\" -> \"output\";\n"
                "}\n");
}

TEST(Dot, EdgesFollowUsersOncePerPair) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(native_object(&kAdd), {N(x), N(x)});  // x used twice by one node: one edge
  Node* m = g.call_function(native_object(&kMul), {N(a), N(y)});
  Node* c = g.call_function(native_object(&kCat), {Argument::list({N(a), N(m), N(x)})});
  g.output(Argument::tuple({N(c), N(a)}));
  MiniDot d(to_dot(g));
  EXPECT_EQ(d.nodes.size(), 6u);
  std::vector<std::pair<std::string, std::string>> want = {{"x", "add"}, {"x", "cat"},   {"y", "mul"},
                                                           {"add", "mul"}, {"add", "cat"}, {"add", "output"},
                                                           {"mul", "cat"}, {"cat", "output"}};
  EXPECT_EQ(d.edges, want);
}

TEST(Dot, EscapesHostileNamesAndTargets) {
  Graph g;
  Node* p = g.placeholder("p");
  Node* weird = g.call_method("we{ir}d|<m> \"q\" \\", {N(p), S("a{b}|c<d>\"e\\")});
  weird->set_name("n\"{|}\\");
  Node* attr = g.get_attr("sub.0.weight");
  Node* s = g.call_function(native_object(&kAdd), {N(weird), N(attr)});
  g.output(N(s));
  DotOptions o;
  o.graph_name = "name with \"quotes\" and \\";
  o.extra_fields = [](const Node& n) {
    return n.op() == Op::GetAttr ? std::vector<std::string>{"type={Tensor}|<x>"} : std::vector<std::string>{};
  };
  std::string text = to_dot(g, o);
  MiniDot d(text);
  EXPECT_EQ(d.name, "name with \\\"quotes\\\" and \\\\");
  EXPECT_EQ(d.nodes.count("n\\\"{|}\\\\"), 1u);
  EXPECT_NE(text.find("target=we\\{ir\\}d\\|\\<m\\> \\\"q\\\" \\\\\\l"), std::string::npos) << text;
  EXPECT_NE(text.find("|type=\\{Tensor\\}\\|\\<x\\>\\l"), std::string::npos) << text;
  EXPECT_NE(text.find("fillcolor=\"LightGrey\""), std::string::npos);
}

TEST(Dot, ArgsOptionsAndClipping) {
  Graph g;
  Node* x = g.placeholder("x");
  std::string long_str(200, 'z');
  Node* n = g.call_method("foo", {N(x), S(long_str), I(7)}, {{"k", N(x)}, {"dim", I(-1)}});
  g.output(N(n));
  DotOptions o;
  o.max_arg_chars = 10;
  std::string text = to_dot(g, o);
  EXPECT_NE(text.find("|args=(\\lzzzzzzz...,\\l7,\\l)\\l|kwargs=\\{\\ldim: -1,\\l\\}\\l"), std::string::npos) << text;
  o.show_args = false;
  text = to_dot(g, o);
  EXPECT_EQ(text.find("args="), std::string::npos);
  MiniDot d(text);
  EXPECT_EQ(d.edges.size(), 2u);
}

TEST(Dot, SkipsErasedNodesAndHandlesEmptyGraph) {
  Graph empty;
  MiniDot e(to_dot(empty));
  EXPECT_TRUE(e.nodes.empty());

  Graph g;
  Node* x = g.placeholder("x");
  Node* dead = g.call_function(native_object(&kNeg), {N(x)});
  Node* r = g.call_function(native_object(&kRelu), {N(x)});
  g.output(N(r));
  g.erase_node(dead);
  MiniDot d(to_dot(g));
  EXPECT_EQ(d.nodes, (std::set<std::string>{"x", "relu", "output"}));
  EXPECT_EQ(d.edges.size(), 2u);
}

TEST(Dot, LargeGraphIsLinear) {
  Graph g;
  Node* cur = g.placeholder("x");
  for (int i = 0; i < 20000; ++i) cur = g.call_function(native_object(&kAdd), {N(cur), I(i)});
  g.output(N(cur));
  MiniDot d(to_dot(g));
  EXPECT_EQ(d.nodes.size(), 20002u);
  EXPECT_EQ(d.edges.size(), 20001u);
}
