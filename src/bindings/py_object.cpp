// ObjectInterface for Python objects, and Python <-> Argument conversion.
#include <cstring>
#include <iterator>
#include <unordered_map>
#ifdef __linux__
#include <pthread.h>
#endif

#include "bindings.h"
#include "fxcpp/passes/lint.h"

namespace fxcpp::py {

PyObject* g_immutable_list = nullptr;
PyObject* g_immutable_dict = nullptr;
const std::function<std::string(const Node*)>* g_codegen_node_repr = nullptr;

namespace {
Helpers g_helpers;
bool g_helpers_set = false;

/// The names graph.py registers each Helpers field under.
constexpr struct {
  const char* name;
  PyObject* Helpers::*field;
} kHelperNames[] = {
    {"_type_repr", &Helpers::type_repr},
    {"_target_info", &Helpers::target_info},
    {"_bad_target", &Helpers::bad_target},
    {"_module_is_impure", &Helpers::module_is_impure},
    {"_origin_type", &Helpers::origin_type},
    {"_snake_case", &Helpers::snake_case},
    {"_assertion_message", &Helpers::assertion_message},
    {"_copy", &Helpers::copy},
    {"_NodeRef", &Helpers::node_ref},
    {"CodeGen", &Helpers::codegen},
    {"wrap", &Helpers::wrap},
    {"_code_repr", &Helpers::code_repr},
    {"_meta_annotation", &Helpers::meta_annotation},
    {"_comment_parts", &Helpers::comment_parts},
    {"_keyword_params", &Helpers::keyword_params},
    {"_union_origin", &Helpers::union_origin},
    {"_create_node_hooks", &Helpers::create_node_hooks},
    {"_erase_node_2x", &Helpers::erase_node_2x},
    {"_rename_2x", &Helpers::rename_2x},
};
}  // namespace

const Helpers& helpers() {
  if (!g_helpers_set) {
    PyErr_SetString(PyExc_RuntimeError, "fxcpp._C: the package's helpers are not registered (import fxcpp first)");
    throw PythonError();
  }
  return g_helpers;
}

void set_helpers(PyObject* dict) {
  Helpers h;
  for (const auto& e : kHelperNames) {
    PyObject* v = PyDict_GetItemString(dict, e.name);  // borrowed
    if (!v) {
      PyErr_Format(PyExc_RuntimeError, "fxcpp._C._set_classes: the helper '%s' is missing", e.name);
      throw PythonError();
    }
    h.*e.field = v;
  }
  if (PyDict_Size(dict) != static_cast<Py_ssize_t>(std::size(kHelperNames))) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
      bool known = false;
      for (const auto& e : kHelperNames)
        known |= PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, e.name) == 0;
      if (!known) {
        PyErr_Format(PyExc_RuntimeError, "fxcpp._C._set_classes: unknown helper %R", key);
        throw PythonError();
      }
    }
  }
  for (const auto& e : kHelperNames) {
    Py_INCREF(h.*e.field);
    if (g_helpers_set) Py_DECREF(g_helpers.*e.field);
  }
  g_helpers = h;
  g_helpers_set = true;
}

namespace {

// Note [C stack guard]
// ~~~~~~~~~~~~~~~~~~~~
// The core prints argument trees recursively and calls back into Python for
// foreign objects; an object whose str()/repr() prints a graph (a Graph
// inside its own arguments) re-enters the printer. CPython counts each such
// call against the recursion limit but not the C++ frames of the argument
// tree between them, so a deep tree inside a self-printing graph overflowed
// the C stack. The callbacks check the stack itself and raise RecursionError
// (torch.fx raises it for the same graphs) with 256 KiB to spare.
void check_c_stack() {
#ifdef __linux__
  static thread_local const char* low = nullptr;
  if (!low) {
    pthread_attr_t attr;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      if (pthread_attr_getstack(&attr, &addr, &size) != 0) addr = nullptr;
      pthread_attr_destroy(&attr);
    }
    low = addr ? static_cast<const char*>(addr) : reinterpret_cast<const char*>(1);  // unknown: never trips
  }
  char here;
  if (&here - low < 256 * 1024) {
    PyErr_SetString(PyExc_RecursionError, "maximum recursion depth exceeded while printing an argument");
    throw PythonError();
  }
#endif
}

// Per-callable facts computed once by the Python helper `_target_info`.
struct TargetInfo {
  std::string name, qualified_name, pretty, operator_name, qualified_reference;
  bool impure = false;
  bool has_name = true;
};

class PyInterface final : public ObjectInterface {
 public:
  void retain(void* p) const override { Py_INCREF(static_cast<PyObject*>(p)); }
  void release(void* p) const override { Py_DECREF(static_cast<PyObject*>(p)); }
  std::string repr(void* p) const override {
    check_c_stack();
    return display_text_owned(PyObject_Repr(static_cast<PyObject*>(p)));
  }
  std::string str(void* p) const override {
    check_c_stack();
    return display_text_owned(PyObject_Str(static_cast<PyObject*>(p)));
  }
  bool equals(void* a, void* b) const override {
    int r = PyObject_RichCompareBool(static_cast<PyObject*>(a), static_cast<PyObject*>(b), Py_EQ);
    if (r < 0) {
      PyErr_Clear();
      return false;
    }
    return r == 1;
  }
  std::string name(void* p) const override {
    const TargetInfo& ti = info(p);
    if (!ti.has_name) {
      // Re-raise Python's own AttributeError.
      Ref n = owned(PyObject_GetAttrString(static_cast<PyObject*>(p), "__name__"));
      return display_text_owned(PyObject_Str(n.get()));
    }
    return ti.name;
  }
  std::string qualified_name(void* p) const override { return info(p).qualified_name; }
  std::string pretty_target(void* p) const override { return info(p).pretty; }
  std::string operator_name(void* p) const override { return info(p).operator_name; }
  std::string qualified_reference(void* p) const override { return info(p).qualified_reference; }
  bool is_impure_target(void* p) const override { return info(p).impure; }
  bool is_builtin(void* p, const std::string& name) const override {
    PyObject* b = PyEval_GetBuiltins();  // borrowed
    if (!b) return false;
    Ref key = owned(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
    PyObject* v = PyDict_GetItemWithError(b, key.get());  // borrowed
    if (!v && PyErr_Occurred()) throw PythonError();
    return v == static_cast<PyObject*>(p);
  }
  bool truthy(void* p) const override { return check(PyObject_IsTrue(static_cast<PyObject*>(p))) != 0; }
  std::string type_repr(void* p) const override {
    PyObject* h = helpers().type_repr;
    return display_text_owned(PyObject_CallOneArg(h, static_cast<PyObject*>(p)));
  }
  std::vector<std::string> tuple_fields(void* p) const override {
    std::vector<std::string> out;
    Ref f = Ref::steal(PyObject_GetAttrString(static_cast<PyObject*>(p), "_fields"));
    Ref seq = f ? Ref::steal(PySequence_Fast(f.get(), "_fields")) : Ref();
    if (!seq) {
      PyErr_Clear();
      return out;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
      out.push_back(display_text_owned(PyObject_Str(PySequence_Fast_GET_ITEM(seq.get(), i))));
    return out;
  }
  std::string annotation(void* p, const AddGlobalFn& add_global) const override {
    // torch.fx CodeGen type_repr: generics register their origin and recurse.
    PyObject* o = static_cast<PyObject*>(p);
    if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 0) return "()";
    if (PyObject_TypeCheck(o, NodeBaseType) || PyObject_TypeCheck(o, GraphBaseType)) {
      // torch.fx names its own (torch) objects by _get_qualified_name, which reads __name__.
      PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '__name__'", Py_TYPE(o)->tp_name);
      throw PythonError();
    }
    Ref origin = Ref::steal(PyObject_GetAttrString(o, "__origin__"));
    if (!origin && std::strcmp(Py_TYPE(o)->tp_name, "types.UnionType") == 0) {
      // X | Y has no __origin__; torch.fx 2.x writes it as typing_Union[X,Y] (the helper says
      // whether, and gives typing.Union), 1.13 as one global.
      PyErr_Clear();
      origin = owned(PyObject_CallOneArg(helpers().union_origin, o));
      if (origin.get() == Py_None) origin = Ref();
    }
    if (!origin) {
      PyErr_Clear();
      std::string hint = type_repr(p);
      // torch.fx's add_global keys its namespace by the object: an unhashable one raises TypeError,
      // unless it is a torch object, named by its qualified reference first (e.g. tensor_type.Dyn).
      if (qualified_reference(p).empty() && PyObject_Hash(o) == -1) throw PythonError();
      return add_global(hint, Object::borrow(this, p));
    }
    PyObject* mapper = helpers().origin_type;
    Ref ot = owned(PyObject_CallFunctionObjArgs(mapper, origin.get(), o, nullptr));
    Object otype = Object::borrow(this, ot.get());
    std::string origin_name = add_global(type_repr(ot.get()), otype);
    Ref args = Ref::steal(PyObject_GetAttrString(o, "__args__"));
    if (!args) {
      PyErr_Clear();
      return origin_name;
    }
    Ref seq = owned(PySequence_Fast(args.get(), "__args__"));
    std::vector<std::string> parts;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
      parts.push_back(annotation(PySequence_Fast_GET_ITEM(seq.get(), i), add_global));
    if (parts.empty()) return origin_name;
    std::string r = origin_name + "[";
    for (size_t i = 0; i < parts.size(); ++i) r += (i ? "," : "") + parts[i];
    return r + "]";
  }

  std::string code_repr(void* p, const AddGlobalFn& add_global,
                        const std::function<std::string(std::string)>& paint) const override {
    // Note [Constants in generated code]: the Python helper says which form; globals are
    // registered here, in the generator's namespace.
    Ref r = owned(PyObject_CallOneArg(helpers().code_repr, static_cast<PyObject*>(p)));
    if (!PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) < 2) {
      PyErr_SetString(PyExc_RuntimeError, "_code_repr must return a tuple (kind, ...)");
      throw PythonError();
    }
    std::string kind = utf8_string(PyTuple_GET_ITEM(r.get(), 0), "_code_repr kind");
    auto text = [&](Py_ssize_t i) { return display_text_owned(PyObject_Str(PyTuple_GET_ITEM(r.get(), i))); };
    if (kind == "text") return text(1);
    if (kind == "global" && PyTuple_GET_SIZE(r.get()) == 4)
      return add_global(text(1), Object::borrow(this, PyTuple_GET_ITEM(r.get(), 2))) + text(3);
    if (kind == "complex" && PyTuple_GET_SIZE(r.get()) == 3) return "complex(" + paint(text(1)) + ", " + paint(text(2)) + ")";
    return paint(text(1));
  }

  const TargetInfo& info(void* p) const {
    auto it = cache_.find(p);
    if (it != cache_.end()) return it->second.second;
    PyObject* h = helpers().target_info;
    Ref t = owned(PyObject_CallOneArg(h, static_cast<PyObject*>(p)));
    TargetInfo ti;
    if (!PyTuple_Check(t.get()) || PyTuple_GET_SIZE(t.get()) != 6) {
      PyErr_SetString(PyExc_RuntimeError, "_target_info must return a 6-tuple");
      throw PythonError();
    }
    // Display text: these names are printed or sanitized into identifiers,
    // never stored as node names or targets.
    auto s = [&](int i) { return display_text_owned(PyObject_Str(PyTuple_GET_ITEM(t.get(), i))); };
    ti.has_name = PyTuple_GET_ITEM(t.get(), 0) != Py_None;
    ti.name = ti.has_name ? s(0) : std::string();
    ti.qualified_name = s(1);
    ti.pretty = s(2);
    ti.operator_name = s(3);
    ti.qualified_reference = s(4);
    ti.impure = check(PyObject_IsTrue(PyTuple_GET_ITEM(t.get(), 5))) == 1;
    if (cache_.size() > 8192) clear();
    Py_INCREF(static_cast<PyObject*>(p));  // keep the key alive while cached
    return cache_.emplace(p, std::make_pair(static_cast<PyObject*>(p), std::move(ti))).first->second.second;
  }
  void clear() const {
    auto old = std::move(cache_);
    cache_.clear();
    for (auto& kv : old) Py_DECREF(kv.second.first);
  }

 private:
  mutable std::unordered_map<void*, std::pair<PyObject*, TargetInfo>> cache_;
};

PyInterface g_iface;

}  // namespace

const ObjectInterface* py_iface() { return &g_iface; }
void clear_object_caches() { g_iface.clear(); }

// ------------------------------------------------------------ conversions

// RecursionGuard (toolkit.h) bounds the nesting of converted containers by
// Python's recursion limit (torch.fx's map_aggregate raises RecursionError on
// self-containing lists; so do we, instead of overflowing the C stack). The
// core's recursive walks over argument trees are bounded by the same depth.

Argument to_arg(PyObject* o, bool* canonical) {
  if (o == Py_None) return Argument();
  PyTypeObject* t = Py_TYPE(o);
  if (t == &PyBool_Type) return Argument::boolean(o == Py_True);
  if (t == &PyLong_Type) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0 && !(v == -1 && PyErr_Occurred())) return Argument::integer(v);
    PyErr_Clear();
    return Argument::foreign(borrow_obj(o));
  }
  if (t == &PyFloat_Type) return Argument::real(PyFloat_AS_DOUBLE(o));
  if (t == &PyUnicode_Type) {
    std::string_view text;
    // Unencodable (lone surrogates): keep the object itself, as torch.fx does.
    if (!utf8_if_encodable(o, &text)) return Argument::foreign(borrow_obj(o));
    return Argument::string(std::string(text));
  }
  if (is_node(o)) {
    Node* n = node_of(o);
    if (!n) throw PythonError();
    return Argument::node(n);
  }
  if (PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o) || PySlice_Check(o)) return to_arg_container(o, canonical);
  return Argument::foreign(borrow_obj(o));
}

Argument to_arg_container(PyObject* o, bool* canonical) {
  RecursionGuard guard(" while converting a graph argument");
  PyTypeObject* t = Py_TYPE(o);
  if (PyTuple_Check(o)) {
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    std::vector<Argument> items;
    items.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(to_arg(PyTuple_GET_ITEM(o, i), canonical));
    if (t != &PyTuple_Type) {
      if (canonical) *canonical = false;
      if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(t), "_fields"))
        return Argument::tuple(std::move(items), borrow_obj(reinterpret_cast<PyObject*>(t)));
    }
    return Argument::tuple(std::move(items));
  }
  if (PyList_Check(o)) {
    if (canonical) *canonical = false;
    Py_ssize_t n = PyList_GET_SIZE(o);
    std::vector<Argument> items;
    items.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); ++i) items.push_back(to_arg(PyList_GET_ITEM(o, i), nullptr));
    return Argument::list(std::move(items));
  }
  if (PyDict_Check(o)) {
    if (canonical) *canonical = false;
    ArgPairs pairs;
    pairs.reserve(static_cast<size_t>(PyDict_GET_SIZE(o)));
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v)) {
      // Keys are kept as plain values (never mapped), like torch.fx.
      Argument key = is_node(k) ? Argument::foreign(borrow_obj(k)) : to_arg(k, nullptr);
      pairs.emplace_back(std::move(key), to_arg(v, nullptr));
    }
    return Argument::dict(std::move(pairs));
  }
  if (PySlice_Check(o)) {
    if (canonical) *canonical = false;
    auto* s = reinterpret_cast<PySliceObject*>(o);
    Argument start = to_arg(s->start, nullptr);  // sequenced: errors surface in torch.fx's order
    Argument stop = to_arg(s->stop, nullptr);
    return Argument::slice(std::move(start), std::move(stop), to_arg(s->step, nullptr));
  }
  return Argument::foreign(borrow_obj(o));
}

std::vector<Argument> tuple_to_args(PyObject* tuple, bool* canonical) {
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  std::vector<Argument> out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(to_arg(PyTuple_GET_ITEM(tuple, i), canonical));
  return out;
}

KwArgs dict_to_kwargs(PyObject* dict) {
  KwArgs out;
  out.reserve(static_cast<size_t>(PyDict_GET_SIZE(dict)));
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(dict, &pos, &k, &v)) {
    out.emplace_back(utf8(k, "kwargs key"), to_arg(v, nullptr));
  }
  return out;
}

namespace {
PyObject* seq_to_tuple(ArgSpan items) {
  Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
  for (size_t i = 0; i < items.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), from_arg(items[i]));
  return t.release();
}

Ref make_immutable_dict() {
  if (g_immutable_dict) return owned(PyObject_CallNoArgs(g_immutable_dict));
  return owned(PyDict_New());
}
}  // namespace

PyObject* from_arg(const Argument& a) {
  std::optional<RecursionGuard> guard;
  if (a.kind() >= ArgKind::Tuple) guard.emplace(" while converting a graph argument");
  switch (a.kind()) {
    case ArgKind::None: Py_RETURN_NONE;
    case ArgKind::Bool: return PyBool_FromLong(a.as_bool());
    case ArgKind::Int: return check(PyLong_FromLongLong(a.as_int()));
    case ArgKind::Double: return check(PyFloat_FromDouble(a.as_double()));
    case ArgKind::String: {
      const std::string& s = a.as_string();
      return check(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
    }
    case ArgKind::NodeRef: return wrap_node(a.as_node());
    case ArgKind::Tuple: {
      Ref t = Ref::steal(seq_to_tuple(a.items()));
      if (a.tuple_type()) return check(PyObject_CallObject(obj_ptr(a.tuple_type()), t.get()));
      return t.release();
    }
    case ArgKind::List: {
      Ref l = owned(PyList_New(static_cast<Py_ssize_t>(a.items().size())));
      for (size_t i = 0; i < a.items().size(); ++i)
        PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), from_arg(a.items()[i]));
      if (!g_immutable_list) return l.release();
      return check(PyObject_CallOneArg(g_immutable_list, l.get()));
    }
    case ArgKind::Dict: {
      Ref d = make_immutable_dict();
      for (auto& kv : a.pairs()) {
        Ref k = Ref::steal(from_arg(kv.first));
        Ref v = Ref::steal(from_arg(kv.second));
        check(PyDict_SetItem(d.get(), k.get(), v.get()));
      }
      return d.release();
    }
    case ArgKind::Slice: {
      Ref s = Ref::steal(from_arg(a.slice_start()));
      Ref e = Ref::steal(from_arg(a.slice_stop()));
      Ref st = Ref::steal(from_arg(a.slice_step()));
      return check(PySlice_New(s.get(), e.get(), st.get()));
    }
    case ArgKind::Foreign: {
      PyObject* o = obj_ptr(a.as_object());
      Py_INCREF(o);
      return o;
    }
  }
  Py_RETURN_NONE;
}

PyObject* args_to_tuple(ArgSpan args) { return seq_to_tuple(args); }

PyObject* kwargs_to_dict(const KwArgs& kwargs) {
  Ref d = make_immutable_dict();
  for (auto& kv : kwargs) {
    Ref v = Ref::steal(from_arg(kv.second));
    check(PyDict_SetItemString(d.get(), kv.first.c_str(), v.get()));
  }
  return d.release();
}

}  // namespace fxcpp::py
