// Runtime targets: interned ATen operator handles, primitives and torch
// constants (Note [Runtime targets] in ops.h).
#include "fxcpp/torch/ops.h"

#include <torch/csrc/api/include/torch/version.h>

#include "names.h"

#include <map>
#include <memory>
#include <mutex>

namespace fxcpp::torch {

namespace {

// ---- ATen operators -------------------------------------------------------------

// Note [Numbers as tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// `torch.ops.aten.add.Tensor(x, 1)` runs: torch's Python binding turns the 1
// into a 0-dim "wrapped number" tensor. It does so for a few operators only
// (torch::should_allow_numbers_as_tensors, by the operator's name, every
// overload; and every prims:: operator): elsewhere
// `torch.ops.aten.ne.Tensor(x, 1)` is a TypeError. torch.fx graphs and
// torch.export programs therefore hold numbers for tensors only there, and the
// runtime takes them only there, so it refuses at load what the Python runtime
// could not run (an untrusted file is checked at load by both:
// check_compiles). The names are those of the LibTorch it is built with
// (torch 2 added copy and _conj); tests/python/test_untrusted_files.py
// compares them with the installed torch's for every registered operator.
bool takes_numbers_as_tensors(const std::string& ns, const std::string& base) {
  if (ns == "prims") return true;
  if (ns != "aten") return false;
  static const char* const kNames[] = {
      "add", "add_", "div", "div_", "divide", "divide_", "mul", "mul_", "multiply", "multiply_", "sub", "sub_",
      "subtract", "subtract_", "true_divide", "true_divide_", "floor_divide", "floor_divide_", "to", "_to_copy",
      "copy_",
#if TORCH_VERSION_MAJOR >= 2
      "copy", "_conj",
#endif
  };
  for (const char* n : kNames)
    if (base == n) return true;
  return false;
}

class AtenOpInterface final : public ObjectInterface {
 public:
  static const AtenOp* op(void* p) { return static_cast<const AtenOp*>(p); }
  void retain(void*) const override {}
  void release(void*) const override {}
  std::string repr(void* p) const override {
    const AtenOp* o = op(p);
    size_t dot = o->name.find('.');
    std::string ns = o->qualified.substr(0, o->qualified.find("::"));
    return "<OpOverload(op='" + ns + "." + o->name.substr(0, dot) + "', overload='" + o->name.substr(dot + 1) + "')>";
  }
  std::string str(void* p) const override { return op(p)->python.substr(10); }  // "aten.add.Tensor"
  std::string name(void* p) const override { return op(p)->name; }
  std::string qualified_name(void* p) const override { return op(p)->python; }
  std::string pretty_target(void* p) const override { return op(p)->python; }
  std::string qualified_reference(void* p) const override { return op(p)->python; }
  // An operator that writes to an argument (in-place, out=) is kept by DCE
  // even when its result is unused: the write is the point.
  bool is_impure_target(void* p) const override {
    for (const c10::Argument& a : op(p)->handle.schema().arguments())
      if (a.alias_info() && a.alias_info()->isWrite()) return true;
    return false;
  }
};
const AtenOpInterface aten_iface;

// Interned operators: never freed, so Objects are plain pointers.
std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}


// ---- primitives -------------------------------------------------------------------

// Printed and code-generated as torch.fx prints the Python objects.
const NamedNative kPrimitives[] = {
    {"getitem", "operator.getitem", "getitem"}, {"add", "operator.add", "add"},
    {"sub", "operator.sub", "sub"},             {"mul", "operator.mul", "mul"},
    {"floordiv", "operator.floordiv", "floordiv"}, {"truediv", "operator.truediv", "truediv"},
    {"mod", "operator.mod", "mod"},             {"neg", "operator.neg", "neg"},
    {"getattr", "getattr", "", false, true},
};
constexpr size_t kNumPrimitives = sizeof(kPrimitives) / sizeof(kPrimitives[0]);

// ---- constants ------------------------------------------------------------------------

class ConstantInterface final : public ObjectInterface {
 public:
  static const TorchConstant* c(void* p) { return static_cast<const TorchConstant*>(p); }
  void retain(void*) const override {}
  void release(void*) const override {}
  std::string repr(void* p) const override {
    const TorchConstant* k = c(p);
    if (k->kind == TorchConstant::Kind::Device) return "device(type='" + k->name + "')";
    return "torch." + k->name;
  }
  std::string qualified_name(void* p) const override { return "torch." + c(p)->name; }
  std::string qualified_reference(void* p) const override {
    return c(p)->kind == TorchConstant::Kind::Device ? std::string() : "torch." + c(p)->name;
  }
};
const ConstantInterface constant_iface;

struct DtypeName {
  c10::ScalarType type;
  const char* name;
};
const DtypeName kDtypes[] = {
    {c10::ScalarType::Float, "float32"},   {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::Half, "float16"},    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::ComplexFloat, "complex64"}, {c10::ScalarType::ComplexDouble, "complex128"},
    {c10::ScalarType::Byte, "uint8"},      {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Short, "int16"},     {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Long, "int64"},      {c10::ScalarType::Bool, "bool"},
};

}  // namespace

Object aten_op(const std::string& qualified) {
  static std::map<std::string, std::unique_ptr<AtenOp>> table;
  size_t sep = qualified.find("::");
  if (sep == std::string::npos || sep == 0)
    throw FormatError("fxcpp::torch: '" + qualified + "' is not an operator name (expected 'namespace::name.overload')");
  std::string ns = qualified.substr(0, sep), rest = qualified.substr(sep + 2);
  size_t dot = rest.find('.');
  std::string base = rest.substr(0, dot), overload = dot == std::string::npos ? "" : rest.substr(dot + 1);
  if (overload == "default") overload.clear();
  if (!names::is_ascii_word(ns) || !names::is_ascii_word(base) ||
      (dot != std::string::npos && !names::is_ascii_word(rest.substr(dot + 1))))
    throw FormatError("fxcpp::torch: '" + qualified + "' is not an operator name (expected 'namespace::name.overload')");
  // One entry per overload, whichever way the default overload is spelled.
  std::string canonical = ns + "::" + base + (overload.empty() ? "" : "." + overload);
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table.find(canonical);
  if (it != table.end()) return Object::steal(&aten_iface, it->second.get());
  auto handle = c10::Dispatcher::singleton().findSchema({ns + "::" + base, overload});
  if (!handle)
    throw FormatError("fxcpp::torch: unknown operator '" + qualified +
                      "': no such schema is registered with the dispatcher (load the library that defines it, "
                      "or lower the model with this build's torch)");
  auto op = std::make_unique<AtenOp>(AtenOp{*handle, {}, {}, {}});
  std::string shown = overload.empty() ? "default" : overload;
  op->qualified = canonical;
  op->python = "torch.ops." + ns + "." + base + "." + shown;
  op->name = base + "." + shown;
  op->numbers_as_tensors = takes_numbers_as_tensors(ns, base);
  AtenOp* raw = op.get();
  table.emplace(canonical, std::move(op));
  return Object::steal(&aten_iface, raw);
}

const AtenOp* as_aten_op(const Object& target) {
  return target.iface() == &aten_iface ? AtenOpInterface::op(target.get()) : nullptr;
}

Object primitive(const std::string& python_name) {
  for (size_t i = 0; i < kNumPrimitives; ++i) {
    const NamedNative& p = kPrimitives[i];
    if (python_name == p.qualified_name || (p.is_builtin && python_name == "builtins." + p.name))
      return native_object(&p);
  }
  throw FormatError("fxcpp::torch: '" + python_name +
                    "' is not a runtime primitive (operator.getitem/add/sub/mul/floordiv/truediv/mod/neg, getattr)");
}

bool as_primitive(const Object& target, Primitive* out) {
  if (target.iface() != named_native_interface()) return false;
  for (size_t i = 0; i < kNumPrimitives; ++i)
    if (target.get() == &kPrimitives[i]) {
      *out = static_cast<Primitive>(i);
      return true;
    }
  return false;
}

const char* primitive_name(Primitive p) { return kPrimitives[static_cast<size_t>(p)].qualified_name.c_str(); }

std::string dtype_name(c10::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  throw FormatError(std::string("fxcpp::torch: dtype ") + c10::toString(t) + " is not supported by the file format");
}

c10::ScalarType dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  throw FormatError("fxcpp::torch: unknown dtype '" + name + "'");
}

Object torch_constant(TorchConstant::Kind kind, const std::string& name) {
  static std::map<std::pair<int, std::string>, std::unique_ptr<TorchConstant>> table;
  std::lock_guard<std::mutex> lock(table_mutex());
  auto key = std::make_pair(static_cast<int>(kind), name);
  auto it = table.find(key);
  if (it != table.end()) return Object::steal(&constant_iface, it->second.get());

  c10::IValue value;
  switch (kind) {
    case TorchConstant::Kind::Dtype:
      value = static_cast<int64_t>(dtype_from_name(name));
      break;
    case TorchConstant::Kind::Device: {
      if (name != "cpu" && name.rfind("cpu:", 0) != 0 && name.rfind("cuda", 0) != 0 && name != "meta")
        throw FormatError("fxcpp::torch: unsupported device '" + name + "'");
      try {
        value = c10::Device(name);
      } catch (const c10::Error&) {
        throw FormatError("fxcpp::torch: unsupported device '" + name + "'");
      }
      break;
    }
    case TorchConstant::Kind::Layout:
      if (name == "strided") value = static_cast<int64_t>(c10::Layout::Strided);
      else if (name == "sparse_coo") value = static_cast<int64_t>(c10::Layout::Sparse);
      else throw FormatError("fxcpp::torch: unknown layout '" + name + "'");
      break;
    case TorchConstant::Kind::MemoryFormat:
      if (name == "contiguous_format") value = static_cast<int64_t>(c10::MemoryFormat::Contiguous);
      else if (name == "preserve_format") value = static_cast<int64_t>(c10::MemoryFormat::Preserve);
      else if (name == "channels_last") value = static_cast<int64_t>(c10::MemoryFormat::ChannelsLast);
      else if (name == "channels_last_3d") value = static_cast<int64_t>(c10::MemoryFormat::ChannelsLast3d);
      else throw FormatError("fxcpp::torch: unknown memory format '" + name + "'");
      break;
  }
  auto c = std::make_unique<TorchConstant>(TorchConstant{kind, std::move(value), name});
  TorchConstant* raw = c.get();
  table.emplace(key, std::move(c));
  return Object::steal(&constant_iface, raw);
}

const TorchConstant* as_torch_constant(const Object& o) {
  return o.iface() == &constant_iface ? ConstantInterface::c(o.get()) : nullptr;
}

}  // namespace fxcpp::torch
