// fxcpp._C_torch: the .fxpt codec for Python graphs, through the C++ reader
// and writer (Note [Graph handover] in src/bindings/handover.h).
//
// The target bridge maps the LibTorch objects of a graph the C++ reader made
// to the Python objects they stand for, and back:
//   aten_op("aten::add.Tensor")    <-> torch.ops.aten.add.Tensor
//   primitive("operator.getitem")  <-> operator.getitem (getattr <-> builtins.getattr)
//   torch_constant(Dtype, "float32") <-> torch.float32 (layouts, memory formats
//                                       likewise; devices <-> torch.device)
//   meta "tensor_meta" dict        <-> fxcpp.passes.shape_prop.TensorMetadata
//   meta "input_spec" (a .pt2 input's) -> plain Python data (read only; it is
//                                       made from "pt2_value" on each load)
// Everything else in an argument tree (numbers, strings, containers, node
// references) is the core's own representation on both sides.
#include "torch_bindings.h"  // first: Python.h

#include <torch/csrc/autograd/python_variable.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "handover.h"

namespace fxcpp::py {
namespace {

const HandoverApi& api() {
  static const HandoverApi* table = nullptr;
  if (!table) {
    auto* t = static_cast<const HandoverApi*>(PyCapsule_Import(kHandoverCapsule, 0));
    if (!t) throw PythonError();
    if (t->version != kHandoverVersion) {
      PyErr_Format(PyExc_ImportError,
                   "fxcpp._C_torch needs version %u of fxcpp._C's handover table, and the fxcpp._C loaded has "
                   "version %u: the two extensions come from different builds; reinstall fxcpp",
                   kHandoverVersion, t->version);
      throw PythonError();
    }
    table = t;
  }
  return *table;
}

Ref import(const char* name) { return owned(PyImport_ImportModule(name)); }

// The core graph of fxcpp Graph `o`; TypeError when it is none.
Graph* graph_arg(PyObject* o) {
  Graph* g = api().graph_of(o);
  if (!g) throw PythonError();
  return g;
}
Ref attr(PyObject* o, const char* name) { return owned(PyObject_GetAttrString(o, name)); }
Ref str_of(const std::string& s) {
  return owned(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

// The keys of a TensorMetadata as the reader stores it (a dict Argument), in order.
constexpr const char* kTensorMetaKeys[] = {"shape", "dtype", "requires_grad", "stride", "memory_format",
                                           "is_quantized"};
constexpr size_t kTensorMetaFields = sizeof(kTensorMetaKeys) / sizeof(kTensorMetaKeys[0]);
constexpr int kMaxDepth = 64;

bool is_tensor_meta_dict(const Argument& a) {
  if (a.kind() != ArgKind::Dict || a.pairs().size() != kTensorMetaFields) return false;
  for (size_t i = 0; i < kTensorMetaFields; ++i) {
    const Argument& k = a.pairs()[i].first;
    if (!k.is_string() || k.as_string() != kTensorMetaKeys[i]) return false;
  }
  return true;
}

// The meta entries a .pt2 archive's values carry (JSON text; Note [Writing
// .pt2 archives] in src/torch/pt2_writer.cpp), handed over as str both ways.
bool is_pt2_meta(const std::string& key) { return key == "pt2_value" || key == "pt2_range_constraints"; }

// ---- reading: LibTorch objects -> Python objects -----------------------------------

class ToPython {
 public:
  ToPython() : torch_(import("torch")), operator_(import("operator")), builtins_(import("builtins")) {}

  // A call_function target: the Python object behind an aten_op or primitive.
  Object target(const Object& t) { return cached(t, [&] { return target_object(t); }); }

  Argument arg(const Argument& a, const std::unordered_map<const Node*, Node*>& nodes, int depth = 0) {
    if (depth > kMaxDepth) throw torch::FormatError("fxcpp::torch: an argument is nested too deeply");
    switch (a.kind()) {
      case ArgKind::NodeRef: return Argument::node(nodes.at(a.as_node()));
      case ArgKind::Tuple:
      case ArgKind::List: {
        std::vector<Argument> items;
        items.reserve(a.items().size());
        for (const Argument& x : a.items()) items.push_back(arg(x, nodes, depth + 1));
        return a.kind() == ArgKind::Tuple ? Argument::tuple(std::move(items)) : Argument::list(std::move(items));
      }
      case ArgKind::Dict: {
        ArgPairs pairs;
        for (const auto& kv : a.pairs()) pairs.emplace_back(arg(kv.first, nodes, depth + 1), arg(kv.second, nodes, depth + 1));
        return Argument::dict(std::move(pairs));
      }
      case ArgKind::Slice:
        return Argument::slice(arg(a.slice_start(), nodes, depth + 1), arg(a.slice_stop(), nodes, depth + 1),
                               arg(a.slice_step(), nodes, depth + 1));
      case ArgKind::Foreign:
        return Argument::foreign(cached(a.as_object(), [&] { return constant_object(a.as_object()); }));
      default: return a;
    }
  }

  // A meta value as Python's load gives it (new reference): TensorMetadata
  // for the reader's tensor_meta dicts, containers of them, else None.
  Ref meta(const Argument& a, int depth = 0) {
    return walk(a, depth, [this](const Argument& x) -> std::optional<Ref> {
      if (is_tensor_meta_dict(x)) return tensor_meta(x);
      if (is_container(x)) return std::nullopt;
      return Ref::borrow(Py_None);
    });
  }

  // A meta value of plain data (None, bool, int, float, str, dtype; tuples,
  // lists and dicts of them) as the Python objects it spells (new reference):
  // meta["input_spec"] (Note [Exported input checks] in src/torch/pt2.cpp).
  Ref value(const Argument& a, int depth = 0) {
    return walk(a, depth, [this](const Argument& x) -> std::optional<Ref> {
      if (is_container(x)) return std::nullopt;
      return plain(x);
    });
  }

 private:
  static bool is_container(const Argument& a) {
    return a.kind() == ArgKind::Tuple || a.kind() == ArgKind::List || a.kind() == ArgKind::Dict;
  }

  // Tuples, lists and dicts rebuilt as Python containers (new reference); every
  // other value (and any value `leaf` claims first) is `leaf`'s.
  template <typename Leaf>
  Ref walk(const Argument& a, int depth, Leaf&& leaf) {
    if (depth > kMaxDepth) throw torch::FormatError("fxcpp::torch: a meta value is nested too deeply");
    if (std::optional<Ref> r = leaf(a)) return std::move(*r);
    if (a.kind() == ArgKind::Dict) {
      Ref d = owned(PyDict_New());
      for (const auto& kv : a.pairs()) {
        Ref k = plain(kv.first), v = walk(kv.second, depth + 1, leaf);
        check(PyDict_SetItem(d.get(), k.get(), v.get()));
      }
      return d;
    }
    Py_ssize_t n = static_cast<Py_ssize_t>(a.items().size());
    Ref seq = owned(a.kind() == ArgKind::Tuple ? PyTuple_New(n) : PyList_New(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = walk(a.items()[static_cast<size_t>(i)], depth + 1, leaf).release();
      if (a.kind() == ArgKind::Tuple) PyTuple_SET_ITEM(seq.get(), i, item);
      else PyList_SET_ITEM(seq.get(), i, item);
    }
    return seq;
  }

  template <typename Make>
  Object cached(const Object& key, Make&& make) {
    auto it = cache_.find(key.get());
    if (it != cache_.end()) return it->second;
    return cache_.emplace(key.get(), make()).first->second;
  }

  Object own(Ref o) { return Object::steal(api().py_interface(), o.release()); }

  Object target_object(const Object& t) {
    if (const torch::AtenOp* op = torch::as_aten_op(t)) {
      // "torch.ops.aten.add.Tensor": attributes of the torch module, which
      // resolve registered operators only (nothing from the file runs).
      const std::string& dotted = op->python;
      Ref cur = Ref::borrow(torch_.get());
      size_t pos = dotted.find('.') + 1;  // past "torch."
      while (pos != 0 && pos <= dotted.size()) {
        size_t end = dotted.find('.', pos);
        std::string part = dotted.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        cur = attr(cur.get(), part.c_str());
        pos = end == std::string::npos ? 0 : end + 1;
      }
      return own(std::move(cur));
    }
    torch::Primitive p;
    if (torch::as_primitive(t, &p)) {
      std::string name = torch::primitive_name(p);
      if (name.rfind("operator.", 0) == 0) return own(attr(operator_.get(), name.c_str() + 9));
      return own(attr(builtins_.get(), name.c_str()));
    }
    throw torch::FormatError("fxcpp::torch: a call_function target that is neither an ATen operator nor a primitive");
  }

  Object constant_object(const Object& o) {
    const torch::TorchConstant* c = torch::as_torch_constant(o);
    if (!c) throw torch::FormatError("fxcpp::torch: an argument of a kind Python's load cannot give back");
    if (c->kind == torch::TorchConstant::Kind::Device) {
      Ref device = attr(torch_.get(), "device");
      Ref s = str_of(c->name);
      return own(owned(PyObject_CallOneArg(device.get(), s.get())));
    }
    return own(attr(torch_.get(), c->name.c_str()));
  }

  Ref plain(const Argument& a) {
    switch (a.kind()) {
      case ArgKind::None: return Ref::borrow(Py_None);
      case ArgKind::Bool: return Ref::borrow(a.as_bool() ? Py_True : Py_False);
      case ArgKind::Int: return owned(PyLong_FromLongLong(a.as_int()));
      case ArgKind::Double: return owned(PyFloat_FromDouble(a.as_double()));
      case ArgKind::String: return str_of(a.as_string());
      case ArgKind::Foreign: {
        Object o = cached(a.as_object(), [&] { return constant_object(a.as_object()); });
        return Ref::borrow(static_cast<PyObject*>(o.get()));
      }
      case ArgKind::Tuple: {
        Py_ssize_t n = static_cast<Py_ssize_t>(a.items().size());
        Ref t = owned(PyTuple_New(n));
        for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(t.get(), i, plain(a.items()[static_cast<size_t>(i)]).release());
        return t;
      }
      default: throw torch::FormatError("fxcpp::torch: malformed tensor_meta");
    }
  }

  Ref tensor_meta(const Argument& a) {
    if (!tensor_meta_class_) tensor_meta_class_ = attr(import("fxcpp.passes.shape_prop").get(), "TensorMetadata");
    const ArgPairs& p = a.pairs();
    Ref shape_items = plain(p[0].second);
    Ref shape = owned(PyObject_CallOneArg(attr(torch_.get(), "Size").get(), shape_items.get()));
    Ref qparams = owned(PyDict_New());
    Ref dtype = plain(p[1].second), rg = plain(p[2].second), stride = plain(p[3].second),
        mf = plain(p[4].second), q = plain(p[5].second);
    return owned(PyObject_CallFunctionObjArgs(tensor_meta_class_.get(), shape.get(), dtype.get(), rg.get(),
                                              stride.get(), mf.get(), q.get(), qparams.get(), nullptr));
  }

  Ref torch_, operator_, builtins_, tensor_meta_class_;
  std::unordered_map<const void*, Object> cache_;  // LibTorch object -> Python object (per call)
};

const char* kind_name(torch::NamedTensor::Kind k) {
  switch (k) {
    case torch::NamedTensor::Kind::Parameter: return "parameter";
    case torch::NamedTensor::Kind::Buffer: return "buffer";
    case torch::NamedTensor::Kind::Constant: break;
  }
  return "constant";
}

// read_graph(data, graph, *, trusted=False, mmap=True, check_calls=False) -> (class_name, [(name, kind,
// tensor, requires_grad)]). Reads a .fxpt or .pt2 file with the C++ reader, which checks it whole, and
// appends its nodes to `graph`, an empty fxcpp Graph (the Python runtime then runs the argument guards
// itself: check_arguments). check_calls: also the C++ runtime's checks of the calls against their
// schemas (torch::check_compiles), which it makes at load.
PyObject* read_graph(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"source", "graph", "trusted", "mmap", "check_calls", nullptr};
  PyObject *obj, *pygraph;
  int trusted = 0, map = 1, check_calls = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$ppp:read_graph", const_cast<char**>(names), &obj, &pygraph,
                                   &trusted, &map, &check_calls))
    throw PythonError();
  Graph* dst = graph_arg(pygraph);
  if (dst->nodes().begin() != dst->nodes().end())
    throw torch::InputError("fxcpp: read_graph appends a file's nodes to an empty Graph; this one has nodes");
  Source source(obj);
  torch::LoadOptions options;
  options.trusted = trusted != 0;
  options.mmap = map != 0;
  torch::FileContents file;
  load_without_gil([&] {
    file = source.is_buffer ? torch::read_buffer(source.view.buf, static_cast<size_t>(source.view.len), options)
                            : torch::read_contents(source.path, options);
    if (check_calls) torch::check_compiles(*file.graph, file.tensors);
  });

  ToPython bridge;
  std::unordered_map<const Node*, Node*> nodes;
  for (Node* n : file.graph->nodes()) {
    Target target = n->op() == Op::CallFunction ? Target(bridge.target(n->target().fn())) : n->target();
    std::vector<Argument> av;
    for (const Argument& a : n->args()) av.push_back(bridge.arg(a, nodes));
    KwArgs kv;
    for (const auto& [k, v] : n->kwargs()) kv.emplace_back(k, bridge.arg(v, nodes));
    std::string name(n->name());
    Node* m = dst->create_node(n->op(), std::move(target), std::move(av), std::move(kv), name);
    if (m->name() != name) m->set_name(name);
    nodes.emplace(n, m);
    if (!n->has_meta()) continue;
    for (const auto& [key, value] : n->meta()) {
      if (key == "tensor_meta") {
        Ref tm = bridge.meta(value);
        Ref meta = owned(api().node_meta(m));
        check(PyDict_SetItemString(meta.get(), "tensor_meta", tm.get()));
      } else if (key == "input_spec") {
        Ref spec = bridge.value(value);
        Ref meta = owned(api().node_meta(m));
        check(PyDict_SetItemString(meta.get(), "input_spec", spec.get()));
      } else if (is_pt2_meta(key) && value.is_string()) {
        Ref text = str_of(value.as_string());
        Ref meta = owned(api().node_meta(m));
        check(PyDict_SetItemString(meta.get(), key.c_str(), text.get()));
      }
    }
  }

  Ref list = owned(PyList_New(static_cast<Py_ssize_t>(file.tensors.size())));
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const torch::NamedTensor& t = file.tensors[i];
    Ref tensor = owned(THPVariable_Wrap(t.tensor));
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i),
                    check(Py_BuildValue("(ssOO)", t.name.c_str(), kind_name(t.kind), tensor.get(),
                                        t.requires_grad.value_or(false) ? Py_True : Py_False)));
  }
  return Py_BuildValue("(sO)", file.class_name.c_str(), list.get());
}

// ---- writing: Python objects -> LibTorch objects -----------------------------------

[[noreturn]] void refuse(const Node* n, const std::string& what) {
  throw torch::FormatError("fxcpp.aten.save: cannot save node '" + std::string(n->name()) + "': " + what);
}

std::string repr_of(PyObject* o) {
  Ref r = Ref::steal(PyObject_Repr(o));
  if (!r) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return std::string(utf8(r.get(), "repr"));
}

class FromPython {
 public:
  FromPython() : torch_(import("torch")) {
    Ref ops = attr(torch_.get(), "_ops");
    overload_type_ = attr(ops.get(), "OpOverload");
    dtype_type_ = attr(torch_.get(), "dtype");
    device_type_ = attr(torch_.get(), "device");
    layout_type_ = attr(torch_.get(), "layout");
    memory_format_type_ = attr(torch_.get(), "memory_format");
    Ref op = import("operator"), builtins = import("builtins");
    for (int i = 0; i <= static_cast<int>(torch::Primitive::GetAttr); ++i) {
      auto p = static_cast<torch::Primitive>(i);
      std::string name = torch::primitive_name(p);
      Ref fn = name.rfind("operator.", 0) == 0 ? attr(op.get(), name.c_str() + 9) : attr(builtins.get(), name.c_str());
      primitives_.emplace(fn.get(), torch::primitive(name));
      keep_.push_back(std::move(fn));
    }
  }

  Object target(const Node* n, PyObject* fn) {
    if (is_instance(fn, overload_type_)) {
      Ref schema = attr(fn, "_schema");
      std::string qualified(utf8(attr(schema.get(), "name").get(), "schema name"));
      std::string overload(utf8(attr(schema.get(), "overload_name").get(), "overload name"));
      if (!overload.empty()) qualified += "." + overload;
      return torch::aten_op(qualified);
    }
    auto it = primitives_.find(fn);
    if (it != primitives_.end()) return it->second;
    Ref qual = Ref::steal(PyObject_GetAttrString(fn, "__qualname__"));
    if (!qual) PyErr_Clear();
    refuse(n, "its target " + repr_of(qual && PyUnicode_Check(qual.get()) ? qual.get() : fn) +
                  " is neither an ATen operator overload nor a runtime primitive. Lower the model first "
                  "(fxcpp.aten.lower(model, *inputs)).");
  }

  Argument arg(const Node* n, const Argument& a, const std::unordered_map<const Node*, Node*>& nodes, int depth = 0) {
    if (depth > kMaxDepth) refuse(n, "its arguments are nested more than " + std::to_string(kMaxDepth) + " deep");
    switch (a.kind()) {
      case ArgKind::NodeRef: return Argument::node(nodes.at(a.as_node()));
      case ArgKind::Tuple:
      case ArgKind::List: {
        if (a.kind() == ArgKind::Tuple && a.tuple_type())
          refuse(n, "a named tuple argument has no encoding in the file format");
        std::vector<Argument> items;
        items.reserve(a.items().size());
        for (const Argument& x : a.items()) items.push_back(arg(n, x, nodes, depth + 1));
        return a.kind() == ArgKind::Tuple ? Argument::tuple(std::move(items)) : Argument::list(std::move(items));
      }
      case ArgKind::Dict: {
        ArgPairs pairs;
        for (const auto& kv : a.pairs())
          pairs.emplace_back(arg(n, kv.first, nodes, depth + 1), arg(n, kv.second, nodes, depth + 1));
        return Argument::dict(std::move(pairs));
      }
      case ArgKind::Slice:
        return Argument::slice(arg(n, a.slice_start(), nodes, depth + 1), arg(n, a.slice_stop(), nodes, depth + 1),
                               arg(n, a.slice_step(), nodes, depth + 1));
      case ArgKind::Foreign: return Argument::foreign(constant(n, a.as_object()));
      default: return a;
    }
  }

  // Python's meta["tensor_meta"] as the writer takes it (the reader's dict
  // form), or None for what the format does not record.
  Argument meta(const Node* n, PyObject* v, int depth = 0) {
    if (depth > kMaxDepth) return Argument::none();
    if (PyTuple_Check(v) && std::string(Py_TYPE(v)->tp_name).find("TensorMetadata") != std::string::npos)
      return tensor_meta(n, v);
    if (PyTuple_Check(v) || PyList_Check(v)) {
      Ref seq = owned(PySequence_Fast(v, "meta"));
      std::vector<Argument> items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
        items.push_back(meta(n, PySequence_Fast_GET_ITEM(seq.get(), i), depth + 1));
      return PyTuple_Check(v) ? Argument::tuple(std::move(items)) : Argument::list(std::move(items));
    }
    if (PyDict_Check(v)) {
      ArgPairs pairs;
      PyObject *k, *x;
      Py_ssize_t pos = 0;
      while (PyDict_Next(v, &pos, &k, &x)) {
        Argument key = key_of(k);
        if (key.is_none() && k != Py_None) return Argument::none();
        pairs.emplace_back(std::move(key), meta(n, x, depth + 1));
      }
      return Argument::dict(std::move(pairs));
    }
    return Argument::none();
  }

 private:
  bool is_instance(PyObject* o, const Ref& type) { return check(PyObject_IsInstance(o, type.get())) == 1; }

  Object constant(const Node* n, const Object& o) {
    auto* v = static_cast<PyObject*>(o.get());
    if (o.iface() == api().py_interface()) {
      using Kind = torch::TorchConstant::Kind;
      if (is_instance(v, dtype_type_)) return torch_constant(n, Kind::Dtype, v, true);
      if (is_instance(v, layout_type_)) return torch_constant(n, Kind::Layout, v, true);
      if (is_instance(v, memory_format_type_)) return torch_constant(n, Kind::MemoryFormat, v, true);
      if (is_instance(v, device_type_)) return torch_constant(n, Kind::Device, v, false);
      if (PyLong_Check(v)) refuse(n, "the int " + repr_of(v) + " does not fit in 64 bits");
      refuse(n, "the argument " + repr_of(v) + " (" + Py_TYPE(v)->tp_name +
                    ") has no encoding in the file format (tensors must be get_attr nodes)");
    }
    refuse(n, "an argument from outside Python (" + o.repr() + ") has no encoding in the file format");
  }

  // torch.float32 -> torch_constant(Dtype, "float32"); torch.device('cpu') -> (Device, "cpu").
  Object torch_constant(const Node* n, torch::TorchConstant::Kind kind, PyObject* v, bool strip_torch) {
    std::string s(utf8(owned(PyObject_Str(v)).get(), "str()"));
    if (strip_torch && s.rfind("torch.", 0) == 0) s = s.substr(6);
    try {
      return torch::torch_constant(kind, s);
    } catch (const torch::FormatError&) {
      refuse(n, "the argument " + repr_of(v) + " (" + Py_TYPE(v)->tp_name + ") has no encoding in the file format");
    }
  }

  Argument key_of(PyObject* k) {
    if (PyUnicode_Check(k)) return Argument::string(std::string(utf8(k, "meta key")));
    if (PyLong_Check(k)) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(k, &overflow);
      if (!overflow && !(x == -1 && PyErr_Occurred())) return Argument::integer(x);
      PyErr_Clear();
    }
    return Argument::none();
  }

  Argument tensor_meta(const Node* n, PyObject* tm) {
    using Kind = torch::TorchConstant::Kind;
    Ref dtype = attr(tm, "dtype");
    if (!is_instance(dtype.get(), dtype_type_)) return Argument::none();
    Object dt;
    try {
      std::string s(utf8(owned(PyObject_Str(dtype.get())).get(), "str()"));
      dt = torch::torch_constant(Kind::Dtype, s.rfind("torch.", 0) == 0 ? s.substr(6) : s);
    } catch (const torch::FormatError&) {
      return Argument::none();  // a dtype the format cannot spell: no tensor_meta, as before
    }
    auto ints = [&](const char* field) {
      Ref seq = owned(PySequence_Fast(attr(tm, field).get(), "tensor_meta field"));
      std::vector<Argument> items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq.get(), i));
        if (x == -1 && PyErr_Occurred()) throw PythonError();
        items.push_back(Argument::integer(x));
      }
      return Argument::tuple(std::move(items));
    };
    auto flag = [&](const char* field) { return Argument::boolean(check(PyObject_IsTrue(attr(tm, field).get())) == 1); };
    ArgPairs p;
    p.emplace_back(Argument::string("shape"), ints("shape"));
    p.emplace_back(Argument::string("dtype"), Argument::foreign(std::move(dt)));
    p.emplace_back(Argument::string("requires_grad"), flag("requires_grad"));
    p.emplace_back(Argument::string("stride"), ints("stride"));
    Ref mf = attr(tm, "memory_format");
    Argument mfa;
    if (mf.get() != Py_None) {
      if (!is_instance(mf.get(), memory_format_type_)) return Argument::none();
      std::string s(utf8(owned(PyObject_Str(mf.get())).get(), "str()"));
      try {
        mfa = Argument::foreign(torch::torch_constant(Kind::MemoryFormat, s.rfind("torch.", 0) == 0 ? s.substr(6) : s));
      } catch (const torch::FormatError&) {
        return Argument::none();
      }
    }
    p.emplace_back(Argument::string("memory_format"), std::move(mfa));
    p.emplace_back(Argument::string("is_quantized"), flag("is_quantized"));
    (void)n;
    return Argument::dict(std::move(p));
  }

  Ref torch_, overload_type_, dtype_type_, device_type_, layout_type_, memory_format_type_;
  std::unordered_map<PyObject*, Object> primitives_;
  std::vector<Ref> keep_;
};

torch::NamedTensor::Kind kind_of(std::string_view k) {
  if (k == "parameter") return torch::NamedTensor::Kind::Parameter;
  if (k == "buffer") return torch::NamedTensor::Kind::Buffer;
  if (k == "constant") return torch::NamedTensor::Kind::Constant;
  throw torch::InputError("fxcpp: a tensor's kind must be 'parameter', 'buffer' or 'constant', not '" +
                          std::string(k) + "'");
}

// write_graph(graph, tensors, *, class_name='GraphModule', format='fxpt') -> bytes
// The .fxpt file (format='pt2': the .pt2 archive) of fxcpp Graph `graph`
// (lowered: placeholder, get_attr, call_function on ATen overloads and
// primitives, output) with `tensors`, a list of (name, kind, tensor,
// requires_grad) for its get_attr targets, encoded by the C++ writer.
PyObject* write_graph(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"graph", "tensors", "class_name", "format", nullptr};
  PyObject *pygraph, *pytensors;
  const char* class_name = "GraphModule";
  const char* format = "fxpt";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|$ss:write_graph", const_cast<char**>(names), &pygraph,
                                   &PyList_Type, &pytensors, &class_name, &format))
    throw PythonError();
  std::string fmt = format;
  if (fmt != "fxpt" && fmt != "pt2")
    throw torch::InputError("fxcpp: write_graph's format is 'fxpt' or 'pt2', not '" + fmt + "'");
  Graph* src = graph_arg(pygraph);

  std::vector<torch::NamedTensor> tensors;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pytensors); ++i) {
    PyObject *name, *kind, *tensor;
    int requires_grad;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(pytensors, i), "UUOp:write_graph tensor", &name, &kind, &tensor,
                          &requires_grad))
      throw PythonError();
    if (!THPVariable_Check(tensor)) throw torch::InputError("fxcpp: write_graph's tensors must be tensors");
    torch::NamedTensor t;
    t.name = utf8_string(name, "tensor name");
    t.kind = kind_of(utf8(kind, "tensor kind"));
    t.tensor = THPVariable_Unpack(tensor);
    t.requires_grad = requires_grad != 0;
    tensors.push_back(std::move(t));
  }

  FromPython bridge;
  Ref key = str_of("tensor_meta");
  Graph dst;
  std::unordered_map<const Node*, Node*> nodes;
  for (Node* n : src->nodes()) {
    Target target = n->target();
    switch (n->op()) {
      case Op::CallFunction: {
        const Object& fn = n->target().fn();
        if (fn.iface() != api().py_interface()) refuse(n, "its target is not a Python object");
        target = Target(bridge.target(n, static_cast<PyObject*>(fn.get())));
        break;
      }
      case Op::Placeholder:
      case Op::GetAttr:
      case Op::Output: break;
      default:
        refuse(n, std::string("it is a ") + op_name(n->op()) + " node; lower the model first "
                                                                 "(fxcpp.aten.lower(model, *inputs))");
    }
    std::vector<Argument> av;
    for (const Argument& a : n->args()) av.push_back(bridge.arg(n, a, nodes));
    KwArgs kv;
    for (const auto& [k, v] : n->kwargs()) kv.emplace_back(k, bridge.arg(n, v, nodes));
    std::string name(n->name());
    Node* m = dst.create_node(n->op(), std::move(target), std::move(av), std::move(kv), name);
    if (m->name() != name) m->set_name(name);
    nodes.emplace(n, m);
    if (PyObject* meta = api().node_meta_if_any(n)) {
      PyObject* tm = PyDict_GetItemWithError(meta, key.get());
      if (!tm && PyErr_Occurred()) throw PythonError();
      if (tm) {
        Argument a = bridge.meta(n, tm);
        if (!a.is_none()) m->meta().emplace_back("tensor_meta", std::move(a));
      }
      for (const char* k : {"pt2_value", "pt2_range_constraints"}) {
        PyObject* text = PyDict_GetItemString(meta, k);  // borrowed; str keys cannot fail to hash
        if (text && PyUnicode_Check(text)) m->meta().emplace_back(k, Argument::string(utf8_string(text, k)));
      }
    }
  }

  torch::SaveOptions options;
  options.class_name = class_name;
  options.format = fmt == "pt2" ? torch::SaveFormat::Pt2 : torch::SaveFormat::Fxpt;
  std::string bytes;
  // Encoding and copying the tensors touch no Python object.
  PyThreadState* ts = PyEval_SaveThread();
  try {
    bytes = torch::save_to_buffer(dst, tensors, options);
  } catch (...) {
    PyEval_RestoreThread(ts);
    throw;
  }
  PyEval_RestoreThread(ts);
  return PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
}

/// write_file(path, data): torch::write_bytes (Note [Atomic saving]); `path` is
/// str, bytes or os.PathLike, `data` any buffer. The GIL is released while writing.
PyObject* write_file(PyObject*, PyObject* args, PyObject*) {
  PyObject* raw_path = nullptr;
  Py_buffer data;
  if (!PyArg_ParseTuple(args, "O&y*:write_file", PyUnicode_FSConverter, &raw_path, &data)) return nullptr;
  Ref path = Ref::steal(raw_path);
  std::string target(PyBytes_AS_STRING(path.get()), static_cast<size_t>(PyBytes_GET_SIZE(path.get())));
  PyThreadState* ts = PyEval_SaveThread();
  try {
    torch::write_bytes(target, data.buf, static_cast<size_t>(data.len));
  } catch (...) {
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&data);
    throw;
  }
  PyEval_RestoreThread(ts);
  PyBuffer_Release(&data);
  Py_RETURN_NONE;
}

PyMethodDef file_methods[] = {
    def<read_graph>("read_graph", METH_VARARGS | METH_KEYWORDS,
                    "read_graph(source, graph, *, trusted=False, mmap=True, check_calls=False) -> (class_name, [(name, kind, tensor, "
                    "requires_grad)]): reads a file (a path, mapped unless mmap=False, or its bytes) with the C++ reader and appends "
                    "its nodes to `graph`, an empty fxcpp Graph (Note [Graph handover]); check_calls: also checks every call "
                    "against its schema as the C++ runtime does at load."),
    def<write_graph>("write_graph", METH_VARARGS | METH_KEYWORDS,
                     "write_graph(graph, tensors, *, class_name='GraphModule', format='fxpt') -> bytes: the .fxpt "
                     "file (format='pt2': the .pt2 archive) of a lowered fxcpp Graph and its get_attr tensors [(name, kind, tensor, requires_grad)], "
                     "encoded by the C++ writer."),
    def<write_file>("write_file", METH_VARARGS,
                    "write_file(path, data): writes the bytes-like `data` to `path` atomically (the target keeps its "
                    "old content or gets the complete new one; a device or fifo is written directly); OSError on failure."),
    kEndOfMethods};

}  // namespace

int init_files(PyObject* m) {
  if (PyModule_AddIntConstant(m, "FORMAT_VERSION", torch::kFormatVersion) < 0) return -1;
  return add_functions(m, file_methods);
}

}  // namespace fxcpp::py
