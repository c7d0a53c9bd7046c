// The C++ half of the capture benchmark (bench/bench_runtime.py drives it):
// capture time of fxcpp::torch::trace against LibTorch's JIT tracer
// (torch::jit::tracer::trace) on the same torch::nn modules, in one run.
//
//   fxcpp_capture_bench [--iters N] [--reps N] [--ops 1000]
//
// Modules (torch::nn, eval mode, parameters not requiring grad, NoGradGuard):
//   cnn    conv-bn-relu x2, max_pool, conv-relu, flatten, linear on 1x3x32x32
//   chain  --ops calls of add / mul / relu, cycling, on 1x8 float tensors
//
// Prints machine-readable lines, nothing else on stdout:
//
//   RESULT,<module>/<variant>,<us per op>,us/op   best of --reps repetitions of
//                                                 --iters calls (after one untimed
//                                                 warm-up call; the variants take
//                                                 turns within each repetition)
//   OPS,<module>/<variant>,<ops per capture>
//   CHECK,<module>/fxcpp_trace,<max abs difference of the captured graph run
//                               by fxcpp::torch::Module from eager>
//
// Variants: fxcpp_trace (fxcpp::torch::trace(module, inputs): dispatcher-mode
// capture plus dead code elimination; per op = time / recorded_ops),
// jit_tracer (torch::jit::tracer::trace of the module's forward, graph
// clean-up passes included; per op = time / aten nodes in its graph) and
// eager (module->forward alone, per fxcpp's op count: the kernels' share of
// both captures, which run the module once). Each capture is destroyed
// inside the timed loop. One intra-op thread. No timing assertions.
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fxcpp/torch/capture.h"

namespace {

using Clock = std::chrono::steady_clock;

struct SmallCnnImpl : ::torch::nn::Module {
  SmallCnnImpl() {
    using namespace ::torch::nn;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(3, 16, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", BatchNorm2d(16));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(16, 16, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", BatchNorm2d(16));
    conv3 = register_module("conv3", Conv2d(Conv2dOptions(16, 32, 3).stride(2)));
    fc = register_module("fc", Linear(32 * 7 * 7, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = ::torch::relu(bn1(conv1(x)));
    x = ::torch::relu(bn2(conv2(x)));
    x = ::torch::max_pool2d(x, 2);
    x = ::torch::relu(conv3(x));
    return fc(x.flatten(1));
  }
  ::torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  ::torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  ::torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(SmallCnn);

struct ChainImpl : ::torch::nn::Module {
  explicit ChainImpl(int ops) : ops(ops) {}
  at::Tensor forward(at::Tensor x, at::Tensor y) {
    for (int i = 0; i < ops; ++i) {
      switch (i % 3) {
        case 0: x = ::torch::add(x, y); break;
        case 1: x = ::torch::mul(x, y); break;
        default: x = ::torch::relu(x); break;
      }
    }
    return x;
  }
  int ops;
};
TORCH_MODULE(Chain);

/// Best seconds per call of each function over reps x iters calls, after one
/// warm-up call each. The functions take turns within each repetition, so
/// background load on a shared machine hits them alike.
std::vector<double> best_of(const std::vector<std::function<void()>>& fns, int reps, int iters) {
  std::vector<double> best(fns.size(), 1e30);
  for (const auto& fn : fns) fn();
  for (int r = 0; r < reps; ++r) {
    for (size_t f = 0; f < fns.size(); ++f) {
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) fns[f]();
      best[f] = std::min(best[f], std::chrono::duration<double>(Clock::now() - t0).count() / iters);
    }
  }
  return best;
}

/// The ATen nodes of a JIT trace of `fn` on `inputs`.
size_t jit_trace_ops(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& fn,
                     const std::vector<at::Tensor>& inputs) {
  ::torch::jit::Stack stack(inputs.begin(), inputs.end());
  auto traced = ::torch::jit::tracer::trace(
      stack,
      [&](::torch::jit::Stack in) -> ::torch::jit::Stack {
        std::vector<at::Tensor> ts;
        for (auto& v : in) ts.push_back(v.toTensor());
        return {fn(ts)};
      },
      [](const at::Tensor&) { return std::string(); });
  size_t n = 0;
  for (const ::torch::jit::Node* node : traced.first->graph->nodes())
    if (node->kind().is_aten()) ++n;
  return n;
}

template <typename M>
void bench(const std::string& name, M& module, const std::vector<at::Tensor>& inputs,
           const std::function<at::Tensor(const std::vector<at::Tensor>&)>& fn, int reps, int iters) {
  module->eval();
  for (auto& p : module->parameters()) p.set_requires_grad(false);  // the JIT tracer makes them constants
  ::torch::NoGradGuard no_grad;

  // Op counts and the correctness check, outside the timed loops.
  fxcpp::torch::Traced once = fxcpp::torch::trace(module, inputs);
  const size_t ours = once.recorded_ops;
  const size_t jit = jit_trace_ops(fn, inputs);
  {
    fxcpp::torch::Module m = std::move(once).module();
    std::vector<c10::IValue> in(inputs.begin(), inputs.end());
    at::Tensor got = m.forward(in).toTensor();
    at::Tensor want = fn(inputs);
    std::printf("CHECK,%s/fxcpp_trace,%.6g\n", name.c_str(), (got - want).abs().max().item<double>());
  }
  std::printf("OPS,%s/fxcpp_trace,%zu\nOPS,%s/jit_tracer,%zu\n", name.c_str(), ours, name.c_str(), jit);

  const std::vector<double> t = best_of({[&] { fxcpp::torch::Traced traced = fxcpp::torch::trace(module, inputs); },
                                         [&] { jit_trace_ops(fn, inputs); }, [&] { fn(inputs); }},
                                        reps, iters);
  const double t_ours = t[0], t_jit = t[1], t_eager = t[2];
  std::printf("RESULT,%s/fxcpp_trace,%.6g,us/op\n", name.c_str(), t_ours * 1e6 / ours);
  std::printf("RESULT,%s/jit_tracer,%.6g,us/op\n", name.c_str(), t_jit * 1e6 / jit);
  std::printf("RESULT,%s/eager,%.6g,us/op\n", name.c_str(), t_eager * 1e6 / ours);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, reps = 5, ops = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(k, "--iters")) iters = std::max(1, v);
    else if (!std::strcmp(k, "--reps")) reps = std::max(1, v);
    else if (!std::strcmp(k, "--ops")) ops = std::max(1, v);
    else {
      std::fprintf(stderr, "usage: fxcpp_capture_bench [--iters N] [--reps N] [--ops N]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  try {
    ::torch::manual_seed(0);
    SmallCnn cnn;
    bench("cnn", cnn, {at::randn({1, 3, 32, 32})},
          [&](const std::vector<at::Tensor>& in) { return cnn->forward(in[0]); }, reps, iters);
    Chain chain(ops);
    bench("chain", chain, {at::randn({1, 8}), at::rand({1, 8})},
          [&](const std::vector<at::Tensor>& in) { return chain->forward(in[0], in[1]); }, reps,
          std::max(1, iters / 4));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fxcpp_capture_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
