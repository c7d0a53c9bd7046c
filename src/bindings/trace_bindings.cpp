// Bindings for symbolic tracing: the per-trace walks over the module
// hierarchy (module-path lookup), done in C.
#include "bindings.h"

namespace fxcpp::py {
namespace {

// _collect_tensor_attrs(root, out, tensor_types, skip_types, module_named_children)
//
// Maps every object stored directly in the __dict__ of a module of the
// hierarchy whose type is an instance of `tensor_types` to its qualified name
// ("later visits win"), walking children in registration order. Modules whose
// class overrides named_children are walked through that method, exactly as
// the Python fallback does.
struct Walk {
  PyObject* out;
  PyObject* tensor_types;
  PyObject* skip_types;  // frozenset of exact types that are never tensors
  PyObject* default_named_children;
};

int visit(const Walk& w, PyObject* m, const std::string& prefix) {
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  PyObject* d = dictptr ? *dictptr : nullptr;
  if (d) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
      int skip = PySet_Contains(w.skip_types, reinterpret_cast<PyObject*>(Py_TYPE(v)));
      if (skip < 0) return -1;
      if (skip) continue;
      int is_t = PyObject_IsInstance(v, w.tensor_types);
      if (is_t < 0) return -1;
      if (!is_t || !PyUnicode_Check(k)) continue;
      std::string name = prefix + PyUnicode_AsUTF8(k);
      PyObject* s = PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
      if (!s) return -1;
      int rc = PyDict_SetItem(w.out, v, s);
      Py_DECREF(s);
      if (rc < 0) return -1;
    }
  }
  PyObject* nc = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(m)), "named_children");
  if (!nc) return -1;
  bool standard = nc == w.default_named_children;
  Py_DECREF(nc);
  PyObject* mods = (standard && d) ? PyDict_GetItemString(d, "_modules") : nullptr;  // borrowed
  if (standard && mods && PyDict_Check(mods)) {
    PyObject* seen = PySet_New(nullptr);
    if (!seen) return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *c;
    int rc = 0;
    while (rc == 0 && PyDict_Next(mods, &pos, &k, &c)) {
      if (c == Py_None || !PyUnicode_Check(k)) continue;
      int dup = PySet_Contains(seen, c);
      if (dup < 0) { rc = -1; break; }
      if (dup) continue;
      if (PySet_Add(seen, c) < 0) { rc = -1; break; }
      Py_INCREF(c);
      rc = visit(w, c, prefix + PyUnicode_AsUTF8(k) + ".");
      Py_DECREF(c);
    }
    Py_DECREF(seen);
    return rc;
  }
  // Non-standard hierarchy: defer to the module's own named_children().
  PyObject* it_src = PyObject_CallMethod(m, "named_children", nullptr);
  if (!it_src) return -1;
  PyObject* it = PyObject_GetIter(it_src);
  Py_DECREF(it_src);
  if (!it) return -1;
  int rc = 0;
  while (PyObject* item = PyIter_Next(it)) {
    PyObject *k, *c;
    if (!PyArg_ParseTuple(item, "OO", &k, &c) || !PyUnicode_Check(k)) {
      Py_DECREF(item);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "named_children() must yield (str, Module)");
      rc = -1;
      break;
    }
    rc = visit(w, c, prefix + PyUnicode_AsUTF8(k) + ".");
    Py_DECREF(item);
    if (rc < 0) break;
  }
  Py_DECREF(it);
  if (rc == 0 && PyErr_Occurred()) rc = -1;
  return rc;
}

PyObject* collect_tensor_attrs(PyObject*, PyObject* args) {
  PyObject *root, *out, *tensor_types, *skip_types, *default_nc;
  if (!PyArg_ParseTuple(args, "OO!OOO:_collect_tensor_attrs", &root, &PyDict_Type, &out, &tensor_types, &skip_types,
                        &default_nc))
    return nullptr;
  if (!PyAnySet_Check(skip_types)) {
    PyErr_SetString(PyExc_TypeError, "skip_types must be a set");
    return nullptr;
  }
  Walk w{out, tensor_types, skip_types, default_nc};
  if (Py_EnterRecursiveCall(" in _collect_tensor_attrs")) return nullptr;
  int rc = visit(w, root, "");
  Py_LeaveRecursiveCall();
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}

// Module.named_modules() semantics (memo-deduplicated pre-order walk of
// _modules) producing {module: qualified_name}; modules whose class overrides
// named_modules are expanded through it.
int paths_walk(PyObject* m, const std::string& prefix, PyObject* out, PyObject* default_named_modules) {
  int present = PyDict_Contains(out, m);
  if (present < 0) return -1;
  if (present) return 0;
  PyObject* nm = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(m)), "named_modules");
  if (!nm) return -1;
  bool standard = nm == default_named_modules;
  Py_DECREF(nm);
  if (!standard) {
    PyObject* it_src = PyObject_CallMethod(m, "named_modules", "Os", Py_None, prefix.c_str());
    if (!it_src) return -1;
    PyObject* it = PyObject_GetIter(it_src);
    Py_DECREF(it_src);
    if (!it) return -1;
    while (PyObject* item = PyIter_Next(it)) {
      PyObject *k, *c;
      int rc = PyArg_ParseTuple(item, "OO", &k, &c) ? 0 : -1;
      if (rc == 0 && PyDict_Contains(out, c) == 0) rc = PyDict_SetItem(out, c, k);
      Py_DECREF(item);
      if (rc < 0) {
        Py_DECREF(it);
        return -1;
      }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
  }
  PyObject* s = PyUnicode_FromStringAndSize(prefix.data(), static_cast<Py_ssize_t>(prefix.size()));
  if (!s) return -1;
  int rc = PyDict_SetItem(out, m, s);
  Py_DECREF(s);
  if (rc < 0) return -1;
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  PyObject* mods = (dictptr && *dictptr) ? PyDict_GetItemString(*dictptr, "_modules") : nullptr;
  if (!mods || !PyDict_Check(mods)) return 0;
  Py_INCREF(mods);
  Py_ssize_t pos = 0;
  PyObject *k, *c;
  while (PyDict_Next(mods, &pos, &k, &c)) {
    if (c == Py_None || !PyUnicode_Check(k)) continue;
    std::string sub = prefix.empty() ? std::string(PyUnicode_AsUTF8(k)) : prefix + "." + PyUnicode_AsUTF8(k);
    Py_INCREF(c);
    rc = paths_walk(c, sub, out, default_named_modules);
    Py_DECREF(c);
    if (rc < 0) break;
  }
  Py_DECREF(mods);
  return rc;
}

// _module_paths(root, Module.named_modules) -> {module: qualified name}
PyObject* module_paths(PyObject*, PyObject* args) {
  PyObject *root, *default_nm;
  if (!PyArg_ParseTuple(args, "OO:_module_paths", &root, &default_nm)) return nullptr;
  PyObject* out = PyDict_New();
  if (!out) return nullptr;
  if (Py_EnterRecursiveCall(" in _module_paths")) {
    Py_DECREF(out);
    return nullptr;
  }
  int rc = paths_walk(root, "", out, default_nm);
  Py_LeaveRecursiveCall();
  if (rc < 0) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

PyMethodDef trace_methods[] = {
    {"_module_paths", module_paths, METH_VARARGS, "{module: qualified name} as Module.named_modules() visits them."},
    {"_collect_tensor_attrs", collect_tensor_attrs, METH_VARARGS,
     "Map tensors stored in module __dicts of a hierarchy to their qualified names."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_trace(PyObject* m) { return PyModule_AddFunctions(m, trace_methods); }

}  // namespace fxcpp::py
