// fxcpp::torch::trace (Note [Capture by dispatcher mode] in capture.h):
// graphs captured from C++ code and torch::nn modules, printed, run by the
// runtime and compared with eager; in-place ops; errors and the dispatcher
// state they leave behind. The only TU of the tests that includes torch/torch.h.
#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <map>
#include <sstream>
#include <thread>

#include "fxcpp/torch/capture.h"

// Not inside namespace fxcpp::torch: TORCH_MODULE spells `torch::nn` unqualified.
namespace {

using fxcpp::Graph;
using fxcpp::Node;
using fxcpp::Op;
using fxcpp::torch::capture_active;
using fxcpp::torch::CaptureError;
using fxcpp::torch::Execution;
using fxcpp::torch::Module;
using fxcpp::torch::ModuleOptions;
using fxcpp::torch::NamedTensor;
using fxcpp::torch::trace;
using fxcpp::torch::Traced;
using fxcpp::torch::TraceOptions;

std::string str(const Graph& g) {
  std::ostringstream os;
  os << g;
  return os.str();
}

std::vector<std::string> targets(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes())
    if (n->op() == Op::CallFunction) out.push_back(n->target().fn().str());
  return out;
}

bool mode_clean() {
  return !capture_active() && !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::TESTING_ONLY_GenericMode) &&
         !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::TESTING_ONLY_GenericMode);
}

TEST(Capture, LambdaOfAtenOps) {
  at::manual_seed(0);
  at::Tensor x = at::randn({2, 3}), y = at::randn({2, 3});
  auto fn = [](const std::vector<at::Tensor>& in) { return at::relu(in[0] + in[1]) * 2; };
  Traced t = trace(fn, {x, y});
  EXPECT_EQ(t.recorded_ops, 3u);
  EXPECT_EQ(t.input_shapes, (std::vector<std::vector<int64_t>>{{2, 3}, {2, 3}}));
  EXPECT_EQ(str(*t.graph),
            "graph():\n"
            "    %x : [num_users=1] = placeholder[target=x]\n"
            "    %x_1 : [num_users=1] = placeholder[target=x_1]\n"
            "    %add_tensor : [num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%x, %x_1), kwargs = {})\n"
            "    %relu_default : [num_users=1] = call_function[target=torch.ops.aten.relu.default](args = (%add_tensor,), kwargs = {})\n"
            "    %mul_scalar : [num_users=1] = call_function[target=torch.ops.aten.mul.Scalar](args = (%relu_default, 2), kwargs = {})\n"
            "    return mul_scalar");
  Module m = std::move(t).module();
  for (int i = 0; i < 3; ++i) {
    at::Tensor a = at::randn({2, 3}), b = at::randn({2, 3});
    EXPECT_TRUE(at::allclose(m.forward({a, b}).toTensor(), fn({a, b})));
  }
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, InputNamesDtypesFactoriesAndConstants) {
  at::Tensor w = at::randn({3, 3});  // made outside: a constant
  auto fn = [&](const std::vector<at::Tensor>& in) {
    at::Tensor z = at::zeros({2, 3}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor d = (in[0].matmul(w) + z).to(at::kDouble);
    return c10::IValue(std::make_tuple(d, in[0].contiguous(at::MemoryFormat::Contiguous)));
  };
  at::Tensor x = at::randn({2, 3});
  TraceOptions opts;
  opts.input_names = {"inp"};
  Traced t = trace(fn, {x}, opts);
  std::string s = str(*t.graph);
  EXPECT_NE(s.find("placeholder[target=inp]"), std::string::npos) << s;
  EXPECT_NE(s.find("get_attr[target=_tensor_constant0]"), std::string::npos) << s;
  EXPECT_NE(s.find("torch.ops.aten.zeros.default](args = ([2, 3],), kwargs = {dtype: torch.float32})"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("torch.ops.aten.to.dtype](args = (%add_tensor, torch.float64)"), std::string::npos) << s;
  ASSERT_EQ(t.tensors.size(), 1u);
  EXPECT_EQ(t.tensors[0].name, "_tensor_constant0");
  EXPECT_EQ(t.tensors[0].kind, NamedTensor::Kind::Constant);
  EXPECT_TRUE(t.tensors[0].tensor.is_same(w));  // shared, not copied
  Module m = std::move(t).module();
  at::Tensor a = at::randn({2, 3});
  auto got = m.forward({a}).toTupleRef().elements();
  auto want = fn({a}).toTupleRef().elements();
  EXPECT_EQ(got[0].toTensor().scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(got[0].toTensor(), want[0].toTensor()));
  EXPECT_TRUE(at::equal(got[1].toTensor(), a));
}

TEST(Capture, MultipleReturnsBecomeGetitems) {
  auto fn = [](const std::vector<at::Tensor>& in) {
    auto mx = at::max(in[0], 1);
    auto parts = at::split(in[0], 2, 1);
    return at::cat({std::get<0>(mx).unsqueeze(1), parts[1], std::get<1>(mx).unsqueeze(1).to(at::kFloat)}, 1);
  };
  at::Tensor x = at::randn({3, 4});
  Traced t = trace(fn, {x});
  std::string s = str(*t.graph);
  EXPECT_NE(s.find("call_function[target=operator.getitem](args = (%max_dim, 0)"), std::string::npos) << s;
  EXPECT_NE(s.find("call_function[target=operator.getitem](args = (%split_tensor, 1)"), std::string::npos) << s;
  EXPECT_EQ(s.find("(%split_tensor, 0)"), std::string::npos) << s;  // unused elements get no node
  Module m = std::move(t).module();
  at::Tensor a = at::randn({3, 4});
  EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), fn({a})));
}

TEST(Capture, InPlaceOpsRecordedInOrderAndKept) {
  auto fn = [](const std::vector<at::Tensor>& in) {
    at::Tensor y = in[0].clone();
    y.add_(1);
    y.mul_(in[1]);
    at::Tensor v = y.view({-1});
    v.relu_();  // result unused: writes through the view into y
    return y * 3;
  };
  at::Tensor x = at::randn({2, 4}), s = at::randn({2, 4});
  Traced t = trace(fn, {x, s});
  EXPECT_EQ(targets(*t.graph), (std::vector<std::string>{"aten.clone.default", "aten.add_.Scalar", "aten.mul_.Tensor",
                                                         "aten.view.default", "aten.relu_.default",
                                                         "aten.mul.Scalar"}));
  // The in-place results are the tensor's new values.
  std::string g = str(*t.graph);
  EXPECT_NE(g.find("aten.mul_.Tensor](args = (%add__scalar, %x_1)"), std::string::npos) << g;
  for (bool plan : {true, false}) {
    Module m = trace(fn, {x, s}).module(ModuleOptions{plan});
    for (int i = 0; i < 3; ++i) {
      at::Tensor a = at::randn({2, 4}), b = at::randn({2, 4});
      at::Tensor a0 = a.clone();
      EXPECT_TRUE(at::allclose(m.forward({a, b}).toTensor(), fn({a, b}))) << "plan=" << plan;
      EXPECT_TRUE(at::equal(a, a0));  // clone first: the input is untouched
    }
  }
}

TEST(Capture, MutatingAnInputIsCaptured) {
  auto fn = [](const std::vector<at::Tensor>& in) {
    in[0].mul_(2);
    return in[0] + 1;
  };
  at::Tensor x = at::ones({3});
  Traced t = trace(fn, {x});
  EXPECT_TRUE(at::equal(x, at::full({3}, 2.0)));  // the capture ran the function
  EXPECT_EQ(targets(*t.graph), (std::vector<std::string>{"aten.mul_.Scalar", "aten.add.Scalar"}));
  Module m = std::move(t).module();
  at::Tensor a = at::ones({3});
  EXPECT_TRUE(at::equal(m.forward({a}).toTensor(), at::full({3}, 3.0)));
  EXPECT_TRUE(at::equal(a, at::full({3}, 2.0)));
}

TEST(Capture, DeadCodeIsRemovedButWritesStay) {
  auto fn = [](const std::vector<at::Tensor>& in) {
    at::Tensor unused = at::sin(in[0]);
    at::Tensor buf = at::zeros({3});
    at::add_out(buf, in[0], in[0]);  // out=: a write
    float f = in[0].sum().item<float>();  // data-dependent: baked in
    (void)unused;
    return buf * f;
  };
  at::Tensor x = at::ones({3});
  Traced t = trace(fn, {x});
  auto ts = targets(*t.graph);
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.sin.default"), 0);
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.add.out"), 1);
  EXPECT_GE(t.data_dependent, 1u);
  EXPECT_NE(str(*t.graph).find("aten.mul.Scalar](args = (%add_out, 3.0)"), std::string::npos) << str(*t.graph);
  TraceOptions keep;
  keep.dead_code_elimination = false;
  Traced t2 = trace(fn, {x}, keep);
  auto ts2 = targets(*t2.graph);
  EXPECT_EQ(std::count(ts2.begin(), ts2.end(), "aten.sin.default"), 1);
  Module m = std::move(t).module();
  EXPECT_TRUE(at::allclose(m.forward({x}).toTensor(), at::full({3}, 6.0)));
}

TEST(Capture, NestedCaptureIsAnError) {
  at::Tensor x = at::randn({2});
  bool threw = false;
  auto outer = [&](const std::vector<at::Tensor>& in) {
    try {
      trace([](const std::vector<at::Tensor>& i) { return i[0] + 1; }, {in[0]});
    } catch (const CaptureError& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find("already active"), std::string::npos) << e.what();
    }
    return at::neg(in[0]);
  };
  Traced t = trace(outer, {x});
  EXPECT_TRUE(threw);
  // The failed inner attempt left the outer capture intact.
  EXPECT_EQ(targets(*t.graph), (std::vector<std::string>{"aten.neg.default"}));
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, UnsupportedArgumentNamesTheOperator) {
  at::Generator gen = at::detail::createCPUGenerator(42);
  auto fn = [&](const std::vector<at::Tensor>& in) { return in[0] + at::rand({2}, gen); };
  try {
    trace(fn, {at::randn({2})});
    FAIL() << "expected CaptureError";
  } catch (const CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("aten::rand.generator"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'generator'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, ExceptionsLeaveNoStateBehind) {
  auto bad = [](const std::vector<at::Tensor>& in) { return at::mm(in[0], in[0]); };  // 2x3 @ 2x3 fails
  EXPECT_THROW(trace(bad, {at::randn({2, 3})}), c10::Error);
  EXPECT_TRUE(mode_clean());
  auto user = [](const std::vector<at::Tensor>& in) -> c10::IValue {
    at::relu(in[0]);
    throw std::runtime_error("user error");
  };
  EXPECT_THROW(trace(user, {at::randn({2, 3})}), std::runtime_error);
  EXPECT_TRUE(mode_clean());
  // Normal execution afterwards, and a second capture.
  at::Tensor a = at::ones({2});
  EXPECT_TRUE(at::equal(a + a, at::full({2}, 2.0)));
  Traced t = trace([](const std::vector<at::Tensor>& in) { return at::exp(in[0]); }, {a});
  EXPECT_EQ(targets(*t.graph), (std::vector<std::string>{"aten.exp.default"}));
  EXPECT_EQ(t.recorded_ops, 1u);  // nothing from the failed captures leaks in
}

TEST(Capture, ConcurrentCapturesOnTwoThreads) {
  // Each thread records only its own calls.
  std::vector<std::string> a_ops, b_ops;
  auto run = [](int which, std::vector<std::string>* out) {
    for (int rep = 0; rep < 20; ++rep) {
      Traced t = trace(
          [which](const std::vector<at::Tensor>& in) { return which == 0 ? at::sin(in[0]) : at::cos(in[0]) + 1; },
          {at::randn({4})});
      *out = targets(*t.graph);
    }
  };
  std::thread ta(run, 0, &a_ops), tb(run, 1, &b_ops);
  ta.join();
  tb.join();
  EXPECT_EQ(a_ops, (std::vector<std::string>{"aten.sin.default"}));
  EXPECT_EQ(b_ops, (std::vector<std::string>{"aten.cos.default", "aten.add.Scalar"}));
}

// ---- torch::nn -----------------------------------------------------------------------

struct SmallCnnImpl : ::torch::nn::Module {
  SmallCnnImpl()
      : conv1(register_module("conv1", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(3, 8, 3).padding(1)))),
        bn1(register_module("bn1", ::torch::nn::BatchNorm2d(8))),
        conv2(register_module("conv2", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(8, 16, 3).stride(2)))),
        fc(register_module("fc", ::torch::nn::Linear(16 * 3 * 3, 10))) {}
  at::Tensor forward(at::Tensor x) {
    x = ::torch::relu(bn1(conv1(x)));
    x = ::torch::max_pool2d(x, 2);
    x = ::torch::relu(conv2(x));
    x = x.flatten(1);
    return fc(x);
  }
  ::torch::nn::Conv2d conv1;
  ::torch::nn::BatchNorm2d bn1;
  ::torch::nn::Conv2d conv2;
  ::torch::nn::Linear fc;
};
TORCH_MODULE(SmallCnn);

TEST(Capture, TorchNnCnn) {
  ::torch::manual_seed(0);
  SmallCnn net;
  net->eval();
  ::torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 16, 16});
  Traced t = trace(net, {x});
  std::string s = str(*t.graph);
  EXPECT_NE(s.find("%conv1_weight : [num_users=1] = get_attr[target=conv1.weight]"), std::string::npos) << s;
  EXPECT_NE(s.find("get_attr[target=bn1.running_mean]"), std::string::npos) << s;
  EXPECT_NE(s.find("torch.ops.aten.conv2d.default](args = (%x, %conv1_weight, %conv1_bias, [1, 1], [1, 1])"),
            std::string::npos)
      << s;
  EXPECT_EQ(targets(*t.graph),
            (std::vector<std::string>{"aten.conv2d.default", "aten.batch_norm.default", "aten.relu.default",
                                      "aten.max_pool2d.default", "aten.conv2d.default", "aten.relu.default",
                                      "aten.flatten.using_ints", "aten.t.default", "aten.addmm.default"}));
  // (torch::nn::functional::linear calls addmm(bias, x, weight.t()) for 2-d inputs itself.)
  for (auto& nt : t.tensors) EXPECT_NE(nt.kind, NamedTensor::Kind::Constant) << nt.name;
  EXPECT_EQ(t.tensors.size(), 10u);  // 2 conv x 2, bn: weight, bias, mean, var, linear x 2
  Module m = std::move(t).module();
  for (int64_t batch : {2, 5}) {  // sizes were not read in C++: other batches work
    at::Tensor a = at::randn({batch, 3, 16, 16});
    EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), net->forward(a), 1e-5, 1e-6)) << batch;
  }
}

TEST(Capture, TorchNnSequentialTrainingModeMutatesBuffers) {
  ::torch::manual_seed(0);
  ::torch::nn::Sequential seq(::torch::nn::Linear(4, 4), ::torch::nn::BatchNorm1d(4), ::torch::nn::ReLU());
  seq->train();
  ::torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({8, 4});
  Traced t = trace(seq, {x});
  auto ts = targets(*t.graph);
  // num_batches_tracked += 1 is an in-place op on a buffer, kept by DCE.
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.add_.Scalar"), 1) << str(*t.graph);
  EXPECT_NE(str(*t.graph).find("get_attr[target=1.num_batches_tracked]"), std::string::npos) << str(*t.graph);
  const int64_t before = seq->named_buffers()["1.num_batches_tracked"].item<int64_t>();
  Module m = std::move(t).module();
  m.forward({at::randn({8, 4})});
  EXPECT_EQ(seq->named_buffers()["1.num_batches_tracked"].item<int64_t>(), before + 1);  // shared, not copied
}

// The JIT tracer's op sequence on the same module and input.
std::vector<std::string> jit_trace_ops(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& x) {
  auto traced = ::torch::jit::tracer::trace(
      {x}, [&](::torch::jit::Stack in) -> ::torch::jit::Stack { return {fn(in[0].toTensor())}; },
      [](const at::Tensor&) { return std::string(); });
  std::vector<std::string> out;
  for (const ::torch::jit::Node* n : traced.first->graph->nodes())
    if (n->kind().is_aten()) out.push_back(n->kind().toQualString());
  return out;
}

// The capture's op sequence (recorded calls, no dead code elimination) in
// the tracer's spelling. The one renaming: the tracer records conv2d by what
// it calls (a tracer special case in LibTorch 1.13); the capture keeps the
// overload the code called, as fxcpp.aten.lower does.
template <typename M>
std::vector<std::string> captured_ops(M& net, const at::Tensor& x) {
  TraceOptions keep;
  keep.dead_code_elimination = false;
  std::vector<std::string> ours;
  for (const std::string& t : targets(*trace(net, {x}, keep).graph)) {
    if (t == "operator.getitem") continue;  // an element of a recorded call's result, not a call
    std::string op = "aten::" + t.substr(5, t.rfind('.') - 5);
    ours.push_back(op == "aten::conv2d" ? "aten::_convolution" : op);
  }
  return ours;
}

TEST(Capture, SameOpsAsJitTracer) {
  ::torch::manual_seed(0);
  SmallCnn net;
  net->eval();
  for (auto& p : net->parameters()) p.set_requires_grad(false);  // the tracer makes them constants
  ::torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 16, 16});
  std::vector<std::string> jit = jit_trace_ops([&](const at::Tensor& in) { return net->forward(in); }, x);
  EXPECT_EQ(captured_ops(net, x), jit);
  EXPECT_EQ(jit.size(), 9u);
}

// ---- ResNet-18 with torch::nn ----------------------------------------------------------

struct BasicBlockImpl : ::torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    using namespace ::torch::nn;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", BatchNorm2d(out));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", BatchNorm2d(out));
    if (stride != 1 || in != out)
      downsample = register_module(
          "downsample", Sequential(Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)), BatchNorm2d(out)));
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor identity = downsample ? downsample->forward(x) : x;
    at::Tensor y = ::torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return ::torch::relu(y + identity);
  }
  ::torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  ::torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  ::torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : ::torch::nn::Module {
  ResNet18Impl() {
    using namespace ::torch::nn;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; ++l) {
      Sequential layer;
      layer->push_back(BasicBlock(in, widths[l], l == 0 ? 1 : 2));
      layer->push_back(BasicBlock(widths[l], widths[l], 1));
      in = widths[l];
      layers.push_back(register_module("layer" + std::to_string(l + 1), layer));
    }
    fc = register_module("fc", Linear(512, 1000));
  }
  at::Tensor forward(at::Tensor x) {
    x = ::torch::relu(bn1(conv1(x)));
    x = ::torch::max_pool2d(x, 3, 2, 1);
    for (auto& l : layers) x = l->forward(x);
    x = ::torch::adaptive_avg_pool2d(x, {1, 1});
    return fc(x.flatten(1));
  }
  ::torch::nn::Conv2d conv1{nullptr};
  ::torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<::torch::nn::Sequential> layers;
  ::torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

TEST(Capture, TorchNnResNet18) {
  ::torch::manual_seed(0);
  ResNet18 net;
  net->eval();
  ::torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({1, 3, 64, 64});
  Traced t = trace(net, {x});
  auto ts = targets(*t.graph);
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.conv2d.default"), 20);
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.batch_norm.default"), 20);
  EXPECT_EQ(std::count(ts.begin(), ts.end(), "aten.add.Tensor"), 8);
  std::string s = str(*t.graph);
  EXPECT_NE(s.find("get_attr[target=layer1.0.conv1.weight]"), std::string::npos);
  EXPECT_NE(s.find("get_attr[target=layer2.0.downsample.0.weight]"), std::string::npos);
  EXPECT_EQ(t.tensors.size(), 62u + 40u);  // 62 parameters; running mean/var of 20 batch norms
  Module m = std::move(t).module();
  for (int64_t batch : {1, 2}) {
    at::Tensor a = at::randn({batch, 3, 64, 64});
    EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), net->forward(a), 1e-4, 1e-5)) << batch;
  }
}

TEST(Capture, ResNet18SameOpsAsJitTracer) {
  ::torch::manual_seed(0);
  ResNet18 net;
  net->eval();
  for (auto& p : net->parameters()) p.set_requires_grad(false);
  ::torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({1, 3, 32, 32});
  std::vector<std::string> jit = jit_trace_ops([&](const at::Tensor& in) { return net->forward(in); }, x);
  EXPECT_EQ(captured_ops(net, x), jit);
  EXPECT_EQ(jit.size(), 70u);  // 20 conv, 20 batch_norm, 17 relu, 8 add, pools, flatten, t, addmm
}

// ---- Execution::Meta --------------------------------------------------------------------

TraceOptions on(Execution e) {
  TraceOptions o;
  o.execution = e;
  return o;
}

// What a module's parameters and buffers were before a capture.
struct TensorState {
  std::string name;
  const c10::TensorImpl* impl;
  at::Tensor copy;
  const void* data;
  int64_t version;
  bool requires_grad;
};

template <typename M>
std::map<std::string, at::Tensor> module_tensors(M& net) {
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : net->named_parameters(true)) out[kv.key()] = kv.value();
  for (const auto& kv : net->named_buffers(true)) out[kv.key()] = kv.value();
  return out;
}

template <typename M>
std::vector<TensorState> snapshot(M& net) {
  std::vector<TensorState> out;
  for (const auto& kv : module_tensors(net))
    out.push_back(TensorState{kv.first, kv.second.unsafeGetTensorImpl(),
                              kv.second.detach().clone(),  // no autograd graph that keeps state alive
                              kv.second.data_ptr(), kv.second._version(), kv.second.requires_grad()});
  return out;
}

// The module holds the same tensors (TensorImpl), on the CPU, with the same
// storage, values, version and requires_grad.
template <typename M>
void expect_restored(M& net, const std::vector<TensorState>& before) {
  auto now = module_tensors(net);
  ASSERT_EQ(now.size(), before.size());
  for (const TensorState& s : before) {
    const at::Tensor& t = now.at(s.name);
    EXPECT_EQ(t.unsafeGetTensorImpl(), s.impl) << s.name;
    EXPECT_TRUE(t.device().is_cpu()) << s.name;
    EXPECT_FALSE(t.key_set().has(c10::DispatchKey::Meta)) << s.name;
    EXPECT_EQ(t.data_ptr(), s.data) << s.name;
    EXPECT_EQ(t._version(), s.version) << s.name;
    EXPECT_EQ(t.requires_grad(), s.requires_grad) << s.name;
    EXPECT_EQ(t.sizes(), s.copy.sizes()) << s.name;
    EXPECT_EQ(t.strides(), s.copy.strides()) << s.name;
    EXPECT_TRUE(at::equal(t, s.copy)) << s.name;
  }
}

// A Meta capture equals the real one: same printout, counts, tensors (the
// same objects, by the same names) and placeholder tensor_meta (the real
// inputs').
void expect_same_capture(const Traced& real, const Traced& meta) {
  EXPECT_FALSE(real.ran_on_meta);
  EXPECT_TRUE(meta.ran_on_meta);
  EXPECT_EQ(meta.meta_fallback, "");
  EXPECT_EQ(str(*meta.graph), str(*real.graph));
  EXPECT_EQ(meta.recorded_ops, real.recorded_ops);
  EXPECT_EQ(meta.data_dependent, real.data_dependent);
  EXPECT_EQ(meta.input_shapes, real.input_shapes);
  ASSERT_EQ(meta.tensors.size(), real.tensors.size());
  for (size_t i = 0; i < real.tensors.size(); ++i) {
    EXPECT_EQ(meta.tensors[i].name, real.tensors[i].name);
    EXPECT_EQ(meta.tensors[i].kind, real.tensors[i].kind);
    EXPECT_TRUE(meta.tensors[i].tensor.is_same(real.tensors[i].tensor)) << real.tensors[i].name;
    EXPECT_FALSE(meta.tensors[i].tensor.is_meta()) << real.tensors[i].name;
  }
  std::vector<Node*> a, b;
  for (Node* n : real.graph->nodes())
    if (n->op() == Op::Placeholder) a.push_back(n);
  for (Node* n : meta.graph->nodes())
    if (n->op() == Op::Placeholder) b.push_back(n);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(a[i]->meta().empty());
    EXPECT_TRUE(a[i]->meta() == b[i]->meta()) << a[i]->name();
  }
}

// A model whose operators all have C++ Meta kernels in LibTorch 1.13
// (linear, gelu, tanh, sigmoid, add, mul, log_softmax; not layer_norm, whose
// composite kernel calls native_batch_norm).
struct SmallMlpImpl : ::torch::nn::Module {
  SmallMlpImpl()
      : fc1(register_module("fc1", ::torch::nn::Linear(16, 32))),
        fc2(register_module("fc2", ::torch::nn::Linear(32, 32))),
        gate(register_module("gate", ::torch::nn::Linear(32, 32))),
        head(register_module("head", ::torch::nn::Linear(32, 10))) {
    register_buffer("scale", at::full({32}, 0.5));
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor h = ::torch::gelu(fc1(x));
    h = ::torch::tanh(h + fc2(h)) * ::torch::sigmoid(gate(h)) * named_buffers()["scale"];
    return ::torch::log_softmax(head(h), -1);
  }
  ::torch::nn::Linear fc1, fc2, gate, head;
};
TORCH_MODULE(SmallMlp);

TEST(Capture, MetaRunGivesTheRealGraphMlp) {
  ::torch::manual_seed(0);
  SmallMlp net;
  at::Tensor x = at::randn({2, 5, 16});
  for (bool grad : {true, false}) {
    c10::AutoGradMode mode(grad);
    auto before = snapshot(net);
    Traced meta = trace(net, {x}, on(Execution::Meta));
    expect_restored(net, before);
    Traced real = trace(net, {x});
    expect_same_capture(real, meta);
    Traced either = trace(net, {x}, on(Execution::MetaOrReal));
    expect_same_capture(real, either);
    EXPECT_TRUE(mode_clean());
  }
  ::torch::NoGradGuard no_grad;
  Module m = trace(net, {x}, on(Execution::Meta)).module();  // runs on the real tensors
  at::Tensor a = at::randn({3, 5, 16});
  EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), net->forward(a), 1e-5, 1e-6));
}

TEST(Capture, CnnsFallBackWithoutCppMetaKernels) {
  // LibTorch 1.13 has no C++ Meta kernel for convolution (it reaches
  // convolution_overrideable), native_batch_norm or relu: a Meta capture of
  // a CNN in a C++ program fails at its first conv2d.
  ::torch::manual_seed(0);
  SmallCnn cnn;
  ResNet18 resnet;
  cnn->eval();
  resnet->eval();
  auto check = [](auto& net, const at::Tensor& x) {
    auto before = snapshot(net);
    Traced t = trace(net, {x}, on(Execution::MetaOrReal));
    expect_restored(net, before);
    EXPECT_FALSE(t.ran_on_meta);
    EXPECT_NE(t.meta_fallback.find("aten::conv2d failed on Meta tensors"), std::string::npos) << t.meta_fallback;
    EXPECT_NE(t.meta_fallback.find("convolution_overrideable"), std::string::npos) << t.meta_fallback;
    Traced real = trace(net, {x});
    EXPECT_EQ(str(*t.graph), str(*real.graph));
    EXPECT_EQ(t.recorded_ops, real.recorded_ops);
    try {
      trace(net, {x}, on(Execution::Meta));
      ADD_FAILURE() << "expected CaptureError";
    } catch (const CaptureError& e) {
      EXPECT_NE(std::string(e.what()).find("aten::conv2d failed on Meta tensors"), std::string::npos) << e.what();
    }
    expect_restored(net, before);
    EXPECT_TRUE(mode_clean());
  };
  check(cnn, at::randn({2, 3, 16, 16}));
  check(resnet, at::randn({1, 3, 64, 64}));
}

// Shape-only Meta kernels for the three operators the C++ ResNet-18 and the
// small CNN lack (the Python package registers Python ones when torch is
// imported, torch/_meta_registrations.py), registered for one test's scope:
// with them every operator of these models has a Meta kernel.
at::Tensor meta_convolution(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>&,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                            bool transposed, at::IntArrayRef, int64_t) {
  TORCH_CHECK(!transposed, "meta_convolution: not transposed");
  std::vector<int64_t> size{input.size(0), weight.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) {
    const size_t i = static_cast<size_t>(d - 2);
    size.push_back((input.size(d) + 2 * padding[i] - dilation[i] * (weight.size(d) - 1) - 1) / stride[i] + 1);
  }
  return at::empty(size, input.options());
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> meta_native_batch_norm(const at::Tensor& input,
                                                                      const c10::optional<at::Tensor>&,
                                                                      const c10::optional<at::Tensor>&,
                                                                      const c10::optional<at::Tensor>&,
                                                                      const c10::optional<at::Tensor>&, bool, double,
                                                                      double) {
  return {at::empty_like(input), at::empty({input.size(1)}, input.options()),
          at::empty({input.size(1)}, input.options())};
}
at::Tensor meta_relu(const at::Tensor& self) { return at::empty_like(self); }

struct CnnMetaKernels {
  ::torch::Library lib{::torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__};
  CnnMetaKernels() {
    lib.impl("convolution", &meta_convolution);
    lib.impl("native_batch_norm", &meta_native_batch_norm);
    lib.impl("relu", &meta_relu);
  }
};

TEST(Capture, MetaRunGivesTheRealGraphSmallCnn) {
  CnnMetaKernels kernels;
  ::torch::manual_seed(0);
  SmallCnn net;
  at::Tensor x = at::randn({2, 3, 16, 16});
  for (bool train : {false, true}) {
    net->train(train);
    auto before = snapshot(net);
    Traced meta = trace(net, {x}, on(Execution::Meta));
    expect_restored(net, before);  // training mode too: the running stats were updated on Meta
    Traced real = trace(net, {x});
    expect_same_capture(real, meta);
    Traced either = trace(net, {x}, on(Execution::MetaOrReal));
    expect_same_capture(real, either);
    EXPECT_TRUE(mode_clean());
  }
  net->eval();
  ::torch::NoGradGuard no_grad;
  Module m = trace(net, {x}, on(Execution::Meta)).module();
  at::Tensor a = at::randn({2, 3, 16, 16});
  EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), net->forward(a), 1e-5, 1e-6));
}

TEST(Capture, MetaRunGivesTheRealGraphResNet18) {
  CnnMetaKernels kernels;
  ::torch::manual_seed(0);
  ResNet18 net;
  net->eval();
  at::Tensor x = at::randn({1, 3, 64, 64});
  auto before = snapshot(net);
  Traced meta = trace(net, {x}, on(Execution::Meta));
  expect_restored(net, before);
  Traced real = trace(net, {x});
  expect_same_capture(real, meta);
  EXPECT_EQ(meta.tensors.size(), 62u + 40u);
  ::torch::NoGradGuard no_grad;
  Module m = std::move(meta).module();
  at::Tensor a = at::randn({2, 3, 64, 64});
  EXPECT_TRUE(at::allclose(m.forward({a}).toTensor(), net->forward(a), 1e-4, 1e-5));
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, MetaRunWritesNothing) {
  // In-place writes land on the Meta stand-ins: the input and the buffers
  // keep their values and versions (a real capture runs the function).
  auto fn = [](const std::vector<at::Tensor>& in) {
    in[0].mul_(2);
    return in[0] + 1;
  };
  at::Tensor x = at::ones({3});
  const int64_t version = x._version();
  Traced meta = trace(fn, {x}, on(Execution::Meta));
  EXPECT_TRUE(at::equal(x, at::ones({3})));
  EXPECT_EQ(x._version(), version);
  Traced real = trace(fn, {x});
  EXPECT_TRUE(at::equal(x, at::full({3}, 2.0)));
  expect_same_capture(real, meta);

  CnnMetaKernels kernels;  // batch_norm and relu
  ::torch::manual_seed(0);
  ::torch::nn::Sequential seq(::torch::nn::Linear(4, 4), ::torch::nn::BatchNorm1d(4), ::torch::nn::ReLU());
  seq->train();
  ::torch::NoGradGuard no_grad;
  at::Tensor y = at::randn({8, 4});
  auto before = snapshot(seq);
  Traced m2 = trace(seq, {y}, on(Execution::Meta));
  expect_restored(seq, before);  // num_batches_tracked, running_mean/var: unchanged
  Traced r2 = trace(seq, {y});
  EXPECT_EQ(seq->named_buffers()["1.num_batches_tracked"].item<int64_t>(), 1);  // the real run counted
  expect_same_capture(r2, m2);
}

TEST(Capture, MetaRecordsTheRealDevice) {
  // Options taken from a Meta stand-in say device=meta: recorded as the
  // device of the tensors it stands for.
  auto fn = [](const std::vector<at::Tensor>& in) {
    at::Tensor z = at::zeros({2, 3}, in[0].options());
    return (in[0].to(in[0].device()) + z).to(at::kDouble);
  };
  at::Tensor x = at::randn({2, 3});
  Traced real = trace(fn, {x});
  Traced meta = trace(fn, {x}, on(Execution::Meta));
  expect_same_capture(real, meta);
  std::string s = str(*meta.graph);
  EXPECT_NE(s.find("device: device(type='cpu')"), std::string::npos) << s;
  EXPECT_EQ(s.find("meta"), std::string::npos) << s;
}

TEST(Capture, MetaOrRealFallsBackWithoutAMetaKernel) {
  auto nonzero = [](const std::vector<at::Tensor>& in) { return at::nonzero(at::sigmoid(in[0]) > 0.5); };
  auto item = [](const std::vector<at::Tensor>& in) {  // data-dependent
    float s = in[0].sum().item<float>();
    return in[0] * s;
  };
  auto caught = [](const std::vector<at::Tensor>& in) {  // the callable swallows the error
    at::Tensor r = at::sigmoid(in[0]);
    try {
      r = at::nonzero(r);
    } catch (const c10::Error&) {
    }
    return r;
  };
  at::Tensor x = at::randn({4, 5});
  // LibTorch's own reason, which the message carries: nonzero has no Meta
  // kernel on any LibTorch (1.13: "Could not run 'aten::nonzero' with
  // arguments from the 'Meta' backend", 2.x: "attempted to run this operator
  // with Meta tensors, but there was no fake impl or Meta kernel").
  std::string no_kernel;
  try {
    at::nonzero(at::ones({4, 5}, at::TensorOptions().dtype(at::kBool).device(at::kMeta)));
    ADD_FAILURE() << "aten::nonzero ran on Meta tensors";
  } catch (const c10::NotImplementedError& e) {
    no_kernel = e.what_without_backtrace();
    no_kernel = no_kernel.substr(0, no_kernel.find('\n'));
  }
  ASSERT_NE(no_kernel.find("Meta"), std::string::npos) << no_kernel;
  struct Case {
    std::function<c10::IValue(const std::vector<at::Tensor>&)> fn;
    std::vector<std::string> names;  // what the error names
  };
  for (const Case& c : {Case{nonzero, {"aten::nonzero failed on Meta tensors: " + no_kernel}},
                        Case{item, {"aten::item failed on Meta tensors", "aten::_local_scalar_dense"}},
                        Case{caught, {"aten::nonzero failed on Meta tensors"}}}) {
    Traced real = trace(c.fn, {x});
    Traced t = trace(c.fn, {x}, on(Execution::MetaOrReal));
    EXPECT_FALSE(t.ran_on_meta);
    for (const std::string& n : c.names) EXPECT_NE(t.meta_fallback.find(n), std::string::npos) << t.meta_fallback;
    EXPECT_EQ(t.meta_fallback.find('\n'), std::string::npos) << t.meta_fallback;
    EXPECT_EQ(str(*t.graph), str(*real.graph));
    EXPECT_EQ(t.recorded_ops, real.recorded_ops);
    EXPECT_TRUE(mode_clean());
    try {
      trace(c.fn, {x}, on(Execution::Meta));
      ADD_FAILURE() << "expected CaptureError";
    } catch (const CaptureError& e) {
      for (const std::string& n : c.names) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
    EXPECT_TRUE(mode_clean());
  }
}

TEST(Capture, MetaFallbackRestoresTheModule) {
  // The Meta attempt fails after the module ran on Meta: its tensors are back
  // before the real run, which computes with them.
  ::torch::manual_seed(0);
  SmallMlp net;
  ::torch::NoGradGuard no_grad;
  auto fn = [&](const std::vector<at::Tensor>& in) { return at::nonzero(net->forward(in[0]) > -2); };
  at::Tensor x = at::randn({2, 5, 16});
  auto before = snapshot(net);
  Traced t = trace(net, fn, {x}, on(Execution::MetaOrReal));
  expect_restored(net, before);
  EXPECT_FALSE(t.ran_on_meta);
  EXPECT_NE(t.meta_fallback.find("aten::nonzero failed on Meta tensors"), std::string::npos) << t.meta_fallback;
  Traced real = trace(net, fn, {x});
  EXPECT_EQ(str(*t.graph), str(*real.graph));
  EXPECT_NE(str(*t.graph).find("get_attr[target=fc1.weight]"), std::string::npos);
  Module m = std::move(t).module();
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), fn({x})));
  EXPECT_THROW(trace(net, fn, {x}, on(Execution::Meta)), CaptureError);
  expect_restored(net, before);
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, MetaRunsLeaveNoStateBehind) {
  ::torch::manual_seed(0);
  SmallMlp net;
  at::Tensor x = at::randn({2, 5, 16});
  auto before = snapshot(net);
  int calls = 0;
  auto user = [&](const std::vector<at::Tensor>& in) -> c10::IValue {
    ++calls;
    net->forward(in[0]);
    throw std::runtime_error("user error");
  };
  // Meta: the callable's own exception propagates as it is.
  EXPECT_THROW(trace(net, user, {x}, on(Execution::Meta)), std::runtime_error);
  EXPECT_EQ(calls, 1);
  expect_restored(net, before);
  EXPECT_TRUE(mode_clean());
  // MetaOrReal: the real run throws it again.
  EXPECT_THROW(trace(net, user, {x}, on(Execution::MetaOrReal)), std::runtime_error);
  EXPECT_EQ(calls, 3);
  expect_restored(net, before);
  EXPECT_TRUE(mode_clean());
  // A shape error on Meta: CaptureError naming the operator (Meta), or the
  // real run's c10::Error (MetaOrReal).
  auto bad = [](const std::vector<at::Tensor>& in) { return at::mm(in[0], in[0]); };
  try {
    trace(bad, {at::randn({2, 3})}, on(Execution::Meta));
    ADD_FAILURE() << "expected CaptureError";
  } catch (const CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("aten::mm failed on Meta tensors"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(mode_clean());
  EXPECT_THROW(trace(bad, {at::randn({2, 3})}, on(Execution::MetaOrReal)), c10::Error);
  EXPECT_TRUE(mode_clean());
  // A nested capture inside a Meta capture is refused as usual.
  bool nested = false;
  Traced outer = trace(
      [&](const std::vector<at::Tensor>& in) {
        EXPECT_TRUE(in[0].is_meta());
        try {
          trace([](const std::vector<at::Tensor>& i) { return i[0] + 1; }, {in[0]}, on(Execution::Meta));
        } catch (const CaptureError&) {
          nested = true;
        }
        return at::neg(in[0]);
      },
      {at::randn({2})}, on(Execution::Meta));
  EXPECT_TRUE(nested);
  EXPECT_TRUE(outer.ran_on_meta);
  EXPECT_EQ(targets(*outer.graph), (std::vector<std::string>{"aten.neg.default"}));
  // A Meta output the callable keeps holds the Meta run's autograd graph
  // (and its AccumulateGrad nodes) alive: training afterwards builds its own.
  at::Tensor kept;
  trace(net, [&](const std::vector<at::Tensor>& in) { return c10::IValue(kept = net->forward(in[0])); }, {x},
        on(Execution::Meta));
  ASSERT_TRUE(kept.is_meta() && kept.requires_grad());
  net->zero_grad();
  net->forward(x).sum().backward();
  for (const auto& p : net->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().device().is_cpu());
  }
  net->zero_grad();
  kept.reset();
  // Ordinary execution and a real capture afterwards.
  at::Tensor a = at::ones({2});
  EXPECT_TRUE(at::equal(a + a, at::full({2}, 2.0)));
  Traced t = trace([](const std::vector<at::Tensor>& in) { return at::exp(in[0]); }, {a});
  EXPECT_EQ(targets(*t.graph), (std::vector<std::string>{"aten.exp.default"}));
  EXPECT_EQ(t.recorded_ops, 1u);
  EXPECT_FALSE(t.ran_on_meta);
  ::torch::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(net->forward(x), net->forward(x)));
  expect_restored(net, before);
  EXPECT_TRUE(mode_clean());
}

TEST(Capture, MetaRefusesTensorsWithoutAMetaForm) {
  // A sparse tensor (its TensorImpl is not the base class): no Meta stand-in.
  at::Tensor w = at::eye(3).to_sparse();
  auto fn = [&](const std::vector<at::Tensor>& in) { return at::mm(w, in[0]); };
  TraceOptions opts;
  opts.named_tensors.push_back(NamedTensor{"w", NamedTensor::Kind::Buffer, w, std::nullopt});
  at::Tensor x = at::randn({3, 2});
  opts.execution = Execution::Meta;
  try {
    trace(fn, {x}, opts);
    ADD_FAILURE() << "expected CaptureError";
  } catch (const CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("'w' is a Sparse"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no Meta stand-in"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(w.is_sparse());
  opts.execution = Execution::MetaOrReal;
  Traced t = trace(fn, {x}, opts);
  EXPECT_FALSE(t.ran_on_meta);
  EXPECT_NE(t.meta_fallback.find("no Meta stand-in"), std::string::npos) << t.meta_fallback;
  opts.execution = Execution::Real;
  EXPECT_EQ(str(*t.graph), str(*trace(fn, {x}, opts).graph));
  EXPECT_TRUE(mode_clean());
}

}  // namespace
