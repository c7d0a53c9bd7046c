// Reading the .fxpt file format (docs/fxpt_format.md): a PyTorch zip archive
// holding graph.json and the raw storages.
//
// Note [Loading untrusted files]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A file is data, never code: the graph is JSON, operators are looked up by
// name in the dispatcher, tensors are raw bytes. Everything read is checked
// before use:
// * The container is read by our own strict zip reader (Note [Strict zip
//   container] in zip_reader.cpp), from a file or a buffer alike: exactly
//   one reading of the archive or a refusal. Records are stored, never
//   compressed (nothing is ever inflated: no decompression bombs, no
//   half-written buffers); local headers agree with the central directory;
//   entries lie inside the file, never overlap or repeat, and every byte of
//   the file belongs to one of them or to the directory and end records; the
//   CRC-32 of every record read is verified; entry count, name length and
//   directory size are bounded; graph.json is at most kMaxGraphJsonBytes.
//   A record larger than the file is refused before anything is allocated.
// * JSON nesting is limited, node references must name earlier nodes.
// * Every tensor's extent must fit its storage record (overflow-checked
//   arithmetic), and independently of its strides it may hold at most
//   kMaxTensorBytes (a stride of 0 lets 4 bytes back 2^62 elements); its
//   storage offset lies inside the record even when it has no element
//   (check_tensor_extent in storages.h, shared with the .pt2 reader).
// Each failure is a FormatError that says what is wrong.
#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/CPUAllocator.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>

#include "fxcpp/torch/format.h"
#include "fxcpp/torch/module.h"  // load() builds a Module
#include "fxcpp/torch/policy.h"
#include "json_fields.h"
#include "pt2_reader.h"
#include "names.h"
#include "storages.h"
#include "zip_reader.h"

namespace fxcpp::torch {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;
constexpr const char* kFormatName = "fxcpp-aten";

// ---- the archive ------------------------------------------------------------------

// graph.json is parsed into memory whole (a DOM several times its size), so
// its size is capped; real graphs are a few MB.
constexpr uint64_t kMaxGraphJsonBytes = uint64_t(256) << 20;
constexpr const char* kGraphRecord = "graph.json";

// The records of a .fxpt file, through the strict zip reader (Note [Strict
// zip container] in zip_reader.cpp), read into memory as they are asked for.
class Archive {
 public:
  explicit Archive(std::shared_ptr<const zip::Source> in) : reader_(std::move(in)) {}
  /// The bytes of record `name`, CRC-checked. `claimed` is the size
  /// graph.json gives it: a stored record cannot be larger than the file, so
  /// a larger claim is refused before anything is allocated.
  std::tuple<at::DataPtr, size_t> get(const std::string& name, uint64_t claimed = 0) {
    const zip::Entry* e = &entry(name, claimed);
    if (name == kGraphRecord && e->size > kMaxGraphJsonBytes)
      throw FormatError("fxcpp::torch: graph.json has " + std::to_string(e->size) + " bytes, more than the " +
                        std::to_string(kMaxGraphJsonBytes) + " bytes (256 MiB) a .fxpt file's graph may have");
    const size_t n = static_cast<size_t>(e->size);
    at::DataPtr data = c10::GetCPUAllocator()->allocate(n);
    reader_.read(*e, data.get());
    return {std::move(data), n};
  }
  /// The entry of record `name`; `claimed` as for get().
  const zip::Entry& entry(const std::string& name, uint64_t claimed = 0) const {
    if (claimed > reader_.file_size())
      throw FormatError("fxcpp::torch: record '" + name + "' claims " + std::to_string(claimed) +
                        " bytes, more than the whole file");
    const zip::Entry* e = reader_.find(name);
    if (!e) throw FormatError("fxcpp::torch: the archive has no record '" + name + "'");
    return *e;
  }
  /// The checked archive (for the .pt2 reader, Note [Reading .pt2 archives]).
  const zip::Reader& reader() const { return reader_; }

 private:
  zip::Reader reader_;
};

// ---- JSON helpers ---------------------------------------------------------------------

struct GraphJson {
  static constexpr const char* kPrefix = "fxcpp::torch: malformed graph.json: ";
};
using J = JsonFields<GraphJson>;  // the checked accessors of json_fields.h
[[noreturn]] void bad(const std::string& what) { J::bad(what); }

// ---- values ------------------------------------------------------------------------

class Decoder {
 public:
  explicit Decoder(std::unordered_map<std::string, Node*>& nodes) : nodes_(nodes) {}

  Argument value(const Json& j, const std::string& where, int depth = 0) {
    if (depth > kMaxDepth) bad(where + ": values nested more than " + std::to_string(kMaxDepth) + " deep");
    switch (j.type()) {
      case Json::value_t::null: return Argument::none();
      case Json::value_t::boolean: return Argument::boolean(j.get<bool>());
      case Json::value_t::number_integer: return Argument::integer(j.get<int64_t>());
      case Json::value_t::number_unsigned:
        if (j.get<uint64_t>() > uint64_t(INT64_MAX)) bad(where + ": integer out of int64 range");
        return Argument::integer(j.get<int64_t>());
      case Json::value_t::number_float: return Argument::real(j.get<double>());
      case Json::value_t::string: return Argument::string(j.get<std::string>());
      case Json::value_t::object: break;
      default: bad(where + ": unexpected " + std::string(j.type_name()));
    }
    if (j.size() != 1) bad(where + ": a tagged value has exactly one key");
    const std::string& tag = j.begin().key();
    const Json& v = j.begin().value();
    if (tag == "node") {
      if (!v.is_string()) bad(where + ": node reference is not a string");
      auto it = nodes_.find(v.get<std::string>());
      if (it == nodes_.end()) bad(where + ": reference to node '" + v.get<std::string>() + "', which is not defined before it");
      return Argument::node(it->second);
    }
    if (tag == "float") {
      if (v.is_number()) return Argument::real(v.get<double>());
      if (v == "inf") return Argument::real(std::numeric_limits<double>::infinity());
      if (v == "-inf") return Argument::real(-std::numeric_limits<double>::infinity());
      if (v == "nan") return Argument::real(std::numeric_limits<double>::quiet_NaN());
      bad(where + ": bad float");
    }
    if (tag == "list" || tag == "tuple") {
      if (!v.is_array()) bad(where + ": " + tag + " is not an array");
      std::vector<Argument> items;
      items.reserve(v.size());
      for (auto& x : v) items.push_back(value(x, where, depth + 1));
      return tag == "list" ? Argument::list(std::move(items)) : Argument::tuple(std::move(items));
    }
    if (tag == "dict") {
      if (!v.is_array()) bad(where + ": dict is not an array of pairs");
      ArgPairs pairs;
      for (auto& kv : v) {
        if (!kv.is_array() || kv.size() != 2) bad(where + ": dict item is not a [key, value] pair");
        pairs.emplace_back(value(kv[0], where, depth + 1), value(kv[1], where, depth + 1));
      }
      return Argument::dict(std::move(pairs));
    }
    if (tag == "slice") {
      if (!v.is_array() || v.size() != 3) bad(where + ": slice is not [start, stop, step]");
      return Argument::slice(value(v[0], where, depth + 1), value(v[1], where, depth + 1), value(v[2], where, depth + 1));
    }
    if (tag == "dtype" || tag == "device" || tag == "layout" || tag == "memory_format") {
      if (!v.is_string()) bad(where + ": " + tag + " is not a string");
      TorchConstant::Kind k = tag == "dtype" ? TorchConstant::Kind::Dtype
                              : tag == "device" ? TorchConstant::Kind::Device
                              : tag == "layout" ? TorchConstant::Kind::Layout
                                                : TorchConstant::Kind::MemoryFormat;
      return Argument::foreign(torch_constant(k, v.get<std::string>()));
    }
    if (tag == "tensor_meta") return tensor_meta(v, where);
    bad(where + ": unknown value tag '" + tag + "'");
  }

  // ShapeProp's TensorMetadata, as a dict Argument with its field names.
  Argument tensor_meta(const Json& v, const std::string& where) {
    std::string w = where + ".tensor_meta";
    ArgPairs p;
    auto ints = [&](const char* k) {
      std::vector<Argument> items;
      for (int64_t x : J::ints_field(v, k, w)) items.push_back(Argument::integer(x));
      return Argument::tuple(std::move(items));
    };
    p.emplace_back(Argument::string("shape"), ints("shape"));
    p.emplace_back(Argument::string("dtype"),
                   Argument::foreign(torch_constant(TorchConstant::Kind::Dtype, J::str_field(v, "dtype", w))));
    const Json& rg = J::field(v, "requires_grad", w);
    if (!rg.is_boolean()) bad(w + ".requires_grad is not a bool");
    p.emplace_back(Argument::string("requires_grad"), Argument::boolean(rg.get<bool>()));
    p.emplace_back(Argument::string("stride"), ints("stride"));
    const Json& mf = J::field(v, "memory_format", w);
    if (!mf.is_null() && !mf.is_string()) bad(w + ".memory_format is not a string or null");
    p.emplace_back(Argument::string("memory_format"),
                   mf.is_null() ? Argument::none()
                                : Argument::foreign(torch_constant(TorchConstant::Kind::MemoryFormat, mf.get<std::string>())));
    const Json& q = J::field(v, "is_quantized", w);
    if (!q.is_boolean()) bad(w + ".is_quantized is not a bool");
    p.emplace_back(Argument::string("is_quantized"), Argument::boolean(q.get<bool>()));
    return Argument::dict(std::move(p));
  }

 private:
  std::unordered_map<std::string, Node*>& nodes_;
};

// ---- tensors --------------------------------------------------------------------------



std::vector<NamedTensor> read_tensors(const Json& doc, Archive& archive, bool map) {
  const Json& storages = J::field(doc, "storages", "graph.json");
  const Json& tensors = J::field(doc, "tensors", "graph.json");
  if (!storages.is_array() || !tensors.is_array()) bad("storages and tensors must be arrays");

  struct StorageInfo {
    std::string record;
    uint64_t nbytes;
    c10::optional<c10::Storage> storage;
  };
  std::vector<StorageInfo> infos;
  for (size_t i = 0; i < storages.size(); ++i) {
    std::string w = "storages[" + std::to_string(i) + "]";
    std::string record = J::str_field(storages[i], "record", w);
    int64_t nbytes = J::int_field(storages[i], "nbytes", w);
    if (nbytes < 0) bad(w + ".nbytes is negative");
    infos.push_back({record, static_cast<uint64_t>(nbytes), c10::nullopt});
  }

  std::vector<NamedTensor> out;
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Json& t = tensors[i];
    std::string w = "tensors[" + std::to_string(i) + "]";
    NamedTensor nt;
    nt.name = J::str_field(t, "name", w);
    if (nt.name.empty() || !seen.emplace(nt.name, i).second) bad(w + ": empty or repeated tensor name '" + nt.name + "'");
    std::string kind = J::str_field(t, "kind", w);
    if (kind == "parameter") nt.kind = NamedTensor::Kind::Parameter;
    else if (kind == "buffer") nt.kind = NamedTensor::Kind::Buffer;
    else if (kind == "constant") nt.kind = NamedTensor::Kind::Constant;
    else bad(w + ": unknown kind '" + kind + "'");
    c10::ScalarType dtype = dtype_from_name(J::str_field(t, "dtype", w));
    int64_t sidx = J::int_field(t, "storage", w);
    if (sidx < 0 || static_cast<size_t>(sidx) >= infos.size()) bad(w + ": storage index out of range");
    int64_t offset = J::int_field(t, "offset", w);
    std::vector<int64_t> sizes = J::ints_field(t, "sizes", w), strides = J::ints_field(t, "strides", w);
    if (sizes.size() != strides.size()) bad(w + ": sizes and strides differ in length");
    if (offset < 0) bad(w + ": negative storage offset");
    StorageInfo& si = infos[static_cast<size_t>(sidx)];
    switch (check_tensor_extent(sizes, strides, offset, c10::elementSize(dtype), si.nbytes)) {
      case Extent::Ok: break;
      case Extent::NegativeSizeOrStride: bad(w + ": negative size or stride");
      case Extent::Overflows: bad(w + ": tensor extent overflows");
      case Extent::PastStorage:
        bad(w + ": tensor extends past its storage (" + std::to_string(si.nbytes) + " bytes)");
      case Extent::OffsetPastStorage:
        bad(w + ": storage offset " + std::to_string(offset) + " lies past its storage (" + std::to_string(si.nbytes) +
            " bytes)");
      case Extent::TooManyBytes:
        bad(w + ": its elements take more than the " + std::to_string(kMaxTensorBytes) + " bytes a tensor may have");
    }
    if (!si.storage) {
      const zip::Entry& e = archive.entry(si.record, si.nbytes);
      if (e.size != si.nbytes)
        bad("storage record '" + si.record + "' has " + std::to_string(e.size) + " bytes, graph.json says " +
            std::to_string(si.nbytes));
      si.storage = record_storage(archive.reader(), e, map);  // Note [Memory-mapped weights]
    }
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(*si.storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     caffe2::TypeMeta::fromScalarType(dtype));
    impl->set_sizes_and_strides(sizes, strides, offset);
    nt.tensor = at::Tensor(std::move(impl));
    auto rg = t.find("requires_grad");
    if (rg != t.end()) {
      if (!rg->is_boolean()) bad(w + ".requires_grad is not a bool");
      nt.requires_grad = rg->get<bool>();
    }
    out.push_back(std::move(nt));
  }
  return out;
}

// ---- names ---------------------------------------------------------------------------

// Names are checked by the rules in names.h (Note [Names a file may use]).
using names::is_identifier;
using names::is_module_path;
using names::shown;

void check_identifier(const std::string& s, const std::string& what) {
  if (!is_identifier(s)) bad(what + " " + shown(s) + " is not a Python identifier (ASCII letters, digits and '_', not a keyword)");
}

[[noreturn]] void refuse_operator(const std::string& node, const AtenOp& op, const std::string& why) {
  throw FormatError("fxcpp::torch: node " + shown(node) + " calls " + op.qualified +
                    ", which a file from an untrusted source may not call (" + why +
                    "). If you made this file yourself, load it with trusted=True (C++: LoadOptions::trusted = true).");
}

// Note [Enumerations from a file]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Schemas take dtypes, layouts and memory formats as ints, and kernels index
// tables with them unchecked: aten::view.dtype with -5 kills the process with
// SIGFPE, aten::scalar_tensor with dtype 200 reads past a table. A file spells
// them as tagged constants ({"dtype": "float32"}, checked by name); so an int
// constant or tagged constant passed where the schema takes one must be a
// value of that enumeration (a tagged constant also of that kind: a dtype is
// not a layout, whichever numbers the LibTorch gives them), and unless the
// file is trusted, a value the graph computes may only be a dtype straight
// from getattr(tensor, "dtype").

// The number of values of the enumeration `t` takes (through Optional and
// List), or 0 when it takes none.
int64_t enum_size(const c10::TypePtr& t, c10::TypeKind* kind) {
  switch (t->kind()) {
    case c10::TypeKind::ScalarTypeType: *kind = t->kind(); return static_cast<int64_t>(c10::ScalarType::NumOptions);
    case c10::TypeKind::LayoutType: *kind = t->kind(); return static_cast<int64_t>(c10::Layout::NumOptions);
    case c10::TypeKind::MemoryFormatType: *kind = t->kind(); return static_cast<int64_t>(c10::MemoryFormat::NumOptions);
    case c10::TypeKind::OptionalType:
    case c10::TypeKind::ListType: return enum_size(t->containedType(0), kind);
    default: return 0;
  }
}

bool is_dtype_getattr(const Node* n) {
  Primitive p;
  if (n->op() != Op::CallFunction || !as_primitive(n->target().fn(), &p) || p != Primitive::GetAttr) return false;
  auto args = n->args();
  return args.size() == 2 && args[1].kind() == ArgKind::String && args[1].as_string() == "dtype";
}

// The kind of tagged constant that spells values of the enumeration `kind`.
TorchConstant::Kind constant_kind(c10::TypeKind kind) {
  switch (kind) {
    case c10::TypeKind::LayoutType: return TorchConstant::Kind::Layout;
    case c10::TypeKind::MemoryFormatType: return TorchConstant::Kind::MemoryFormat;
    default: return TorchConstant::Kind::Dtype;
  }
}

void check_enum_value(const Argument& a, c10::TypeKind kind, int64_t size, const std::string& where, bool trusted) {
  switch (a.kind()) {
    case ArgKind::Int:
      if (a.as_int() < 0 || a.as_int() >= size)
        bad(where + " is " + std::to_string(a.as_int()) + ", which is not a " + c10::typeKindToString(kind) +
            " (files spell them as {\"dtype\": \"float32\"} and the like)");
      return;
    case ArgKind::Foreign:
      // A constant of another enumeration is refused whatever its number: a
      // dtype's number may be a valid layout (float64 is 7, torch 2.x's
      // Layout::Jagged), and would silently mean that.
      if (const TorchConstant* c = as_torch_constant(a.as_object());
          c && (c->kind != constant_kind(kind) || !c->value.isInt() || c->value.toInt() < 0 || c->value.toInt() >= size))
        bad(where + " is the " + c->name + " constant, which is not a " + c10::typeKindToString(kind));
      return;
    case ArgKind::NodeRef:
      if (!trusted && !(kind == c10::TypeKind::ScalarTypeType && is_dtype_getattr(a.as_node())))
        throw FormatError("fxcpp::torch: " + where + " is computed by node " + shown(std::string(a.as_node()->name())) +
                          "; a file from an untrusted source may pass a " + c10::typeKindToString(kind) +
                          " only as a constant (or a dtype from getattr(tensor, 'dtype')). If you made this file "
                          "yourself, load it with trusted=True (C++: LoadOptions::trusted = true).");
      return;
    case ArgKind::List:
    case ArgKind::Tuple:
      for (const Argument& item : a.items()) check_enum_value(item, kind, size, where, trusted);
      return;
    default: return;  // None; anything else the plan refuses by type
  }
}

void check_enum_arguments(const std::string& node, const AtenOp& op, const std::vector<Argument>& args,
                          const KwArgs& kwargs, bool trusted) {
  const auto& params = op.handle.schema().arguments();
  auto check = [&](const c10::Argument& param, const Argument& a) {
    c10::TypeKind kind{};
    if (int64_t size = enum_size(param.real_type(), &kind))
      check_enum_value(a, kind, size, "node " + shown(node) + ": argument '" + param.name() + "' of " + op.qualified,
                       trusted);
  };
  for (size_t i = 0; i < args.size() && i < params.size(); ++i) check(params[i], args[i]);
  for (const auto& kv : kwargs)
    for (const auto& param : params)
      if (param.name() == kv.first) check(param, kv.second);
}

// ---- the graph -------------------------------------------------------------------------

std::unique_ptr<Graph> read_graph(const Json& doc, const std::vector<NamedTensor>& tensors, const LoadOptions& options) {
  const Json& nodes = J::field(doc, "nodes", "graph.json");
  if (!nodes.is_array()) bad("nodes is not an array");
  auto cls = doc.find("class_name");
  if (cls != doc.end()) {
    if (!cls->is_string()) bad("class_name is not a string");
    check_identifier(cls->get<std::string>(), "class_name");
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!is_module_path(tensors[i].name))
      bad("tensors[" + std::to_string(i) + "]: name " + shown(tensors[i].name) +
          " is not a module path (dotted parts of letters, digits, '_' and '-': \"layer1.0.weight\")");
  auto g = std::make_unique<Graph>();
  std::unordered_map<std::string, Node*> by_name;
  std::unordered_map<std::string, bool> tensor_names;
  for (auto& t : tensors) tensor_names.emplace(t.name, true);
  Decoder dec(by_name);
  bool have_output = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& j = nodes[i];
    std::string w = "nodes[" + std::to_string(i) + "]";
    if (have_output) bad(w + ": nodes after the output node");
    std::string name = J::str_field(j, "name", w), op_text = J::str_field(j, "op", w);
    if (!is_identifier(name)) check_identifier(name, w + ": node name");
    w += " ('" + name + "')";
    if (by_name.count(name)) bad(w + ": repeated node name");
    auto op = parse_op(op_text);
    if (!op || *op == Op::Root) bad(w + ": unknown opcode '" + op_text + "'");
    const Json& args_j = J::field(j, "args", w);
    if (!args_j.is_array()) bad(w + ".args is not an array");
    std::vector<Argument> args;
    for (auto& a : args_j) args.push_back(dec.value(a, w + ".args"));
    KwArgs kwargs;
    if (j.contains("kwargs")) {
      const Json& kw = j["kwargs"];
      if (!kw.is_object()) bad(w + ".kwargs is not an object");
      for (auto it = kw.begin(); it != kw.end(); ++it) {
        check_identifier(it.key(), w + ": kwargs key");
        kwargs.emplace_back(it.key(), dec.value(it.value(), w + ".kwargs"));
      }
    }
    Node* n = nullptr;
    switch (*op) {
      case Op::Placeholder: {
        if (args.size() > 1 || !kwargs.empty()) bad(w + ": a placeholder has at most one argument (its default)");
        std::string target = J::str_field(j, "target", w);
        size_t stars = target.rfind("**", 0) == 0 ? 2 : target.rfind('*', 0) == 0 ? 1 : 0;
        if (!is_identifier(target.substr(stars))) check_identifier(target, w + ": placeholder target");
        n = g->create_node(Op::Placeholder, Target(target), std::move(args), {}, name);
        break;
      }
      case Op::GetAttr: {
        std::string target = J::str_field(j, "target", w);
        if (!tensor_names.count(target)) bad(w + ": get_attr of " + shown(target) + ", which is not in the tensor table");
        if (!args.empty() || !kwargs.empty()) bad(w + ": get_attr takes no arguments");
        n = g->create_node(Op::GetAttr, Target(target), {}, {}, name);
        break;
      }
      case Op::CallFunction: {
        std::string target = J::str_field(j, "target", w);
        Object fn = target.find("::") != std::string::npos ? aten_op(target) : primitive(target);
        if (const AtenOp* op = as_aten_op(fn)) {
          if (!options.trusted) {
            std::string why = refusal_reason(*op);
            if (!why.empty()) refuse_operator(name, *op, why);
          }
          check_enum_arguments(name, *op, args, kwargs, options.trusted);
        }
        n = g->create_node(Op::CallFunction, Target(std::move(fn)), std::move(args), std::move(kwargs), name);
        break;
      }
      case Op::Output:
        if (args.size() != 1 || !kwargs.empty()) bad(w + ": output takes exactly one argument");
        n = g->create_node(Op::Output, Target("output"), std::move(args), {}, name);
        have_output = true;
        break;
      default:
        throw FormatError("fxcpp::torch: " + w + " is a " + op_text +
                          " node; the runtime runs lowered graphs: lower the model with fxcpp.aten.lower first");
    }
    if (j.contains("meta")) {
      const Json& meta = j["meta"];
      if (!meta.is_object()) bad(w + ".meta is not an object");
      auto tm = meta.find("tensor_meta");
      if (tm != meta.end()) n->meta().emplace_back("tensor_meta", dec.value(*tm, w + ".meta"));
    }
    by_name.emplace(name, n);
  }
  if (!have_output) bad("the graph has no output node");
  return g;
}

Json parse_graph(Archive& archive) {
  auto [data, size] = archive.get("graph.json");
  const char* text = static_cast<const char*>(data.get());
  Json doc;
  try {
    // Nesting is limited while parsing: a hostile file cannot exhaust the stack.
    doc = Json::parse(text, text + size, [](int depth, Json::parse_event_t, Json&) {
      if (depth > 4 * kMaxDepth) throw FormatError("fxcpp::torch: malformed graph.json: nested too deeply");
      return true;
    });
  } catch (const Json::exception& e) {
    bad(e.what());
  }
  if (!doc.is_object()) bad("the document is not an object");
  if (J::str_field(doc, "format", "graph.json") != kFormatName) bad("format is not '" + std::string(kFormatName) + "'");
  int64_t version = J::int_field(doc, "version", "graph.json");
  if (version > kFormatVersion)
    throw FormatError("fxcpp::torch: this file has format version " + std::to_string(version) +
                      ", newer than the newest this build reads (" + std::to_string(kFormatVersion) +
                      "); load it with a newer fxcpp");
  if (version < 1) bad("version " + std::to_string(version) + " does not exist");
  return doc;
}

FileContents read_archive(Archive& archive, const LoadOptions& options) {
  FileContents out;
  // Told apart by content (Note [Reading .pt2 archives] in fxcpp/torch/pt2.h).
  if (pt2::is_pt2(archive.reader())) {
    std::tie(out.graph, out.tensors) = pt2::read(archive.reader(), options);
    out.class_name = "GraphModule";
  } else {
    Json doc = parse_graph(archive);
    out.tensors = read_tensors(doc, archive, options.mmap);
    out.graph = read_graph(doc, out.tensors, options);  // checks class_name
    auto cls = doc.find("class_name");
    out.class_name = cls != doc.end() ? cls->get<std::string>() : "GraphModule";
  }
  copy_written_tensors(*out.graph, out.tensors);  // Note [Memory-mapped weights] in zip_reader.cpp
  return out;
}

// The archive of the file at `path`: mapped when `options.mmap` (and the
// file can be mapped), else read with pread (Note [Memory-mapped weights]).
std::shared_ptr<const zip::Source> file_source(const std::string& path, const LoadOptions& options) {
  if (options.mmap)
    if (auto m = zip::MappedFile::open(path)) return m;
  return std::make_shared<zip::FileSource>(path);
}

}  // namespace

std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read_file(const std::string& path, const LoadOptions& options) {
  FileContents c = read_contents(path, options);
  return {std::move(c.graph), std::move(c.tensors)};
}

FileContents read_contents(const std::string& path, const LoadOptions& options) {
  Archive archive(file_source(path, options));
  return read_archive(archive, options);
}

FileContents read_buffer(const void* data, size_t size, const LoadOptions& options) {
  Archive archive(std::make_shared<zip::MemorySource>(data, size));
  return read_archive(archive, options);
}

Module load(const std::string& path, const LoadOptions& options) {
  auto [graph, tensors] = read_file(path, options);
  return Module(std::move(graph), std::move(tensors), ModuleOptions{options.plan_memory});
}

Module load_from_buffer(const void* data, size_t size, const LoadOptions& options) {
  FileContents c = read_buffer(data, size, options);
  return Module(std::move(c.graph), std::move(c.tensors), ModuleOptions{options.plan_memory});
}

namespace {
// The graph record of a .fxpt archive; of a .pt2 archive, the one its
// program would have as a .fxpt file (Python's load rebuilds its graph from it).
std::string graph_json_of(Archive& archive) {
  if (!pt2::is_pt2(archive.reader())) return parse_graph(archive).dump(1);
  LoadOptions options;
  options.plan_memory = false;
  options.trusted = true;
  auto [graph, tensors] = pt2::read(archive.reader(), options);
  std::string bytes = save_to_buffer(*graph, tensors);
  Archive converted(std::make_shared<zip::MemorySource>(bytes.data(), bytes.size()));
  return parse_graph(converted).dump(1);
}
}  // namespace

std::string graph_json(const std::string& path) {
  Archive archive(std::make_shared<zip::FileSource>(path));
  return graph_json_of(archive);
}

std::string graph_json_from_buffer(const void* data, size_t size) {
  Archive archive(std::make_shared<zip::MemorySource>(data, size));
  return graph_json_of(archive);
}

}  // namespace fxcpp::torch
