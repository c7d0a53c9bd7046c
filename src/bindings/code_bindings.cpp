// Bindings for Note [Direct bytecode]: builds the forward function's code
// object from what the core assembler produced.
#include "bindings.h"

#include "fxcpp/core/bytecode.h"

namespace fxcpp::py {
namespace {

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
constexpr bool kAssemblerSupported = true;

PyObject* to_python(const BytecodeConstant& c) {
  using K = BytecodeConstant::Kind;
  switch (c.kind) {
    case K::None: Py_RETURN_NONE;
    case K::Ellipsis: return Py_NewRef(Py_Ellipsis);
    case K::Bool: return PyBool_FromLong(c.boolean);
    case K::Int: return PyLong_FromLongLong(c.integer);
    case K::Float: return PyFloat_FromDouble(c.floating);
    case K::Str: return PyUnicode_DecodeUTF8(c.text.data(), static_cast<Py_ssize_t>(c.text.size()), nullptr);
    case K::Tuple: {
      PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(c.items.size()));
      if (!t) return nullptr;
      for (size_t i = 0; i < c.items.size(); ++i) {
        PyObject* v = to_python(c.items[i]);
        if (!v) {
          Py_DECREF(t);
          return nullptr;
        }
        PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), v);
      }
      return t;
    }
  }
  PyErr_SetString(PyExc_SystemError, "unknown bytecode constant");
  return nullptr;
}

PyObject* str_tuple(const std::vector<std::string>& v) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(v.size()));
  if (!t) return nullptr;
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* s = PyUnicode_DecodeUTF8(v[i].data(), static_cast<Py_ssize_t>(v[i].size()), nullptr);
    if (!s) {
      Py_DECREF(t);
      return nullptr;
    }
    PyUnicode_InternInPlace(&s);
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), s);
  }
  return t;
}

PyObject* build_code(const AssembledFunction& f, PyObject* filename) {
  PyObject *consts = nullptr, *names = nullptr, *varnames = nullptr, *empty = nullptr, *code = nullptr,
           *table = nullptr, *exc = nullptr, *name = nullptr, *result = nullptr;
  consts = PyTuple_New(static_cast<Py_ssize_t>(f.consts.size()));
  if (!consts) goto done;
  for (size_t i = 0; i < f.consts.size(); ++i) {
    PyObject* v = to_python(f.consts[i]);
    if (!v) goto done;
    PyTuple_SET_ITEM(consts, static_cast<Py_ssize_t>(i), v);
  }
  if (!(names = str_tuple(f.names)) || !(varnames = str_tuple(f.varnames)) || !(empty = PyTuple_New(0)) ||
      !(code = PyBytes_FromStringAndSize(f.code.data(), static_cast<Py_ssize_t>(f.code.size()))) ||
      !(table = PyBytes_FromStringAndSize(f.linetable.data(), static_cast<Py_ssize_t>(f.linetable.size()))) ||
      !(exc = PyBytes_FromStringAndSize("", 0)) || !(name = PyUnicode_FromString(f.name.c_str())))
    goto done;
  result = reinterpret_cast<PyObject*>(PyCode_NewWithPosOnlyArgs(
      static_cast<int>(f.params.size()), 0, 0, static_cast<int>(f.varnames.size()), f.stacksize,
      CO_OPTIMIZED | CO_NEWLOCALS, code, consts, names, varnames, empty, empty, filename, name, name, f.first_line,
      table, exc));
done:
  Py_XDECREF(consts);
  Py_XDECREF(names);
  Py_XDECREF(varnames);
  Py_XDECREF(empty);
  Py_XDECREF(code);
  Py_XDECREF(table);
  Py_XDECREF(exc);
  Py_XDECREF(name);
  return result;
}
#else
constexpr bool kAssemblerSupported = false;
#endif

// _assemble_function(src, filename) -> (code, params, return_annotation, prologue) | str
//   params: tuple of (name, annotation text or None, default text or None);
//   prologue: the module-level source before the def, or None.
//   A str result says why the source is outside the subset (or the
//   interpreter is not CPython 3.11); the caller then uses compile().
PyObject* assemble_function(PyObject*, PyObject* args) {
  PyObject* text;
  PyObject* filename;
  if (!PyArg_ParseTuple(args, "UU:_assemble_function", &text, &filename)) return nullptr;
  Py_ssize_t len;
  const char* src = PyUnicode_AsUTF8AndSize(text, &len);
  if (!src) return nullptr;
  if (!kAssemblerSupported) return PyUnicode_FromString("direct bytecode needs CPython 3.11");
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
  FXCPP_TRY
  AssembledFunction f;
  std::string why;
  if (!assemble_py311_function(std::string_view(src, static_cast<size_t>(len)), f, &why))
    return PyUnicode_DecodeUTF8(why.data(), static_cast<Py_ssize_t>(why.size()), "replace");
  PyObject* code = build_code(f, filename);
  if (!code) return nullptr;
  PyObject* params = PyTuple_New(static_cast<Py_ssize_t>(f.params.size()));
  if (!params) {
    Py_DECREF(code);
    return nullptr;
  }
  auto text_or_none = [](const std::string& s) -> PyObject* {
    if (s.empty()) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr);
  };
  for (size_t i = 0; i < f.params.size(); ++i) {
    const FunctionParameter& p = f.params[i];
    PyObject* item = Py_BuildValue("(s#NN)", p.name.data(), static_cast<Py_ssize_t>(p.name.size()),
                                   text_or_none(p.annotation), text_or_none(p.default_value));
    if (!item) {
      Py_DECREF(code);
      Py_DECREF(params);
      return nullptr;
    }
    PyTuple_SET_ITEM(params, static_cast<Py_ssize_t>(i), item);
  }
  return Py_BuildValue("(NNNN)", code, params, text_or_none(f.return_annotation), text_or_none(f.prologue));
  FXCPP_CATCH(nullptr)
#else
  return nullptr;
#endif
}

PyMethodDef code_methods[] = {
    {"_assemble_function", assemble_function, METH_VARARGS,
     "_assemble_function(src, filename) -> (code, params, return_annotation, prologue) | str\n"
     "The code object of the single function in `src`, built without compile() "
     "(Note [Direct bytecode]); a str says why `src` needs compile()."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_code(PyObject* m) { return PyModule_AddFunctions(m, code_methods); }

}  // namespace fxcpp::py
