// Reading the .pt2 archives torch.export.save writes (Note [Reading .pt2
// archives] in fxcpp/torch/pt2.h; docs/pt2_format.md). The archive goes
// through the strict zip reader; model.json and the two tensor configs are
// parsed with nesting limits; every string, index and extent is checked
// before use, as for .fxpt files (Note [Loading untrusted files] in load.cpp).
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "fxcpp/torch/policy.h"
#include "fxcpp/torch/pt2.h"
#include "json_fields.h"
#include "names.h"
#include "pt2_reader.h"
#include "storages.h"

namespace fxcpp::torch::pt2 {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;
// model.json is parsed whole (a DOM several times its size): capped, as .fxpt's graph.json is.
constexpr uint64_t kMaxJsonBytes = uint64_t(256) << 20;

struct Pt2Json {
  static constexpr const char* kPrefix = "fxcpp::torch: malformed .pt2 archive: ";
};
using J = JsonFields<Pt2Json>;  // the checked accessors of json_fields.h
[[noreturn]] void bad(const std::string& what) { J::bad(what); }
[[noreturn]] void unsupported(const std::string& what) {
  throw FormatError("fxcpp::torch: cannot load this .pt2 archive: " + what);
}


// ---- names (Note [Names a file may use] in names.h) ---------------------------------------

using names::is_identifier;
using names::is_module_path;
using names::is_word_char;
using names::shown;

const std::string& identifier(const std::string& s, const std::string& what) {
  if (!is_identifier(s))
    bad(what + " " + shown(s) + " is not a Python identifier (ASCII letters, digits and '_', not a keyword)");
  return s;
}

// ---- JSON -------------------------------------------------------------------------------

// Parses `text` with nesting limited while parsing (a hostile file cannot
// exhaust the stack, neither parsing nor destroying the document).
Json parse_limited(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text, [&](int depth, Json::parse_event_t, Json&) {
      if (depth > 4 * kMaxDepth) bad(where + " is nested too deeply");
      return true;
    });
  } catch (const Json::exception& e) {
    bad(where + ": " + e.what());
  }
}

std::string read_record(const zip::Reader& z, const std::string& name, uint64_t max) {
  const zip::Entry* e = z.find(name);
  if (!e) bad("the archive has no record '" + name + "'");
  if (e->size > max)
    bad("record '" + name + "' has " + std::to_string(e->size) + " bytes, more than the " + std::to_string(max) +
        " it may have");
  std::string out(static_cast<size_t>(e->size), '\0');
  z.read(*e, out.data());
  return out;
}

Json parse_json(const zip::Reader& z, const std::string& name) {
  return parse_limited(read_record(z, name, kMaxJsonBytes), name);
}

// ---- enumerations: torch's serde numbers (schema.py), not c10's ------------------------------

c10::ScalarType scalar_type(int64_t v, const std::string& where) {
  switch (v) {
    case 1: return c10::ScalarType::Byte;
    case 2: return c10::ScalarType::Char;
    case 3: return c10::ScalarType::Short;
    case 4: return c10::ScalarType::Int;
    case 5: return c10::ScalarType::Long;
    case 6: return c10::ScalarType::Half;
    case 7: return c10::ScalarType::Float;
    case 8: return c10::ScalarType::Double;
    case 9: return c10::ScalarType::ComplexHalf;
    case 10: return c10::ScalarType::ComplexFloat;
    case 11: return c10::ScalarType::ComplexDouble;
    case 12: return c10::ScalarType::Bool;
    case 13: return c10::ScalarType::BFloat16;
    default:
      if (v >= 28 && v <= 35) unsupported(where + ": dtype " + std::to_string(v) + " (uint16/32/64, float8) is not supported yet");
      bad(where + ": " + std::to_string(v) + " is not a dtype");
  }
}
std::string layout_name(int64_t v, const std::string& where) {
  if (v == 7) return "strided";
  if (v >= 1 && v <= 6) unsupported(where + ": layout " + std::to_string(v) + " (sparse or mkldnn): only strided tensors are read");
  bad(where + ": " + std::to_string(v) + " is not a layout");
}
std::string memory_format_name(int64_t v, const std::string& where) {
  switch (v) {
    case 1: return "contiguous_format";
    case 2: return "channels_last";
    case 3: return "channels_last_3d";
    case 4: return "preserve_format";
    default: bad(where + ": " + std::to_string(v) + " is not a memory format");
  }
}
std::string device_name(const Json& d, const std::string& where) {
  std::string type = J::str_field(d, "type", where);
  if (type != "cpu" && type != "cuda" && type != "meta") unsupported(where + ": device type " + shown(type));
  const Json* index = J::opt_field(d, "index", where);
  if (!index) return type;
  int64_t i = J::as_int(*index, where + ".index");
  if (i < 0 || i > 1024) bad(where + ".index is out of range");
  return type + ":" + std::to_string(i);
}

// ---- tensors --------------------------------------------------------------------------


// A SymInt of a weight's metadata: a weight's sizes are concrete.
int64_t concrete(const Json& v, const std::string& where) {
  auto [tag, val] = J::as_union(v, where);
  if (tag != "as_int") bad(where + " is symbolic (" + tag + "); a stored tensor's sizes are concrete");
  return J::as_int(*val, where);
}

class Builder {
 public:
  Builder(const zip::Reader& z, const LoadOptions& options) : z_(z), options_(options) {}

  std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> run();

 private:
  // archive
  void check_records();
  const Json& model();
  const Json* config(const std::string& dir, const std::string& file);
  at::Tensor tensor(const Json& entry, const std::string& dir, const std::string& where);
  c10::Storage storage(const std::string& record, const std::string& where);
  // graph
  void inputs(const Json& sig, const Json& graph, size_t num_user_inputs);
  void node(const Json& n, size_t index);
  void outputs(const Json& sig, const Json* out_spec);
  Argument arg(const Json& a, const std::string& where);
  Argument value(const std::string& name, const std::string& where);
  Argument sym(const Json& a, const char* number_tag, const std::string& where);
  void define(const std::string& name, Argument v, const std::string& where);
  Node* call(Object target, std::vector<Argument> args, KwArgs kwargs, const std::string& name);
  Argument tensor_meta(const Json& meta, const std::string& where);
  Argument input_spec(const Json& meta, const std::string& where);
  void check_enums(const std::string& node, const AtenOp& op, const std::vector<Argument>& args, const KwArgs& kwargs);

  const zip::Reader& z_;
  const LoadOptions& options_;
  std::string model_name_;
  Json model_;
  Json weights_, constants_;
  bool weights_read_ = false, constants_read_ = false;
  std::unordered_map<std::string, c10::Storage> storages_;
  std::unique_ptr<Graph> g_ = std::make_unique<Graph>();
  std::vector<NamedTensor> tensors_;
  std::unordered_map<std::string, Argument> values_;  ///< serialized value name -> what it is in g_
  std::unordered_map<std::string, Node*> attrs_;       ///< fqn -> its get_attr node
  std::unordered_map<std::string, Node*> user_inputs_;
  std::vector<Node*> placeholders_;
  const Json* tensor_values_ = nullptr;
  const Json* sym_values_[3] = {};  ///< graph.sym_int_values, sym_float_values, sym_bool_values
  const Json* range_constraints_ = nullptr;
};

void Builder::check_records() {
  std::string format = read_record(z_, "archive_format", 64);
  if (format != "pt2") unsupported("archive_format is " + shown(format) + ", not 'pt2'");
  if (z_.find("byteorder")) {
    std::string order = read_record(z_, "byteorder", 64);
    if (order != "little")
      unsupported("its tensors are stored " + shown(order) + "-endian; fxcpp reads little-endian archives only");
  }
  // The program: models/<name>.json, one of them. An archive of several
  // programs (torch.export.save of a dict) or an AOTInductor package is not
  // read yet.
  std::vector<std::string> models;
  for (const zip::Entry& e : z_.entries()) {
    std::string rel = e.name.substr(z_.prefix().size());
    if (rel.rfind("models/", 0) == 0 && rel.size() > 12 && rel.compare(rel.size() - 5, 5, ".json") == 0 &&
        rel.find('/', 7) == std::string::npos)
      models.push_back(rel.substr(7, rel.size() - 12));
  }
  if (models.empty()) {
    bool aoti = false;
    for (const zip::Entry& e : z_.entries()) aoti = aoti || e.name.find("/data/aotinductor/") != std::string::npos;
    unsupported(aoti ? "it is an AOTInductor package (compiled code), which fxcpp never loads; save the ExportedProgram "
                       "with torch.export.save instead"
                     : "it holds no models/<name>.json (not an ExportedProgram archive)");
  }
  if (models.size() > 1)
    unsupported("it holds " + std::to_string(models.size()) + " programs; fxcpp reads archives of one (torch.export.save)");
  model_name_ = models[0];
  if (!is_identifier(model_name_)) bad("the program name " + shown(model_name_) + " is not an identifier");
}

const Json* Builder::config(const std::string& dir, const std::string& file) {
  std::string name = dir + "/" + model_name_ + file;
  Json& slot = dir == "data/weights" ? weights_ : constants_;
  bool& read = dir == "data/weights" ? weights_read_ : constants_read_;
  if (!read) {
    read = true;
    if (z_.find(name)) {
      slot = parse_json(z_, name);
      const Json& c = J::field(slot, "config", name);
      if (!c.is_object()) bad(name + ".config is not an object");
    }
  }
  return slot.is_null() ? nullptr : &slot["config"];
}

c10::Storage Builder::storage(const std::string& record, const std::string& where) {
  auto it = storages_.find(record);
  if (it != storages_.end()) return it->second;
  const zip::Entry* e = z_.find(record);
  if (!e) bad(where + ": the archive has no record '" + record + "'");
  c10::Storage s = record_storage(z_, *e, options_.mmap);  // Note [Memory-mapped weights] in zip_reader.cpp
  storages_.emplace(record, s);
  return s;
}

// A weight or constant: its record holds the bytes of an untyped storage; the
// tensor is a strided view into it, checked to lie inside it.
at::Tensor Builder::tensor(const Json& entry, const std::string& dir, const std::string& where) {
  if (J::as_bool(J::field(entry, "use_pickle", where), where + ".use_pickle"))
    unsupported(where + " is stored pickled (torch.save of a tensor subclass or an object), and fxcpp never unpickles "
                "(a pickle can run code); export the model with plain tensors");
  std::string path = J::str_field(entry, "path_name", where);
  if (!is_module_path(path)) bad(where + ".path_name " + shown(path) + " is not a record name");
  const Json* meta = J::opt_field(entry, "tensor_meta", where);
  if (!meta) bad(where + " has no tensor_meta");
  std::string w = where + ".tensor_meta";
  c10::ScalarType dtype = scalar_type(J::as_int(J::field(*meta, "dtype", w), w + ".dtype"), w);
  layout_name(J::as_int(J::field(*meta, "layout", w), w + ".layout"), w);
  device_name(J::field(*meta, "device", w), w + ".device");  // checked; read onto the CPU
  const Json& sizes_j = J::as_array(J::field(*meta, "sizes", w), w + ".sizes");
  const Json& strides_j = J::as_array(J::field(*meta, "strides", w), w + ".strides");
  if (sizes_j.size() > 64 || sizes_j.size() != strides_j.size()) bad(w + ": sizes and strides differ in length (or over 64)");
  std::vector<int64_t> sizes, strides;
  for (size_t d = 0; d < sizes_j.size(); ++d) {
    sizes.push_back(concrete(sizes_j[d], w + ".sizes"));
    strides.push_back(concrete(strides_j[d], w + ".strides"));
    if (sizes.back() < 0 || strides.back() < 0) bad(w + ": negative size or stride");
  }
  int64_t offset = concrete(J::field(*meta, "storage_offset", w), w + ".storage_offset");
  if (offset < 0) bad(w + ": negative storage offset");
  c10::Storage st = storage(dir + "/" + path, where);
  const uint64_t nbytes = st.nbytes();
  switch (check_tensor_extent(sizes, strides, offset, c10::elementSize(dtype), nbytes)) {
    case Extent::Ok: break;
    case Extent::NegativeSizeOrStride: bad(w + ": negative size or stride");
    case Extent::Overflows: bad(w + ": tensor extent overflows");
    case Extent::PastStorage:
      bad(where + " extends past its record '" + path + "' (" + std::to_string(nbytes) + " bytes)");
    case Extent::OffsetPastStorage:
      bad(where + ": storage offset " + std::to_string(offset) + " lies past its record '" + path + "' (" +
          std::to_string(nbytes) + " bytes)");
    case Extent::TooManyBytes:
      bad(where + " has more than the " + std::to_string(kMaxTensorBytes) + " bytes a tensor may have");
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                   caffe2::TypeMeta::fromScalarType(dtype));
  impl->set_sizes_and_strides(sizes, strides, offset);
  return at::Tensor(std::move(impl));
}

// ---- values -------------------------------------------------------------------------------

// Each value a node defines keeps its serialized metadata, as JSON text in
// meta["pt2_value"] ({"as_tensor": TensorMeta} or {"as_sym_int": SymInt},
// ...), so the .pt2 writer can give it back, symbolic sizes included (Note
// [Writing .pt2 archives] in src/torch/pt2_writer.cpp).
void Builder::define(const std::string& name, Argument v, const std::string& where) {
  identifier(name, where + ": value name");
  if (v.is_node() && v.as_node()->op() != Op::GetAttr) {
    static const char* const kTags[] = {"as_tensor", "as_sym_int", "as_sym_float", "as_sym_bool"};
    const Json* tables[] = {tensor_values_, sym_values_[0], sym_values_[1], sym_values_[2]};
    for (size_t i = 0; i < 4; ++i) {
      if (!tables[i]) continue;
      auto it = tables[i]->find(name);
      if (it == tables[i]->end()) continue;
      v.as_node()->meta().emplace_back("pt2_value", Argument::string(Json{{kTags[i], *it}}.dump()));
      break;
    }
  }
  if (!values_.emplace(name, std::move(v)).second) bad(where + ": value " + shown(name) + " is defined twice");
}

Argument Builder::value(const std::string& name, const std::string& where) {
  auto it = values_.find(name);
  if (it == values_.end()) bad(where + ": value " + shown(name) + " is used before it is defined");
  return it->second;
}

// A SymIntArgument / SymFloatArgument / SymBoolArgument: a named value or a number.
Argument Builder::sym(const Json& a, const char* number_tag, const std::string& where) {
  auto [tag, v] = J::as_union(a, where);
  if (tag == "as_name") return value(J::as_str(*v, where), where);
  if (tag != number_tag) bad(where + ": unknown tag '" + tag + "'");
  if (tag == std::string("as_int")) return Argument::integer(J::as_int(*v, where));
  if (tag == std::string("as_float")) return Argument::real(J::as_float(*v, where));
  return Argument::boolean(J::as_bool(*v, where));
}

Argument Builder::arg(const Json& a, const std::string& where) {
  const auto tagged = J::as_union(a, where);  // not a structured binding: lambdas below capture it
  const std::string& tag = tagged.first;
  const Json& v = *tagged.second;
  auto list = [&](auto&& item) {
    std::vector<Argument> items;
    for (const Json& x : J::as_array(v, where + "." + tag)) items.push_back(item(x));
    return Argument::list(std::move(items));
  };
  auto tensor_ref = [&](const Json& t) { return value(J::str_field(t, "name", where), where); };
  auto opt_tensor = [&](const Json& t) {
    auto [ttag, tv] = J::as_union(t, where);
    if (ttag == "as_none") return Argument::none();
    if (ttag == "as_tensor") return tensor_ref(*tv);
    bad(where + ": unknown optional-tensor tag '" + ttag + "'");
  };
  if (tag == "as_none") return Argument::none();
  if (tag == "as_tensor") return tensor_ref(v);
  if (tag == "as_tensors") return list(tensor_ref);
  if (tag == "as_optional_tensor") return opt_tensor(v);
  if (tag == "as_optional_tensors") return list(opt_tensor);
  if (tag == "as_int") return Argument::integer(J::as_int(v, where));
  if (tag == "as_ints") return list([&](const Json& x) { return Argument::integer(J::as_int(x, where)); });
  if (tag == "as_int_lists")
    return list([&](const Json& l) {
      std::vector<Argument> items;
      for (const Json& x : J::as_array(l, where)) items.push_back(Argument::integer(J::as_int(x, where)));
      return Argument::list(std::move(items));
    });
  if (tag == "as_float") return Argument::real(J::as_float(v, where));
  if (tag == "as_floats") return list([&](const Json& x) { return Argument::real(J::as_float(x, where)); });
  if (tag == "as_bool") return Argument::boolean(J::as_bool(v, where));
  if (tag == "as_bools") return list([&](const Json& x) { return Argument::boolean(J::as_bool(x, where)); });
  if (tag == "as_string") return Argument::string(J::as_str(v, where));
  if (tag == "as_strings") return list([&](const Json& x) { return Argument::string(J::as_str(x, where)); });
  if (tag == "as_sym_int") return sym(v, "as_int", where);
  if (tag == "as_sym_ints") return list([&](const Json& x) { return sym(x, "as_int", where); });
  if (tag == "as_sym_float") return sym(v, "as_float", where);
  if (tag == "as_sym_floats") return list([&](const Json& x) { return sym(x, "as_float", where); });
  if (tag == "as_sym_bool") return sym(v, "as_bool", where);
  if (tag == "as_sym_bools") return list([&](const Json& x) { return sym(x, "as_bool", where); });
  if (tag == "as_scalar_type")
    return Argument::foreign(
        torch_constant(TorchConstant::Kind::Dtype, dtype_name(scalar_type(J::as_int(v, where), where))));
  if (tag == "as_layout")
    return Argument::foreign(torch_constant(TorchConstant::Kind::Layout, layout_name(J::as_int(v, where), where)));
  if (tag == "as_memory_format")
    return Argument::foreign(
        torch_constant(TorchConstant::Kind::MemoryFormat, memory_format_name(J::as_int(v, where), where)));
  if (tag == "as_device") return Argument::foreign(torch_constant(TorchConstant::Kind::Device, device_name(v, where)));
  if (tag == "as_graph")
    unsupported(where + " is a subgraph (a higher-order operator such as cond or while_loop); fxcpp's runtime runs "
                "flat graphs only");
  if (tag == "as_custom_obj")
    unsupported(where + " is a TorchBind object, which would have to be unpickled; fxcpp never unpickles");
  if (tag == "as_complex" || tag == "as_operator" || tag == "as_string_to_argument" || tag == "as_nested_tensors" ||
      tag == "as_float_lists")
    unsupported(where + ": arguments of kind '" + tag + "' are not supported yet");
  bad(where + ": unknown argument tag '" + tag + "'");
}

// The ShapeProp-style tensor_meta a placeholder carries (Plan::check_inputs
// checks the rank); null when the metadata is missing or has no hints.
Argument Builder::tensor_meta(const Json& meta, const std::string& where) {
  auto ints = [&](const char* key) {
    std::vector<Argument> items;
    for (const Json& s : J::as_array(J::field(meta, key, where), where + "." + key)) {
      auto [tag, v] = J::as_union(s, where + "." + key);
      if (tag == "as_int") {
        items.push_back(Argument::integer(J::as_int(*v, where)));
      } else {
        // Symbolic: its hint (the example's size), as ShapeProp records it.
        const Json* hint = J::opt_field(J::field(*v, "hint", where), "as_int", where);
        items.push_back(Argument::integer(hint ? J::as_int(*hint, where) : -1));
      }
    }
    return Argument::tuple(std::move(items));
  };
  ArgPairs p;
  p.emplace_back(Argument::string("shape"), ints("sizes"));
  p.emplace_back(Argument::string("dtype"),
                 Argument::foreign(torch_constant(
                     TorchConstant::Kind::Dtype, dtype_name(scalar_type(J::as_int(J::field(meta, "dtype", where), where), where)))));
  p.emplace_back(Argument::string("requires_grad"), Argument::boolean(false));
  p.emplace_back(Argument::string("stride"), ints("strides"));
  p.emplace_back(Argument::string("memory_format"), Argument::none());
  p.emplace_back(Argument::string("is_quantized"), Argument::boolean(false));
  return Argument::dict(std::move(p));
}

// Note [Exported input checks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An exported program holds for the inputs it was exported for: their dtypes,
// their static sizes, and for each symbolic size its range
// (range_constraints) and its relations to the other inputs' sizes (one
// symbol in two inputs; a size derived from a symbol, "2*s0 - 1"). Each user
// input placeholder of a .pt2 archive carries them as meta["input_spec"],
// which the runtime checks before each forward (Plan::check_inputs), raising
// InputError in the words torch's own check uses ("Expected input at
// x.shape[1] to be equal to 4, but got 5"). The spec is a dict:
// * "dtype": the exported dtype (torch.export's ep.module() does not check it;
//   a kernel would then fail deep in the graph, or promote silently);
// * "sizes": one item per dimension: an int (static), a tuple (symbol name,
//   min, max or None) for a plain symbol, a list of (coefficient, symbol
//   names) monomials for a polynomial of symbols (sympy's Add, Mul, Integer,
//   Symbol, as the archive spells them), or None (another expression: not
//   checked; the kernels see it).
// As torch's check does, a minimum of 2 or less is not enforced: export
// assumes sizes of 0 and 1 away (it specializes them) and records 2 for a
// Dim declared without a minimum, yet the program runs at 1.
namespace {

// A parsed sympy srepr expression as a polynomial; false when it is not one
// (another function, a rational, a malformed text).
struct Monomial {
  int64_t coef;
  std::vector<std::string> syms;
};
using Poly = std::vector<Monomial>;

class ExprParser {
 public:
  explicit ExprParser(const std::string& s) : s_(s) {}
  bool parse(Poly* out) {
    if (!term(out, 0)) return false;
    skip();
    return at_ == s_.size();
  }

 private:
  void skip() {
    while (at_ < s_.size() && s_[at_] == ' ') ++at_;
  }
  bool eat(char c) {
    skip();
    if (at_ < s_.size() && s_[at_] == c) return ++at_, true;
    return false;
  }
  std::string word() {
    skip();
    size_t b = at_;
    while (at_ < s_.size() && (is_word_char(s_[at_]))) ++at_;
    return s_.substr(b, at_ - b);
  }
  bool integer(int64_t* v) {
    skip();
    bool neg = at_ < s_.size() && s_[at_] == '-';
    if (neg) ++at_;
    size_t b = at_;
    int64_t x = 0;
    while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') {
      if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, s_[at_] - '0', &x)) return false;
      ++at_;
    }
    *v = neg ? -x : x;
    return at_ > b;
  }
  // Skips `, key=value` pairs up to the closing parenthesis (Symbol's assumptions).
  bool rest_of_call() {
    while (eat(',')) {
      std::string k = word();
      if (k.empty() || !eat('=')) return false;
      if (word().empty()) return false;
    }
    return eat(')');
  }
  bool term(Poly* out, int depth) {
    if (depth > 32) return false;
    std::string head = word();
    if (!eat('(')) return false;
    if (head == "Integer") {
      int64_t v;
      if (!integer(&v) || !eat(')')) return false;
      *out = {{v, {}}};
      return true;
    }
    if (head == "Symbol") {
      skip();
      if (at_ >= s_.size() || (s_[at_] != '\'' && s_[at_] != '"')) return false;
      char q = s_[at_++];
      size_t b = at_;
      while (at_ < s_.size() && s_[at_] != q) ++at_;
      if (at_ >= s_.size()) return false;
      std::string name = s_.substr(b, at_ - b);
      ++at_;
      if (!is_identifier(name) || !rest_of_call()) return false;
      *out = {{1, {name}}};
      return true;
    }
    if (head != "Add" && head != "Mul") return false;
    std::vector<Poly> parts;
    do {
      Poly p;
      if (!term(&p, depth + 1)) return false;
      parts.push_back(std::move(p));
    } while (eat(','));
    if (!eat(')') || parts.empty() || parts.size() > 64) return false;
    Poly acc = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      if (head == "Add") {
        acc.insert(acc.end(), parts[i].begin(), parts[i].end());
      } else {
        Poly prod;
        for (const Monomial& a : acc)
          for (const Monomial& b : parts[i]) {
            Monomial m{0, a.syms};
            if (__builtin_mul_overflow(a.coef, b.coef, &m.coef)) return false;
            m.syms.insert(m.syms.end(), b.syms.begin(), b.syms.end());
            prod.push_back(std::move(m));
          }
        acc = std::move(prod);
      }
      if (acc.size() > 64) return false;
    }
    *out = std::move(acc);
    return true;
  }
  const std::string& s_;
  size_t at_ = 0;
};

}  // namespace

// meta["input_spec"] of a user input (Note [Exported input checks]).
Argument Builder::input_spec(const Json& meta, const std::string& where) {
  std::vector<Argument> dims;
  for (const Json& s : J::as_array(J::field(meta, "sizes", where), where + ".sizes")) {
    auto [tag, v] = J::as_union(s, where + ".sizes");
    if (tag == "as_int") {
      dims.push_back(Argument::integer(J::as_int(*v, where + ".sizes")));
      continue;
    }
    if (tag != "as_expr") bad(where + ".sizes: unknown size kind '" + tag + "'");
    const Json* text = J::opt_field(*v, "expr_str", where + ".sizes");
    Poly poly;
    if (!text || !text->is_string() || text->get<std::string>().size() > 4096 ||
        !ExprParser(text->get<std::string>()).parse(&poly)) {
      dims.push_back(Argument::none());
      continue;
    }
    if (poly.size() == 1 && poly[0].coef == 1 && poly[0].syms.size() == 1) {
      const std::string& sym = poly[0].syms[0];
      Argument lo = Argument::none(), hi = Argument::none();
      if (range_constraints_ && range_constraints_->contains(sym)) {
        const Json& r = (*range_constraints_)[sym];
        const Json* mn = J::opt_field(r, "min_val", "range_constraints." + sym);
        const Json* mx = J::opt_field(r, "max_val", "range_constraints." + sym);
        // Unbounded ends are null (or a huge int: int_oo).
        if (mn && mn->is_number_integer()) lo = Argument::integer(J::as_int(*mn, "range_constraints." + sym));
        if (mx && mx->is_number_integer() && !(mx->is_number_unsigned() && mx->get<uint64_t>() > uint64_t(INT64_MAX)))
          hi = Argument::integer(mx->get<int64_t>());
      }
      dims.push_back(Argument::tuple({Argument::string(sym), lo, hi}));
      continue;
    }
    std::vector<Argument> monos;
    for (const Monomial& m : poly) {
      std::vector<Argument> syms;
      for (const std::string& x : m.syms) syms.push_back(Argument::string(x));
      monos.push_back(Argument::tuple({Argument::integer(m.coef), Argument::tuple(std::move(syms))}));
    }
    dims.push_back(Argument::list(std::move(monos)));
  }
  ArgPairs p;
  p.emplace_back(Argument::string("dtype"),
                 Argument::foreign(torch_constant(
                     TorchConstant::Kind::Dtype, dtype_name(scalar_type(J::as_int(J::field(meta, "dtype", where), where), where)))));
  p.emplace_back(Argument::string("sizes"), Argument::tuple(std::move(dims)));
  return Argument::dict(std::move(p));
}

Node* Builder::call(Object target, std::vector<Argument> args, KwArgs kwargs, const std::string& name) {
  return g_->create_node(Op::CallFunction, Target(std::move(target)), std::move(args), std::move(kwargs), name);
}

// Note [Enumerations from a file] in load.cpp, for .pt2 arguments: a
// parameter typed as a dtype, layout or memory format takes a constant of that
// enumeration (as_scalar_type and the like, checked when read) or None; an
// int must be a value of it; a computed one only in a trusted file.
void Builder::check_enums(const std::string& node, const AtenOp& op, const std::vector<Argument>& args,
                          const KwArgs& kwargs) {
  const auto& params = op.handle.schema().arguments();
  std::function<void(const Argument&, c10::TypeKind, int64_t, const std::string&)> check =
      [&](const Argument& a, c10::TypeKind kind, int64_t size, const std::string& where) {
        switch (a.kind()) {
          case ArgKind::Int:
            if (a.as_int() < 0 || a.as_int() >= size) bad(where + " is " + std::to_string(a.as_int()) + ", not a " + c10::typeKindToString(kind));
            return;
          case ArgKind::Foreign: {
            const TorchConstant* c = as_torch_constant(a.as_object());
            TorchConstant::Kind want = kind == c10::TypeKind::LayoutType         ? TorchConstant::Kind::Layout
                                       : kind == c10::TypeKind::MemoryFormatType ? TorchConstant::Kind::MemoryFormat
                                                                                 : TorchConstant::Kind::Dtype;
            if (c && (c->kind != want || !c->value.isInt() || c->value.toInt() < 0 || c->value.toInt() >= size))
              bad(where + " is the " + c->name + " constant, which is not a " + c10::typeKindToString(kind));
            return;
          }
          case ArgKind::NodeRef:
            if (!options_.trusted)
              throw FormatError("fxcpp::torch: " + where + " is computed by another node; a file from an untrusted "
                                "source may pass a " + std::string(c10::typeKindToString(kind)) +
                                " only as a constant. If you made this file yourself, load it with trusted=True "
                                "(C++: LoadOptions::trusted = true).");
            return;
          case ArgKind::List:
          case ArgKind::Tuple:
            for (const Argument& item : a.items()) check(item, kind, size, where);
            return;
          default: return;
        }
      };
  auto enum_size = [](c10::TypePtr t, c10::TypeKind* kind) -> int64_t {
    while (t->kind() == c10::TypeKind::OptionalType || t->kind() == c10::TypeKind::ListType) t = t->containedType(0);
    *kind = t->kind();
    switch (t->kind()) {
      case c10::TypeKind::ScalarTypeType: return static_cast<int64_t>(c10::ScalarType::NumOptions);
      case c10::TypeKind::LayoutType: return static_cast<int64_t>(c10::Layout::NumOptions);
      case c10::TypeKind::MemoryFormatType: return static_cast<int64_t>(c10::MemoryFormat::NumOptions);
      default: return 0;
    }
  };
  auto one = [&](const c10::Argument& param, const Argument& a) {
    c10::TypeKind kind{};
    if (int64_t size = enum_size(param.real_type(), &kind))
      check(a, kind, size, "node " + shown(node) + ": argument '" + param.name() + "' of " + op.qualified);
  };
  for (size_t i = 0; i < args.size() && i < params.size(); ++i) one(params[i], args[i]);
  for (const auto& kv : kwargs)
    for (const auto& param : params)
      if (param.name() == kv.first) one(param, kv.second);
}

// ---- the signature's inputs -------------------------------------------------------------------

void Builder::inputs(const Json& sig, const Json& graph, size_t num_user_inputs) {
  const Json& specs = J::as_array(J::field(sig, "input_specs", "signature"), "signature.input_specs");
  const Json& graph_inputs = J::as_array(J::field(graph, "inputs", "graph"), "graph.inputs");
  if (graph_inputs.size() != specs.size())
    bad("the graph has " + std::to_string(graph_inputs.size()) + " inputs, its signature " + std::to_string(specs.size()));
  size_t users = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string w = "signature.input_specs[" + std::to_string(i) + "]";
    auto [tag, spec] = J::as_union(specs[i], w);
    w += "." + tag;
    if (tag == "parameter" || tag == "buffer" || tag == "tensor_constant") {
      std::string name = J::str_field(J::field(*spec, "arg", w), "name", w + ".arg");
      const char* key = tag == "parameter" ? "parameter_name" : tag == "buffer" ? "buffer_name" : "tensor_constant_name";
      std::string fqn = J::str_field(*spec, key, w);
      if (!is_module_path(fqn))
        bad(w + ": " + key + " " + shown(fqn) + " is not a dotted path of names ([A-Za-z0-9_-] parts)");
      // Parameters and persistent buffers are weights; non-persistent buffers
      // and tensor constants are constants.
      const Json* entry = nullptr;
      std::string dir;
      for (const char* d : {"data/weights", "data/constants"}) {
        const Json* c = config(d, std::string(d) == "data/weights" ? "_weights_config.json" : "_constants_config.json");
        if (c && c->contains(fqn)) {
          entry = &(*c)[fqn];
          dir = d;
          break;
        }
      }
      if (!entry) bad(w + ": no weight or constant is stored for " + shown(fqn));
      Node* n = nullptr;
      auto known = attrs_.find(fqn);
      if (known != attrs_.end()) {
        n = known->second;  // one tensor lifted twice: one get_attr
      } else {
        NamedTensor nt;
        nt.name = fqn;
        nt.kind = tag == "parameter" ? NamedTensor::Kind::Parameter
                  : tag == "buffer"  ? NamedTensor::Kind::Buffer
                                     : NamedTensor::Kind::Constant;
        nt.tensor = tensor(*entry, dir, dir + " config entry " + shown(fqn));
        tensors_.push_back(std::move(nt));
        n = g_->create_node(Op::GetAttr, Target(fqn), {}, {}, identifier(name, w + ".arg.name"));
        attrs_.emplace(fqn, n);
      }
      define(name, Argument::node(n), w);
    } else if (tag == "user_input") {
      const Json& a = J::field(*spec, "arg", w);
      auto [atag, av] = J::as_union(a, w + ".arg");
      std::string name;
      if (atag == "as_tensor") name = J::str_field(*av, "name", w);
      else if (atag == "as_sym_int" || atag == "as_sym_float" || atag == "as_sym_bool") {
        auto [stag, sv] = J::as_union(*av, w + ".arg");
        if (stag != "as_name") unsupported(w + ": a constant user input");
        name = J::as_str(*sv, w);
      } else {
        unsupported(w + ": user inputs of kind '" + atag + "' (constants, containers) are not supported yet");
      }
      Node* n = g_->create_node(Op::Placeholder, Target(identifier(name, w + ": input name")), {}, {}, name);
      if (atag == "as_tensor" && tensor_values_ && tensor_values_->contains(name)) {
        n->meta().emplace_back("tensor_meta", tensor_meta((*tensor_values_)[name], "graph.tensor_values." + name));
        n->meta().emplace_back("input_spec", input_spec((*tensor_values_)[name], "graph.tensor_values." + name));
      }
      define(name, Argument::node(n), w);
      user_inputs_.emplace(name, n);
      placeholders_.push_back(n);
      ++users;
    } else if (tag == "custom_obj") {
      unsupported(w + ": the program takes a TorchBind object, which would have to be unpickled; fxcpp never unpickles");
    } else if (tag == "token") {
      unsupported(w + ": the program uses effect tokens (side-effecting custom operators), which fxcpp does not run");
    } else if (tag == "constant_input") {
      unsupported(w + ": constant inputs are not supported yet");
    } else {
      bad(w + ": unknown input kind '" + tag + "'");
    }
  }
  if (users != num_user_inputs)
    bad("the in_spec gives " + std::to_string(num_user_inputs) + " inputs, the signature " + std::to_string(users));
}

// ---- nodes --------------------------------------------------------------------------------------

// "_operator.mul" -> operator.mul; the rest of the symbolic-math namespace is not a primitive.
void Builder::node(const Json& n, size_t index) {
  std::string w = "graph.nodes[" + std::to_string(index) + "]";
  std::string target = J::str_field(n, "target", w);
  const Json& outs = J::as_array(J::field(n, "outputs", w), w + ".outputs");
  const Json* name_j = J::opt_field(n, "name", w);
  std::string node_name = name_j ? J::as_str(*name_j, w + ".name") : "";
  w += " (" + shown(target) + ")";

  std::vector<Argument> args;
  KwArgs kwargs;
  for (const Json& in : J::as_array(J::field(n, "inputs", w), w + ".inputs")) {
    std::string pname = J::str_field(in, "name", w + ".inputs");
    Argument a = arg(J::field(in, "arg", w + ".inputs"), w + ": input '" + pname + "'");
    const Json* kind = J::opt_field(in, "kind", w);
    if (kind && J::as_int(*kind, w + ".inputs.kind") == 2) {
      kwargs.emplace_back(identifier(pname, w + ": keyword"), std::move(a));
    } else {
      if (!kwargs.empty()) bad(w + ": a positional input after a keyword input");
      args.push_back(std::move(a));
    }
  }

  // The single value name of a node with one output, or "".
  auto single_name = [&](const char* want) -> std::string {
    if (outs.size() != 1) bad(w + " should have one output, has " + std::to_string(outs.size()));
    auto [tag, v] = J::as_union(outs[0], w + ".outputs[0]");
    if (tag != want) bad(w + ": output is '" + tag + "', expected '" + want + "'");
    if (tag == std::string("as_tensor")) return J::str_field(*v, "name", w);
    auto [stag, sv] = J::as_union(*v, w + ".outputs[0]");
    if (stag != "as_name") bad(w + ": a constant output");
    return J::as_str(*sv, w);
  };

  Object fn;
  const std::string ops_prefix = "torch.ops.";
  if (target.rfind("_operator.", 0) == 0) {
    std::string op = target.substr(10);
    if (op != "add" && op != "sub" && op != "mul" && op != "floordiv" && op != "truediv" && op != "mod" && op != "neg" &&
        op != "getitem")
      unsupported(w + " calls " + shown(target) + ", which is not a runtime primitive");
    fn = primitive("operator." + op);
    if (!kwargs.empty()) bad(w + ": keyword inputs to an operator");
    if (outs.size() != 1) bad(w + " should have one output, has " + std::to_string(outs.size()));
    std::string tag = J::as_union(outs[0], w + ".outputs[0]").first;
    if (tag != "as_sym_int" && tag != "as_sym_float" && tag != "as_sym_bool") bad(w + ": output is '" + tag + "', not a number");
    std::string name = single_name(tag.c_str());
    define(name, Argument::node(call(fn, std::move(args), {}, name)), w);
    return;
  }
  if (target.rfind(ops_prefix, 0) != 0)
    unsupported(w + " calls " + shown(target) + ", which fxcpp's runtime does not run (it runs ATen operators and "
                "operator.* shape arithmetic)");
  std::string rest = target.substr(ops_prefix.size());
  if (rest.rfind("higher_order.", 0) == 0)
    unsupported(w + " is a higher-order operator (" + shown(target) + "); fxcpp's runtime runs flat graphs only");
  size_t dot1 = rest.find('.');
  size_t dot2 = dot1 == std::string::npos ? std::string::npos : rest.find('.', dot1 + 1);
  if (dot2 == std::string::npos || rest.find('.', dot2 + 1) != std::string::npos)
    bad(w + ": target " + shown(target) + " is not 'torch.ops.<namespace>.<op>.<overload>'");
  std::string qualified = rest.substr(0, dot1) + "::" + rest.substr(dot1 + 1);

  // aten.sym_size.int: getattr(x, "shape")[dim], shape arithmetic without a dispatcher call.
  if (qualified == "aten::sym_size.int") {
    if (args.size() != 2 || !kwargs.empty() || args[0].kind() != ArgKind::NodeRef || args[1].kind() != ArgKind::Int)
      bad(w + ": sym_size.int takes (tensor, dim)");
    std::string name = single_name("as_sym_int");
    Node* shape = call(primitive("getattr"), {args[0], Argument::string("shape")}, {}, name + "_shape");
    define(name, Argument::node(call(primitive("operator.getitem"), {Argument::node(shape), args[1]}, {}, name)), w);
    return;
  }

  // aten._assert_tensor_metadata: export's record that a tensor had the dtype
  // (device, layout) it traced, before each .to(); a check with no result.
  // Its arguments were decoded and checked above; the call is dropped (it is
  // not on the allow-list, LibTorch 1.13 has no such operator, and the
  // runtime's results do not depend on it). Inputs are not checked against
  // the exported metadata (docs/pt2_format.md).
  if (qualified == "aten::_assert_tensor_metadata.default" || qualified == "aten::_assert_tensor_metadata") {
    for (const Json& o : outs)
      if (J::as_union(o, w + ".outputs").first != "as_none") bad(w + ": _assert_tensor_metadata has no results");
    return;
  }
  fn = aten_op(qualified);
  const AtenOp* op = as_aten_op(fn);
  if (!options_.trusted) {
    std::string why = refusal_reason(*op);
    if (!why.empty())
      throw FormatError("fxcpp::torch: node " + shown(node_name.empty() ? target : node_name) + " calls " +
                        op->qualified + ", which a file from an untrusted source may not call (" + why +
                        "). If you made this file yourself, load it with trusted=True (C++: LoadOptions::trusted = "
                        "true).");
  }
  check_enums(node_name.empty() ? target : node_name, *op, args, kwargs);

  // One output that is one value: the node is that value. Otherwise the
  // node is the tuple (or list) of results and each named value a getitem.
  const auto& returns = op->handle.schema().returns();
  if (outs.size() == 1 && returns.size() == 1) {
    auto [tag, v] = J::as_union(outs[0], w + ".outputs[0]");
    if (tag == "as_tensor" || tag == "as_sym_int" || tag == "as_sym_float" || tag == "as_sym_bool") {
      std::string name = single_name(tag.c_str());
      define(name, Argument::node(call(fn, std::move(args), std::move(kwargs), name)), w);
      return;
    }
    if (tag == "as_none") {
      call(fn, std::move(args), std::move(kwargs), node_name.empty() ? op->name.substr(0, op->name.find('.')) : node_name);
      return;
    }
    if (tag != "as_tensors" && tag != "as_optional_tensors") bad(w + ": unknown output kind '" + tag + "'");
    std::string base = node_name.empty() ? op->name.substr(0, op->name.find('.')) : identifier(node_name, w + ".name");
    Node* c = call(fn, std::move(args), std::move(kwargs), base);
    const Json& items = J::as_array(*v, w + ".outputs[0]");
    for (size_t j = 0; j < items.size(); ++j) {
      const Json* t = &items[j];
      if (tag == "as_optional_tensors") {
        auto [otag, ov] = J::as_union(items[j], w + ".outputs[0]");
        if (otag == "as_none") continue;
        if (otag != "as_tensor") bad(w + ": unknown output kind '" + otag + "'");
        t = ov;
      }
      std::string name = J::str_field(*t, "name", w + ".outputs[0]");
      define(name, Argument::node(call(primitive("operator.getitem"), {Argument::node(c), Argument::integer(int64_t(j))}, {}, name)), w);
    }
    return;
  }
  if (outs.size() != returns.size())
    bad(w + " has " + std::to_string(outs.size()) + " outputs, the operator's schema " + std::to_string(returns.size()));
  std::string base = node_name.empty() ? op->name.substr(0, op->name.find('.')) : identifier(node_name, w + ".name");
  Node* c = call(fn, std::move(args), std::move(kwargs), base);
  for (size_t j = 0; j < outs.size(); ++j) {
    auto [tag, v] = J::as_union(outs[j], w + ".outputs[" + std::to_string(j) + "]");
    if (tag == "as_none") continue;
    Node* item = call(primitive("operator.getitem"), {Argument::node(c), Argument::integer(int64_t(j))}, {},
                      tag == "as_tensor" ? J::str_field(*v, "name", w) : base + "_" + std::to_string(j));
    if (tag == "as_tensor") {
      define(J::str_field(*v, "name", w), Argument::node(item), w);
    } else if (tag == "as_tensors") {
      const Json& items = J::as_array(*v, w + ".outputs");
      for (size_t k = 0; k < items.size(); ++k) {
        std::string name = J::str_field(items[k], "name", w);
        define(name, Argument::node(call(primitive("operator.getitem"), {Argument::node(item), Argument::integer(int64_t(k))}, {}, name)), w);
      }
    } else if (tag == "as_sym_int") {
      auto [stag, sv] = J::as_union(*v, w);
      if (stag != "as_name") bad(w + ": a constant output");
      define(J::as_str(*sv, w), Argument::node(item), w);
    } else {
      bad(w + ": unknown output kind '" + tag + "'");
    }
  }
}

// ---- pytree specs --------------------------------------------------------------------------------

// A treespec string ("[1, {...}]", protocol 1) parsed; null when empty.
Json parse_spec(const Json& s, const std::string& where) {
  Json j = parse_limited(J::as_str(s, where), where);
  if (!j.is_array() || j.size() != 2 || J::as_int(j[0], where + " protocol") != 1)
    unsupported(where + ": not a version-1 treespec");
  return j[1];
}

std::string spec_type(const Json& spec, const std::string& where) {
  const Json* t = J::opt_field(spec, "type", where);
  return t ? J::as_str(*t, where + ".type") : "";
}
const Json& spec_children(const Json& spec, const std::string& where) {
  return J::as_array(J::field(spec, "children_spec", where), where + ".children_spec");
}

// The output value the out_spec `spec` builds from `leaves` (consumed from `pos`).
Argument build_output(const Json& spec, const std::vector<Argument>& leaves, size_t& pos, int depth,
                      const std::string& where) {
  if (depth > kMaxDepth) bad(where + " is nested too deeply");
  std::string type = spec_type(spec, where);
  const Json& children = spec_children(spec, where);
  if (type.empty()) {
    if (!children.empty()) bad(where + ": a leaf with children");
    if (pos >= leaves.size()) bad(where + ": more leaves than outputs");
    return leaves[pos++];
  }
  std::vector<Argument> items;
  for (const Json& c : children) items.push_back(build_output(c, leaves, pos, depth + 1, where));
  if (type == "builtins.tuple") return Argument::tuple(std::move(items));
  if (type == "builtins.list") return Argument::list(std::move(items));
  if (type == "builtins.dict") {
    Json keys = parse_limited(J::as_str(J::field(spec, "context", where), where + ".context"), where + ".context");
    if (!keys.is_array() || keys.size() != items.size()) bad(where + ": a dict's context is not its list of keys");
    ArgPairs pairs;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!keys[i].is_string()) unsupported(where + ": a dict output with non-string keys");
      pairs.emplace_back(Argument::string(keys[i].get<std::string>()), std::move(items[i]));
    }
    return Argument::dict(std::move(pairs));
  }
  unsupported(where + ": outputs of type " + shown(type) +
              " (fxcpp reads tuples, lists and dicts with string keys of tensors)");
}

// ---- the signature's outputs -----------------------------------------------------------------------

void Builder::outputs(const Json& sig, const Json* out_spec) {
  const Json& specs = J::as_array(J::field(sig, "output_specs", "signature"), "signature.output_specs");
  std::vector<Argument> user;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string w = "signature.output_specs[" + std::to_string(i) + "]";
    auto [tag, spec] = J::as_union(specs[i], w);
    w += "." + tag;
    if (tag == "user_output") {
      user.push_back(arg(J::field(*spec, "arg", w), w + ".arg"));
    } else if (tag == "buffer_mutation" || tag == "parameter_mutation" || tag == "user_input_mutation") {
      // ep.module() writes the new value into the buffer (parameter, input)
      // after the graph ran: an aten::copy_ before the output.
      Argument v = value(J::str_field(J::field(*spec, "arg", w), "name", w), w);
      const char* key = tag == "buffer_mutation" ? "buffer_name" : tag == "parameter_mutation" ? "parameter_name" : "user_input_name";
      std::string target = J::str_field(*spec, key, w);
      Node* dst = nullptr;
      if (tag == "user_input_mutation") {
        auto it = user_inputs_.find(target);
        if (it != user_inputs_.end()) dst = it->second;
      } else {
        auto it = attrs_.find(target);
        if (it != attrs_.end()) dst = it->second;
      }
      if (!dst) bad(w + ": " + shown(target) + " is not an input of the program");
      call(aten_op("aten::copy_"), {Argument::node(dst), v}, {}, "copy_");
    } else if (tag == "loss_output" || tag == "gradient_to_parameter" || tag == "gradient_to_user_input") {
      unsupported(w + ": a training program (loss and gradient outputs); fxcpp runs inference programs");
    } else if (tag == "token") {
      unsupported(w + ": the program uses effect tokens (side-effecting custom operators), which fxcpp does not run");
    } else {
      bad(w + ": unknown output kind '" + tag + "'");
    }
  }
  Argument result;
  if (!out_spec) {
    result = user.size() == 1 ? user[0] : Argument::tuple(user);
  } else {
    size_t pos = 0;
    result = build_output(*out_spec, user, pos, 0, "out_spec");
    if (pos != user.size()) bad("the out_spec has " + std::to_string(pos) + " leaves, the program " + std::to_string(user.size()) + " outputs");
  }
  Node* out = g_->create_node(Op::Output, Target("output"), {std::move(result)}, {}, "output");
  // The symbols' ranges, for the .pt2 writer (as JSON text).
  if (range_constraints_) out->meta().emplace_back("pt2_range_constraints", Argument::string(range_constraints_->dump()));
}

// ---- the program ------------------------------------------------------------------------------------

std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> Builder::run() {
  check_records();
  const std::string model_record = "models/" + model_name_ + ".json";
  Json doc = parse_json(z_, model_record);
  if (!doc.is_object()) bad(model_record + " is not an object");
  const Json& version = J::field(doc, "schema_version", model_record);
  int64_t major = J::as_int(J::field(version, "major", "schema_version"), "schema_version.major");
  int64_t minor = J::as_int(J::field(version, "minor", "schema_version"), "schema_version.minor");
  std::string theirs = std::to_string(major) + "." + std::to_string(minor);
  std::string ours = std::to_string(kPt2SchemaMajor) + "." + std::to_string(kPt2SchemaMinor);
  const Json* tv = J::opt_field(doc, "torch_version", model_record);
  std::string by = tv && tv->is_string() ? " (written by torch " + shown(tv->get<std::string>()) + ")" : "";
  if (major > kPt2SchemaMajor)
    unsupported("its schema version " + theirs + by + " is newer than the newest this build reads (" + ours +
                ", torch 2.14); load it with a newer fxcpp, or save it with an older torch");
  if (major < kPt2SchemaMajor)
    unsupported("its schema version " + theirs + by + " is older than the oldest this build reads (" +
                std::to_string(kPt2SchemaMajor) + ".x, as torch 2.14 writes); export it again with a newer torch");
  if (minor < 0) bad("schema_version.minor is negative");

  const Json& gm = J::field(doc, "graph_module", model_record);
  const Json& graph = J::field(gm, "graph", "graph_module");
  const Json& sig = J::field(gm, "signature", "graph_module");
  tensor_values_ = J::opt_field(graph, "tensor_values", "graph");
  range_constraints_ = J::opt_field(doc, "range_constraints", model_record);
  if (range_constraints_ && !range_constraints_->is_object()) bad("range_constraints is not an object");
  if (tensor_values_ && !tensor_values_->is_object()) bad("graph.tensor_values is not an object");
  const char* const sym_tables[] = {"sym_int_values", "sym_float_values", "sym_bool_values"};
  for (size_t i = 0; i < 3; ++i) {
    sym_values_[i] = J::opt_field(graph, sym_tables[i], "graph");
    if (sym_values_[i] && !sym_values_[i]->is_object()) bad(std::string("graph.") + sym_tables[i] + " is not an object");
  }
  range_constraints_ = J::opt_field(doc, "range_constraints", model_record);
  if (range_constraints_ && !range_constraints_->is_object()) bad("range_constraints is not an object");
  if (const Json* co = J::opt_field(graph, "custom_obj_values", "graph"); co && !co->empty())
    unsupported("the program holds TorchBind objects, which would have to be unpickled; fxcpp never unpickles");

  // The root call's pytree specs: inputs a flat tuple of positional values.
  const Json* in_spec = nullptr;
  Json in_spec_j, out_spec_j;
  if (const Json* mcg = J::opt_field(gm, "module_call_graph", "graph_module")) {
    for (const Json& e : J::as_array(*mcg, "module_call_graph")) {
      if (J::str_field(e, "fqn", "module_call_graph entry") != "") continue;
      if (const Json* s = J::opt_field(e, "signature", "module_call_graph entry")) {
        in_spec_j = parse_spec(J::field(*s, "in_spec", "the root signature"), "in_spec");
        out_spec_j = parse_spec(J::field(*s, "out_spec", "the root signature"), "out_spec");
        in_spec = &in_spec_j;
      }
      break;
    }
  }
  size_t num_user_inputs = 0;
  bool counted = false;
  if (in_spec) {
    const Json& children = spec_children(*in_spec, "in_spec");
    if (spec_type(*in_spec, "in_spec") != "builtins.tuple" || children.size() != 2)
      unsupported("in_spec: the program's inputs are not (args, kwargs)");
    if (spec_type(children[1], "in_spec") != "builtins.dict" || !spec_children(children[1], "in_spec").empty())
      unsupported("the program takes keyword inputs; fxcpp's runtime takes positional inputs only (export with args)");
    const Json& a = children[0];
    if (spec_type(a, "in_spec") != "builtins.tuple") unsupported("in_spec: the positional inputs are not a tuple");
    for (const Json& leaf : spec_children(a, "in_spec")) {
      if (!spec_type(leaf, "in_spec").empty())
        unsupported("the program takes an input of type " + shown(spec_type(leaf, "in_spec")) +
                    " (a container); fxcpp's runtime takes tensors and numbers, not nested inputs");
      ++num_user_inputs;
    }
    counted = true;
  }
  if (!counted)
    for (const Json& s : J::as_array(J::field(sig, "input_specs", "signature"), "signature.input_specs"))
      num_user_inputs += s.is_object() && s.contains("user_input") ? 1 : 0;

  inputs(sig, graph, num_user_inputs);
  const Json& nodes = J::as_array(J::field(graph, "nodes", "graph"), "graph.nodes");
  for (size_t i = 0; i < nodes.size(); ++i) node(nodes[i], i);
  outputs(sig, in_spec ? &out_spec_j : nullptr);
  return {std::move(g_), std::move(tensors_)};
}

}  // namespace

bool is_pt2(const zip::Reader& archive) { return archive.find("archive_format") && !archive.find("graph.json"); }

std::pair<std::unique_ptr<Graph>, std::vector<NamedTensor>> read(const zip::Reader& archive, const LoadOptions& options) {
  return Builder(archive, options).run();
}

}  // namespace fxcpp::torch::pt2
