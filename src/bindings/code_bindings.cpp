// Bindings for Note [Direct bytecode]: builds the forward function's code
// object from what the CPython 3.11 backend (src/backends/cpython311)
// assembled.
#include "bindings.h"

#include "cpython311/assembler.h"

namespace fxcpp::py {
namespace {

using cpython311::AssembledFunction;
using cpython311::Constant;
using cpython311::Parameter;
using cpython311::Refusal;

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
constexpr bool kAssemblerSupported = true;

Ref str_of(const std::string& s) {
  return owned(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr));
}

Ref bytes_of(const std::string& s) {
  return owned(PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

Ref to_python(const Constant& c) {
  using K = Constant::Kind;
  switch (c.kind) {
    case K::None: return Ref::borrow(Py_None);
    case K::Ellipsis: return Ref::borrow(Py_Ellipsis);
    case K::Bool: return Ref::borrow(c.boolean ? Py_True : Py_False);
    case K::Int: return owned(PyLong_FromLongLong(c.integer));
    case K::Float: return owned(PyFloat_FromDouble(c.floating));
    case K::Str: return str_of(c.text);
    case K::Tuple: {
      Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(c.items.size())));
      for (size_t i = 0; i < c.items.size(); ++i)
        PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), to_python(c.items[i]).release());
      return t;
    }
  }
  PyErr_SetString(PyExc_SystemError, "unknown bytecode constant");
  throw PythonError();
}

// A tuple of interned strs, as the compiler stores co_names and co_varnames.
Ref str_tuple(const std::vector<std::string>& v) {
  Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(v.size())));
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* s = str_of(v[i]).release();
    PyUnicode_InternInPlace(&s);
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), s);
  }
  return t;
}

Ref build_code(const AssembledFunction& f, PyObject* filename) {
  Ref consts = owned(PyTuple_New(static_cast<Py_ssize_t>(f.consts.size())));
  for (size_t i = 0; i < f.consts.size(); ++i)
    PyTuple_SET_ITEM(consts.get(), static_cast<Py_ssize_t>(i), to_python(f.consts[i]).release());
  Ref names = str_tuple(f.names), varnames = str_tuple(f.varnames);
  Ref empty = owned(PyTuple_New(0));
  Ref code = bytes_of(f.code), table = bytes_of(f.linetable), exceptions = bytes_of(std::string());
  Ref name = str_of(f.name);
  return owned(reinterpret_cast<PyObject*>(PyCode_NewWithPosOnlyArgs(
      static_cast<int>(f.params.size()), 0, 0, static_cast<int>(f.varnames.size()), f.stacksize,
      CO_OPTIMIZED | CO_NEWLOCALS, code.get(), consts.get(), names.get(), varnames.get(), empty.get(), empty.get(),
      filename, name.get(), name.get(), f.first_line, table.get(), exceptions.get())));
}

Ref text_or_none(const std::string& s) { return s.empty() ? Ref::borrow(Py_None) : str_of(s); }

// (code, params, return_annotation, prologue): see assemble_function below.
Ref assembled_tuple(const AssembledFunction& f, PyObject* filename) {
  Ref code = build_code(f, filename);
  Ref params = owned(PyTuple_New(static_cast<Py_ssize_t>(f.params.size())));
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Parameter& p = f.params[i];
    Ref name = str_of(p.name), annotation = text_or_none(p.annotation), value = text_or_none(p.default_value);
    PyTuple_SET_ITEM(params.get(), static_cast<Py_ssize_t>(i),
                     owned(PyTuple_Pack(3, name.get(), annotation.get(), value.get())).release());
  }
  Ref ret = text_or_none(f.return_annotation), prologue = text_or_none(f.prologue);
  return owned(PyTuple_Pack(4, code.get(), params.get(), ret.get(), prologue.get()));
}
#else
constexpr bool kAssemblerSupported = false;
#endif

Ref refusal_tuple(Refusal r, const std::string& detail) {
  Ref text = owned(PyUnicode_DecodeUTF8(detail.data(), static_cast<Py_ssize_t>(detail.size()), "replace"));
  return owned(Py_BuildValue("(iO)", static_cast<int>(r), text.get()));
}

// _assemble_function(src, filename) -> (refusal, result)
//   refusal 0: result is (code, params, return_annotation, prologue), with
//   params a tuple of (name, annotation text or None, default text or None)
//   and prologue the module-level source before the def, or None.
//   Otherwise refusal is a cpython311::Refusal value (names in
//   _assembler_refusals()) and result the human-readable detail; the caller
//   then uses compile().
PyObject* assemble_function(PyObject*, PyObject* args) {
  PyObject* text;
  PyObject* filename;
  if (!PyArg_ParseTuple(args, "UU:_assemble_function", &text, &filename)) return nullptr;
  std::string_view src = utf8(text, "src");
  if (!kAssemblerSupported) return refusal_tuple(Refusal::kUnsupportedInterpreter, "direct bytecode needs CPython 3.11").release();
  AssembledFunction f;
  std::string detail;
  Refusal r = cpython311::assemble_function(src, f, &detail);
  if (r != Refusal::kNone) return refusal_tuple(r, detail).release();
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
  Ref result = assembled_tuple(f, filename);
  return owned(Py_BuildValue("(iO)", 0, result.get())).release();
#else
  return nullptr;  // unreachable: kAssemblerSupported is false
#endif
}

// _assembler_refusals() -> tuple of names; a Refusal's value is its index.
PyObject* assembler_refusals(PyObject*, PyObject*) {
  Ref t = owned(PyTuple_New(cpython311::kRefusalCount));
  for (int i = 0; i < cpython311::kRefusalCount; ++i)
    PyTuple_SET_ITEM(t.get(), i, owned(PyUnicode_FromString(cpython311::refusal_name(static_cast<Refusal>(i)))).release());
  return t.release();
}

PyMethodDef code_methods[] = {
    def<assemble_function>(
        "_assemble_function", METH_VARARGS,
        "_assemble_function(src, filename) -> (refusal, result)\n"
        "The code object of the single function in `src`, built without compile() "
        "(Note [Direct bytecode]): (0, (code, params, return_annotation, prologue)); "
        "otherwise (refusal code, detail text) and `src` needs compile()."),
    def<assembler_refusals>("_assembler_refusals", METH_NOARGS,
                            "_assembler_refusals() -> tuple of str\n"
                            "The names of the assembler's refusal codes, indexed by code (0 is 'none')."),
    kEndOfMethods};

}  // namespace

int init_code(PyObject* m) { return add_functions(m, code_methods); }

}  // namespace fxcpp::py
