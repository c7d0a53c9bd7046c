// Capturing TorchScript modules (from_torchscript in
// include/fxcpp/torch/capture.h): the only TU of fxcpp_torch that includes
// TorchScript's headers. Everything is in libtorch_cpu, like the rest of the
// layer.
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>

#include <ATen/core/grad_mode.h>

#include <cctype>
#include <sstream>

#include "fxcpp/torch/capture.h"

namespace fxcpp::torch {

Traced from_torchscript(::torch::jit::Module& module, const std::vector<at::Tensor>& example_inputs,
                        TraceOptions options) {
  if (!module.find_method("forward"))
    throw CaptureError("fxcpp::torch::from_torchscript: the module has no forward method");
  // Placeholders are named after forward's parameters when they fit.
  if (options.input_names.empty()) {
    const auto& params = module.get_method("forward").function().getSchema().arguments();
    std::vector<std::string> names;
    for (size_t i = 1; i < params.size(); ++i) names.push_back(params[i].name());
    auto identifier = [](const std::string& n) {
      if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
      for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
      return true;
    };
    bool ok = names.size() == example_inputs.size();
    for (size_t i = 0; ok && i < names.size(); ++i) {
      ok = identifier(names[i]);
      for (size_t j = 0; ok && j < i; ++j) ok = names[i] != names[j];
    }
    if (ok) options.input_names = std::move(names);
  }
  for (const auto& p : module.named_parameters(true))
    options.named_tensors.push_back(NamedTensor{p.name, NamedTensor::Kind::Parameter, p.value, std::nullopt});
  for (const auto& b : module.named_buffers(true))
    options.named_tensors.push_back(NamedTensor{b.name, NamedTensor::Kind::Buffer, b.value, std::nullopt});
  auto run = [&](const std::vector<at::Tensor>& in) {
    // No autograd (no DifferentiableGraph), no optimization passes (no fusion
    // groups): the interpreter calls the operators one by one.
    at::AutoGradMode no_grad(false);
    ::torch::jit::GraphOptimizerEnabledGuard no_opt(false);
    std::vector<c10::IValue> args(in.begin(), in.end());
    return module.forward(std::move(args));
  };
  return trace_function(run, example_inputs, std::move(options));
}

namespace {
::torch::jit::Module load_script(const std::function<::torch::jit::Module()>& load) {
  try {
    return load();
  } catch (const c10::Error& e) {
    throw CaptureError(std::string("fxcpp::torch::from_torchscript: cannot load the TorchScript module (") +
                       e.what_without_backtrace() + ")");
  }
}
}  // namespace

Traced from_torchscript(const std::string& path, const std::vector<at::Tensor>& example_inputs,
                        TraceOptions options) {
  ::torch::jit::Module m = load_script([&] { return ::torch::jit::load(path, c10::Device(c10::kCPU)); });
  return from_torchscript(m, example_inputs, std::move(options));
}

Traced from_torchscript_buffer(const void* data, size_t size, const std::vector<at::Tensor>& example_inputs,
                               TraceOptions options) {
  ::torch::jit::Module m = load_script([&] {
    std::istringstream in(std::string(static_cast<const char*>(data), size));
    return ::torch::jit::load(in, c10::Device(c10::kCPU));
  });
  return from_torchscript(m, example_inputs, std::move(options));
}

}  // namespace fxcpp::torch
