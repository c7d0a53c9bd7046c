// fxcpp._C module definition.
#include "bindings.h"

namespace fxcpp::py {
namespace {

PyObject* set_classes(PyObject*, PyObject* args) {
  PyObject *node_cls, *ilist, *idict, *helpers;
  if (!PyArg_ParseTuple(args, "OOOO!:_set_classes", &node_cls, &ilist, &idict, &PyDict_Type, &helpers)) return nullptr;
  if (!PyType_Check(node_cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(node_cls), NodeBaseType)) {
    PyErr_SetString(PyExc_TypeError, "node class must subclass NodeBase");
    return nullptr;
  }
  Py_INCREF(node_cls);
  Py_XSETREF(g_node_class, node_cls);
  Py_INCREF(ilist);
  Py_XSETREF(g_immutable_list, ilist);
  Py_INCREF(idict);
  Py_XSETREF(g_immutable_dict, idict);
  Py_INCREF(helpers);
  Py_XSETREF(g_helpers, helpers);
  Py_RETURN_NONE;
}

// _set_name_rules(builtin_names: iterable[str], custom_builtins: list[(name, obj)])
PyObject* set_name_rules(PyObject*, PyObject* args) {
  PyObject *names, *custom;
  if (!PyArg_ParseTuple(args, "OO:_set_name_rules", &names, &custom)) return nullptr;
  FXCPP_TRY
  NameRules& r = name_rules();
  PyObject* it = PyObject_GetIter(names);
  if (!it) return nullptr;
  std::unordered_set<std::string> b;
  while (PyObject* s = PyIter_Next(it)) {
    const char* c = PyUnicode_AsUTF8(s);
    if (c) b.insert(c);
    Py_DECREF(s);
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) return nullptr;
  r.builtins = std::move(b);
  std::vector<std::pair<std::string, Object>> cb;
  PyObject* seq = PySequence_Fast(custom, "custom builtins must be a sequence");
  if (!seq) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    PyObject *k, *v;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "OO", &k, &v)) {
      Py_DECREF(seq);
      return nullptr;
    }
    cb.emplace_back(PyUnicode_AsUTF8(k), borrow_obj(v));
  }
  Py_DECREF(seq);
  r.custom_builtins = std::move(cb);
  r.refresh();
  Py_RETURN_NONE;
  FXCPP_CATCH(nullptr)
}

// repr() of a non-ASCII str for the core's printer and codegen: CPython's
// unicode database decides what is printable (set_non_ascii_repr_hook).
std::string non_ascii_repr(const std::string& utf8) {
  Ref u = owned(PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass"));
  return utf8_owned(PyObject_Repr(u.get()), "repr()");
}

// torch.fx's _snake_case (the package's copy) for names with non-ASCII
// characters: Unicode case rules (NameRules::non_ascii_snake_case).
std::string non_ascii_snake_case(std::string_view utf8) {
  PyObject* h = helper("_snake_case");
  if (!h) throw PythonError();
  Ref u = owned(PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass"));
  return utf8_owned(PyObject_CallOneArg(h, u.get()), "_snake_case()");
}

// str.isidentifier() for texts with non-ASCII characters
// (NameRules::non_ascii_is_identifier).
bool non_ascii_is_identifier(std::string_view utf8) {
  Ref u = owned(PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass"));
  return PyUnicode_IsIdentifier(u.get()) == 1;
}

PyObject* clear_caches(PyObject*, PyObject*) {
  clear_object_caches();
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"_set_classes", set_classes, METH_VARARGS, nullptr},
    {"_set_name_rules", set_name_rules, METH_VARARGS, nullptr},
    {"_clear_caches", clear_caches, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fxcpp._C", "fxcpp's C++ core bindings.", -1, module_methods,
                          nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace fxcpp::py

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&fxcpp::py::module_def);
  if (!m) return nullptr;
  fxcpp::set_non_ascii_repr_hook(fxcpp::py::non_ascii_repr);
  fxcpp::name_rules().non_ascii_snake_case = fxcpp::py::non_ascii_snake_case;
  fxcpp::name_rules().non_ascii_is_identifier = fxcpp::py::non_ascii_is_identifier;
  if (fxcpp::py::init_node_type(m) < 0 || fxcpp::py::init_graph_type(m) < 0 || fxcpp::py::init_transform(m) < 0 ||
      fxcpp::py::init_tools(m) < 0 || fxcpp::py::init_trace(m) < 0 ||
      fxcpp::py::init_code(m) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
