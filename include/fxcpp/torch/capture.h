// fxcpp torch layer: capturing a graph from C++ code that calls ATen.
//
//   auto traced = fxcpp::torch::trace(
//       [](const std::vector<at::Tensor>& in) { return at::relu(in[0] + in[1]); }, {x, y});
//   std::cout << *traced.graph;                  // torch.fx-style printout
//   fxcpp::torch::Module m = std::move(traced).module();
//   c10::IValue out = m.forward({x, y});
//
//   torch::nn::Sequential net(...);              // any torch::nn module holder
//   auto traced = fxcpp::torch::trace(net, {x}); // parameters become get_attr nodes
//
//   fxcpp::torch::TraceOptions opts;             // no compute: on Meta tensors,
//   opts.execution = fxcpp::torch::Execution::MetaOrReal;  // real ones if that fails
//   auto cheap = fxcpp::torch::trace(net, {x}, opts);
//
// Note [Capture by dispatcher mode]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// trace() runs the callable once on the example inputs with a dispatcher
// mode active: the dispatch key TESTING_ONLY_GenericMode (free in LibTorch
// 1.13; it sorts above Autograd, so it sees every operator call first) is put
// in the thread's included set, and a boxed fallback registered for it (once,
// on first use) records each call and redispatches below itself. While the
// recorded operator runs the key is excluded, so only top-level calls are
// recorded: `at::conv2d` is one `aten.conv2d.default` node, not the
// convolution it decomposes into. Each node's target is aten_op(overload),
// the same target the .fxpt loader and Python lowering produce, so the graph
// runs in Module and prints like a lowered one.
// * Values. Tensors are tracked by identity (TensorImpl), each map entry
//   holding a strong reference, so a freed tensor's address cannot be
//   mistaken for a new one. The example inputs are placeholders; a tensor an
//   operator returns is its node (getitem of it for a tuple or list return,
//   made when first used); any other tensor is a get_attr: by its module path
//   for a torch::nn module's parameters and buffers (`layer1.0.conv1.weight`),
//   `_tensor_constantN` otherwise. Tensors are shared, never copied.
// * Other arguments become constants: ints, floats, bools, strings, lists,
//   None; ScalarType/Layout/MemoryFormat/Device as torch_constant objects.
//   Trailing arguments equal to the schema default are left out; kwarg-only
//   arguments are kwargs.
// * Specialisation. Like torch.jit.trace, the graph is the program run on
//   these inputs: sizes read in C++ (`x.size(0)`, `x.dim()`) and values read
//   back (`x.item<float>()`, control flow on tensor values) are baked in as
//   constants. Traced::input_shapes records the example shapes;
//   Traced::data_dependent counts calls whose non-tensor results the C++
//   code may have branched on (item, equal, is_nonzero, ...).
// * Mutation. In-place and out= calls are recorded in program order; the
//   tensor they return is remapped to their node. An aten_op target whose
//   schema writes to an argument is impure, so DCE keeps it.
// * Errors. A capture started while another is active on the same thread
//   throws CaptureError; an argument the graph cannot hold throws
//   CaptureError naming the operator. All dispatcher state is kept in RAII
//   guards, so after an exception the next capture and ordinary calls behave
//   normally. Operators called on other threads are not recorded.
// * Meta execution (TraceOptions::execution). The callable runs on Meta
//   tensors, which have sizes, strides and dtypes but no data: the example
//   inputs are replaced by new Meta tensors of their sizes, strides and
//   dtypes, and options.named_tensors (a module's parameters and buffers,
//   which the callable reaches through the module) are turned into Meta
//   tensors in place, the same TensorImpl with a Meta storage, so they keep
//   their identity and get_attr names; a snapshot of each is put back when
//   the run ends, however it ends (storage, sizes, strides, dtype, device,
//   version counter, cached AccumulateGrad; values are never written, so
//   in-place updates of buffers and inputs do not happen). Structured
//   kernels share one meta function between Meta and CPU, so sizes and
//   strides, and with them the path C++ code takes, are the real run's; a
//   Device argument `meta` (from a stand-in's options()) is recorded as the
//   device the tensors are on. Placeholder tensor_meta describes the real
//   inputs. So the graph is the real capture's, with no compute. When an
//   operator fails on Meta tensors (no Meta kernel: NotImplementedError, or
//   a kernel that refuses, as convolution does by reaching
//   convolution_overrideable), the Meta run is void, even if the callable
//   catches the error: Execution::Meta throws CaptureError naming the
//   top-level operator and the error, Execution::MetaOrReal discards it and
//   captures again on the real tensors (Traced::meta_fallback says why).
//   The fallback is the whole run, not the failing operator: once one
//   operator's result is missing, later ones cannot be computed from Meta
//   values, and the operators without Meta kernels include the
//   data-dependent ones (nonzero, item, equal) whose results the C++ code
//   branches on, so running just that operator for real would need real
//   inputs the Meta run never had. What LibTorch 1.13 has: structured
//   kernels (add, mul, mm, addmm, bmm, mean, softmax, log_softmax, gelu,
//   tanh, sigmoid, hardsigmoid, max_pool2d_with_indices, clamp_min, relu_,
//   hardswish_, view ops, cat) have C++ Meta kernels; convolution,
//   _convolution, native_batch_norm (so batch_norm and layer_norm), relu,
//   hardswish, _adaptive_avg_pool2d (adaptive_avg_pool2d to more than 1x1),
//   floor_divide, _native_multi_head_attention and the data-dependent ones
//   do not. In a Python process torch registers Python Meta kernels for
//   convolution, native_batch_norm, relu, hardswish and more when it is
//   imported (torch/_meta_registrations.py), which then count too; not for
//   _convolution, which torch.jit.trace records for every convolution. The
//   callable must not read tensor memory itself (data_ptr, accessor): on
//   Meta there is none. While a Meta capture runs, other threads see the
//   named tensors as Meta tensors.
// * Same ops as the tracer. from_torchscript of a torch.jit.trace'd module
//   records what the tracer recorded on the same input, in order and by
//   overload, with one rule to align them (tests/python/test_aten_capture.py,
//   test_same_ops_as_jit_tracer): a tracer node whose operator (name and
//   overload from its schema) is a c10 dispatcher operator is one recorded
//   call; a node without a schema (prim::Constant, prim::GetAttr,
//   prim::ListConstruct) is an interpreter instruction and records nothing;
//   an interpreter operator that the dispatcher does not have
//   (aten::Int.Tensor, prim::NumToTensor.Scalar) records what its kernel
//   calls through the dispatcher (Int: aten::item; NumToTensor: nothing).
//   With dead code elimination, the calls whose results only fed baked-in
//   values (vit's size arithmetic) go. For C++ code traced by
//   torch::jit::tracer the rule is the same plus one renaming: the tracer
//   records aten::conv2d as the aten::_convolution it calls.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/ops.h"

namespace torch::jit {
struct Module;  // torch/csrc/jit/api/module.h, included only by src/torch/torchscript.cpp
}  // namespace torch::jit

namespace fxcpp::torch {

/// A capture that cannot go on: nested captures, arguments the graph cannot
/// represent, inputs that do not fit.
struct CaptureError : Error {
  using Error::Error;
};

/// Where trace() runs the callable (Note [Capture by dispatcher mode],
/// Meta execution).
enum class Execution {
  /// On the example inputs and the module's tensors themselves: every kernel
  /// computes, and in-place operators write to them.
  Real,
  /// On Meta tensors (sizes, strides and dtypes, no data): the example
  /// inputs are replaced by Meta tensors of their sizes, strides and dtypes,
  /// and options.named_tensors (a module's parameters and buffers) are turned
  /// into Meta tensors in place for the run and restored afterwards, even
  /// when it throws. No kernel computes, so capturing a large model costs no
  /// compute and writes nothing. An operator that fails on Meta tensors (no
  /// Meta kernel, as for nonzero or the item() behind data-dependent code)
  /// makes trace() throw CaptureError naming it.
  Meta,
  /// Meta, and when the Meta run fails in any way (an operator without a
  /// Meta kernel, an exception of the callable, tensors that cannot be Meta),
  /// the whole capture again on the real tensors: the callable runs twice.
  /// Traced::meta_fallback says why.
  MetaOrReal,
};

/// How trace() captures.
struct TraceOptions {
  /// Placeholder names, one per example input; empty: "x", "x_1", ...
  std::vector<std::string> input_names;
  /// Tensors the graph reads by name (get_attr) instead of as
  /// `_tensor_constantN`: a module's parameters and buffers. The
  /// torch::nn overload of trace() fills this from the module.
  std::vector<NamedTensor> named_tensors;
  /// Remove nodes whose values are never used (pure ops only; see
  /// Note [Capture by dispatcher mode], Mutation).
  bool dead_code_elimination = true;
  /// Real tensors (the default) or Meta tensors; see Execution.
  Execution execution = Execution::Real;
};

/// What trace() captured: a graph plus the tensors it reads.
struct Traced {
  std::unique_ptr<Graph> graph;
  std::vector<NamedTensor> tensors;  ///< every get_attr target, in first-use order
  /// The example inputs' sizes: the graph is specialised to them (sizes read
  /// in C++ are constants). Also in each placeholder's meta["tensor_meta"].
  std::vector<std::vector<int64_t>> input_shapes;
  /// Recorded calls whose non-tensor results (a Scalar, a bool, an int)
  /// the C++ code may have used: what they returned is baked into the graph.
  size_t data_dependent = 0;
  /// The recorded operator calls, in order (before dead code elimination).
  size_t recorded_ops = 0;
  /// Whether the graph was recorded on Meta tensors (TraceOptions::execution).
  bool ran_on_meta = false;
  /// Execution::MetaOrReal only: why the capture ran on the real tensors
  /// after all (the failing operator and its error); empty when it did not.
  std::string meta_fallback;

  /// Compiles the graph with the runtime (consumes this Traced).
  Module module(ModuleOptions options = {}) && { return Module(std::move(graph), std::move(tensors), options); }
};

namespace detail {
// Whether `M` is a torch::nn module holder (or a shared_ptr to a module).
template <typename M, typename = void>
struct IsModuleHolder : std::false_type {};
template <typename M>
struct IsModuleHolder<M, std::void_t<decltype(std::declval<M&>()->named_parameters(true)),
                                     decltype(std::declval<M&>()->named_buffers(true))>> : std::true_type {};
}  // namespace detail

/// The callable trace() runs: it gets the example inputs (the same tensors,
/// not copies) and returns a Tensor, a tuple or list of them, or any IValue.
using TraceFn = std::function<c10::IValue(const std::vector<at::Tensor>&)>;

/// Runs `fn(example_inputs)` once, recording every top-level ATen operator
/// call made on this thread, and returns the graph (Note [Capture by
/// dispatcher mode]). The graph's output is what fn returns. Exceptions
/// thrown by fn (or by a kernel) propagate after the capture is torn down.
/// Throws CaptureError when a capture is already active on this thread, or
/// for an argument the graph cannot represent.
Traced trace_function(const TraceFn& fn, const std::vector<at::Tensor>& example_inputs, TraceOptions options = {});

/// trace_function for any callable (lambda, function pointer, functor) that
/// takes the inputs' vector; a torch::nn module holder takes the overload
/// below instead.
template <typename F, typename = std::enable_if_t<!detail::IsModuleHolder<std::decay_t<F>>::value>>
Traced trace(F&& fn, const std::vector<at::Tensor>& example_inputs, TraceOptions options = {}) {
  return trace_function(TraceFn(std::forward<F>(fn)), example_inputs, std::move(options));
}

/// Whether a capture is active on this thread.
bool capture_active();

// ---- torch::nn modules (templates: no torch/torch.h here) ----------------------------

namespace detail {
template <typename M, size_t N, typename = void>
struct ForwardArity : std::false_type {};
template <typename M>
struct ForwardArity<M, 1, std::void_t<decltype(std::declval<M&>()->forward(std::declval<at::Tensor>()))>>
    : std::true_type {};
template <typename M>
struct ForwardArity<M, 2, std::void_t<decltype(std::declval<M&>()->forward(std::declval<at::Tensor>(),
                                                                           std::declval<at::Tensor>()))>>
    : std::true_type {};
template <typename M>
struct ForwardArity<M, 3, std::void_t<decltype(std::declval<M&>()->forward(
                              std::declval<at::Tensor>(), std::declval<at::Tensor>(), std::declval<at::Tensor>()))>>
    : std::true_type {};

template <typename M>
c10::IValue call_forward(M& module, const std::vector<at::Tensor>& in) {
  if constexpr (ForwardArity<M, 1>::value)
    if (in.size() == 1) return c10::IValue(module->forward(in[0]));
  if constexpr (ForwardArity<M, 2>::value)
    if (in.size() == 2) return c10::IValue(module->forward(in[0], in[1]));
  if constexpr (ForwardArity<M, 3>::value)
    if (in.size() == 3) return c10::IValue(module->forward(in[0], in[1], in[2]));
  throw CaptureError("fxcpp::torch::trace: the module's forward does not take " + std::to_string(in.size()) +
                     " tensors (pass a callable: trace(module, fn, inputs))");
}

/// The module's parameters and buffers by qualified name.
template <typename M>
std::vector<NamedTensor> module_tensors(M& module) {
  std::vector<NamedTensor> out;
  for (const auto& kv : module->named_parameters(true))
    out.push_back(NamedTensor{kv.key(), NamedTensor::Kind::Parameter, kv.value(), std::nullopt});
  for (const auto& kv : module->named_buffers(true))
    out.push_back(NamedTensor{kv.key(), NamedTensor::Kind::Buffer, kv.value(), std::nullopt});
  return out;
}
}  // namespace detail

/// Captures `module->forward(inputs...)` (1 to 3 tensor arguments) of a
/// torch::nn module holder (`torch::nn::Sequential`, `std::shared_ptr<MyNet>`,
/// `torch::nn::Linear`, ...). The module's parameters and buffers become
/// get_attr nodes named by their path. The module's training flag is used
/// as it is (call module->eval() first for inference graphs).
template <typename M, typename = std::enable_if_t<detail::IsModuleHolder<M>::value>>
Traced trace(M& module, const std::vector<at::Tensor>& example_inputs, TraceOptions options = {}) {
  auto named = detail::module_tensors(module);
  options.named_tensors.insert(options.named_tensors.end(), named.begin(), named.end());
  return trace_function([&](const std::vector<at::Tensor>& in) { return detail::call_forward(module, in); },
                        example_inputs, std::move(options));
}

/// The same with a callable that uses the module (other forward signatures).
template <typename M, typename = std::enable_if_t<detail::IsModuleHolder<M>::value>>
Traced trace(M& module, const TraceFn& fn, const std::vector<at::Tensor>& example_inputs, TraceOptions options = {}) {
  auto named = detail::module_tensors(module);
  options.named_tensors.insert(options.named_tensors.end(), named.begin(), named.end());
  return trace_function(fn, example_inputs, std::move(options));
}

// ---- TorchScript modules --------------------------------------------------------------

/// Captures `module.forward(example_inputs...)` of a TorchScript module (a
/// `.pt` file from torch.jit.trace or torch.jit.script) by running it once
/// in TorchScript's interpreter under the capture's dispatcher mode (Note
/// [Capture by dispatcher mode]): every ATen operator the interpreter calls
/// through the dispatcher becomes a node. The interpreter's own instructions
/// (prim::GetAttr, prim::ListConstruct, aten::size, control flow, ...) are
/// not dispatcher calls: what they computed is baked in, so the graph is
/// specialised to the example inputs' shapes (and to the branches taken),
/// as trace() is. Parameters and buffers are get_attr nodes named by their
/// module path (`layer1.0.conv1.weight`, from named_parameters() and
/// named_buffers()); other tensors the program holds are `_tensor_constantN`.
/// Placeholders are named after forward's parameters (unless
/// options.input_names says otherwise or they are not identifiers).
/// Runs with autograd off and the graph executor's optimizations off
/// (GraphOptimizerEnabledGuard), so no fusion group hides the operators.
/// The module's training flag is used as it is. With options.execution
/// Meta or MetaOrReal, the parameters and buffers are Meta tensors for the
/// run, as a torch::nn module's are. Throws CaptureError as trace() does;
/// exceptions of the interpreter propagate.
Traced from_torchscript(::torch::jit::Module& module, const std::vector<at::Tensor>& example_inputs,
                        TraceOptions options = {});
/// The same for a module saved with torch.jit.save, read with torch::jit::load
/// (on the CPU). The file is TorchScript: unlike a .fxpt, loading it runs its code.
Traced from_torchscript(const std::string& path, const std::vector<at::Tensor>& example_inputs,
                        TraceOptions options = {});
/// The same from the bytes of such a file.
Traced from_torchscript_buffer(const void* data, size_t size, const std::vector<at::Tensor>& example_inputs,
                               TraceOptions options = {});

}  // namespace fxcpp::torch
