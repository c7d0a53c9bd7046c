// fxcpp._C module definition.
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bindings.h"
#include "handover.h"
#include "fxcpp/core/dialect.h"

namespace fxcpp::py {
namespace {

PyObject* set_classes(PyObject*, PyObject* args) {
  PyObject *node_cls, *ilist, *idict, *helper_dict;
  if (!PyArg_ParseTuple(args, "OOOO!:_set_classes", &node_cls, &ilist, &idict, &PyDict_Type, &helper_dict)) return nullptr;
  if (!PyType_Check(node_cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(node_cls), NodeBaseType)) {
    PyErr_SetString(PyExc_TypeError, "node class must subclass NodeBase");
    return nullptr;
  }
  set_helpers(helper_dict);  // first: a bad helper dict changes nothing
  Py_INCREF(node_cls);
  Py_XSETREF(g_node_class, node_cls);
  Py_INCREF(ilist);
  Py_XSETREF(g_immutable_list, ilist);
  Py_INCREF(idict);
  Py_XSETREF(g_immutable_dict, idict);
  Py_RETURN_NONE;
}

// _set_name_rules(builtin_names: iterable[str], custom_builtins: list[(name, obj)])
PyObject* set_name_rules(PyObject*, PyObject* args) {
  PyObject *names, *custom;
  if (!PyArg_ParseTuple(args, "OO:_set_name_rules", &names, &custom)) return nullptr;
  std::unordered_set<std::string> b;
  Ref it = owned(PyObject_GetIter(names));
  while (Ref s = Ref::steal(PyIter_Next(it.get()))) b.emplace(utf8(s.get(), "builtin name"));
  if (PyErr_Occurred()) return nullptr;
  std::vector<std::pair<std::string, Object>> cb;
  Ref seq = owned(PySequence_Fast(custom, "custom builtins must be a sequence"));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject *k, *v;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq.get(), i), "OO", &k, &v)) return nullptr;
    cb.emplace_back(utf8(k, "custom builtin name"), borrow_obj(v));
  }
  // Nothing is changed unless every input converted.
  NameRules& r = name_rules();
  r.builtins = std::move(b);
  r.custom_builtins = std::move(cb);
  r.refresh();
  Py_RETURN_NONE;
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
  PyObject* h = helpers().snake_case;
  Ref u = owned(PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass"));
  return utf8_owned(PyObject_CallOneArg(h, u.get()), "_snake_case()");
}

// str.isidentifier() for texts with non-ASCII characters
// (NameRules::non_ascii_is_identifier).
bool non_ascii_is_identifier(std::string_view utf8) {
  Ref u = owned(PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass"));
  return PyUnicode_IsIdentifier(u.get()) == 1;
}

// _set_dialect(name: str): the torch.fx release whose text the core writes
// ("1.13" or "2", Note [Dialect]); the package calls it at import from
// _torch_compat.FX_DIALECT.
PyObject* set_dialect(PyObject*, PyObject* args) {
  const char* name;
  if (!PyArg_ParseTuple(args, "s:_set_dialect", &name)) return nullptr;
  const std::string n(name);
  if (n == "1.13") fxcpp::set_dialect(fxcpp::Dialect::fx_1_13);
  else if (n == "2") fxcpp::set_dialect(fxcpp::Dialect::fx_2);
  else return PyErr_Format(PyExc_ValueError, "unknown torch.fx dialect %R: use '1.13' or '2'", PyTuple_GET_ITEM(args, 0));
  Py_RETURN_NONE;
}

// _dialect() -> "1.13" or "2": the dialect in force.
PyObject* get_dialect(PyObject*, PyObject*) {
  return PyUnicode_FromString(fxcpp::dialect_name(fxcpp::dialect()));
}

PyObject* clear_caches(PyObject*, PyObject*) {
  clear_object_caches();
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {def<set_classes>("_set_classes", METH_VARARGS),
                                def<set_name_rules>("_set_name_rules", METH_VARARGS),
                                def<clear_caches>("_clear_caches", METH_NOARGS),
                                def<set_dialect>("_set_dialect", METH_VARARGS),
                                def<get_dialect>("_dialect", METH_NOARGS),
                                kEndOfMethods};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fxcpp._C", "fxcpp's C++ core bindings.", -1, nullptr,
                          nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace fxcpp::py

PyMODINIT_FUNC PyInit__C() {
  using namespace fxcpp::py;
  Ref m = Ref::steal(PyModule_Create(&module_def));
  if (!m) return nullptr;
  fxcpp::set_non_ascii_repr_hook(non_ascii_repr);
  fxcpp::name_rules().non_ascii_snake_case = non_ascii_snake_case;
  fxcpp::name_rules().non_ascii_is_identifier = non_ascii_is_identifier;
  if (add_functions(m.get(), module_methods) < 0 || init_node_type(m.get()) < 0 || init_graph_type(m.get()) < 0 ||
      init_interpreter(m.get()) < 0 || init_matcher(m.get()) < 0 || init_tools(m.get()) < 0 ||
      init_trace(m.get()) < 0 || init_code(m.get()) < 0 || init_toolbox(m.get()) < 0 ||
      init_handover(m.get()) < 0 || init_explorer(m.get()) < 0 || init_signed_method(m.get()) < 0)
    return nullptr;
  return m.release();
}
