// The runtime's facade (fxcpp/torch/module.h): Module over a Plan (plan.h).
#include <ATen/core/ivalue.h>

#include "plan.h"

namespace fxcpp::torch {

c10::IValue make_list(std::vector<c10::IValue> items) {
  bool tensors = !items.empty();
  for (auto& v : items) tensors &= v.isTensor();
  if (tensors) {
    c10::List<at::Tensor> l;
    l.reserve(items.size());
    for (auto& v : items) l.push_back(v.toTensor());
    return l;
  }
  c10::impl::GenericList l(c10::AnyType::get());
  l.reserve(items.size());
  for (auto& v : items) l.push_back(std::move(v));
  return l;
}

Module::Module(std::unique_ptr<Graph> graph, std::vector<NamedTensor> tensors, ModuleOptions options)
    : graph_(std::move(graph)), tensors_(std::move(tensors)) {
  if (!graph_) throw FormatError("fxcpp::torch: Module needs a graph");
  plan_ = Plan::compile(*graph_, tensors_, options);
}
Module::Module(Module&&) noexcept = default;

void check_compiles(const Graph& graph, const std::vector<NamedTensor>& tensors) {
  ModuleOptions options;
  options.plan_memory = false;
  Plan::compile(graph, tensors, options);
}

Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

c10::IValue Module::forward(std::vector<c10::IValue> inputs) const { return plan_->run(inputs); }

const at::Tensor* Module::find_tensor(const std::string& name) const {
  for (auto& t : tensors_)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

std::vector<std::string> Module::input_names() const {
  std::vector<std::string> names;
  for (auto& in : plan_->inputs) names.push_back(in.name);
  return names;
}

size_t Module::num_instructions() const { return plan_->instrs.size(); }

Module::PlanStats Module::plan_stats() const {
  return {plan_->instrs.size(), plan_->num_managed, plan_->num_buffers};
}

}  // namespace fxcpp::torch
