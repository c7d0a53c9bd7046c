// The C++ half of the runtime benchmark (bench/bench_runtime.py drives it).
//
//   fxcpp_runtime_bench chain --fxpt F --ts T --inputs x.bin,y.bin --shape 1,8
//                       [--expect out.bin] [--ops 1000] [--iters 100] [--reps 5]
//   fxcpp_runtime_bench model --fxpt F --ts T --inputs x.bin --shape 1,3,224,224
//                       [--dtypes int64] [--expect out.bin --expect-shape 1,1000] [--iters 2] [--reps 2]
//   fxcpp_runtime_bench load  --fxpt F --ts T [--reps 3]
//
// F may be a .fxpt file or a torch.export.save archive (.pt2; told apart by
// content). Without --ts, chain and model skip the TorchScript variant.
//
// Inputs and the expected output are raw little-endian files written by the
// driver (numpy's tofile), so every variant here and in Python runs on the
// same values: the expected output float32, the inputs float32 unless
// --dtypes says otherwise (one of float32, int64 per input, comma-separated:
// a GPT's token ids are int64). Prints machine-readable lines, nothing else on stdout:
//
//   RESULT,<variant>,<value>,<unit>     best of --reps repetitions of --iters calls
//                                       (after one untimed warm-up call)
//   CHECK,<variant>,<max abs difference from --expect>
//
// chain variants (unit us/op = time of one forward / --ops):
//   fxcpp_cpp        fxcpp::torch::load(F) then Module::forward
//   at_direct        the same chain as a loop of at::add / at::mul / at::relu
//   at_out           at::add_out / mul_out / clamp_min_out(., 0) ping-ponging
//                    between two preallocated tensors (no allocation per op;
//                    relu's generated relu.out calls relu and copies, so relu
//                    is written as clamp_min, as fxcpp's memory plan does)
//   torchscript_cpp  torch::jit::load(T) then Module::forward (the TorchScript
//                    interpreter)
// model variants (unit ms per forward): fxcpp_cpp, torchscript_cpp.
// load variants (unit ms per load): fxcpp_load, torchscript_load.
//
// Everything runs with one intra-op thread (at::set_num_threads(1)) and under
// c10::InferenceMode, as fxcpp's forward always does, so no variant pays for
// autograd bookkeeping that another skips. No timing assertions: this program
// measures and reports.
#include <torch/script.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fxcpp/torch/module.h"

namespace {

using Clock = std::chrono::steady_clock;

// The bench's files are its own (make_fx graphs of the models, which call
// aten::empty through batch_norm's decomposition): loaded as trusted
// (Note [What a file may make the runtime do]).
static fxcpp::torch::LoadOptions own_file() {
  fxcpp::torch::LoadOptions o;
  o.trusted = true;
  return o;
}

struct Args {
  std::string cmd;
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& dflt = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? dflt : it->second;
  }
  int num(const std::string& k, int dflt) const {
    auto it = kv.find(k);
    return it == kv.end() ? dflt : std::atoi(it->second.c_str());
  }
};

[[noreturn]] void usage(const char* why) {
  std::cerr << "fxcpp_runtime_bench: " << why
            << "\nusage: fxcpp_runtime_bench chain|model|load --fxpt F --ts T [--inputs a.bin,b.bin --shape 1,8]"
               " [--dtypes float32,int64] [--expect out.bin] [--ops N] [--iters N] [--reps N]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage("missing command");
  Args a;
  a.cmd = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || i + 1 >= argc) usage(("bad argument " + k).c_str());
    a.kv[k.substr(2)] = argv[++i];
  }
  return a;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

at::Tensor read_tensor(const std::string& path, const std::vector<int64_t>& shape, at::ScalarType dtype = at::kFloat) {
  std::ifstream f(path, std::ios::binary);
  if (!f) usage(("cannot open " + path).c_str());
  at::Tensor t = at::empty(shape, dtype);
  const auto bytes = static_cast<std::streamsize>(t.nbytes());
  f.read(static_cast<char*>(t.data_ptr()), bytes);
  if (f.gcount() != bytes) usage(("short file " + path).c_str());
  return t;
}

// Best (smallest) seconds per call over `reps` repetitions of `iters` calls,
// after one untimed warm-up call.
template <class F>
double best_of(int reps, int iters, F&& f) {
  f();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) f();
    double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    best = std::min(best, s);
  }
  return best;
}

void result(const std::string& variant, double value, const char* unit) {
  std::printf("RESULT,%s,%.6g,%s\n", variant.c_str(), value, unit);
  std::fflush(stdout);
}

void check(const std::string& variant, const at::Tensor& got, const at::Tensor& expect) {
  if (!expect.defined()) return;
  double diff = got.sizes() == expect.sizes() ? (got - expect).abs().max().item<double>() : -1.0;
  std::printf("CHECK,%s,%.3g\n", variant.c_str(), diff);
  std::fflush(stdout);
}

// Volatile sink so no loop is optimized away.
volatile int64_t g_sink = 0;
void sink(const at::Tensor& t) { g_sink = g_sink + t.numel(); }

at::Tensor chain_direct(const at::Tensor& x0, const at::Tensor& y, int ops) {
  at::Tensor x = x0;
  for (int i = 0; i < ops; ++i) {
    switch (i % 3) {
      case 0: x = at::add(x, y); break;
      case 1: x = at::mul(x, y); break;
      default: x = at::relu(x); break;
    }
  }
  return x;
}

const at::Tensor& chain_out(const at::Tensor& x0, const at::Tensor& y, int ops, at::Tensor& a, at::Tensor& b) {
  const at::Tensor* cur = &x0;
  for (int i = 0; i < ops; ++i) {
    at::Tensor& dst = (i & 1) ? b : a;
    switch (i % 3) {
      case 0: at::add_out(dst, *cur, y); break;
      case 1: at::mul_out(dst, *cur, y); break;
      default: at::clamp_min_out(dst, *cur, 0); break;  // relu.out allocates and copies
    }
    cur = &dst;
  }
  return *cur;
}

std::vector<int64_t> parse_shape(const std::string& s) {
  std::vector<int64_t> shape;
  for (const auto& d : split(s, ',')) shape.push_back(std::atoll(d.c_str()));
  return shape;
}

std::vector<at::Tensor> read_inputs(const Args& a) {
  std::vector<int64_t> shape = parse_shape(a.get("shape"));
  if (shape.empty()) usage("--shape is required");
  const std::vector<std::string> files = split(a.get("inputs"), ','), dtypes = split(a.get("dtypes"), ',');
  if (files.empty()) usage("--inputs is required");
  if (!dtypes.empty() && dtypes.size() != files.size()) usage("--dtypes needs one dtype per input");
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string dt = dtypes.empty() ? "float32" : dtypes[i];
    if (dt != "float32" && dt != "int64") usage(("unsupported input dtype " + dt + " (float32 or int64)").c_str());
    inputs.push_back(read_tensor(files[i], shape, dt == "int64" ? at::kLong : at::kFloat));
  }
  return inputs;
}

// The expected output (--expect, shape --expect-shape or else `dflt`), or an
// undefined tensor when none was given.
at::Tensor read_expect(const Args& a, const std::string& dflt) {
  std::string p = a.get("expect");
  return p.empty() ? at::Tensor() : read_tensor(p, parse_shape(a.get("expect-shape", dflt)));
}

int run_chain(const Args& a) {
  const int ops = a.num("ops", 1000), iters = a.num("iters", 100), reps = a.num("reps", 5);
  auto inputs = read_inputs(a);
  if (inputs.size() != 2) usage("chain takes two inputs (x, y)");
  const at::Tensor& x = inputs[0];
  const at::Tensor& y = inputs[1];
  at::Tensor expect = read_expect(a, a.get("shape"));

  auto fx = fxcpp::torch::load(a.get("fxpt"), own_file());
  const bool with_ts = !a.get("ts").empty();
  torch::jit::Module ts = with_ts ? torch::jit::load(a.get("ts")) : torch::jit::Module();
  if (with_ts) ts.eval();

  c10::InferenceMode guard;
  std::vector<c10::IValue> args{x, y};
  const double per_op = 1e6 / ops;

  check("fxcpp_cpp", fx.forward(args).toTensor(), expect);
  result("fxcpp_cpp", best_of(reps, iters, [&] { sink(fx.forward(args).toTensor()); }) * per_op, "us/op");

  check("at_direct", chain_direct(x, y, ops), expect);
  result("at_direct", best_of(reps, iters, [&] { sink(chain_direct(x, y, ops)); }) * per_op, "us/op");

  at::Tensor ba = at::empty_like(x), bb = at::empty_like(x);
  check("at_out", chain_out(x, y, ops, ba, bb), expect);
  result("at_out", best_of(reps, iters, [&] { sink(chain_out(x, y, ops, ba, bb)); }) * per_op, "us/op");

  if (!with_ts) return 0;
  check("torchscript_cpp", ts.forward(args).toTensor(), expect);
  result("torchscript_cpp", best_of(reps, iters, [&] { sink(ts.forward(args).toTensor()); }) * per_op, "us/op");
  return 0;
}

int run_model(const Args& a) {
  const int iters = a.num("iters", 2), reps = a.num("reps", 2);
  auto inputs = read_inputs(a);
  at::Tensor expect = read_expect(a, "1,1000");

  auto fx = fxcpp::torch::load(a.get("fxpt"), own_file());
  const bool with_ts = !a.get("ts").empty();
  torch::jit::Module ts = with_ts ? torch::jit::load(a.get("ts")) : torch::jit::Module();
  if (with_ts) ts.eval();

  c10::InferenceMode guard;
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());

  check("fxcpp_cpp", fx.forward(args).toTensor(), expect);
  result("fxcpp_cpp", best_of(reps, iters, [&] { sink(fx.forward(args).toTensor()); }) * 1e3, "ms");
  if (!with_ts) return 0;
  check("torchscript_cpp", ts.forward(args).toTensor(), expect);
  result("torchscript_cpp", best_of(reps, iters, [&] { sink(ts.forward(args).toTensor()); }) * 1e3, "ms");
  return 0;
}

int run_load(const Args& a) {
  const int reps = a.num("reps", 3);
  const std::string fxpt = a.get("fxpt"), tsp = a.get("ts");
  // best_of's warm-up load brings each file into the page cache: both are
  // then measured reading from memory.
  result("fxcpp_load", best_of(reps, 1, [&] {
           auto m = fxcpp::torch::load(fxpt, own_file());
           g_sink = g_sink + static_cast<int64_t>(m.num_instructions());
         }) * 1e3,
         "ms");
  result("torchscript_load", best_of(reps, 1, [&] {
           auto m = torch::jit::load(tsp);
           g_sink = g_sink + 1;
         }) * 1e3,
         "ms");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.get("fxpt").empty()) usage("--fxpt is required");
  if (a.cmd == "load" && a.get("ts").empty()) usage("load needs --ts");
  at::set_num_threads(1);
  try {
    if (a.cmd == "chain") return run_chain(a);
    if (a.cmd == "model") return run_model(a);
    if (a.cmd == "load") return run_load(a);
  } catch (const std::exception& e) {
    std::cerr << "fxcpp_runtime_bench: " << e.what() << "\n";
    return 1;
  }
  usage(("unknown command " + a.cmd).c_str());
}
