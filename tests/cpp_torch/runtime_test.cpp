// The runtime on graphs built with the C++ API: results against direct ATen
// calls, memory planning (Note [Memory planning]) with views, in-place ops and
// changing shapes, input checks, kernel errors and concurrent forwards.
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <gtest/gtest.h>

#include <thread>

#include "fxcpp/torch/module.h"

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
  Module m(std::move(g), {{"w", NamedTensor::Kind::Constant, wt}});
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
