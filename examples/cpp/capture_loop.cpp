// The whole loop in C++: capture a torch::nn CNN with fxcpp::torch::trace,
// transform the graph (fold each batch_norm into the conv2d before it), run
// it with the fxcpp runtime, compare with eager, and save it for Python.
//
//   fxcpp_example_capture_loop [OUT.fxpt] [--repeat N]
//
// Writes OUT.fxpt (default capture_loop.fxpt) plus OUT.fxpt.x.bin and
// OUT.fxpt.y.bin (the example input and the runtime's output, raw float32),
// so Python can check the file: `fxcpp.aten.load("capture_loop.fxpt")`.
// Exits 0 when the transformed graph matches eager, 1 otherwise.
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fxcpp/passes/dce.h"
#include "fxcpp/torch/capture.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A conv-bn-relu block.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t in, int64_t out, int64_t stride) {
    conv = register_module(
        "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(out));
  }
  at::Tensor forward(at::Tensor x) { return torch::relu(bn(conv(x))); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(Block);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    block1 = register_module("block1", Block(3, 16, 1));
    block2 = register_module("block2", Block(16, 32, 2));
    block3 = register_module("block3", Block(32, 32, 1));
    fc = register_module("fc", torch::nn::Linear(32, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = block1(x);
    x = torch::max_pool2d(x, 2);
    x = block3(block2(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    return fc(x.flatten(1));
  }
  Block block1{nullptr}, block2{nullptr}, block3{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

bool is_op(const fxcpp::Node* n, const char* qualified) {
  if (n->op() != fxcpp::Op::CallFunction) return false;
  const fxcpp::torch::AtenOp* op = fxcpp::torch::as_aten_op(n->target().fn());
  return op && op->qualified == qualified;
}

// Folds eval-mode batch_norm(conv2d(x, w, b, ...), gamma, beta, mean, var,
// training=False, momentum, eps, cudnn) into conv2d(x, w', b', ...) with
//   w' = w * gamma / sqrt(var + eps)  (per output channel)
//   b' = (b - mean) * gamma / sqrt(var + eps) + beta
// computed now, from the tensors the get_attr nodes name. Plain graph edits:
// new get_attr nodes for w' and b', the conv's arguments updated, the
// batch_norm's users pointed at the conv; dead code elimination then drops
// the batch_norm and its get_attr nodes, and the tensors no get_attr reads
// any more are dropped. Returns the number of folds.
int fold_conv_bn(fxcpp::Graph& g, std::vector<fxcpp::torch::NamedTensor>& tensors) {
  using fxcpp::Argument;
  using fxcpp::Node;
  std::map<std::string, at::Tensor> by_name;
  for (const auto& t : tensors) by_name[t.name] = t.tensor;
  auto attr = [&](const Argument& a) -> at::Tensor {  // the tensor behind a get_attr argument, or undefined
    if (!a.is_node() || a.as_node()->op() != fxcpp::Op::GetAttr) return {};
    auto it = by_name.find(a.as_node()->target().str().get());
    return it == by_name.end() ? at::Tensor() : it->second;
  };
  std::vector<Node*> bns;
  for (Node* n : g.nodes())
    if (is_op(n, "aten::batch_norm")) bns.push_back(n);
  int folded = 0;
  for (Node* bn : bns) {
    auto a = bn->args();
    if (a.size() < 8 || !a[0].is_node() || !is_op(a[0].as_node(), "aten::conv2d")) continue;
    Node* conv = a[0].as_node();
    if (conv->num_users() != 1 || a[5].kind() != fxcpp::ArgKind::Bool || a[5].as_bool()) continue;
    at::Tensor gamma = attr(a[1]), beta = attr(a[2]), mean = attr(a[3]), var = attr(a[4]);
    at::Tensor w = attr(conv->args()[1]);
    if (!gamma.defined() || !beta.defined() || !mean.defined() || !var.defined() || !w.defined()) continue;
    const double eps = a[7].as_double();
    at::Tensor b = conv->args().size() > 2 ? attr(conv->args()[2]) : at::Tensor();
    if (conv->args().size() > 2 && !conv->args()[2].is_none() && !b.defined()) continue;  // bias not a get_attr
    if (!b.defined()) b = at::zeros_like(mean);

    at::Tensor scale = gamma / at::sqrt(var + eps);
    at::Tensor w2 = w * scale.reshape({-1, 1, 1, 1});
    at::Tensor b2 = (b - mean) * scale + beta;
    // "block1.conv.weight" -> "block1.conv.folded_weight", "block1.conv.folded_bias"
    std::string base = conv->args()[1].as_node()->target().str().get();
    base = base.substr(0, base.rfind('.') + 1) + "folded_";
    tensors.push_back({base + "weight", fxcpp::torch::NamedTensor::Kind::Parameter, w2, std::nullopt});
    tensors.push_back({base + "bias", fxcpp::torch::NamedTensor::Kind::Parameter, b2, std::nullopt});
    by_name[base + "weight"] = w2;
    by_name[base + "bias"] = b2;
    Node *wn, *bn_node;
    {
      auto guard = g.inserting_before(conv);
      wn = g.get_attr(base + "weight");
      bn_node = g.get_attr(base + "bias");
    }
    std::vector<Argument> args = conv->args().to_vector();
    if (args.size() < 3) args.resize(3);
    args[1] = Argument::node(wn);
    args[2] = Argument::node(bn_node);
    conv->set_args(std::move(args));
    bn->replace_all_uses_with(conv);
    ++folded;
  }
  fxcpp::eliminate_dead_code(g);
  std::set<std::string> used;
  for (Node* n : g.nodes())
    if (n->op() == fxcpp::Op::GetAttr) used.insert(n->target().str().get());
  std::vector<fxcpp::torch::NamedTensor> kept;
  for (auto& t : tensors)
    if (used.count(t.name)) kept.push_back(std::move(t));
  tensors = std::move(kept);
  return folded;
}

size_t count_op(const fxcpp::Graph& g, const char* qualified) {
  size_t n = 0;
  for (const fxcpp::Node* node : g.nodes()) n += is_op(node, qualified);
  return n;
}

void write_raw(const std::string& path, const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::ofstream o(path, std::ios::binary);
  o.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
  if (!o) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "capture_loop.fxpt";
  int repeat = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (!a.empty() && a[0] != '-') out_path = a;
    else {
      std::cerr << "usage: " << argv[0] << " [OUT.fxpt] [--repeat N]\n";
      return 2;
    }
  }
  try {
    at::set_num_threads(1);
    torch::manual_seed(0);
    Net net;
    net->eval();
    torch::NoGradGuard no_grad;
    // Non-trivial batch norm statistics, so folding has something to fold.
    for (auto& kv : net->named_buffers())
      if (kv.key().find("running_") != std::string::npos) kv.value().uniform_(0.5, 1.5);
    for (auto& kv : net->named_parameters())
      if (kv.key().find(".bn.") != std::string::npos) kv.value().uniform_(-0.5, 0.5).add_(0.5);
    at::Tensor x = at::randn({2, 3, 32, 32});

    // 1. Capture.
    auto t0 = Clock::now();
    fxcpp::torch::Traced traced = fxcpp::torch::trace(net, {x});
    const double capture_ms = ms_since(t0);
    std::cout << "== captured (" << traced.recorded_ops << " ATen calls, " << capture_ms << " ms)\n"
              << *traced.graph << "\n";

    // 2. Transform: fold conv2d + batch_norm.
    t0 = Clock::now();
    const int folded = fold_conv_bn(*traced.graph, traced.tensors);
    const double transform_ms = ms_since(t0);
    std::cout << "\n== after folding " << folded << " batch_norm(s) into conv2d (" << transform_ms << " ms)\n"
              << *traced.graph << "\n";
    const size_t bn_left = count_op(*traced.graph, "aten::batch_norm");

    // 3. Run with the fxcpp runtime and compare with eager.
    t0 = Clock::now();
    fxcpp::torch::Module m(std::move(traced.graph), std::move(traced.tensors));
    const double compile_ms = ms_since(t0);
    at::Tensor eager = net->forward(x);
    at::Tensor got = m.forward({x}).toTensor();
    const bool close = at::allclose(got, eager, 1e-4, 1e-5);
    const double diff = (got - eager).abs().max().item<double>();
    std::cout << "\nallclose(fxcpp, eager): " << (close ? "true" : "false") << " (max |difference| " << diff
              << ")\n";
    at::Tensor x2 = at::randn({5, 3, 32, 32});  // no size was read in C++: other batches run too
    const bool close2 = at::allclose(m.forward({x2}).toTensor(), net->forward(x2), 1e-4, 1e-5);
    std::cout << "allclose at batch 5: " << (close2 ? "true" : "false") << "\n";

    double fx_best = 1e30, eager_best = 1e30;
    for (int i = 0; i < repeat; ++i) {
      auto t = Clock::now();
      m.forward({x});
      fx_best = std::min(fx_best, ms_since(t));
      t = Clock::now();
      net->forward(x);
      eager_best = std::min(eager_best, ms_since(t));
    }

    // 4. Save for Python (fxcpp.aten.load).
    t0 = Clock::now();
    fxcpp::torch::save(m, out_path);
    const double save_ms = ms_since(t0);
    write_raw(out_path + ".x.bin", x);
    write_raw(out_path + ".y.bin", got);
    std::cout << "saved " << out_path << " (" << m.named_tensors().size() << " tensors)\n";

    std::cout << "\ntimings: capture " << capture_ms << " ms, transform " << transform_ms << " ms, compile "
              << compile_ms << " ms, save " << save_ms << " ms\n"
              << "forward (best of " << repeat << ", batch 2): fxcpp " << fx_best << " ms (folded), eager "
              << eager_best << " ms\n";
    if (!close || !close2 || folded != 3 || bn_left != 0) {
      std::cerr << "error: the transformed graph does not match eager (or nothing was folded)\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
