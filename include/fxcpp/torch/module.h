// fxcpp torch layer: loading and running graphs with LibTorch, no Python.
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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"
#include "fxcpp/torch/ops.h"

namespace fxcpp::torch {

/// A named tensor the graph reads with get_attr.
struct NamedTensor {
  std::string name;  ///< qualified attribute name ("layer1.0.conv1.weight")
  enum class Kind : uint8_t { Parameter, Buffer, Constant } kind = Kind::Constant;
  at::Tensor tensor;
  /// The requires_grad flag a file records for the tensor (read by load(),
  /// written by save()). Unset: save() writes tensor.requires_grad(), or true
  /// for a floating or complex Parameter (as nn.Parameter makes them).
  std::optional<bool> requires_grad;
};

class Plan;

/// How a Module is compiled.
struct ModuleOptions {
  /// Plan memory: write intermediates into reused storage through out=
  /// overloads (Note [Memory planning] in src/torch/plan.cpp). Off: every op
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
  /// What the memory planner decided (Note [Memory planning] in plan.cpp).
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

/// A list value as the runtime passes lists: a `Tensor[]` when every item is
/// a tensor (and there is at least one), otherwise a generic list. O(items).
c10::IValue make_list(std::vector<c10::IValue> items);

/// The newest file format version this build writes and reads.
constexpr int kFormatVersion = 1;

/// How a file is loaded.
struct LoadOptions {
  /// Plan memory (ModuleOptions::plan_memory).
  bool plan_memory = true;
  /// The file is the user's own: its operators resolve against the whole
  /// dispatcher. Off (the default), a file may call only the allow-listed
  /// operators (Note [What a file may make the runtime do] in
  /// fxcpp/torch/policy.h). Names are checked either way.
  bool trusted = false;
};

/// How save() writes a file.
struct SaveOptions {
  /// The class name the file records (Python's load names the GraphModule's
  /// class after it). Must be a Python identifier that is not a keyword.
  std::string class_name = "GraphModule";
};

/// Reads a file written by `fxcpp.aten.save` (Python). Runs
/// no code from it. Throws FormatError saying what is wrong (not a zip
/// archive, missing record, newer version, unknown operator, an operator a
/// file may not call unless `options.trusted`, a name that is not an
/// identifier, bad tensor extent, ...). Tensors are read into memory once and
/// owned by the Module.
Module load(const std::string& path, const LoadOptions& options = {});
/// The same from bytes in memory (the whole file).
Module load_from_buffer(const void* data, size_t size, const LoadOptions& options = {});

/// Writes `graph` and the tensors its get_attr nodes read to `path` in the
/// format `fxcpp.aten.save` writes (docs/fxpt_format.md, kFormatVersion), so
/// the file loads with load() and with `fxcpp.aten.load` in Python. Only the
/// tensors some get_attr names are written, in first-use order; a storage
/// shared by several of them is written once; tensors not on the CPU (or
/// conjugated, negated, not strided) are written as contiguous CPU copies.
/// meta["tensor_meta"] (as load() and trace() store it) is kept. Parameters
/// of a floating or complex dtype are written as requiring grad (the loader
/// keeps no such flag; Python's load makes them nn.Parameters). Throws
/// FormatError naming the node, before anything is written, for what the
/// format cannot hold: call_module/call_method nodes, call_function targets
/// other than aten_op()/primitive(), arguments other than constants, node
/// references and torch_constant objects, get_attr of a name not in `tensors`,
/// unsupported dtypes. Writes atomically (Note [Atomic saving] in
/// src/torch/save.cpp): a temporary file in the target's directory, fsync'ed
/// and renamed over `path`, so the target holds the old file or the complete
/// new one; a target that is not a regular file (a device, a fifo) is written
/// directly. Throws Error (saying why, with the OS's reason) when the file
/// cannot be written, leaving no partial file. O(nodes + argument size +
/// tensor bytes).
void save(const Graph& graph, const std::vector<NamedTensor>& tensors, const std::string& path,
          const SaveOptions& options = {});
/// save(module.graph(), module.named_tensors(), path).
void save(const Module& module, const std::string& path);
/// The same file's bytes, in memory.
std::string save_to_buffer(const Graph& graph, const std::vector<NamedTensor>& tensors,
                           const SaveOptions& options = {});

/// The graph and tensors of a file, without compiling a plan (for tools).
/// Checks the file as load() does (`options.plan_memory` is unused).
std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read_file(const std::string& path,
                                                                      const LoadOptions& options = {});

/// Everything a file holds, as read_buffer() returns it.
struct FileContents {
  /// The graph: call_function targets are aten_op()/primitive() objects,
  /// dtypes and the like torch_constant() objects, meta["tensor_meta"] as
  /// load() stores it.
  std::unique_ptr<Graph> graph;
  /// The tensors, in file order, each with the requires_grad flag the file records.
  std::vector<NamedTensor> tensors;
  /// The class name the file records ("GraphModule" when it records none).
  std::string class_name;
};
/// read_file() of a file's bytes in memory, with the class name: what
/// `fxcpp.aten.load(..., runtime="python")` builds its GraphModule from, the
/// file parsed once (Note [Graph handover] in src/bindings/handover.h).
FileContents read_buffer(const void* data, size_t size, const LoadOptions& options = {});


/// The JSON text of a file's graph record, pretty-printed (`fxcpp inspect`).
std::string graph_json(const std::string& path);
/// The same from the file's bytes in memory.
std::string graph_json_from_buffer(const void* data, size_t size);

}  // namespace fxcpp::torch
