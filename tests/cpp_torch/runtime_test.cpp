// The runtime on graphs built with the C++ API: results against direct ATen
// calls, memory planning (Note [Memory planning]) with views, in-place ops and
// changing shapes, input checks, kernel errors and concurrent forwards;
// primitives against exact 128-bit arithmetic (Note [Primitive semantics]).
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/full.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <climits>
#include <cmath>
#include <functional>
#include <thread>

#include "fxcpp/torch/module.h"

// An operator with a CPU kernel of its own and no alias annotation that
// returns its argument when `same` is true: the planner assumes its result
// is fresh; the runtime's storage check must catch it (Note [Memory planning]).
TORCH_LIBRARY_FRAGMENT(fxcpp_runtime_test, m) {
  m.def("maybe_same(Tensor x, int same) -> Tensor");
  // Two ops with out= overloads, whose Meta kernels are a typed C++ one and
  // a boxed one as `import torch` registers from Python (Note [C++ Meta
  // kernels]).
  m.def("twice(Tensor x) -> Tensor");
  m.def("twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("twice_boxed_meta(Tensor x) -> Tensor");
  m.def("twice_boxed_meta.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
}
namespace {
at::Tensor twice(const at::Tensor& x) { return x * 2; }
at::Tensor& twice_out(const at::Tensor& x, at::Tensor& out) { return at::mul_out(out, x, at::scalar_tensor(2)); }
at::Tensor& twice_out_meta(const at::Tensor& x, at::Tensor& out) {
  out.resize_(x.sizes());
  return out;
}
void boxed_meta(const c10::OperatorHandle&, c10::Stack* stack) {  // like a Python kernel: boxed only
  at::Tensor out = (*stack)[1].toTensor();
  out.resize_((*stack)[0].toTensor().sizes());
  stack->clear();
  stack->emplace_back(out);
}
}  // namespace
TORCH_LIBRARY_IMPL(fxcpp_runtime_test, CPU, m) {
  m.impl("maybe_same", [](const at::Tensor& x, int64_t same) { return same ? x : x.clone(); });
  m.impl("twice", TORCH_FN(twice));
  m.impl("twice.out", TORCH_FN(twice_out));
  m.impl("twice_boxed_meta", TORCH_FN(twice));
  m.impl("twice_boxed_meta.out", TORCH_FN(twice_out));
}
TORCH_LIBRARY_IMPL(fxcpp_runtime_test, Meta, m) {
  m.impl("twice.out", TORCH_FN(twice_out_meta));
  m.impl("twice_boxed_meta.out", torch::CppFunction::makeFromBoxedFunction<&boxed_meta>());
}

namespace fxcpp::torch {
namespace {

Argument N(Node* n) { return Argument::node(n); }

// x, y -> ((relu((x + y) * y)) repeated `reps` times)
std::unique_ptr<Graph> chain(int reps) {
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* v = x;
  for (int i = 0; i < reps; ++i) {
    v = g->call_function(aten_op("aten::add.Tensor"), {N(v), N(y)});
    v = g->call_function(aten_op("aten::mul.Tensor"), {N(v), N(y)});
    v = g->call_function(aten_op("aten::relu"), {N(v)});
  }
  g->output(N(v));
  return g;
}

at::Tensor eager_chain(at::Tensor x, const at::Tensor& y, int reps) {
  for (int i = 0; i < reps; ++i) x = at::relu(at::mul(at::add(x, y), y));
  return x;
}

TEST(Runtime, ChainMatchesDirectCallsPlannedAndNot) {
  at::manual_seed(0);
  for (bool plan : {true, false}) {
    Module m(chain(50), {}, ModuleOptions{plan});
    auto stats = m.plan_stats();
    EXPECT_EQ(stats.instructions, 150u);
    if (plan) {
      // Everything but the output is planned, into two alternating storages.
      EXPECT_EQ(stats.managed, 149u);
      EXPECT_EQ(stats.buffers, 2u);
    } else {
      EXPECT_EQ(stats.managed, 0u);
    }
    for (int64_t rows : {1, 3, 2, 3}) {  // shapes change between forwards
      for (int rep = 0; rep < 3; ++rep) {
        at::Tensor x = at::randn({rows, 8}), y = at::randn({rows, 8});
        at::Tensor out = m.forward({x, y}).toTensor();
        EXPECT_TRUE(at::allclose(out, eager_chain(x, y, 50))) << "rows=" << rows << " plan=" << plan;
      }
    }
  }
}

TEST(Runtime, OutputsAreNeverPlannedBuffers) {
  Module m(chain(3), {});
  at::Tensor x = at::randn({2, 8}), y = at::randn({2, 8});
  at::Tensor a = m.forward({x, y}).toTensor().clone();
  at::Tensor first = m.forward({x, y}).toTensor();
  at::Tensor second = m.forward({x * 2, y}).toTensor();
  // The second forward must not have written into the first one's result.
  EXPECT_TRUE(at::allclose(first, a));
  EXPECT_FALSE(first.is_alias_of(second));
}

TEST(Runtime, ViewsKeepTheirBaseAliveAndEscapeWithIt) {
  // a = x + y; v = a.view(-1); b = v * 2 (reads the view after more planned
  // ops ran); output (b, v): v aliases a, so a's set escapes and is not planned.
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function(aten_op("aten::add.Tensor"), {N(x), N(y)});
  Node* v = g->call_function(aten_op("aten::view"), {N(a), Argument::list({Argument::integer(-1)})});
  Node* t = g->call_function(aten_op("aten::mul.Tensor"), {N(x), N(y)});  // planned, must not reuse a's storage
  Node* u = g->call_function(aten_op("aten::add.Tensor"), {N(t), N(t)});
  Node* uf = g->call_function(aten_op("aten::view"), {N(u), Argument::list({Argument::integer(-1)})});
  Node* b = g->call_function(aten_op("aten::mul.Tensor"), {N(v), N(uf)});
  Node* c = g->call_function(aten_op("aten::add.Tensor"), {N(b), Argument::integer(1)});
  g->output(Argument::tuple({N(c), N(v)}));
  Module m(std::move(g), {});
  for (int i = 0; i < 3; ++i) {
    at::Tensor xt = at::randn({2, 4}), yt = at::randn({2, 4});
    auto out = m.forward({xt, yt}).toTuple();
    at::Tensor ea = xt + yt;
    at::Tensor eu = (xt * yt) + (xt * yt);
    EXPECT_TRUE(at::allclose(out->elements()[0].toTensor(), ea.view(-1) * eu.view(-1) + 1));
    EXPECT_TRUE(at::allclose(out->elements()[1].toTensor(), ea.view(-1)));
  }
}

TEST(Runtime, InPlaceOpsOnPlannedValuesRunInOrder) {
  // a = x * y; a.relu_(); r = a + x; output r: relu_ aliases a.
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function(aten_op("aten::mul.Tensor"), {N(x), N(y)});
  g->call_function(aten_op("aten::relu_"), {N(a)});
  Node* r = g->call_function(aten_op("aten::add.Tensor"), {N(a), N(x)});
  g->output(N(r));
  Module m(std::move(g), {});
  for (int i = 0; i < 3; ++i) {
    at::Tensor xt = at::randn({3, 5}), yt = at::randn({3, 5});
    EXPECT_TRUE(at::allclose(m.forward({xt, yt}).toTensor(), at::relu(xt * yt) + xt));
  }
}

TEST(Runtime, ShapeArithmeticPrimitives) {
  // n = x.shape[0]; k = (n * 4) // 2 - 1 + n % 3; y = x.view([n, -1]); out = (y, k, n / 2, -n, shape[1:])
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* shape = g->call_function(primitive("getattr"), {N(x), Argument::string("shape")});
  Node* n = g->call_function(primitive("operator.getitem"), {N(shape), Argument::integer(0)});
  Node* m4 = g->call_function(primitive("operator.mul"), {N(n), Argument::integer(4)});
  Node* d2 = g->call_function(primitive("operator.floordiv"), {N(m4), Argument::integer(2)});
  Node* s1 = g->call_function(primitive("operator.sub"), {N(d2), Argument::integer(1)});
  Node* md = g->call_function(primitive("operator.mod"), {N(n), Argument::integer(3)});
  Node* k = g->call_function(primitive("operator.add"), {N(s1), N(md)});
  Node* half = g->call_function(primitive("operator.truediv"), {N(n), Argument::integer(2)});
  Node* neg = g->call_function(primitive("operator.neg"), {N(n)});
  Node* tail = g->call_function(primitive("operator.getitem"),
                                {N(shape), Argument::slice(Argument::integer(1), Argument::none(), Argument::none())});
  Node* y = g->call_function(aten_op("aten::view"), {N(x), Argument::list({N(n), Argument::integer(-1)})});
  g->output(Argument::tuple({N(y), N(k), N(half), N(neg), N(tail)}));
  Module m(std::move(g), {});
  for (int64_t rows : {1, 5}) {
    auto out = m.forward({at::randn({rows, 2, 3})}).toTuple()->elements();
    EXPECT_EQ(out[0].toTensor().sizes(), (std::vector<int64_t>{rows, 6}));
    EXPECT_EQ(out[1].toInt(), rows * 4 / 2 - 1 + rows % 3);
    EXPECT_DOUBLE_EQ(out[2].toDouble(), rows / 2.0);
    EXPECT_EQ(out[3].toInt(), -rows);
    EXPECT_EQ(out[4].toIntVector(), (std::vector<int64_t>{2, 3}));
  }
}

TEST(Runtime, NumbersWhereSchemasTakeTensorsAreWrappedNumbers) {
  // aten::mul.Tensor(x, 2) as torch's Python binding accepts it: the int
  // does not promote a float tensor, and a node holding an int works too.
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function(aten_op("aten::mul.Tensor"), {N(x), Argument::integer(2)});
  Node* n = g->call_function(aten_op("aten::size.int"), {N(x), Argument::integer(0)});
  Node* b = g->call_function(aten_op("aten::add.Tensor"), {N(a), N(n)});
  g->output(N(b));
  Module m(std::move(g), {});
  at::Tensor xt = at::randn({3, 2});
  at::Tensor out = m.forward({xt}).toTensor();
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(out, xt * 2 + 3));
}

TEST(Runtime, ListsOfNodesAndTensorConstants) {
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* r = g->call_function(aten_op("aten::relu"), {N(x)});
  Node* c = g->call_function(aten_op("aten::cat"), {Argument::list({N(x), N(r), N(w)}), Argument::integer(0)});
  g->output(N(c));
  at::Tensor wt = at::randn({1, 4});
  Module m(std::move(g), {{"w", NamedTensor::Kind::Constant, wt, std::nullopt}});
  at::Tensor xt = at::randn({2, 4});
  EXPECT_TRUE(at::allclose(m.forward({xt}).toTensor(), at::cat({xt, at::relu(xt), wt}, 0)));
  ASSERT_NE(m.find_tensor("w"), nullptr);
  EXPECT_TRUE(m.find_tensor("w")->is_same(wt));  // shared, not copied
}

TEST(Runtime, InputsAreCheckedAtTheBoundary) {
  Module m(chain(1), {});
  try {
    m.forward({at::randn({1, 8})});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expects 2 inputs (x, y), got 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.forward({}), InputError);
  EXPECT_THROW(m.forward({at::randn({1}), at::randn({1}), at::randn({1})}), InputError);
  // A kernel that fails names the node and its operator.
  try {
    m.forward({at::randn({2, 8}), at::randn({3, 8})});
    FAIL();
  } catch (const InputError&) {
    FAIL() << "shape mismatches are kernel errors";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'add_tensor' (aten::add.Tensor) failed"), std::string::npos) << e.what();
  }
  // Without recorded tensor_meta a non-tensor input reaches the kernel, which
  // refuses it by node too (loaded files check it at the boundary:
  // Load.InputsCheckedAgainstRecordedMeta).
  EXPECT_THROW(m.forward({c10::IValue(std::string("no")), at::randn({1, 8})}), Error);
}

TEST(Runtime, RefusesGraphsItCannotRun) {
  {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    g->output(N(g->call_method("relu", {N(x)})));
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
  }
  {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    g->output(N(g->get_attr("missing")));
    (void)x;
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
  }
  {  // too many positional arguments, unknown keyword, missing argument, wrong type
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    g->output(N(g->call_function(aten_op("aten::relu"), {N(x), N(x)})));
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
    g = std::make_unique<Graph>();
    x = g->placeholder("x");
    g->output(N(g->call_function(aten_op("aten::relu"), {N(x)}, {{"bogus", Argument::integer(1)}})));
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
    g = std::make_unique<Graph>();
    x = g->placeholder("x");
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(x)})));
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
    g = std::make_unique<Graph>();
    x = g->placeholder("x");
    g->output(N(g->call_function(aten_op("aten::view"), {N(x), Argument::string("no")})));
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
  }
  {  // no output
    auto g = std::make_unique<Graph>();
    g->placeholder("x");
    EXPECT_THROW(Module(std::move(g), {}), FormatError);
  }
}

// ---- Note [Primitive semantics] ------------------------------------------------------

// A graph of one primitive over placeholders.
Module one_primitive(const char* name, int inputs) {
  auto g = std::make_unique<Graph>();
  std::vector<Argument> args;
  for (int i = 0; i < inputs; ++i) {
    std::string x = "x";  // not "x" + std::to_string(i): GCC 12's -Wrestrict false positive (its bug 105651)
    args.push_back(N(g->placeholder(x += std::to_string(i))));
  }
  g->output(N(g->call_function(primitive(name), std::move(args))));
  return Module(std::move(g), {});
}

using Wide = __int128;

// Python's results, computed exactly in 128 bits: the floor quotient and the
// remainder with the divisor's sign.
Wide py_floordiv(Wide x, Wide y) {
  Wide q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}
Wide py_mod(Wide x, Wide y) { return x - py_floordiv(x, y) * y; }

const std::vector<int64_t> kEdgeInts = {0, 1, -1, 2, -2, 3, -7, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1,
                                        int64_t(1) << 32, -(int64_t(1) << 32), int64_t(1) << 62,
                                        -(int64_t(1) << 62), 3037000499, 3037000500, -3037000500};

TEST(Runtime, IntegerPrimitivesAreExactOrRaiseOnOverflow) {
  struct Case {
    const char* name;
    Wide (*exact)(Wide, Wide);
  };
  const Case cases[] = {
      {"operator.add", [](Wide x, Wide y) { return x + y; }},
      {"operator.sub", [](Wide x, Wide y) { return x - y; }},
      {"operator.mul", [](Wide x, Wide y) { return x * y; }},
      {"operator.floordiv", py_floordiv},
      {"operator.mod", py_mod},
  };
  for (const Case& c : cases) {
    Module m = one_primitive(c.name, 2);
    for (int64_t x : kEdgeInts)
      for (int64_t y : kEdgeInts) {
        std::string what = std::string(c.name) + "(" + std::to_string(x) + ", " + std::to_string(y) + ")";
        bool divides = std::string(c.name) == "operator.floordiv" || std::string(c.name) == "operator.mod";
        if (divides && y == 0) {
          EXPECT_THROW(m.forward({x, y}), Error) << what;
          continue;
        }
        Wide want = c.exact(x, y);
        if (want < INT64_MIN || want > INT64_MAX) {
          try {
            m.forward({x, y});
            ADD_FAILURE() << what << " did not raise";
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("integer overflow"), std::string::npos) << e.what();
          }
        } else {
          c10::IValue got = m.forward({x, y});
          ASSERT_TRUE(got.isInt()) << what;
          EXPECT_EQ(got.toInt(), static_cast<int64_t>(want)) << what;
        }
      }
  }
  Module neg = one_primitive("operator.neg", 1);
  EXPECT_THROW(neg.forward({INT64_MIN}), Error);
  EXPECT_EQ(neg.forward({INT64_MAX}).toInt(), -INT64_MAX);
  EXPECT_EQ(neg.forward({true}).toInt(), -1);  // bools are ints
  Module add = one_primitive("operator.add", 2);
  EXPECT_EQ(add.forward({true, true}).toInt(), 2);
  EXPECT_DOUBLE_EQ(add.forward({true, 1.5}).toDouble(), 2.5);
}

TEST(Runtime, FloatPrimitivesFollowPythonSigns) {
  Module fd = one_primitive("operator.floordiv", 2), md = one_primitive("operator.mod", 2);
  // The remainder takes the divisor's sign; zero remainders are signed zeros of the divisor's sign.
  EXPECT_DOUBLE_EQ(md.forward({-1.0, 3.0}).toDouble(), 2.0);
  EXPECT_TRUE(std::signbit(md.forward({3.0, -1.5}).toDouble()));
  EXPECT_TRUE(std::signbit(fd.forward({-0.0, 5.0}).toDouble()));
  EXPECT_DOUBLE_EQ(fd.forward({-5.0, HUGE_VAL}).toDouble(), -1.0);
  EXPECT_TRUE(std::isnan(fd.forward({HUGE_VAL, 2.0}).toDouble()));
  EXPECT_THROW(fd.forward({1.0, 0.0}), Error);
  EXPECT_THROW(md.forward({1.0, -0.0}), Error);
  Module td = one_primitive("operator.truediv", 2);
  EXPECT_THROW(td.forward({int64_t(1), int64_t(0)}), Error);
  EXPECT_THROW(td.forward({std::nan(""), 0.0}), Error);
  // int / int is correctly rounded: (2**53 + 1) / 1 rounds once, to 2**53.
  EXPECT_EQ(td.forward({(int64_t(1) << 53) + 1, int64_t(1)}).toDouble(), 9007199254740992.0);
  EXPECT_EQ(td.forward({INT64_MAX, INT64_MIN}).toDouble(), -1.0);
}

// CPython's slice semantics restated on 128-bit ints: the indexes picked
// from `size` items.
std::vector<int64_t> reference_slice(int64_t size, c10::optional<int64_t> start, c10::optional<int64_t> stop,
                                     c10::optional<int64_t> ostep) {
  Wide step = ostep ? *ostep : 1;
  auto norm = [&](c10::optional<int64_t> v, bool is_start) -> Wide {
    if (!v) return step > 0 ? (is_start ? 0 : size) : (is_start ? size - 1 : -1);
    Wide x = *v < 0 ? Wide(*v) + size : Wide(*v);
    Wide lo = step > 0 ? 0 : -1, hi = step > 0 ? size : size - 1;
    return x < lo ? lo : (x > hi ? hi : x);
  };
  Wide b = norm(start, true), e = norm(stop, false);
  std::vector<int64_t> out;
  for (Wide i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<int64_t>(i));
  return out;
}

TEST(Runtime, SlicesNeverOverflow) {
  auto g = std::make_unique<Graph>();
  Node* seq = g->placeholder("seq");
  Node* a = g->placeholder("start");
  Node* b = g->placeholder("stop");
  Node* c = g->placeholder("step");
  g->output(N(g->call_function(primitive("operator.getitem"), {N(seq), Argument::slice(N(a), N(b), N(c))})));
  Module m(std::move(g), {});
  std::vector<c10::optional<int64_t>> bounds = {c10::nullopt, 0, 1, -1, 2, -3, 5, INT64_MAX, INT64_MIN,
                                                INT64_MAX - 1, INT64_MIN + 1, int64_t(1) << 62};
  auto iv = [](c10::optional<int64_t> v) { return v ? c10::IValue(*v) : c10::IValue(); };
  for (int64_t size = 0; size < 5; ++size) {
    std::vector<c10::IValue> items;
    for (int64_t i = 0; i < size; ++i) items.emplace_back(i * 10);
    for (auto start : bounds)
      for (auto stop : bounds)
        for (auto step : bounds) {
          auto tuple = c10::ivalue::Tuple::create(items);
          if (step && *step == 0) {
            EXPECT_THROW(m.forward({tuple, iv(start), iv(stop), iv(step)}), Error);
            continue;
          }
          // INT64_MIN as a step acts as -INT64_MAX (CPython clamps it so that -step exists).
          auto ref_step = step && *step == INT64_MIN ? c10::optional<int64_t>(-INT64_MAX) : step;
          std::vector<int64_t> want = reference_slice(size, start, stop, ref_step);
          auto got = m.forward({tuple, iv(start), iv(stop), iv(step)}).toTupleRef().elements();
          ASSERT_EQ(got.size(), want.size()) << size;
          for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[k].toInt(), want[k] * 10);
        }
  }
}

// ---- Note [Memory planning]: ops that return an argument without saying so ----------

// a = x + y; r = OP(a); b = x * y; c = r + b; a2 = x - y; r2 = OP(a2); output (c, r2).
std::unique_ptr<Graph> aliasing_graph(const std::function<Node*(Graph&, Node*, Node*)>& op) {
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function(aten_op("aten::add.Tensor"), {N(x), N(y)});
  Node* r = op(*g, a, y);
  Node* b = g->call_function(aten_op("aten::mul.Tensor"), {N(x), N(y)});
  Node* c = g->call_function(aten_op("aten::add.Tensor"), {N(r), N(b)});
  Node* a2 = g->call_function(aten_op("aten::sub.Tensor"), {N(x), N(y)});
  Node* r2 = op(*g, a2, y);
  g->output(Argument::tuple({N(c), N(r2)}));
  return g;
}

TEST(Runtime, UnannotatedAliasingOpsAreNotMisplanned) {
  using Make = std::function<Node*(Graph&, Node*, Node*)>;
  auto unary = [](const char* name) -> Make {
    return [name](Graph& g, Node* a, Node*) { return g.call_function(aten_op(name), {N(a)}); };
  };
  std::vector<std::pair<std::string, Make>> ops = {
      {"type_as", [](Graph& g, Node* a, Node* y) { return g.call_function(aten_op("aten::type_as"), {N(a), N(y)}); }},
      {"atleast_1d", unary("aten::atleast_1d")},
      {"atleast_2d", unary("aten::atleast_2d")},
      {"einsum",
       [](Graph& g, Node* a, Node*) {
         return g.call_function(aten_op("aten::einsum"), {Argument::string("ij->ij"), Argument::list({N(a)})});
       }},
      {"broadcast_tensors",
       [](Graph& g, Node* a, Node* y) {
         Node* l = g.call_function(aten_op("aten::broadcast_tensors"), {Argument::list({N(a), N(y)})});
         return g.call_function(primitive("operator.getitem"), {N(l), Argument::integer(0)});
       }},
      {"to_dense", unary("aten::to_dense")},
      {"conj_physical", unary("aten::conj_physical")},
      {"sum_to_size",
       [](Graph& g, Node* a, Node*) {
         return g.call_function(aten_op("aten::sum_to_size"),
                                {N(a), Argument::list({Argument::integer(3), Argument::integer(4)})});
       }},
  };
  for (auto& [name, make] : ops) {
    Module planned(aliasing_graph(make), {}), eager(aliasing_graph(make), {}, ModuleOptions{false});
    std::vector<c10::IValue> got, want;
    for (int i = 0; i < 3; ++i) {
      at::Tensor x = at::randn({3, 4}), y = at::randn({3, 4});
      got.push_back(planned.forward({x, y}));
      want.push_back(eager.forward({x, y}));
    }
    for (int i = 0; i < 3; ++i)  // compared after all forwards: none wrote into an earlier result
      for (size_t k = 0; k < 2; ++k) {
        at::Tensor g = got[i].toTupleRef().elements()[k].toTensor(), w = want[i].toTupleRef().elements()[k].toTensor();
        ASSERT_EQ(g.sizes(), w.sizes()) << name << " call " << i << " output " << k;
        EXPECT_TRUE(at::allclose(g, w)) << name << " call " << i << " output " << k;
      }
  }
}

TEST(Runtime, StorageCheckCatchesResultsThatAliasTheirArguments) {
  // a = x + y; r = maybe_same(a); b = x * y (may reuse a's buffer); c = r + b;
  // a2 = x - y; r2 = maybe_same(a2) (returned); d = x * x; e = d + x; output (c, r2, e).
  auto build = [] {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* y = g->placeholder("y");
    Node* s = g->placeholder("s");
    Node* a = g->call_function(aten_op("aten::add.Tensor"), {N(x), N(y)});
    Node* r = g->call_function(aten_op("fxcpp_runtime_test::maybe_same"), {N(a), N(s)});
    Node* b = g->call_function(aten_op("aten::mul.Tensor"), {N(x), N(y)});
    Node* c = g->call_function(aten_op("aten::add.Tensor"), {N(r), N(b)});
    Node* a2 = g->call_function(aten_op("aten::sub.Tensor"), {N(x), N(y)});
    Node* r2 = g->call_function(aten_op("fxcpp_runtime_test::maybe_same"), {N(a2), N(s)});
    Node* d = g->call_function(aten_op("aten::mul.Tensor"), {N(x), N(x)});
    Node* e = g->call_function(aten_op("aten::add.Tensor"), {N(d), N(x)});
    g->output(Argument::tuple({N(c), N(r2), N(e)}));
    return g;
  };
  for (std::vector<int64_t> flags : {std::vector<int64_t>{1, 1, 1}, {0, 0, 1}, {0, 1, 0}}) {
    Module planned(build(), {}), eager(build(), {}, ModuleOptions{false});
    EXPECT_EQ(planned.plan_stats().managed, 4u);
    std::vector<c10::IValue> got, want;
    for (int64_t same : flags) {
      at::Tensor x = at::randn({3, 4}), y = at::randn({3, 4});
      got.push_back(planned.forward({x, y, same}));
      want.push_back(eager.forward({x, y, same}));
    }
    for (size_t i = 0; i < flags.size(); ++i)
      for (size_t k = 0; k < 3; ++k) {
        at::Tensor g = got[i].toTupleRef().elements()[k].toTensor(), w = want[i].toTupleRef().elements()[k].toTensor();
        ASSERT_EQ(g.sizes(), w.sizes()) << "call " << i << " output " << k;
        EXPECT_TRUE(at::allclose(g, w)) << "call " << i << " output " << k;
      }
  }
}

TEST(Runtime, ViewsOutsideTheirStorageAreRefused) {
  // Note [Views stay inside their storage]: as_strided with an offset whose
  // byte size overflows passes PyTorch's check; _reshape_alias checks nothing.
  // The argument guard refuses before the kernel runs, on every LibTorch;
  // the check of results stays behind it.
  enum Kind { kAsStrided, kReshapeAlias, kNegativeSizes, kInside };
  auto build = [](Kind kind) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* a = g->call_function(aten_op("aten::mul.Tensor"), {N(x), Argument::integer(1)});
    auto list = [](std::vector<int64_t> v) {
      std::vector<Argument> items;
      for (int64_t i : v) items.push_back(Argument::integer(i));
      return Argument::list(std::move(items));
    };
    Node* v = kind == kReshapeAlias ? g->call_function(aten_op("aten::_reshape_alias"), {N(a), list({6}), list({7})})
              : kind == kNegativeSizes
                  ? g->call_function(aten_op("aten::_reshape_alias"), {N(a), list({-2, -3}), list({1, 1})})
                  : g->call_function(aten_op("aten::as_strided"),
                                     {N(a), list({4}), list({1}),
                                      Argument::integer(kind == kInside ? 2 : int64_t(1) << 62)});
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(v), Argument::integer(1)})));
    return g;
  };
  for (Kind kind : {kAsStrided, kReshapeAlias, kNegativeSizes}) {
    Module m(build(kind), {});
    for (int i = 0; i < 2; ++i) {
      try {
        m.forward({at::randn({6})});
        ADD_FAILURE() << "a view outside its storage was read";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the view (offset"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(kind == kAsStrided ? "reaches outside the elements of its input"
                                                                 : "reaches outside its storage"),
                  std::string::npos)
            << e.what();
      }
    }
  }
  Module inside(build(kInside), {});
  at::Tensor x = at::randn({6});
  EXPECT_TRUE(at::equal(inside.forward({x}).toTensor(), x.slice(0, 2, 6) + 1));
}

TEST(Runtime, ArgumentGuardsStopKernelsThatWouldCrash) {
  // Note [Argument guards]: repeat_interleave with repeats near 2^62 overflows
  // its result size inside the kernel (SIGSEGV in torch 1.13) for all three
  // overloads; the guard refuses it with the node's Error, planned or not,
  // and leaves ordinary calls alone.
  const int64_t huge = int64_t(1) << 62;
  auto build = [](const char* overload, int64_t r) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* reps = g->placeholder("reps");
    Node* a = g->call_function(aten_op("aten::mul.Tensor"), {N(x), Argument::integer(1)});
    Node* v = nullptr;
    if (std::string(overload) == "self_int")
      v = g->call_function(aten_op("aten::repeat_interleave.self_int"), {N(a), Argument::integer(r), Argument::integer(-2)});
    else if (std::string(overload) == "self_Tensor")
      v = g->call_function(aten_op("aten::repeat_interleave.self_Tensor"), {N(a), N(reps), Argument::integer(1)});
    else
      v = g->call_function(aten_op("aten::repeat_interleave.Tensor"), {N(reps)});
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(v), Argument::integer(1)})));
    return g;
  };
  at::Tensor x = at::zeros({3, 1, 4, 4});
  for (const char* overload : {"self_int", "self_Tensor", "Tensor"}) {
    for (bool plan : {true, false}) {
      Module bad(build(overload, huge), {}, ModuleOptions{plan});
      at::Tensor reps = std::string(overload) == "Tensor" ? at::full({2}, huge, at::kLong) : at::full({1}, huge, at::kLong);
      for (int i = 0; i < 2; ++i) {
        try {
          bad.forward({x, reps});
          ADD_FAILURE() << overload << ": a repeat_interleave of 2^62 ran";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("repeat_interleave"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("would exceed"), std::string::npos) << e.what();
        }
      }
      // The same graphs with small repeats run as eager does.
      Module ok(build(overload, 2), {}, ModuleOptions{plan});
      at::Tensor small = std::string(overload) == "Tensor" ? at::tensor({1, 2}, at::kLong) : at::tensor({2}, at::kLong);
      for (int i = 0; i < 3; ++i) {
        at::Tensor got = ok.forward({x, small}).toTensor();
        at::Tensor want = std::string(overload) == "self_int"      ? at::repeat_interleave(x, 2, -2) + 1
                          : std::string(overload) == "self_Tensor" ? at::repeat_interleave(x, small, 1) + 1
                                                                   : at::repeat_interleave(small) + 1;
        EXPECT_TRUE(at::equal(got, want)) << overload;
      }
    }
  }
}

TEST(Runtime, PlannedPathKeysOnTheTypesOfAllInputs) {
  // r = (x + x) * n, out = r + 1: r's dtype follows n's type.
  auto build = [] {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* n = g->placeholder("n");
    Node* a = g->call_function(aten_op("aten::add.Tensor"), {N(x), N(x)});
    Node* r = g->call_function(aten_op("aten::mul.Tensor"), {N(a), N(n)});
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(r), Argument::integer(1)})));
    return g;
  };
  Module planned(build(), {}), eager(build(), {}, ModuleOptions{false});
  EXPECT_EQ(planned.plan_stats().managed, 2u);
  at::Tensor x = at::arange(6).reshape({2, 3});
  for (c10::IValue n : {c10::IValue(int64_t(2)), c10::IValue(2.5), c10::IValue(true), c10::IValue(int64_t(3)),
                        c10::IValue(-0.5)}) {
    at::Tensor got = planned.forward({x, n}).toTensor(), want = eager.forward({x, n}).toTensor();
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << n;
    EXPECT_TRUE(at::allclose(got, want)) << n;
  }
}

TEST(Runtime, OutVariantsAreChosenAlike) {
  // The planner's choice of out= overloads (attach_out_variant in compile.cpp)
  // for ops that lowered models call: the same on LibTorch 1.13 and 2.x.
  auto ints = [](std::vector<int64_t> v) {
    std::vector<Argument> items;
    for (int64_t i : v) items.push_back(Argument::integer(i));
    return Argument::list(std::move(items));
  };
  struct Case {
    const char* op;
    std::function<std::vector<Argument>(Node*)> args;
  };
  auto unary = [](Node* x) { return std::vector<Argument>{N(x)}; };
  auto binary = [](Node* x) { return std::vector<Argument>{N(x), N(x)}; };
  const std::vector<Case> cases = {
      {"aten::relu", unary},
      {"aten::sigmoid", unary},
      {"aten::tanh", unary},
      {"aten::gelu", unary},
      {"aten::exp", unary},
      {"aten::neg", unary},
      {"aten::abs", unary},
      {"aten::silu", unary},
      {"aten::hardtanh", unary},
      {"aten::hardswish", unary},
      {"aten::hardsigmoid", unary},
      {"aten::leaky_relu", unary},
      {"aten::_softmax", [](Node* x) { return std::vector<Argument>{N(x), Argument::integer(1), Argument::boolean(false)}; }},
      {"aten::_log_softmax", [](Node* x) { return std::vector<Argument>{N(x), Argument::integer(1), Argument::boolean(false)}; }},
      {"aten::add.Tensor", binary},
      {"aten::sub.Tensor", binary},
      {"aten::mul.Tensor", binary},
      {"aten::div.Tensor", binary},
      {"aten::mul.Scalar", [](Node* x) { return std::vector<Argument>{N(x), Argument::real(2.0)}; }},
      {"aten::pow.Tensor_Scalar", [](Node* x) { return std::vector<Argument>{N(x), Argument::integer(2)}; }},
      {"aten::clamp", [](Node* x) { return std::vector<Argument>{N(x), Argument::real(-0.5), Argument::real(0.5)}; }},
      {"aten::mean.dim", [&](Node* x) { return std::vector<Argument>{N(x), ints({2, 3}), Argument::boolean(true)}; }},
      {"aten::sum.dim_IntList", [&](Node* x) { return std::vector<Argument>{N(x), ints({1})}; }},
      {"aten::amax", [&](Node* x) { return std::vector<Argument>{N(x), ints({1})}; }},
      {"aten::avg_pool2d", [&](Node* x) { return std::vector<Argument>{N(x), ints({2, 2})}; }},
      {"aten::cat", [](Node* x) { return std::vector<Argument>{Argument::list({N(x), N(x)}), Argument::integer(1)}; }},
      {"aten::addmm", [](Node* x) { return std::vector<Argument>{N(x), N(x), N(x)}; }},
      {"aten::mm", binary},
      {"aten::bmm", binary},
      {"aten::where.self", [](Node* x) { return std::vector<Argument>{N(x), N(x), N(x)}; }},
      {"aten::upsample_nearest2d", [&](Node* x) { return std::vector<Argument>{N(x), ints({16, 16})}; }},
      {"aten::constant_pad_nd", [&](Node* x) { return std::vector<Argument>{N(x), ints({1, 1})}; }},
      {"aten::conv2d", [](Node* x) { return std::vector<Argument>{N(x), N(x)}; }},
      {"aten::linear", binary},
      {"aten::matmul", binary},
      {"aten::clone", unary},
  };
  std::string planned;
  for (const Case& c : cases) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* r = g->call_function(aten_op(c.op), c.args(x));
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(r), Argument::integer(1)})));
    Module m(std::move(g), {});
    if (m.plan_stats().managed) planned += std::string(planned.empty() ? "" : " ") + c.op;
  }
  // Not planned, for attach_out_variant's reasons: no CPU kernel of their
  // own (conv2d, linear, matmul, ...), no out= overload named after theirs
  // (sum.dim_IntList's is sum.IntList_out), or one without a Meta kernel.
  // Only a C++ Meta kernel marks an out= kernel as structured.
  for (const char* op : {"fxcpp_runtime_test::twice", "fxcpp_runtime_test::twice_boxed_meta"}) {
    auto g = std::make_unique<Graph>();
    Node* x = g->placeholder("x");
    Node* r = g->call_function(aten_op(op), {N(x)});
    g->output(N(g->call_function(aten_op("aten::add.Tensor"), {N(r), Argument::integer(1)})));
    Module m(std::move(g), {});
    if (m.plan_stats().managed) planned += std::string(planned.empty() ? "" : " ") + op;
    at::Tensor in = at::randn({3, 4});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::allclose(m.forward({in}).toTensor(), in * 2 + 1)) << op;
  }
  EXPECT_EQ(planned,
            "aten::relu aten::sigmoid aten::tanh aten::gelu aten::exp aten::neg aten::silu aten::hardsigmoid "
            "aten::leaky_relu aten::_softmax aten::_log_softmax aten::add.Tensor aten::sub.Tensor aten::mul.Tensor "
            "aten::div.Tensor aten::pow.Tensor_Scalar aten::clamp aten::mean.dim aten::amax aten::avg_pool2d "
            "aten::cat aten::addmm aten::mm aten::bmm aten::upsample_nearest2d fxcpp_runtime_test::twice");
}

TEST(Runtime, ConcurrentForwardsOnOneModule) {
  Module m(chain(20), {});
  at::Tensor y = at::randn({4, 8});
  std::vector<at::Tensor> xs, outs(8);
  for (int i = 0; i < 8; ++i) xs.push_back(at::randn({4, 8}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        for (int i = t; i < 8; i += 2) outs[i] = m.forward({xs[i], y}).toTensor();
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(at::allclose(outs[i], eager_chain(xs[i], y, 20)));
}

}  // namespace
}  // namespace fxcpp::torch
