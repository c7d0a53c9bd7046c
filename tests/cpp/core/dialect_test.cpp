// Note [Dialect]: what changes with the torch.fx release fxcpp follows.
// The expected texts are torch.fx 2.14.1's, recorded by running it on the
// same graphs and names (golden/fx2/ holds the larger cases).
#include <gtest/gtest.h>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/dialect.h"
#include "fxcpp/core/namespace.h"
#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

// The core tests other than these and the golden ones were written against
// torch.fx 1.13.1's text: they run with Dialect::fx_1_13 in force, whatever
// the library's default is. (A global environment registered at static
// initialization, before gtest_main runs the tests.)
class PinTorchFx113 : public ::testing::Environment {
 public:
  void SetUp() override { set_dialect(Dialect::fx_1_13); }
};
const auto* const kPin = ::testing::AddGlobalTestEnvironment(new PinTorchFx113);

std::vector<std::string> create_all(const std::vector<std::string>& candidates) {
  Namespace ns;
  std::vector<std::string> out;
  for (auto& c : candidates) out.push_back(ns.create_name(c, nullptr).str());
  return out;
}

}  // namespace

TEST(Dialect, DefaultIsTorchFx2) {
  // The environment above pinned 1.13; the library's own default is fx_2.
  EXPECT_EQ(dialect(), Dialect::fx_1_13);
  EXPECT_STREQ(dialect_name(Dialect::fx_2), "2");
  {
    ScopedDialect d(Dialect::fx_2);
    EXPECT_EQ(dialect(), Dialect::fx_2);
  }
  EXPECT_EQ(dialect(), Dialect::fx_1_13);
}

TEST(Dialect, Fx2PerBaseCounters) {
  ScopedDialect d(Dialect::fx_2);
  using V = std::vector<std::string>;
  EXPECT_EQ(create_all({"add", "add", "add_1", "add"}), (V{"add", "add_1", "add_2", "add_3"}));
  EXPECT_EQ(create_all({"add_01", "add_01", "add"}), (V{"add_01", "add_2", "add"}));
  EXPECT_EQ(create_all({"x_2", "x", "x", "x", "x"}), (V{"x_2", "x", "x_3", "x_4", "x_5"}));
  EXPECT_EQ(create_all({"x_5", "x_1", "x_1", "x", "x"}), (V{"x_5", "x_1", "x_2", "x", "x_3"}));
  EXPECT_EQ(create_all({"x_1", "x_5", "x", "x_1"}), (V{"x_1", "x_5", "x", "x_6"}));
  EXPECT_EQ(create_all({"", "", "_unnamed", "__"}), (V{"_unnamed", "_unnamed_1", "_unnamed_2", "__"}));
  EXPECT_EQ(create_all({"9", "9", "_9_1"}), (V{"_9", "_9_1", "_9_2"}));
  EXPECT_EQ(create_all({"_1", "_1", "_"}), (V{"_1", "_1_1", "_"}));
  EXPECT_EQ(create_all({"_", "_", "__"}), (V{"_", "__1", "__"}));
  EXPECT_EQ(create_all({"print_1", "print", "print"}), (V{"print_1", "print_2", "print_3"}));
  EXPECT_EQ(create_all({"x_99999999999999999999999", "x_99999999999999999999999"}),
            (V{"x_99999999999999999999999", "x_100000000000000000000000"}));
  EXPECT_EQ(create_all({"in", "in", "for"}), (V{"in_1", "in_2", "for_1"}));
}

TEST(Dialect, Fx113SearchesFromOne) {
  using V = std::vector<std::string>;
  EXPECT_EQ(create_all({"x_2", "x", "x", "x", "x"}), (V{"x_2", "x", "x_1", "x_3", "x_4"}));
  EXPECT_EQ(create_all({"add_01", "add_01", "add"}), (V{"add_1", "add_2", "add"}));
  EXPECT_THROW(create_all({""}), std::out_of_range);
}

TEST(Dialect, Fx2PrintsNumUsersAndFreesDeadValues) {
  ScopedDialect d(Dialect::fx_2);
  Graph g;
  Node* x = g.placeholder("x");
  g.placeholder("y");
  Node* r = g.call_function(F(kRelu), {N(x)});
  g.call_function(F(kNeg), {N(x)});  // nobody uses it
  g.output(N(r));
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [num_users=2] = placeholder[target=x]\n"
            "    %y : [num_users=0] = placeholder[target=y]\n"
            "    %relu : [num_users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})\n"
            "    %neg : [num_users=0] = call_function[target=operator.neg](args = (%x,), kwargs = {})\n"
            "    return relu");
  EXPECT_EQ(python_code(g).src,
            "\n\n\ndef forward(self, x, y):\n"
            "    relu = torch.relu(x)\n"
            "    neg = -x;  x = neg = None\n"
            "    return relu\n    ");
}

TEST(Dialect, Fx2BodyTransformerSeesCounterMarkers) {
  // Note [Line numbers of generated code]: the transformer gets torch.fx 2.x's "# COUNTER: i"
  // lines; they are read back into the line map and dropped from the source.
  ScopedDialect d(Dialect::fx_2);
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(F(kRelu), {N(x)});
  g.output(N(r));
  PythonCodeOptions o;
  std::vector<std::string> seen;
  o.hooks.body_transformer = [&](std::vector<std::string> body) {
    seen = body;
    body.insert(body.begin(), "print('hello')\n");
    return body;
  };
  PythonCode pc = python_code(g, o);
  // torch.fx's pieces: a marker per node, the node's code, then what it frees, separately.
  EXPECT_EQ(seen, (std::vector<std::string>{"# COUNTER: 0\n", "# COUNTER: 1\n", "relu = torch.relu(x)",
                                            ";  x = None\n", "# COUNTER: 2\n", "return relu", "\n"}));
  EXPECT_EQ(pc.src, "\n\n\ndef forward(self, x):\n    print('hello')\n    relu = torch.relu(x);  x = None\n"
                    "    return relu\n    ");
  // print is before any marker (None); relu under node 1; return and the last empty line under 2.
  EXPECT_EQ(pc.line_nodes, (std::vector<int64_t>{-1, 1, 2, 2}));
  EXPECT_TRUE(pc.node_lines.empty());
}

TEST(Dialect, Fx2PlaceholdersOnlyIsAnEmptyBody) {
  ScopedDialect d(Dialect::fx_2);
  Graph g;
  g.placeholder("x");
  EXPECT_EQ(python_code(g).src, "\n\n\ndef forward(self, x):\n    ");
  Graph empty;
  EXPECT_EQ(python_code(empty).src, "\n\n\ndef forward(self):\n    pass\n    ");
}

TEST(Dialect, Fx2VerboseComments) {
  ScopedDialect d(Dialect::fx_2);
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kAdd), {N(x), I(1)});
  Node* r = g.call_method("relu", {N(a)});
  Node* m = g.call_function(F(kMul), {N(r), I(2)});
  g.output(N(m));
  std::unordered_map<const Node*, std::string> traces = {
      {a, "  File \"/tmp/a.py\", line 3, in f\n    y = x + 1\n"},
      {m, "ctx\n  File \"/tmp/a.py\", line 5, in g\n    return z * 2\n  File \"/tmp/b.py\", line 7, in h\n    q()\n"}};
  PythonCodeOptions o;
  o.verbose = true;
  o.hooks.stack_trace = [&](const Node& n) -> std::optional<std::string> {
    auto it = traces.find(&n);
    if (it == traces.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(python_code(g, o).src,
            "\n\n\ndef forward(self, x):\n"
            "    # File: /tmp/a.py:3 in f, code: y = x + 1\n"
            "    add = x + 1;  x = None\n"
            "    \n"
            "    # No stacktrace found for following nodes\n"
            "    relu = add.relu();  add = None\n"
            "    \n"
            "    # File: /tmp/b.py:7 in h, code: q()\n"
            "    mul = relu * 2;  relu = None\n"
            "    return mul\n    ");
}

// Note [Verbose annotations]: torch.fx 2.14.1's text for python_code(verbose=True, colored=True,
// expanded_def=True, record_func=True, additional_meta=["seq_nr"]) on this graph (relu's meta has
// seq_nr 3 and custom {'k': 1}), but for the annotations, which the hook gives uncolored here
// (the bindings color them).
TEST(Dialect, Fx2VerboseOptions) {
  ScopedDialect d(Dialect::fx_2);
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(F(kAdd), {N(x), I(1)});
  Node* r = g.call_method("relu", {N(a)}, {{"inplace", Argument::none()}});
  g.output(N(r));
  PythonCodeOptions o;
  o.verbose = true;
  o.colored = true;
  o.expanded_def = true;
  o.record_func = true;
  o.hooks.meta_annotation = [&](const Node& n) -> std::optional<std::string> {
    if (&n == x || &n == r) return std::string("f32[2]");
    return std::nullopt;
  };
  o.hooks.comment_parts = [&](const Node& n) {
    return &n == r ? std::make_pair(std::string("# seq_nr: 3 "), std::string(" Annotation: {'k': 1}"))
                   : std::make_pair(std::string(), std::string());
  };
  EXPECT_EQ(python_code(g, o).src,
            "\n\n\ndef forward(\n    self,\n    x: \"f32[2]\",\n):\n"
            "    _rf = torch._C._profiler._RecordFunctionFast('## ENTER_GRAPH_PLACEHOLDER_KEY ##'); _rf.__enter__()\n"
            "    \n"
            "    \x1b[2m# No stacktrace found for following nodes\x1b[0m\n"
            "    _rf_add = torch._C._profiler._RecordFunctionFast('## 1 ##'); _rf_add.__enter__()\n"
            "    add = x + \x1b[34m1\x1b[0m;  \x1b[2mx = None\x1b[0m\n"
            "    _rf_add.__exit__(None, None, None)\n"
            "    \n"
            "    \x1b[2m# seq_nr: 3 # Annotation: {'k': 1} No stacktrace found for following nodes\x1b[0m\n"
            "    _rf_relu = torch._C._profiler._RecordFunctionFast('## 2 ##'); _rf_relu.__enter__()\n"
            "    relu: \"f32[2]\" = add.relu(inplace = \x1b[34mNone\x1b[0m);  \x1b[2madd = None\x1b[0m\n"
            "    _rf_relu.__exit__(None, None, None)\n"
            "    return relu\n"
            "    _rf.__exit__(None, None, None)\n"
            "    ");
  // torch.fx 1.13 has none of these options: its text stays as it was.
  ScopedDialect d113(Dialect::fx_1_13);
  o.hooks.comment_parts = nullptr;
  EXPECT_EQ(python_code(g, o).src,
            "\n\n\ndef forward(self, x):\n"
            "    \n"
            "    # No stacktrace found for following nodes \n"
            "    add = x + 1;  x = None\n"
            "    relu = add.relu(inplace = None);  add = None\n"
            "    return relu\n    ");
}

TEST(Dialect, Fx2ManyCollisionsAreLinear) {
  // 200k same-base names: the counter's first probe is free, and the run is
  // recorded by the base's hint (Note [Generated name runs]).
  ScopedDialect d(Dialect::fx_2);
  Namespace ns;
  std::string last;
  for (int i = 0; i < 200000; ++i) last = ns.create_name("add", nullptr).str();
  EXPECT_EQ(last, "add_199999");
  EXPECT_TRUE(ns.is_used("add_123"));
  EXPECT_FALSE(ns.is_used("add_200000"));
  EXPECT_EQ(ns.create_name("add_200000", nullptr), "add_200000");
  EXPECT_EQ(ns.create_name("add_5", nullptr), "add_200001");
}
