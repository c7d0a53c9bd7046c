// Loads a model saved with `fxcpp.aten.save` (or `fxcpp export`), or a .pt2
// archive `torch.export.save` wrote (told apart by content), and classifies an
// image tensor with the fxcpp LibTorch runtime. No Python in the process.
//
//   fxcpp_example_classify resnet18.fxpt|resnet18.pt2 [input.bin] [--repeat N] [--output out.bin]
//
// input.bin: raw float32 values of a 1x3x224x224 tensor (the demo writes one);
// without it, a deterministic test pattern is used. Prints the top-5 classes
// and the forward latency; --output writes the logits as raw float32.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fxcpp/torch/module.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL.fxpt|MODEL.pt2 [INPUT.bin] [--repeat N] [--output OUT.bin]\n";
    return 2;
  }
  std::string model = argv[1], input_path, output_path;
  int repeat = 10;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--output" && i + 1 < argc) output_path = argv[++i];
    else input_path = a;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    fxcpp::torch::Module m = fxcpp::torch::load(model);
    double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto stats = m.plan_stats();
    std::cout << model << ": loaded in " << load_ms << " ms, " << stats.instructions << " ops ("
              << stats.managed << " into " << stats.buffers << " planned buffers)\n";

    at::Tensor x;
    if (input_path.empty()) {
      x = (at::arange(3 * 224 * 224, at::kFloat).reshape({1, 3, 224, 224}) / (3 * 224 * 224) - 0.5) * 4;
    } else {
      std::ifstream f(input_path, std::ios::binary);
      std::stringstream s;
      s << f.rdbuf();
      std::string bytes = s.str();
      if (!f.good() && bytes.empty()) throw std::runtime_error("cannot read " + input_path);
      if (bytes.size() != 3 * 224 * 224 * sizeof(float))
        throw std::runtime_error(input_path + " does not hold 1x3x224x224 float32 values");
      x = at::from_blob(bytes.data(), {1, 3, 224, 224}, at::kFloat).clone();
    }

    at::Tensor logits = m.forward({x}).toTensor();  // warm-up: learns the memory plan
    double best = 1e30;
    for (int i = 0; i < repeat; ++i) {
      auto t = std::chrono::steady_clock::now();
      logits = m.forward({x}).toTensor();
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    auto [p, cls] = at::topk(at::softmax(logits, 1), 5);
    std::cout << "top-5 classes:";
    for (int i = 0; i < 5; ++i)
      std::cout << " " << cls[0][i].item<int64_t>() << " (" << p[0][i].item<float>() << ")";
    std::cout << "\nforward: " << best << " ms (best of " << repeat << ")\n";
    if (!output_path.empty()) {
      at::Tensor c = logits.contiguous();
      std::ofstream o(output_path, std::ios::binary);
      o.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
    }
  } catch (const fxcpp::torch::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
