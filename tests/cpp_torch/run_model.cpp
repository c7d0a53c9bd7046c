// fxcpp_torch_run_model: a C++ test driver with no Python in the process.
//
//   fxcpp_torch_run_model MODEL IN.bin D0,D1,... OUT.bin [--repeat N] [--dtype int64] [--trusted]
//                         [--input IN2.bin D0,D1,... float32|int64]...
//
// Loads MODEL (.fxpt, or a .pt2 archive: told apart by content) with
// fxcpp::torch::load (default LoadOptions: the operator allow-list applies, so
// the model tests also check that lowered models pass it; Note [What a file
// may make the runtime do]; --trusted lifts it, for archives of programs the
// tests exported themselves), runs it on the float32 (--dtype int64: int64,
// e.g. token ids) tensor of shape D0,D1,... read from IN.bin (raw
// little-endian), N times (default 2:
// the second forward runs the memory-planned path; each --input adds one more
// positional input, in order: tests/python/test_argument_guards.py drives its
// crafted files through it), and writes every tensor
// of the last output, flattened in output order (dicts in key order), to
// OUT.bin as float32. tests/python/test_aten_models.py drives it to check
// lowered torchvision models against eager PyTorch, tests/python/test_pt2_models.py
// to run torch.export.save archives. Exit status 1 and a
// message on stderr for any fxcpp::torch::Error.
#include <ATen/ops/cat.h>
#include <ATen/ops/from_blob.h>

#include <array>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fxcpp/torch/module.h"

namespace {

// The tensor of `shape` (D0,D1,...) and `dtype` read from raw little-endian `path`.
at::Tensor read_input(const std::string& path, const std::string& dims_text, at::ScalarType dtype) {
  std::vector<int64_t> shape;
  std::stringstream dims(dims_text);
  for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::stoll(d));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > (int64_t(1) << 40) / d)) throw std::runtime_error("bad input shape " + dims_text);
    numel *= d;
  }
  const int64_t item = dtype == at::kLong ? 8 : 4;
  if (static_cast<int64_t>(bytes.size()) != numel * item) throw std::runtime_error("input size does not match shape");
  return at::from_blob(bytes.data(), shape, dtype).clone();
}

void leaves(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor().to(at::kFloat).contiguous().reshape({-1}));
  } else if (v.isTuple()) {
    for (auto& e : v.toTupleRef().elements()) leaves(e, out);
  } else if (v.isList()) {
    for (auto& e : v.toListRef()) leaves(e, out);
  } else if (v.isGenericDict()) {
    for (auto& kv : v.toGenericDict()) leaves(kv.value(), out);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: " << argv[0] << " MODEL IN.bin D0,D1,... OUT.bin [--repeat N] [--dtype int64] [--trusted]\n";
    return 2;
  }
  int repeat = 2;
  at::ScalarType dtype = at::kFloat;
  fxcpp::torch::LoadOptions options;
  std::vector<std::array<std::string, 3>> more;  // --input FILE SHAPE DTYPE
  for (int i = 5; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (flag == "--dtype" && i + 1 < argc && (std::string(argv[i + 1]) == "int64" || std::string(argv[i + 1]) == "float32")) {
      dtype = std::string(argv[++i]) == "int64" ? at::kLong : at::kFloat;
    } else if (flag == "--trusted") {
      options.trusted = true;
    } else if (flag == "--input" && i + 3 < argc &&
               (std::string(argv[i + 3]) == "int64" || std::string(argv[i + 3]) == "float32")) {
      more.push_back({argv[i + 1], argv[i + 2], argv[i + 3]});
      i += 3;
    } else {
      std::cerr << "error: unknown argument '" << flag
                << "' (--repeat N, --dtype float32|int64, --trusted, --input FILE D0,D1,... float32|int64)\n";
      return 2;
    }
  }
  try {
    std::vector<c10::IValue> inputs{read_input(argv[2], argv[3], dtype)};
    for (const auto& extra : more)
      inputs.emplace_back(read_input(extra[0], extra[1], extra[2] == "int64" ? at::kLong : at::kFloat));

    fxcpp::torch::Module m = fxcpp::torch::load(argv[1], options);
    c10::IValue out;
    for (int i = 0; i < repeat; ++i) out = m.forward(inputs);
    std::vector<at::Tensor> parts;
    leaves(out, parts);
    at::Tensor flat = parts.empty() ? at::Tensor() : at::cat(parts);
    std::ofstream o(argv[4], std::ios::binary);
    if (flat.defined())
      o.write(static_cast<const char*>(flat.data_ptr()), static_cast<std::streamsize>(flat.numel() * 4));
    auto stats = m.plan_stats();
    std::cout << stats.instructions << " ops, " << stats.managed << " planned into " << stats.buffers << " buffers\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
