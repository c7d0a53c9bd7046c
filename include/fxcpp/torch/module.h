// fxcpp torch layer: running graphs with LibTorch, no Python. The file format
// (load, save) is fxcpp/torch/format.h, which this header includes.
//
//   auto m = fxcpp::torch::load("model.fxpt");
//   c10::IValue y = m.forward({x});
//
// Note [Runtime plan]
// ~~~~~~~~~~~~~~~~~~~
// Module compiles its graph once into a flat plan: one instruction per
// call_function node, each with its operator handle (or primitive), its
// operands and the value slots it frees. Operands were converted to the
// schema's types at compile time: constants become ready IValues, get_attr
// nodes become the module's own tensors (shared, never copied), node
// references become slot indices, and lists that mix both are built from a
// recipe. forward() is a loop over that plan: push operands, one boxed
// dispatcher call, store the returns in the node's slot, drop the slots whose
// last reader just ran (the core's last_uses pass). Frames (the slot arrays)
// are pooled, so a forward allocates nothing per node beyond what the kernels
// allocate; concurrent forwards from several threads each take their own
// frame. forward() runs under c10::InferenceMode: its results are inference
// tensors, as under torch.inference_mode().
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"
#include "fxcpp/torch/format.h"
#include "fxcpp/torch/ops.h"

namespace fxcpp::torch {

class Plan;

/// How a Module is compiled.
struct ModuleOptions {
  /// Plan memory: write intermediates into reused storage through out=
  /// overloads (Note [Memory planning] in src/torch/compile.cpp). Off: every op
  /// allocates its result, as eager PyTorch does.
  bool plan_memory = true;
};

/// A graph plus the tensors it reads, compiled for execution. Movable, not
/// copyable. forward() is thread-safe (it does not change the Module).
class Module {
 public:
  /// Compiles `graph` (ops made with aten_op()/primitive(), get_attr targets
  /// naming entries of `tensors`). Throws FormatError naming the node for a
  /// target the runtime cannot run or arguments that do not fit the schema.
  /// O(nodes + argument size).
  Module(std::unique_ptr<Graph> graph, std::vector<NamedTensor> tensors, ModuleOptions options = {});
  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  ~Module();

  /// Runs the graph. `inputs` are the placeholders' values in order (a
  /// placeholder with a default may be left out). Throws InputError naming
  /// the input for a wrong count or a non-tensor where the graph recorded a
  /// tensor, and Error naming the node when a kernel fails.
  c10::IValue forward(std::vector<c10::IValue> inputs) const;

  /// The graph, for inspection. Editing it does not change the compiled plan:
  /// build a new Module from an edited clone (graph().clone()).
  const Graph& graph() const { return *graph_; }
  /// The tensors, in file order; they share storage with the module.
  const std::vector<NamedTensor>& named_tensors() const { return tensors_; }
  /// The tensor called `name`, or null.
  const at::Tensor* find_tensor(const std::string& name) const;
  /// Placeholder names, in order.
  std::vector<std::string> input_names() const;
  /// Number of instructions in the plan (call_function nodes).
  size_t num_instructions() const;
  /// What the memory planner decided (Note [Memory planning] in src/torch/compile.cpp).
  struct PlanStats {
    size_t instructions = 0;  ///< call_function nodes
    size_t managed = 0;       ///< of them, writing into planned storage through out= overloads
    size_t buffers = 0;       ///< storages the managed values share
  };
  PlanStats plan_stats() const;

 private:
  std::unique_ptr<Graph> graph_;
  std::vector<NamedTensor> tensors_;
  std::unique_ptr<Plan> plan_;
};

/// Throws what `Module(graph, tensors)` would throw for this graph (a target
/// the runtime cannot run, arguments that do not fit the schema, a get_attr
/// of no tensor), and keeps nothing: the Python runtime's load of an
/// untrusted file runs it, so both runtimes refuse the same files at load
/// (Note [Python load path] in python/fxcpp/aten/_format.py). O(nodes +
/// argument size), no memory plan.
void check_compiles(const Graph& graph, const std::vector<NamedTensor>& tensors);

/// A list value as the runtime passes lists: a `Tensor[]` when every item is
/// a tensor (and there is at least one), otherwise a generic list. O(items).
c10::IValue make_list(std::vector<c10::IValue> items);

}  // namespace fxcpp::torch
