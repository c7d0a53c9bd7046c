// Writing .pt2 archives that torch.export.load reads (docs/pt2_format.md,
// "Writing").
//
// Note [Writing .pt2 archives]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// save() with SaveFormat::Pt2 (or a path ending in ".pt2") writes the graph
// as the ExportedProgram it stands for, in the archive layout and JSON schema
// torch.export.save uses (schema kPt2SchemaMajor.kPt2SchemaMinor), so that
// `torch.export.load(path).module()(*args)` equals the graph's forward. It is
// the inverse of the reader (Note [Reading .pt2 archives] in fxcpp/torch/pt2.h):
// * get_attr nodes become lifted inputs: parameters, then buffers, then
//   tensor constants (the order torch's signature requires), then the
//   placeholders as user inputs; each tensor one weight or constant entry
//   with its raw storage record (one record per storage);
// * call_function nodes on ATen overloads become serialized nodes whose
//   inputs are named and tagged after the operator's schema; a node with
//   several results (or a list result) takes the names of its
//   operator.getitem users as its outputs (a result without one is
//   `as_none`); getattr(x, "shape")[d] and aten.size.int become
//   aten.sym_size.int when the size is symbolic, or constants folded into
//   their users when it is static; operator.* arithmetic becomes `_operator.*`
//   nodes (or constants when every operand is one);
// * trailing aten::copy_ nodes into a get_attr or placeholder whose result
//   is unused (what the reader makes of mutation outputs) become buffer,
//   parameter or user-input mutation outputs again;
// * the output's structure becomes the out_spec (tuples, lists, dicts with
//   string keys of values); the inputs are a flat positional tuple.
// Every value needs the metadata torch.export.load rebuilds it from (dtype,
// sizes as expressions over the program's symbols, strides, ...). It comes
// from meta["pt2_value"] (the serialized metadata as JSON text, which the
// reader stores on every value it defines, so a program read from a .pt2
// archive or made by fxcpp.aten.from_exported_program keeps its symbolic
// sizes), else from meta["tensor_meta"] (ShapeProp's: static sizes, on the
// CPU); a value with neither is refused. Symbol ranges come from the output
// node's meta["pt2_range_constraints"]. Nothing is pickled:
// data/sample_inputs/<model>.pt is written empty, which torch.export.load
// reads as "no example inputs". What cannot be expressed (call_module and
// call_method nodes, targets other than ATen overloads and the primitives
// above, arguments of no serialized kind, getattr(x, "dtype"), a tuple result
// used other than through getitem) is refused with a FormatError naming the
// node, before anything is written.
#include "pt2_writer.h"

#include <ATen/core/function_schema.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "fxcpp/torch/ops.h"
#include "fxcpp/torch/pt2.h"
#include "names.h"

namespace fxcpp::torch::pt2 {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;
constexpr const char* kModel = "model";

[[noreturn]] void refuse(const Node* n, const std::string& what) {
  throw FormatError("fxcpp::torch::save: cannot write node '" + std::string(n->name()) + "' to a .pt2 archive: " + what);
}

// torch's serde numbering of dtypes (the reader's scalar_type(), inverted).
int64_t serde_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Byte: return 1;
    case c10::ScalarType::Char: return 2;
    case c10::ScalarType::Short: return 3;
    case c10::ScalarType::Int: return 4;
    case c10::ScalarType::Long: return 5;
    case c10::ScalarType::Half: return 6;
    case c10::ScalarType::Float: return 7;
    case c10::ScalarType::Double: return 8;
    case c10::ScalarType::ComplexHalf: return 9;
    case c10::ScalarType::ComplexFloat: return 10;
    case c10::ScalarType::ComplexDouble: return 11;
    case c10::ScalarType::Bool: return 12;
    case c10::ScalarType::BFloat16: return 13;
    default: return -1;
  }
}

Json device_json(const std::string& name) {
  size_t colon = name.find(':');
  Json d = Json::object();
  d["type"] = name.substr(0, colon);
  d["index"] = colon == std::string::npos ? Json(nullptr) : Json(std::stoll(name.substr(colon + 1)));
  return d;
}

// A float as torch's serde writes it: non-finite values as strings (JSON has none).
Json fl(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

Json ints_json(c10::IntArrayRef v) {
  Json out = Json::array();
  for (int64_t x : v) out.push_back(Json{{"as_int", x}});
  return out;
}

const Argument* meta_of(const Node* n, const char* key) {
  if (!n->has_meta()) return nullptr;
  for (const auto& kv : const_cast<Node*>(n)->meta())
    if (kv.first == key) return &kv.second;
  return nullptr;
}

Json parse_meta(const Node* n, const std::string& text, const char* key) {
  try {
    return Json::parse(text, [&](int depth, Json::parse_event_t, Json&) {
      if (depth > 4 * kMaxDepth) refuse(n, std::string("meta['") + key + "'] is nested too deeply");
      return true;
    });
  } catch (const Json::exception& e) {
    refuse(n, std::string("meta['") + key + "'] is not JSON: " + e.what());
  }
}

// A value a node stands for: a tensor, or a symbolic int/float/bool.
enum class Kind { Tensor, SymInt, SymFloat, SymBool };

class Writer {
 public:
  Writer(const Graph& graph, const std::vector<NamedTensor>& tensors) : graph_(graph) {
    for (const NamedTensor& t : tensors) by_name_.emplace(t.name, &t);
  }
  Archive run();

 private:
  // values
  std::string name_of(const Node* n) const {
    auto it = alias_.find(n);
    return it == alias_.end() ? std::string(n->name()) : it->second;
  }
  Json value_meta(const Node* n) const;  // meta["pt2_value"] parsed, or null
  Kind kind_of(const Node* n) const;
  void record(const Node* n, Kind want, const std::string& name);
  void record_tensor(const Node* n, const std::string& name);
  std::optional<int64_t> static_size(const Node* tensor, int64_t dim) const;
  // arguments
  Json arg(const Node* n, const Argument& a, const c10::TypePtr& type, const std::string& param, int depth = 0);
  Json scalar_arg(const Node* n, const Argument& a, const std::string& param);
  Json sym_ref(const Node* n, const Node* v, const std::string& param);
  // nodes
  void inputs();
  void call(Node* n);
  void primitive_call(Node* n, Primitive p);
  void aten_call(Node* n, const AtenOp& op);
  Json outputs_of(Node* n, const AtenOp& op);
  void output(Node* n);
  Json out_spec(const Node* n, const Argument& a, std::vector<Argument>& leaves, int depth);
  Json output_arg(const Node* n, const Argument& a);
  bool is_mutation(const Node* n) const;

  const Graph& graph_;
  std::unordered_map<std::string, const NamedTensor*> by_name_;
  std::unordered_map<const Node*, std::string> alias_;          // getattr duplicates, multi-output getitems
  std::unordered_map<const Node*, Argument> folded_;            // static sizes and their arithmetic
  std::unordered_map<const Node*, const Node*> shape_of_;       // getattr(x, "shape") -> x
  std::unordered_set<const Node*> absorbed_;                    // getitems written as their producer's outputs
  std::unordered_set<const Node*> mutations_;                   // trailing copy_ nodes written as mutation outputs
  Json nodes_ = Json::array(), tensor_values_ = Json::object(), sym_int_values_ = Json::object(),
       sym_float_values_ = Json::object(), sym_bool_values_ = Json::object();
  Json input_specs_ = Json::array(), graph_inputs_ = Json::array(), output_specs_ = Json::array(),
       graph_outputs_ = Json::array(), forward_arg_names_ = Json::array();
  std::string in_spec_, out_spec_;
  Json range_constraints_ = Json::object();
  Json weights_ = Json::object(), constants_ = Json::object();
  Archive archive_;
};

// ---- values ---------------------------------------------------------------------------------------

Json Writer::value_meta(const Node* n) const {
  const Argument* m = meta_of(n, "pt2_value");
  if (!m) return nullptr;
  if (!m->is_string()) refuse(n, "meta['pt2_value'] is not a string (the serialized value metadata as JSON)");
  Json j = parse_meta(n, m->as_string(), "pt2_value");
  if (!j.is_object() || j.size() != 1)
    refuse(n, "meta['pt2_value'] is not {\"as_tensor\": ...} or {\"as_sym_int\"|\"as_sym_float\"|\"as_sym_bool\": ...}");
  return j;
}

Kind Writer::kind_of(const Node* n) const {
  Json m = value_meta(n);
  if (!m.is_null()) {
    const std::string& tag = m.begin().key();
    if (tag == "as_sym_int") return Kind::SymInt;
    if (tag == "as_sym_float") return Kind::SymFloat;
    if (tag == "as_sym_bool") return Kind::SymBool;
    return Kind::Tensor;
  }
  if (n->op() == Op::CallFunction) {
    Primitive p;
    if (as_primitive(n->target().fn(), &p)) return p == Primitive::TrueDiv ? Kind::SymFloat : Kind::SymInt;
    if (const AtenOp* op = as_aten_op(n->target().fn())) {
      const auto& rets = op->handle.schema().returns();
      if (rets.size() == 1) {
        auto k = rets[0].type()->kind();
        if (k == c10::TypeKind::IntType) return Kind::SymInt;
        if (k == c10::TypeKind::FloatType) return Kind::SymFloat;
        if (k == c10::TypeKind::BoolType) return Kind::SymBool;
      }
    }
  }
  return Kind::Tensor;
}

void Writer::record_tensor(const Node* n, const std::string& name) {
  if (tensor_values_.contains(name)) return;
  Json m = value_meta(n);
  if (!m.is_null()) {
    if (m.begin().key() != "as_tensor") refuse(n, "it is used as a tensor, and meta['pt2_value'] describes a " + m.begin().key());
    tensor_values_[name] = m.begin().value();
    return;
  }
  const Argument* tm = meta_of(n, "tensor_meta");
  if (tm && tm->kind() == ArgKind::Dict && tm->pairs().size() >= 4) {
    const ArgPairs& p = tm->pairs();
    const TorchConstant* dt =
        p[1].second.kind() == ArgKind::Foreign ? as_torch_constant(p[1].second.as_object()) : nullptr;
    if (dt && p[0].second.is_sequence() && p[3].second.is_sequence()) {
      Json sizes = Json::array(), strides = Json::array();
      for (const Argument& s : p[0].second.items()) {
        if (s.kind() != ArgKind::Int || s.as_int() < 0)
          refuse(n, "its tensor_meta has a size that is not a static int; a symbolic size needs meta['pt2_value']");
        sizes.push_back(Json{{"as_int", s.as_int()}});
      }
      for (const Argument& s : p[3].second.items()) {
        if (s.kind() != ArgKind::Int) refuse(n, "its tensor_meta has a stride that is not an int");
        strides.push_back(Json{{"as_int", s.as_int()}});
      }
      int64_t dtype = serde_dtype(dtype_from_name(dt->name));
      if (dtype < 0) refuse(n, "its dtype " + dt->name + " has no .pt2 encoding");
      Json t = Json::object();
      t["dtype"] = dtype;
      t["sizes"] = std::move(sizes);
      t["requires_grad"] = p[2].second.kind() == ArgKind::Bool && p[2].second.as_bool();
      t["device"] = device_json("cpu");
      t["strides"] = std::move(strides);
      t["storage_offset"] = Json{{"as_int", 0}};
      t["layout"] = 7;
      tensor_values_[name] = std::move(t);
      return;
    }
  }
  refuse(n, "it has no metadata (meta['pt2_value'] as from_exported_program and .pt2 files give it, or "
            "meta['tensor_meta'] as ShapeProp gives it), which torch.export.load needs for every value; run "
            "fxcpp.passes.shape_prop.ShapeProp(gm).propagate(*example_inputs) first, or save as .fxpt");
}

void Writer::record(const Node* n, Kind want, const std::string& name) {
  if (want == Kind::Tensor) return record_tensor(n, name);
  Json m = value_meta(n);
  const char* tag = want == Kind::SymInt ? "as_sym_int" : want == Kind::SymFloat ? "as_sym_float" : "as_sym_bool";
  if (m.is_null() || m.begin().key() != tag)
    refuse(n, std::string("it computes a symbolic size (") + tag + ") and has no meta['pt2_value'] giving its "
              "expression over the program's symbols; only programs read from .pt2 archives or made by "
              "fxcpp.aten.from_exported_program carry them (a static size is folded into a constant)");
  Json& table = want == Kind::SymInt ? sym_int_values_ : want == Kind::SymFloat ? sym_float_values_ : sym_bool_values_;
  table[name] = m.begin().value();
}

// Size `dim` of tensor node `t` when it is static, from its metadata.
std::optional<int64_t> Writer::static_size(const Node* t, int64_t dim) const {
  Json m = value_meta(t);
  if (!m.is_null() && m.begin().key() == "as_tensor") {
    const Json& sizes = m.begin().value().value("sizes", Json::array());
    if (!sizes.is_array()) return std::nullopt;
    int64_t rank = static_cast<int64_t>(sizes.size());
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) return std::nullopt;
    const Json& s = sizes[static_cast<size_t>(dim)];
    if (s.is_object() && s.contains("as_int") && s["as_int"].is_number_integer()) return s["as_int"].get<int64_t>();
    return std::nullopt;
  }
  if (!m.is_null()) return std::nullopt;
  if (t->op() == Op::GetAttr) {
    auto it = by_name_.find(t->target().str().c_str());
    if (it == by_name_.end() || !it->second->tensor.defined()) return std::nullopt;
    int64_t rank = it->second->tensor.dim();
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) return std::nullopt;
    return it->second->tensor.size(dim);
  }
  const Argument* tm = meta_of(t, "tensor_meta");
  if (!tm || tm->kind() != ArgKind::Dict || tm->pairs().empty() || !tm->pairs()[0].second.is_sequence())
    return std::nullopt;
  const auto& sizes = tm->pairs()[0].second.items();
  int64_t rank = static_cast<int64_t>(sizes.size());
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return std::nullopt;
  const Argument& s = sizes[static_cast<size_t>(dim)];
  // Static metadata makes a static program: the input's recorded size is the
  // one the archive declares, so sizes computed from it are that constant.
  if (s.kind() != ArgKind::Int || s.as_int() < 0) return std::nullopt;
  return s.as_int();
}

// ---- arguments --------------------------------------------------------------------------------

Json Writer::sym_ref(const Node* n, const Node* v, const std::string& param) {
  auto f = folded_.find(v);
  if (f != folded_.end()) {
    if (f->second.kind() == ArgKind::Int) return Json{{"as_int", f->second.as_int()}};
    return Json{{"as_float", fl(f->second.as_double())}};
  }
  (void)n;
  (void)param;
  return Json{{"as_name", name_of(v)}};
}

// A number for a Scalar/Tensor parameter: constant, folded or symbolic.
Json Writer::scalar_arg(const Node* n, const Argument& a, const std::string& param) {
  switch (a.kind()) {
    case ArgKind::Int: return Json{{"as_int", a.as_int()}};
    case ArgKind::Bool: return Json{{"as_bool", a.as_bool()}};
    case ArgKind::Double: return Json{{"as_float", fl(a.as_double())}};
    case ArgKind::NodeRef: {
      const Node* v = a.as_node();
      auto f = folded_.find(v);
      if (f != folded_.end())
        return f->second.kind() == ArgKind::Int ? Json{{"as_int", f->second.as_int()}}
                                                : Json{{"as_float", fl(f->second.as_double())}};
      switch (kind_of(v)) {
        case Kind::Tensor: return Json{{"as_tensor", Json{{"name", name_of(v)}}}};
        case Kind::SymInt: return Json{{"as_sym_int", Json{{"as_name", name_of(v)}}}};
        case Kind::SymFloat: return Json{{"as_sym_float", Json{{"as_name", name_of(v)}}}};
        case Kind::SymBool: return Json{{"as_sym_bool", Json{{"as_name", name_of(v)}}}};
      }
      break;
    }
    default: break;
  }
  refuse(n, "argument '" + param + "' is not a number or a value");
}

Json Writer::arg(const Node* n, const Argument& a, const c10::TypePtr& type_in, const std::string& param, int depth) {
  if (depth > kMaxDepth) refuse(n, "argument '" + param + "' is nested too deeply");
  c10::TypePtr type = type_in;
  if (type->kind() == c10::TypeKind::OptionalType) {
    if (a.is_none()) return Json{{"as_none", true}};
    type = type->containedType(0);
  }
  auto bad = [&](const std::string& what) -> Json {
    refuse(n, "argument '" + param + "' (" + type_in->str() + ") " + what + ", which has no .pt2 encoding");
  };
  auto node_of = [&](const Argument& x) -> const Node* { return x.is_node() ? x.as_node() : nullptr; };
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::NumberType:
      if (const Node* v = node_of(a)) {
        if (type->kind() == c10::TypeKind::TensorType && !folded_.count(v) && kind_of(v) == Kind::Tensor)
          return Json{{"as_tensor", Json{{"name", name_of(v)}}}};
      }
      return scalar_arg(n, a, param);
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      if (a.kind() == ArgKind::Int) return Json{{"as_int", a.as_int()}};
      if (const Node* v = node_of(a)) {
        Json r = sym_ref(n, v, param);
        if (r.contains("as_name")) return Json{{"as_sym_int", std::move(r)}};
        return r;
      }
      return bad("is not an int");
    case c10::TypeKind::FloatType:
      if (a.kind() == ArgKind::Double) return Json{{"as_float", fl(a.as_double())}};
      if (a.kind() == ArgKind::Int) return Json{{"as_float", fl(static_cast<double>(a.as_int()))}};
      if (const Node* v = node_of(a)) {
        Json r = sym_ref(n, v, param);
        if (r.contains("as_name")) return Json{{"as_sym_float", std::move(r)}};
        if (r.contains("as_int")) return Json{{"as_float", fl(static_cast<double>(r["as_int"].get<int64_t>()))}};
        return r;
      }
      return bad("is not a float");
    case c10::TypeKind::BoolType:
      if (a.kind() == ArgKind::Bool) return Json{{"as_bool", a.as_bool()}};
      if (const Node* v = node_of(a)) return Json{{"as_sym_bool", Json{{"as_name", name_of(v)}}}};
      return bad("is not a bool");
    case c10::TypeKind::StringType:
      if (a.is_string()) return Json{{"as_string", a.as_string()}};
      return bad("is not a string");
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
    case c10::TypeKind::DeviceObjType: {
      const TorchConstant* c = a.kind() == ArgKind::Foreign ? as_torch_constant(a.as_object()) : nullptr;
      if (!c) return bad("is not a constant");
      switch (c->kind) {
        case TorchConstant::Kind::Dtype: {
          int64_t d = serde_dtype(dtype_from_name(c->name));
          if (d < 0) return bad("is the dtype " + c->name);
          return Json{{"as_scalar_type", d}};
        }
        case TorchConstant::Kind::Layout:
          if (c->name != "strided") return bad("is the layout " + c->name);
          return Json{{"as_layout", 7}};
        case TorchConstant::Kind::MemoryFormat: {
          static const std::map<std::string, int> formats = {
              {"contiguous_format", 1}, {"channels_last", 2}, {"channels_last_3d", 3}, {"preserve_format", 4}};
          auto it = formats.find(c->name);
          if (it == formats.end()) return bad("is the memory format " + c->name);
          return Json{{"as_memory_format", it->second}};
        }
        case TorchConstant::Kind::Device: return Json{{"as_device", device_json(c->name)}};
      }
      return bad("is an unknown constant");
    }
    case c10::TypeKind::ListType: {
      c10::TypePtr elem = type->containedType(0);
      std::vector<Argument> items;
      if (a.is_sequence()) {
        items = a.items();
      } else if (a.kind() == ArgKind::Int && (elem->kind() == c10::TypeKind::IntType || elem->kind() == c10::TypeKind::SymIntType)) {
        items.assign(1, a);  // int[2] given one int: torch repeats it; a one-item list means the same
      } else {
        return bad("is not a list");
      }
      Json out = Json::array();
      switch (elem->kind()) {
        case c10::TypeKind::TensorType:
          for (const Argument& x : items) {
            const Node* v = node_of(x);
            if (!v) return bad("holds a non-tensor");
            out.push_back(Json{{"name", name_of(v)}});
          }
          return Json{{"as_tensors", std::move(out)}};
        case c10::TypeKind::OptionalType:
          if (elem->containedType(0)->kind() != c10::TypeKind::TensorType) return bad("is a list of optionals");
          for (const Argument& x : items) {
            if (x.is_none()) out.push_back(Json{{"as_none", true}});
            else if (const Node* v = node_of(x)) out.push_back(Json{{"as_tensor", Json{{"name", name_of(v)}}}});
            else return bad("holds a non-tensor");
          }
          return Json{{"as_optional_tensors", std::move(out)}};
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType: {
          bool symbolic = false;
          for (const Argument& x : items) {
            if (x.kind() == ArgKind::Int) {
              out.push_back(Json{{"as_int", x.as_int()}});
            } else if (const Node* v = node_of(x)) {
              Json r = sym_ref(n, v, param);
              symbolic = symbolic || r.contains("as_name");
              out.push_back(std::move(r));
            } else {
              return bad("holds a non-int");
            }
          }
          if (symbolic) return Json{{"as_sym_ints", std::move(out)}};
          Json plain = Json::array();
          for (const Json& x : out) plain.push_back(x["as_int"]);
          return Json{{"as_ints", std::move(plain)}};
        }
        case c10::TypeKind::FloatType:
          for (const Argument& x : items) {
            if (x.kind() == ArgKind::Double) out.push_back(fl(x.as_double()));
            else if (x.kind() == ArgKind::Int) out.push_back(static_cast<double>(x.as_int()));
            else return bad("holds a non-float");
          }
          return Json{{"as_floats", std::move(out)}};
        case c10::TypeKind::BoolType:
          for (const Argument& x : items) {
            if (x.kind() != ArgKind::Bool) return bad("holds a non-bool");
            out.push_back(x.as_bool());
          }
          return Json{{"as_bools", std::move(out)}};
        case c10::TypeKind::StringType:
          for (const Argument& x : items) {
            if (!x.is_string()) return bad("holds a non-string");
            out.push_back(x.as_string());
          }
          return Json{{"as_strings", std::move(out)}};
        default: return bad("is a list of " + elem->str());
      }
    }
    default: return bad("is of a type");
  }
}

// ---- nodes ----------------------------------------------------------------------------------

bool Writer::is_mutation(const Node* n) const {
  if (n->op() != Op::CallFunction || n->has_users()) return false;
  const AtenOp* op = as_aten_op(n->target().fn());
  if (!op || op->qualified != "aten::copy_" || n->args().size() != 2 || !n->kwargs().empty()) return false;
  const Argument& dst = n->args()[0];
  if (!dst.is_node() || !n->args()[1].is_node()) return false;
  const Node* d = dst.as_node();
  if (d->op() == Op::Placeholder) return true;
  if (d->op() != Op::GetAttr) return false;
  auto it = by_name_.find(d->target().str().c_str());
  return it != by_name_.end() && it->second->kind != NamedTensor::Kind::Constant;
}

void Writer::inputs() {
  // Lifted inputs first, in the order torch's signature requires.
  std::vector<const Node*> by_kind[3];
  std::unordered_map<std::string, const Node*> first;
  for (Node* n : graph_.nodes()) {
    if (n->op() != Op::GetAttr) continue;
    std::string fqn = n->target().str().c_str();
    auto seen = first.find(fqn);
    if (seen != first.end()) {
      alias_[n] = name_of(seen->second);
      continue;
    }
    auto it = by_name_.find(fqn);
    if (it == by_name_.end()) refuse(n, "get_attr of '" + fqn + "', which is not among the tensors");
    if (!it->second->tensor.defined()) refuse(n, "get_attr of '" + fqn + "', an undefined tensor");
    first.emplace(fqn, n);
    by_kind[static_cast<int>(it->second->kind)].push_back(n);
  }
  std::map<std::pair<const void*, int>, std::string> records;  // (storage, dtype) -> record
  for (int k = 0; k < 3; ++k) {
    for (const Node* n : by_kind[k]) {
      std::string fqn = n->target().str().c_str();
      const NamedTensor& nt = *by_name_.at(fqn);
      std::string name = name_of(n);
      at::Tensor data = nt.tensor.detach();
      if (!data.device().is_cpu() || data.is_conj() || data.is_neg() || data.layout() != c10::kStrided ||
          !data.has_storage())
        data = data.cpu().resolve_conj().resolve_neg().contiguous();
      int64_t dtype = serde_dtype(data.scalar_type());
      if (dtype < 0) refuse(n, "tensor '" + fqn + "' has a dtype the .pt2 writer does not support");
      bool requires_grad = nt.requires_grad.value_or(
          nt.tensor.requires_grad() ||
          (nt.kind == NamedTensor::Kind::Parameter && (data.is_floating_point() || data.is_complex())));
      Json meta = Json::object();
      meta["dtype"] = dtype;
      meta["sizes"] = ints_json(data.sizes());
      meta["requires_grad"] = requires_grad;
      meta["device"] = device_json("cpu");
      meta["strides"] = ints_json(data.strides());
      meta["storage_offset"] = Json{{"as_int", data.storage_offset()}};
      meta["layout"] = 7;
      tensor_values_[name] = meta;

      bool constant = nt.kind == NamedTensor::Kind::Constant;
      auto key = std::make_pair(static_cast<const void*>(data.storage().unsafeGetStorageImpl()),
                                static_cast<int>(data.scalar_type()));
      auto rec = records.find(key);
      // A storage shared by a weight and a constant is written in each directory.
      std::string dir = constant ? "data/constants/" : "data/weights/";
      if (rec == records.end() || rec->second.rfind(dir, 0) != 0) {
        std::string file = (constant ? "tensor_" : "weight_") + std::to_string(constant ? constants_.size() : weights_.size());
        rec = records.insert_or_assign(key, dir + file).first;
        archive_.payloads.emplace_back(dir + file, data);
      }
      Json entry = Json::object();
      entry["path_name"] = rec->second.substr(dir.size());
      entry["is_param"] = nt.kind == NamedTensor::Kind::Parameter;
      entry["use_pickle"] = false;
      entry["tensor_meta"] = meta;
      (constant ? constants_ : weights_)[fqn] = std::move(entry);

      Json spec = Json::object();
      if (nt.kind == NamedTensor::Kind::Parameter) {
        spec["parameter"] = Json{{"arg", Json{{"name", name}}}, {"parameter_name", fqn}};
      } else if (nt.kind == NamedTensor::Kind::Buffer) {
        spec["buffer"] = Json{{"arg", Json{{"name", name}}}, {"buffer_name", fqn}, {"persistent", true}};
      } else {
        spec["tensor_constant"] = Json{{"arg", Json{{"name", name}}}, {"tensor_constant_name", fqn}};
      }
      input_specs_.push_back(std::move(spec));
      graph_inputs_.push_back(Json{{"as_tensor", Json{{"name", name}}}});
    }
  }
  // User inputs: the placeholders, in order.
  size_t count = 0;
  for (Node* n : graph_.nodes()) {
    if (n->op() != Op::Placeholder) continue;
    if (!n->args().empty()) refuse(n, "a placeholder with a default value has no .pt2 encoding");
    std::string name = name_of(n);
    Kind k = kind_of(n);
    record(n, k, name);
    Json a = k == Kind::Tensor ? Json{{"as_tensor", Json{{"name", name}}}}
                               : Json{{k == Kind::SymInt ? "as_sym_int" : k == Kind::SymFloat ? "as_sym_float" : "as_sym_bool",
                                       Json{{"as_name", name}}}};
    input_specs_.push_back(Json{{"user_input", Json{{"arg", a}}}});
    graph_inputs_.push_back(a);
    forward_arg_names_.push_back(std::string(n->target().str().c_str()));
    ++count;
  }
  // in_spec: ((leaf, ...), {})
  Json leaf = Json{{"type", nullptr}, {"context", nullptr}, {"children_spec", Json::array()}};
  Json args = Json{{"type", "builtins.tuple"}, {"context", "null"}, {"children_spec", Json::array()}};
  for (size_t i = 0; i < count; ++i) args["children_spec"].push_back(leaf);
  Json kwargs = Json{{"type", "builtins.dict"}, {"context", "[]"}, {"children_spec", Json::array()}};
  Json root = Json{{"type", "builtins.tuple"}, {"context", "null"}, {"children_spec", Json::array({args, kwargs})}};
  in_spec_ = Json::array({1, root}).dump();
}

// Python's // and % on ints (toward -inf, the divisor's sign); false on overflow or zero.
bool python_int_op(Primitive p, int64_t a, int64_t b, int64_t* out) {
  switch (p) {
    case Primitive::Add: return !__builtin_add_overflow(a, b, out);
    case Primitive::Sub: return !__builtin_sub_overflow(a, b, out);
    case Primitive::Mul: return !__builtin_mul_overflow(a, b, out);
    case Primitive::FloorDiv:
    case Primitive::Mod: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return false;
      int64_t q = a / b, r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) {
        q -= 1;
        r += b;
      }
      *out = p == Primitive::FloorDiv ? q : r;
      return true;
    }
    default: return false;
  }
}

void Writer::primitive_call(Node* n, Primitive p) {
  const auto& args = n->args();
  if (p == Primitive::GetAttr) {
    if (args.size() == 2 && args[0].is_node() && args[1].is_string() && args[1].as_string() == "shape") {
      for (Node* u : n->users()) {
        Primitive up;
        if (u->op() != Op::CallFunction || !as_primitive(u->target().fn(), &up) || up != Primitive::GetItem ||
            u->args().size() != 2 || !u->args()[0].is_node() || u->args()[0].as_node() != n ||
            u->args()[1].kind() != ArgKind::Int)
          refuse(n, "getattr(x, 'shape') is used other than by getitem with a constant index; .pt2 has sizes one "
                    "dimension at a time (aten.sym_size.int)");
      }
      shape_of_[n] = args[0].as_node();
      return;
    }
    refuse(n, "getattr of anything but a tensor's shape has no .pt2 encoding");
  }
  if (p == Primitive::GetItem) {
    if (args.size() == 2 && args[0].is_node() && args[1].kind() == ArgKind::Int) {
      const Node* src = args[0].as_node();
      if (absorbed_.count(n)) return;  // a result of a multi-output node, named there
      auto sh = shape_of_.find(src);
      if (sh != shape_of_.end()) {
        Json m = value_meta(n);
        std::optional<int64_t> s;
        if (m.is_null() || (m.begin().key() == "as_sym_int" && m.begin().value().contains("as_int")))
          s = m.is_null() ? static_size(sh->second, args[1].as_int()) : m.begin().value()["as_int"].get<int64_t>();
        if (s) {
          folded_[n] = Argument::integer(*s);
          return;
        }
        record(n, Kind::SymInt, name_of(n));
        Json node = Json::object();
        node["target"] = "torch.ops.aten.sym_size.int";
        node["inputs"] = Json::array({Json{{"name", "self"}, {"arg", Json{{"as_tensor", Json{{"name", name_of(sh->second)}}}}}, {"kind", 1}},
                                      Json{{"name", "dim"}, {"arg", Json{{"as_int", args[1].as_int()}}}, {"kind", 1}}});
        node["outputs"] = Json::array({Json{{"as_sym_int", Json{{"as_name", name_of(n)}}}}});
        node["metadata"] = Json::object();
        node["is_hop_single_tensor_return"] = nullptr;
        node["name"] = name_of(n);
        nodes_.push_back(std::move(node));
        return;
      }
    }
    refuse(n, "operator.getitem is written only for the results of a multi-output operator and for sizes "
              "(getattr(x, 'shape')[d])");
  }
  // Arithmetic on sizes: folded when every operand is a constant.
  std::vector<Argument> vals;
  bool constant = true;
  for (const Argument& a : args) {
    if (a.is_node()) {
      auto f = folded_.find(a.as_node());
      if (f == folded_.end()) {
        constant = false;
        vals.push_back(a);
      } else {
        vals.push_back(f->second);
      }
    } else if (a.kind() == ArgKind::Int || a.kind() == ArgKind::Double) {
      vals.push_back(a);
    } else {
      refuse(n, "an arithmetic operand that is not a number");
    }
  }
  if (!n->kwargs().empty()) refuse(n, "keyword arguments to an operator");
  if (constant && !value_meta(n).is_object()) {
    bool ints = true;
    for (const Argument& v : vals) ints = ints && v.kind() == ArgKind::Int;
    if (p == Primitive::Neg && vals.size() == 1) {
      if (ints && vals[0].as_int() != INT64_MIN) {
        folded_[n] = Argument::integer(-vals[0].as_int());
        return;
      }
      if (!ints) {
        folded_[n] = Argument::real(-vals[0].as_double());
        return;
      }
    }
    auto num = [](const Argument& v) { return v.kind() == ArgKind::Int ? static_cast<double>(v.as_int()) : v.as_double(); };
    if (vals.size() == 2 && ints && p != Primitive::TrueDiv) {
      int64_t r;
      if (python_int_op(p, vals[0].as_int(), vals[1].as_int(), &r)) {
        folded_[n] = Argument::integer(r);
        return;
      }
    } else if (vals.size() == 2 && p == Primitive::TrueDiv && num(vals[1]) != 0) {
      folded_[n] = Argument::real(num(vals[0]) / num(vals[1]));
      return;
    } else if (vals.size() == 2 && (p == Primitive::Add || p == Primitive::Sub || p == Primitive::Mul)) {
      double a = num(vals[0]), b = num(vals[1]);
      folded_[n] = Argument::real(p == Primitive::Add ? a + b : p == Primitive::Sub ? a - b : a * b);
      return;
    }
  }
  static const std::map<Primitive, const char*> names = {
      {Primitive::Add, "add"}, {Primitive::Sub, "sub"}, {Primitive::Mul, "mul"}, {Primitive::FloorDiv, "floordiv"},
      {Primitive::TrueDiv, "truediv"}, {Primitive::Mod, "mod"}, {Primitive::Neg, "neg"}};
  auto it = names.find(p);
  if (it == names.end()) refuse(n, "an unknown primitive");
  Kind k = kind_of(n);
  if (k == Kind::Tensor) refuse(n, "shape arithmetic whose meta['pt2_value'] describes a tensor");
  std::string name = name_of(n);
  record(n, k, name);
  Json inputs = Json::array();
  const char* pnames[] = {"a", "b"};
  for (size_t i = 0; i < args.size() && i < 2; ++i) {
    Json v;
    if (args[i].is_node()) {
      const Node* src = args[i].as_node();
      Json r = sym_ref(n, src, pnames[i]);
      if (r.contains("as_name")) {
        Kind sk = kind_of(src);
        v = Json{{sk == Kind::SymFloat ? "as_sym_float" : sk == Kind::SymBool ? "as_sym_bool" : "as_sym_int", std::move(r)}};
      } else {
        v = std::move(r);
      }
    } else if (args[i].kind() == ArgKind::Int) {
      v = Json{{"as_int", args[i].as_int()}};
    } else {
      v = Json{{"as_float", fl(args[i].as_double())}};
    }
    inputs.push_back(Json{{"name", pnames[i]}, {"arg", std::move(v)}, {"kind", 1}});
  }
  const char* tag = k == Kind::SymInt ? "as_sym_int" : k == Kind::SymFloat ? "as_sym_float" : "as_sym_bool";
  Json node = Json::object();
  node["target"] = std::string("_operator.") + it->second;
  node["inputs"] = std::move(inputs);
  node["outputs"] = Json::array({Json{{tag, Json{{"as_name", name}}}}});
  node["metadata"] = Json::object();
  node["is_hop_single_tensor_return"] = nullptr;
  node["name"] = name;
  nodes_.push_back(std::move(node));
}

// The serialized outputs of an ATen call: named after the node, or after its getitem users.
Json Writer::outputs_of(Node* n, const AtenOp& op) {
  const auto& rets = op.handle.schema().returns();
  Json outs = Json::array();
  if (rets.empty()) {
    if (n->has_users()) refuse(n, "an operator without results is used");
    return outs;
  }
  auto is_list = [](const c10::TypePtr& t) { return t->kind() == c10::TypeKind::ListType; };
  if (rets.size() == 1 && !is_list(rets[0].type())) {
    Kind k = kind_of(n);
    std::string name = name_of(n);
    record(n, k, name);
    if (k == Kind::Tensor) outs.push_back(Json{{"as_tensor", Json{{"name", name}}}});
    else outs.push_back(Json{{k == Kind::SymInt ? "as_sym_int" : k == Kind::SymFloat ? "as_sym_float" : "as_sym_bool",
                              Json{{"as_name", name}}}});
    return outs;
  }
  // A tuple or list result: each element is named by its getitem user.
  std::map<int64_t, Node*> items;
  for (Node* u : n->users()) {
    Primitive p;
    if (u->op() != Op::CallFunction || !as_primitive(u->target().fn(), &p) || p != Primitive::GetItem ||
        u->args().size() != 2 || !u->args()[0].is_node() || u->args()[0].as_node() != n ||
        u->args()[1].kind() != ArgKind::Int)
      refuse(n, "its results are used other than by operator.getitem with a constant index ('" +
                    std::string(u->name()) + "')");
    int64_t i = u->args()[1].as_int();
    if (i < 0) refuse(u, "a negative index into an operator's results");
    auto [it, fresh] = items.emplace(i, u);
    if (!fresh) alias_[u] = name_of(it->second);
    absorbed_.insert(u);
  }
  auto name_item = [&](Node* u) {
    record(u, Kind::Tensor, name_of(u));
    return Json{{"name", name_of(u)}};
  };
  if (rets.size() == 1) {  // Tensor[]: every element up to the last used one needs a name
    Json list = Json::array();
    int64_t expect = 0;
    for (auto& [i, u] : items) {
      if (i != expect)
        refuse(n, "result " + std::to_string(expect) + " of its list result has no getitem, and .pt2 names every "
                  "element of a list result");
      list.push_back(name_item(u));
      ++expect;
    }
    outs.push_back(Json{{"as_tensors", std::move(list)}});
    return outs;
  }
  for (size_t j = 0; j < rets.size(); ++j) {
    if (rets[j].type()->kind() != c10::TypeKind::TensorType)
      refuse(n, "result " + std::to_string(j) + " of " + op.qualified + " is a " + rets[j].type()->str() +
                    "; only tensor results of multi-result operators are written");
    auto it = items.find(static_cast<int64_t>(j));
    if (it == items.end()) outs.push_back(Json{{"as_none", true}});
    else outs.push_back(Json{{"as_tensor", name_item(it->second)}});
  }
  for (auto& [i, u] : items)
    if (i >= static_cast<int64_t>(rets.size())) refuse(u, "an index past the operator's results");
  return outs;
}

void Writer::aten_call(Node* n, const AtenOp& op) {
  const c10::FunctionSchema& schema = op.handle.schema();
  const auto& params = schema.arguments();
  const auto& args = n->args();
  if (args.size() > params.size()) refuse(n, "more arguments than " + op.qualified + " takes");
  // aten.size.int of a static size: a constant.
  if ((op.qualified == "aten::size.int" || op.qualified == "aten::sym_size.int") && args.size() == 2 &&
      args[0].is_node() && args[1].kind() == ArgKind::Int) {
    Json m = value_meta(n);
    std::optional<int64_t> s;
    if (m.is_null()) s = static_size(args[0].as_node(), args[1].as_int());
    else if (m.begin().key() == "as_sym_int" && m.begin().value().contains("as_int")) s = m.begin().value()["as_int"].get<int64_t>();
    if (s) {
      folded_[n] = Argument::integer(*s);
      return;
    }
  }
  Json inputs = Json::array();
  bool gap = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const c10::Argument& param = params[i];
    const Argument* value = nullptr;
    if (i < args.size()) value = &args[i];
    for (const auto& kv : n->kwargs())
      if (kv.first == param.name()) {
        if (value) refuse(n, "argument '" + param.name() + "' is given twice");
        value = &kv.second;
      }
    if (!value) {
      gap = true;
      continue;
    }
    Json a = arg(n, *value, param.real_type(), param.name());
    int kind = param.kwarg_only() || gap ? 2 : 1;
    inputs.push_back(Json{{"name", param.name()}, {"arg", std::move(a)}, {"kind", kind}});
  }
  for (const auto& kv : n->kwargs()) {
    bool known = false;
    for (const auto& param : params) known = known || param.name() == kv.first;
    if (!known) refuse(n, "keyword argument '" + kv.first + "' is not a parameter of " + op.qualified);
  }
  Json node = Json::object();
  node["target"] = op.python;
  node["inputs"] = std::move(inputs);
  node["outputs"] = outputs_of(n, op);
  node["metadata"] = Json::object();
  node["is_hop_single_tensor_return"] = nullptr;
  node["name"] = name_of(n);
  nodes_.push_back(std::move(node));
}

void Writer::call(Node* n) {
  const Object& fn = n->target().fn();
  Primitive p;
  if (as_primitive(fn, &p)) return primitive_call(n, p);
  if (const AtenOp* op = as_aten_op(fn)) {
    if (mutations_.count(n)) return;
    return aten_call(n, *op);
  }
  refuse(n, "its target " + fn.qualified_name() +
                " is neither an ATen operator overload nor a runtime primitive; an ExportedProgram calls "
                "torch.ops.* operators and operator.* size arithmetic only (lower it with fxcpp.aten.lower first)");
}

// An output leaf as a user output argument.
Json Writer::output_arg(const Node* n, const Argument& a) {
  if (a.is_node()) {
    const Node* v = a.as_node();
    auto f = folded_.find(v);
    if (f != folded_.end())
      return f->second.kind() == ArgKind::Int ? Json{{"as_int", f->second.as_int()}}
                                              : Json{{"as_float", fl(f->second.as_double())}};
    switch (kind_of(v)) {
      case Kind::Tensor: return Json{{"as_tensor", Json{{"name", name_of(v)}}}};
      case Kind::SymInt: return Json{{"as_sym_int", Json{{"as_name", name_of(v)}}}};
      case Kind::SymFloat: return Json{{"as_sym_float", Json{{"as_name", name_of(v)}}}};
      case Kind::SymBool: return Json{{"as_sym_bool", Json{{"as_name", name_of(v)}}}};
    }
  }
  refuse(n, "an output that is a constant, not a value of the graph");
}

Json Writer::out_spec(const Node* n, const Argument& a, std::vector<Argument>& leaves, int depth) {
  if (depth > kMaxDepth) refuse(n, "the output is nested too deeply");
  Json children = Json::array();
  switch (a.kind()) {
    case ArgKind::NodeRef:
      leaves.push_back(a);
      return Json{{"type", nullptr}, {"context", nullptr}, {"children_spec", Json::array()}};
    case ArgKind::Tuple:
    case ArgKind::List:
      if (a.kind() == ArgKind::Tuple && a.tuple_type()) refuse(n, "a named tuple output has no .pt2 encoding here");
      for (const Argument& x : a.items()) children.push_back(out_spec(n, x, leaves, depth + 1));
      return Json{{"type", a.kind() == ArgKind::Tuple ? "builtins.tuple" : "builtins.list"},
                  {"context", "null"},
                  {"children_spec", std::move(children)}};
    case ArgKind::Dict: {
      Json keys = Json::array();
      for (const auto& kv : a.pairs()) {
        if (!kv.first.is_string()) refuse(n, "a dict output with a key that is not a string");
        keys.push_back(kv.first.as_string());
        children.push_back(out_spec(n, kv.second, leaves, depth + 1));
      }
      return Json{{"type", "builtins.dict"}, {"context", keys.dump()}, {"children_spec", std::move(children)}};
    }
    default: refuse(n, "an output that is not a value of the graph or a tuple, list or dict of them");
  }
}

void Writer::output(Node* n) {
  if (n->args().size() != 1) refuse(n, "the output node takes one argument");
  // Mutations first, then the user outputs (the order torch's signature has).
  for (Node* m : graph_.nodes()) {
    if (!mutations_.count(m)) continue;
    const Node* dst = m->args()[0].as_node();
    const Node* v = m->args()[1].as_node();
    std::string value = name_of(v);
    record(v, Kind::Tensor, value);
    Json spec = Json::object();
    if (dst->op() == Op::Placeholder) {
      spec["user_input_mutation"] = Json{{"arg", Json{{"name", value}}}, {"user_input_name", name_of(dst)}};
    } else {
      std::string fqn = dst->target().str().c_str();
      bool param = by_name_.at(fqn)->kind == NamedTensor::Kind::Parameter;
      spec[param ? "parameter_mutation" : "buffer_mutation"] =
          Json{{"arg", Json{{"name", value}}}, {param ? "parameter_name" : "buffer_name", fqn}};
    }
    output_specs_.push_back(std::move(spec));
    graph_outputs_.push_back(Json{{"as_tensor", Json{{"name", value}}}});
  }
  std::vector<Argument> leaves;
  Json spec = out_spec(n, n->args()[0], leaves, 0);
  out_spec_ = Json::array({1, spec}).dump();
  for (const Argument& leaf : leaves) {
    Json a = output_arg(n, leaf);
    output_specs_.push_back(Json{{"user_output", Json{{"arg", a}}}});
    graph_outputs_.push_back(a);
  }
  if (const Argument* rc = meta_of(n, "pt2_range_constraints")) {
    if (!rc->is_string()) refuse(n, "meta['pt2_range_constraints'] is not a string (JSON text)");
    range_constraints_ = parse_meta(n, rc->as_string(), "pt2_range_constraints");
    if (!range_constraints_.is_object()) refuse(n, "meta['pt2_range_constraints'] is not a JSON object");
  }
}

Archive Writer::run() {
  // Trailing copy_ nodes with unused results: mutation outputs.
  std::vector<Node*> order;
  for (Node* n : graph_.nodes()) {
    order.push_back(n);
    // What the reader would refuse is refused here (Note [Names a file may use]).
    if (!names::is_identifier(n->name()))
      refuse(n, "its name is not an ASCII Python identifier, which the loader requires; rename the node");
    if (n->op() == Op::CallModule || n->op() == Op::CallMethod)
      refuse(n, std::string("it is a ") + op_name(n->op()) +
                    " node; an ExportedProgram holds placeholder, call_function (torch.ops.* operators) and output "
                    "nodes (lower the model first: fxcpp.aten.lower(model, *inputs))");
  }
  for (size_t i = order.size(); i-- > 0;) {
    Node* n = order[i];
    if (n->op() == Op::Output) continue;
    if (!is_mutation(n)) break;
    mutations_.insert(n);
  }
  inputs();
  bool has_output = false;
  for (Node* n : order) {
    switch (n->op()) {
      case Op::Placeholder:
      case Op::GetAttr: break;
      case Op::CallFunction: call(n); break;
      case Op::Output:
        if (has_output) refuse(n, "a second output node");
        output(n);
        has_output = true;
        break;
      default:
        refuse(n, std::string("it is a ") + op_name(n->op()) +
                      " node; an ExportedProgram holds placeholder, call_function (torch.ops.* operators) and output "
                      "nodes (lower the model first: fxcpp.aten.lower(model, *inputs))");
    }
  }
  if (!has_output) throw FormatError("fxcpp::torch::save: the graph has no output node");

  Json graph = Json::object();
  graph["inputs"] = graph_inputs_;
  graph["outputs"] = graph_outputs_;
  graph["nodes"] = nodes_;
  graph["tensor_values"] = tensor_values_;
  graph["sym_int_values"] = sym_int_values_;
  graph["sym_bool_values"] = sym_bool_values_;
  graph["is_single_tensor_return"] = false;
  graph["custom_obj_values"] = Json::object();
  graph["sym_float_values"] = sym_float_values_;
  Json signature = Json{{"input_specs", input_specs_}, {"output_specs", output_specs_}};
  Json root_sig = Json::object();
  root_sig["inputs"] = Json::array();
  root_sig["outputs"] = Json::array();
  root_sig["in_spec"] = in_spec_;
  root_sig["out_spec"] = out_spec_;
  root_sig["forward_arg_names"] = forward_arg_names_;
  Json gm = Json::object();
  gm["graph"] = std::move(graph);
  gm["signature"] = std::move(signature);
  gm["module_call_graph"] = Json::array({Json{{"fqn", ""}, {"signature", std::move(root_sig)}}});
  gm["metadata"] = Json::object();
  gm["treespec_namedtuple_fields"] = Json::object();
  Json doc = Json::object();
  doc["graph_module"] = std::move(gm);
  doc["opset_version"] = Json{{"aten", 10}};
  doc["range_constraints"] = range_constraints_;
  doc["schema_version"] = Json{{"major", kPt2SchemaMajor}, {"minor", kPt2SchemaMinor}};
  doc["verifiers"] = Json::array({"TRAINING"});
  doc["torch_version"] = TORCH_VERSION;
  doc["guards_code"] = Json::array();

  std::string model = kModel;
  archive_.texts.emplace_back("archive_format", "pt2");
  archive_.texts.emplace_back("archive_version", "0");
  archive_.texts.emplace_back("byteorder", "little");
  archive_.texts.emplace_back("models/" + model + ".json", doc.dump());
  archive_.texts.emplace_back("data/weights/" + model + "_weights_config.json", Json{{"config", weights_}}.dump());
  archive_.texts.emplace_back("data/constants/" + model + "_constants_config.json", Json{{"config", constants_}}.dump());
  // torch.export.load requires the record; empty means "no example inputs" (nothing pickled).
  archive_.texts.emplace_back("data/sample_inputs/" + model + ".pt", "");
  return std::move(archive_);
}

}  // namespace

Archive prepare(const Graph& graph, const std::vector<NamedTensor>& tensors) { return Writer(graph, tensors).run(); }

}  // namespace fxcpp::torch::pt2
