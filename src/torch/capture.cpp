// Capturing a graph from C++ code by a dispatcher mode (Note [Capture by
// dispatcher mode] in include/fxcpp/torch/capture.h).
#include "fxcpp/torch/capture.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "fxcpp/passes/dce.h"

namespace fxcpp::torch {

namespace {

constexpr c10::DispatchKey kModeKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

class Capture;
thread_local Capture* tls_capture = nullptr;

std::string memory_format_name(c10::MemoryFormat m) {
  switch (m) {
    case c10::MemoryFormat::Contiguous: return "contiguous_format";
    case c10::MemoryFormat::Preserve: return "preserve_format";
    case c10::MemoryFormat::ChannelsLast: return "channels_last";
    case c10::MemoryFormat::ChannelsLast3d: return "channels_last_3d";
    default: break;
  }
  throw CaptureError("fxcpp::torch::trace: unsupported memory format");
}

// Whether `a` (an argument's value) equals `d` (its schema default), for the
// constants defaults are made of.
bool same_constant(const c10::IValue& a, const c10::IValue& d) {
  if (a.isNone() || d.isNone()) return a.isNone() && d.isNone();
  if (a.isInt() && d.isInt()) return a.toInt() == d.toInt();
  if (a.isDouble() && d.isDouble()) return a.toDouble() == d.toDouble();
  if (a.isBool() && d.isBool()) return a.toBool() == d.toBool();
  if (a.isString() && d.isString()) return a.toStringRef() == d.toStringRef();
  if (a.isIntList() && d.isIntList()) return a.toIntVector() == d.toIntVector();
  if (a.isDoubleList() && d.isDoubleList()) return a.toDoubleVector() == d.toDoubleVector();
  if (a.isBoolList() && d.isBoolList()) return a.toBoolList().vec() == d.toBoolList().vec();
  if (a.isDevice() && d.isDevice()) return a.toDevice() == d.toDevice();
  return false;
}

c10::TypeKind base_kind(const c10::TypePtr& t) {
  if (!t) return c10::TypeKind::AnyType;
  if (t->kind() == c10::TypeKind::OptionalType) return t->containedType(0)->kind();
  return t->kind();
}

c10::TypePtr element_type(const c10::TypePtr& t) {
  if (!t) return nullptr;
  c10::TypePtr b = t->kind() == c10::TypeKind::OptionalType ? t->containedType(0) : t;
  if (b->kind() == c10::TypeKind::ListType) return b->containedType(0);
  return nullptr;
}

std::string qualified(const c10::FunctionSchema& schema) {
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

// An exception's message without c10's backtrace, up to its first line
// (NotImplementedError goes on with every backend that has a kernel).
std::string first_line(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string m = c10e ? c10e->what_without_backtrace() : e.what();
  size_t nl = m.find('\n');
  if (nl != std::string::npos) m.resize(nl);
  return m;
}

class Capture {
 public:
  Capture(const TraceOptions& options) : graph_(std::make_unique<Graph>()) {
    for (const NamedTensor& t : options.named_tensors)
      if (t.tensor.defined()) named_.emplace(t.tensor.unsafeGetTensorImpl(), &t);
  }

  // A Meta run: Device arguments `meta` are recorded as `device`, the
  // device of the tensors the Meta ones stand for.
  void set_meta(c10::Device device) {
    meta_ = true;
    real_device_ = device;
  }
  bool meta() const { return meta_; }

  // The first failure of the Meta run (Execution::Meta, MetaOrReal); empty
  // while there is none. Kept even when the callable catches the exception.
  const std::string& meta_failure() const { return meta_failure_; }
  void fail_meta(const std::string& why) {
    if (meta_failure_.empty()) meta_failure_ = why;
  }

  // A placeholder for an example input; its tensor_meta describes `t`, the
  // real tensor. bind_input maps the tensor the callable gets (t itself, or
  // its Meta stand-in) to it.
  Node* add_input(const std::string& name, const at::Tensor& t) {
    Node* n = graph_->placeholder(name);
    if (t.defined()) {
      ArgPairs p;
      std::vector<Argument> shape, stride;
      for (int64_t s : t.sizes()) shape.push_back(Argument::integer(s));
      for (int64_t s : t.strides()) stride.push_back(Argument::integer(s));
      p.emplace_back(Argument::string("shape"), Argument::tuple(std::move(shape)));
      p.emplace_back(Argument::string("dtype"),
                     Argument::foreign(torch_constant(TorchConstant::Kind::Dtype, dtype_name(t.scalar_type()))));
      p.emplace_back(Argument::string("requires_grad"), Argument::boolean(t.requires_grad()));
      p.emplace_back(Argument::string("stride"), Argument::tuple(std::move(stride)));
      p.emplace_back(Argument::string("memory_format"),
                     t.is_contiguous() ? Argument::foreign(torch_constant(TorchConstant::Kind::MemoryFormat,
                                                                          "contiguous_format"))
                                       : Argument::none());
      p.emplace_back(Argument::string("is_quantized"), Argument::boolean(t.is_quantized()));
      n->meta().emplace_back("tensor_meta", Argument::dict(std::move(p)));
    }
    return n;
  }
  void bind_input(Node* n, const at::Tensor& t) {
    if (t.defined()) values_[t.unsafeGetTensorImpl()] = Value{t, n, -1, nullptr};
  }

  // Records one call: `args` are the arguments it was called with, `rets`
  // what it returned. Runs with the mode key excluded.
  void record(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args, c10::ArrayRef<c10::IValue> rets) {
    ++recorded_;
    const c10::FunctionSchema& schema = op.schema();
    const auto& params = schema.arguments();
    Object target = target_of(op);

    std::vector<Argument> converted;
    converted.reserve(args.size());
    for (size_t i = 0; i < args.size() && i < params.size(); ++i)
      converted.push_back(convert(args[i], params[i].real_type(), &schema, params[i].name()));

    // Positional up to the last one that differs from its default; kwarg-only
    // ones that differ from theirs as keywords.
    std::vector<Argument> positional;
    KwArgs kwargs;
    size_t last = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].kwarg_only()) continue;
      if (!params[i].default_value() || !same_constant(args[i], *params[i].default_value())) last = i + 1;
    }
    for (size_t i = 0; i < last; ++i) positional.push_back(std::move(converted[i]));
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].kwarg_only() &&
          (!params[i].default_value() || !same_constant(args[i], *params[i].default_value())))
        kwargs.emplace_back(params[i].name(), std::move(converted[i]));

    Node* node = graph_->call_function(std::move(target), std::move(positional), std::move(kwargs));

    // Returned tensors now are this node's values (in-place and out= calls
    // remap the tensor they wrote to).
    bool any_tensor = false;
    auto bind = [&](const at::Tensor& t, int64_t index) {
      if (!t.defined()) return;
      any_tensor = true;
      values_[t.unsafeGetTensorImpl()] = Value{t, node, index, nullptr};
    };
    if (rets.size() == 1) {
      const c10::IValue& r = rets[0];
      if (r.isTensor()) bind(r.toTensor(), -1);
      else if (r.isTensorList()) {
        auto l = r.toTensorList();
        for (size_t i = 0; i < l.size(); ++i) bind(l.get(i), static_cast<int64_t>(i));
      }
    } else {
      for (size_t i = 0; i < rets.size(); ++i)
        if (rets[i].isTensor()) bind(rets[i].toTensor(), static_cast<int64_t>(i));
    }
    if (!rets.empty() && !any_tensor) ++data_dependent_;
  }

  void finish(const c10::IValue& result, bool dce) {
    graph_->output(convert(result, nullptr, nullptr, "the result"));
    if (dce) eliminate_dead_code(*graph_);
  }

  Traced take() {
    Traced t;
    t.graph = std::move(graph_);
    t.tensors = std::move(tensors_);
    t.data_dependent = data_dependent_;
    t.recorded_ops = recorded_;
    t.ran_on_meta = meta_;
    return t;
  }

 private:
  struct Value {
    at::Tensor keep;  ///< a strong reference: the TensorImpl cannot be reused while mapped
    Node* node;
    int64_t index;    ///< >= 0: element `index` of node's tuple/list result
    Node* item;       ///< the getitem node, once made
  };

  Object target_of(const c10::OperatorHandle& op) {
    const c10::FunctionSchema* key = &op.schema();
    auto it = targets_.find(key);
    if (it != targets_.end()) return it->second;
    const std::string& ov = op.schema().overload_name();
    Object o = aten_op(op.schema().name() + (ov.empty() ? "" : "." + ov));
    targets_.emplace(key, o);
    return o;
  }

  [[noreturn]] static void unsupported(const c10::FunctionSchema* schema, const std::string& pname,
                                       const std::string& what) {
    std::string who = schema ? qualified(*schema) : std::string("the traced function");
    throw CaptureError("fxcpp::torch::trace: " + who + " was called with " + what + " as '" + pname +
                       "', which a captured graph cannot hold");
  }

  Argument tensor(const at::Tensor& t, const c10::FunctionSchema* schema) {
    if (!t.defined()) return Argument::none();
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    auto it = values_.find(impl);
    if (it != values_.end()) {
      Value& v = it->second;
      if (v.index < 0) return Argument::node(v.node);
      if (!v.item)
        v.item = graph_->call_function(primitive("operator.getitem"),
                                       {Argument::node(v.node), Argument::integer(v.index)});
      return Argument::node(v.item);
    }
    if (impl->is_wrapped_number() && t.device().is_cpu()) {
      // A Python-style scalar wrapped by a C++ overload: a constant (the
      // runtime wraps it again). Read directly: no operator call.
      switch (t.scalar_type()) {
        case c10::ScalarType::Long: return Argument::integer(*t.data_ptr<int64_t>());
        case c10::ScalarType::Double: return Argument::real(*t.data_ptr<double>());
        case c10::ScalarType::Bool: return Argument::boolean(*t.data_ptr<bool>());
        default: break;
      }
    }
    std::string name;
    NamedTensor::Kind kind = NamedTensor::Kind::Constant;
    auto nt = named_.find(impl);
    if (nt != named_.end()) {
      name = nt->second->name;
      kind = nt->second->kind;
    } else {
      if (meta_ && t.is_meta()) {
        // Made on Meta without an operator call (or by the callable): a
        // constant without data, which the real run would not have.
        std::string who = schema ? qualified(*schema) : std::string("the traced function's result");
        fail_meta(who + " got a Meta tensor that no recorded operator made");
        throw CaptureError("fxcpp::torch::trace: " + meta_failure_);
      }
      name = "_tensor_constant" + std::to_string(num_constants_++);
    }
    tensors_.push_back(NamedTensor{name, kind, t, std::nullopt});
    Node* n = graph_->get_attr(name);
    values_[impl] = Value{t, n, -1, nullptr};
    return Argument::node(n);
  }

  // One argument's value as a graph Argument. `type` is the schema's real
  // type (ScalarType, Layout, MemoryFormat are ints in the boxed value); null
  // when there is no schema (the function's result).
  Argument convert(const c10::IValue& v, const c10::TypePtr& type, const c10::FunctionSchema* schema,
                   const std::string& pname, int depth = 0) {
    if (depth > 64) unsupported(schema, pname, "a value nested too deeply");
    using K = c10::TypeKind;
    if (v.isNone()) return Argument::none();
    if (v.isTensor()) return tensor(v.toTensor(), schema);
    if (v.isInt()) {
      int64_t i = v.toInt();
      switch (base_kind(type)) {
        case K::ScalarTypeType:
          return Argument::foreign(
              torch_constant(TorchConstant::Kind::Dtype, dtype_name(static_cast<c10::ScalarType>(i))));
        case K::LayoutType:
          if (static_cast<c10::Layout>(i) == c10::Layout::Strided)
            return Argument::foreign(torch_constant(TorchConstant::Kind::Layout, "strided"));
          if (static_cast<c10::Layout>(i) == c10::Layout::Sparse)
            return Argument::foreign(torch_constant(TorchConstant::Kind::Layout, "sparse_coo"));
          unsupported(schema, pname, "an unsupported layout");
        case K::MemoryFormatType:
          return Argument::foreign(torch_constant(TorchConstant::Kind::MemoryFormat,
                                                  memory_format_name(static_cast<c10::MemoryFormat>(i))));
        default:
          return Argument::integer(i);
      }
    }
    if (v.isDouble()) return Argument::real(v.toDouble());
    if (v.isBool()) return Argument::boolean(v.toBool());
    if (v.isString()) return Argument::string(v.toStringRef());
    if (v.isDevice()) {
      c10::Device d = v.toDevice();
      if (meta_ && d.is_meta()) d = real_device_;  // x.options() of a Meta stand-in
      return Argument::foreign(torch_constant(TorchConstant::Kind::Device, d.str()));
    }
    if (v.isIntList()) {
      std::vector<Argument> items;
      for (int64_t i : v.toIntList()) items.push_back(Argument::integer(i));
      return Argument::list(std::move(items));
    }
    if (v.isDoubleList()) {
      std::vector<Argument> items;
      for (double d : v.toDoubleList()) items.push_back(Argument::real(d));
      return Argument::list(std::move(items));
    }
    if (v.isBoolList()) {
      std::vector<Argument> items;
      for (bool b : v.toBoolList()) items.push_back(Argument::boolean(b));
      return Argument::list(std::move(items));
    }
    if (v.isTensorList()) {
      std::vector<Argument> items;
      for (const at::Tensor& t : v.toTensorList()) items.push_back(tensor(t, schema));
      return Argument::list(std::move(items));
    }
    if (v.isList()) {
      std::vector<Argument> items;
      c10::TypePtr elem = element_type(type);
      for (const c10::IValue& x : v.toListRef()) items.push_back(convert(x, elem, schema, pname, depth + 1));
      return Argument::list(std::move(items));
    }
    if (v.isTuple()) {
      std::vector<Argument> items;
      for (const c10::IValue& x : v.toTupleRef().elements()) items.push_back(convert(x, nullptr, schema, pname, depth + 1));
      return Argument::tuple(std::move(items));
    }
    unsupported(schema, pname, std::string("a ") + v.tagKind());
  }

  std::unique_ptr<Graph> graph_;
  std::unordered_map<const c10::TensorImpl*, const NamedTensor*> named_;
  std::unordered_map<const c10::TensorImpl*, Value> values_;
  std::unordered_map<const c10::FunctionSchema*, Object> targets_;
  std::vector<NamedTensor> tensors_;
  size_t num_constants_ = 0;
  size_t data_dependent_ = 0;
  size_t recorded_ = 0;
  bool meta_ = false;
  c10::Device real_device_{c10::kCPU};
  std::string meta_failure_;
};

// The boxed fallback for kModeKey: record top-level calls, run everything
// below the mode with the mode excluded (so nested calls are not recorded).
void capture_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, c10::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard no_mode(kModeKey);
  const c10::DispatchKeySet below = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kModeKey);
  Capture* cap = tls_capture;
  if (!cap) {  // the key leaked into a thread with no capture (thread-local state propagation)
    op.redispatchBoxed(below, stack);
    return;
  }
  const size_t nargs = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  if (cap->meta()) {
    try {
      op.redispatchBoxed(below, stack);
    } catch (const std::exception& e) {
      // No Meta kernel (c10::NotImplementedError), or one that refuses: the
      // Meta run is void even if the callable catches this.
      cap->fail_meta(qualified(op.schema()) + " failed on Meta tensors: " + first_line(e));
      throw;
    }
  } else {
    op.redispatchBoxed(below, stack);
  }
  const size_t nrets = op.schema().returns().size();
  cap->record(op, args, c10::ArrayRef<c10::IValue>(stack->data() + (stack->size() - nrets), nrets));
}

void ensure_registered() {
  // Registered once and never deregistered (the handle is leaked on purpose:
  // no static-destruction order issue with the dispatcher).
  static auto* handle = new c10::RegistrationHandleRAII(c10::Dispatcher::singleton().registerFallback(
      kModeKey, c10::KernelFunction::makeFromBoxedFunction<&capture_fallback>(), "fxcpp::torch::trace"));
  (void)handle;
}

// Sets and clears the thread's active capture.
struct ActiveCapture {
  explicit ActiveCapture(Capture* c) { tls_capture = c; }
  ~ActiveCapture() { tls_capture = nullptr; }
  ActiveCapture(const ActiveCapture&) = delete;
  ActiveCapture& operator=(const ActiveCapture&) = delete;
};

// Thrown out of capture_once when the Meta run failed (why: the operator
// and its error); trace_function falls back or throws CaptureError.
struct MetaFailed {
  std::string why;
};

// Execution::Meta: the tensors the callable sees are Meta tensors (Note
// [Capture by dispatcher mode], Meta execution). Example inputs get new
// Meta stand-ins; named tensors (a module's parameters and buffers, which
// the callable reaches through the module, not through its arguments) are
// turned into Meta tensors in place: the same TensorImpl, so identity and
// with it their get_attr names hold, with a Meta storage, key set and a
// fresh version counter, put back from a snapshot by the destructor
// (TensorImpl::shallow_copy_from both ways, as Variable::set_data does it,
// without set_data's same-backend check).
// A leaf's gradient accumulator, owned and weakly held: LibTorch 1.13 holds autograd
// nodes in std::shared_ptr, 2.x in c10::intrusive_ptr (Note [Which LibTorch]).
using Accumulator = decltype(::torch::autograd::impl::try_get_grad_accumulator(std::declval<const at::Tensor&>()));
template <class P>
struct WeakOf;
template <class T>
struct WeakOf<std::shared_ptr<T>> {
  using type = std::weak_ptr<T>;
};
template <class T, class N>
struct WeakOf<c10::intrusive_ptr<T, N>> {
  using type = c10::weak_intrusive_ptr<T, N>;
};
using WeakAccumulator = WeakOf<Accumulator>::type;

class MetaTensors {
 public:
  MetaTensors() = default;
  MetaTensors(const MetaTensors&) = delete;
  MetaTensors& operator=(const MetaTensors&) = delete;
  ~MetaTensors() { restore(); }

  // Checks every tensor first (nothing is changed when one cannot go to
  // Meta), then swaps the named ones. Returns why not, or empty.
  std::string prepare(const std::vector<NamedTensor>& named, const std::vector<at::Tensor>& inputs) {
    std::vector<c10::Device> devices;
    auto check = [&](const at::Tensor& t, const std::string& what) -> std::string {
      if (!t.defined() || t.is_meta()) return "";
      std::string why = refusal(t);
      if (!why.empty()) return what + " is " + why + ", which has no Meta stand-in";
      if (std::find(devices.begin(), devices.end(), t.device()) == devices.end()) devices.push_back(t.device());
      return "";
    };
    for (const NamedTensor& nt : named) {
      std::string why = check(nt.tensor, "'" + nt.name + "'");
      if (!why.empty()) return why;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string why = check(inputs[i], "example input " + std::to_string(i));
      if (!why.empty()) return why;
    }
    if (devices.size() > 1)
      return "the tensors are on " + devices[0].str() + " and " + devices[1].str() +
             " (a Meta run records one device for 'meta')";
    if (!devices.empty()) device_ = devices[0];
    for (const NamedTensor& nt : named) swap(nt.tensor);
    return "";
  }

  // The tensor the callable gets for the example input `t`.
  at::Tensor stand_in(const at::Tensor& t) {
    if (!t.defined() || t.is_meta()) return t;
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (swapped_.count(impl)) return t;  // a named tensor passed as an input: Meta in place
    auto it = inputs_.find(impl);
    if (it != inputs_.end()) return it->second;  // the same tensor twice: one stand-in
    at::Tensor m = meta_like(t);
    if (t.requires_grad()) m.set_requires_grad(true);
    inputs_.emplace(impl, m);
    return m;
  }

  // The device the Meta tensors stand for.
  c10::Device device() const { return device_; }

 private:
  struct Saved {
    at::Tensor tensor;                             ///< the swapped tensor (a strong reference)
    c10::intrusive_ptr<c10::TensorImpl> snapshot;  ///< its metadata and storage before
    c10::VariableVersion version;  ///< its version counter (disabled: none)
    bool has_version = false;
    /// A leaf that requires grad: its cached AccumulateGrad (whose input
    /// metadata says cpu), set aside so the Meta run makes its own.
    Accumulator accumulator;
    bool has_accumulator = false;
  };

  static std::string refusal(const at::Tensor& t) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    // shallow_copy_from is only an exact round trip for the base class
    // (sparse, quantized, MKLDNN, nested tensors override it).
    if (typeid(*impl) != typeid(c10::TensorImpl)) return "a " + t.toString() + " tensor";
    if (t.key_set().has(c10::DispatchKey::Python)) return "a tensor subclass";
    if (t.is_conj() || t.is_neg() || t._is_zerotensor()) return "a conjugate, negative or zero view";
    return "";
  }

  static at::Tensor meta_like(const at::Tensor& t) {
    c10::InferenceMode inference(t.is_inference());  // the same kind of tensor
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  }

  void swap(const at::Tensor& t) {
    if (!t.defined() || t.is_meta()) return;
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (!swapped_.insert(impl).second) return;  // tied weights: once
    at::Tensor m = meta_like(t);
    Saved s;
    s.tensor = t;
    s.snapshot = impl->shallow_copy_and_detach(impl->version_counter(), impl->allow_tensor_metadata_change());
    s.has_version = !t.is_inference();  // inference tensors have no version counter
    if (s.has_version) s.version = impl->version_counter();
    s.has_accumulator = t.requires_grad() && t.is_leaf();
    if (s.has_accumulator) s.accumulator = ::torch::autograd::impl::try_get_grad_accumulator(t);
    saved_.push_back(std::move(s));
    impl->shallow_copy_from(m.getIntrusivePtr());
    // In-place ops of the Meta run bump a counter of their own; its autograd
    // graph gets an AccumulateGrad of its own.
    if (saved_.back().has_version) impl->set_version_counter(c10::VariableVersion(0));
    if (saved_.back().has_accumulator) ::torch::autograd::impl::set_grad_accumulator(t, WeakAccumulator(Accumulator()));
  }

  void restore() noexcept {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      c10::TensorImpl* impl = it->tensor.unsafeGetTensorImpl();
      impl->shallow_copy_from(it->snapshot);
      if (it->has_version) impl->set_version_counter(it->version);
      if (it->has_accumulator) ::torch::autograd::impl::set_grad_accumulator(it->tensor, WeakAccumulator(it->accumulator));
    }
    saved_.clear();
  }

  std::vector<Saved> saved_;
  std::unordered_set<const c10::TensorImpl*> swapped_;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> inputs_;
  c10::Device device_{c10::kCPU};
};

// One capture, on the example inputs or (`meta`) on Meta stand-ins; throws
// MetaFailed when the Meta run failed, and what the callable throws.
Traced capture_once(const TraceFn& fn, const std::vector<at::Tensor>& example_inputs, const TraceOptions& options,
                    bool meta) {
  Capture cap(options);
  std::vector<std::vector<int64_t>> shapes;
  std::vector<Node*> placeholders;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    // Unique targets: generated code spells placeholders by target. The
    // tensor_meta describes the real input.
    placeholders.push_back(cap.add_input(
        !options.input_names.empty() ? options.input_names[i] : i == 0 ? "x" : "x_" + std::to_string(i),
        example_inputs[i]));
    shapes.push_back(example_inputs[i].defined() ? example_inputs[i].sizes().vec() : std::vector<int64_t>{});
  }
  MetaTensors metas;  // restores the named tensors on every way out
  std::vector<at::Tensor> inputs;
  if (meta) {
    std::string why = metas.prepare(options.named_tensors, example_inputs);
    if (!why.empty()) throw MetaFailed{why};
    cap.set_meta(metas.device());
    for (const at::Tensor& t : example_inputs) inputs.push_back(metas.stand_in(t));
  }
  const std::vector<at::Tensor>& run_inputs = meta ? inputs : example_inputs;
  for (size_t i = 0; i < run_inputs.size(); ++i) cap.bind_input(placeholders[i], run_inputs[i]);

  try {
    c10::IValue result;
    {
      ActiveCapture active(&cap);
      c10::impl::IncludeDispatchKeyGuard mode(kModeKey);
      result = fn(run_inputs);
    }
    if (!cap.meta_failure().empty()) throw MetaFailed{cap.meta_failure()};  // the callable caught it
    cap.finish(result, options.dead_code_elimination);  // the mode is off again
  } catch (const MetaFailed&) {
    throw;
  } catch (...) {
    if (!cap.meta_failure().empty()) throw MetaFailed{cap.meta_failure()};
    throw;
  }
  Traced t = cap.take();
  t.input_shapes = std::move(shapes);
  return t;
}

}  // namespace

bool capture_active() { return tls_capture != nullptr; }

Traced trace_function(const TraceFn& fn, const std::vector<at::Tensor>& example_inputs, TraceOptions options) {
  if (tls_capture)
    throw CaptureError("fxcpp::torch::trace: a capture is already active on this thread (captures do not nest)");
  if (c10::impl::tls_is_dispatch_key_included(kModeKey))
    throw CaptureError("fxcpp::torch::trace: the dispatch key TESTING_ONLY_GenericMode is already in use on this thread");
  if (!options.input_names.empty() && options.input_names.size() != example_inputs.size())
    throw CaptureError("fxcpp::torch::trace: " + std::to_string(options.input_names.size()) + " input names for " +
                       std::to_string(example_inputs.size()) + " inputs");
  for (size_t i = 0; i < options.input_names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (options.input_names[i] == options.input_names[j])
        throw CaptureError("fxcpp::torch::trace: input name '" + options.input_names[i] + "' is given twice");
  ensure_registered();

  if (options.execution == Execution::Real) return capture_once(fn, example_inputs, options, false);
  std::string why;
  try {
    return capture_once(fn, example_inputs, options, true);
  } catch (const MetaFailed& e) {
    if (options.execution == Execution::Meta)
      throw CaptureError("fxcpp::torch::trace: " + e.why +
                         " (Execution::Meta; Execution::MetaOrReal falls back to the real tensors)");
    why = e.why;
  } catch (const CaptureError&) {
    throw;  // not about Meta: the real run would throw it too
  } catch (const std::exception& e) {
    if (options.execution == Execution::Meta) throw;
    why = "the callable threw on Meta tensors: " + first_line(e);
  }
  // Execution::MetaOrReal: the whole capture again, on the real tensors
  // (Note [Capture by dispatcher mode], Meta execution).
  Traced t = capture_once(fn, example_inputs, options, false);
  t.meta_fallback = std::move(why);
  return t;
}

}  // namespace fxcpp::torch
