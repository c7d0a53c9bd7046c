// The binding toolkit's out-of-line parts (Note [Binding toolkit]).
#include "bindings.h"

namespace fxcpp::py {

namespace {
// The one call of PyUnicode_AsUTF8AndSize: true with `*out` set, or false
// with the Python error (usually UnicodeEncodeError) set for the caller.
bool encode_utf8(PyObject* s, std::string_view* out) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) return false;
  *out = std::string_view(c, static_cast<size_t>(n));
  return true;
}
}  // namespace

std::string_view utf8(PyObject* s, const char* what) {
  if (!s) throw PythonError();
  if (!PyUnicode_Check(s)) {
    PyErr_Format(PyExc_TypeError, "%s must be str, not %.200s", what, Py_TYPE(s)->tp_name);
    throw PythonError();
  }
  std::string_view text;
  if (encode_utf8(s, &text)) return text;
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw PythonError();
  // Re-raise the codec's error with the argument named in its reason, keeping
  // the position and character information a user needs to find it.
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Ref t = Ref::steal(type), v = Ref::steal(value), trace = Ref::steal(tb);
  Py_ssize_t start = 0, end = 0;
  Ref reason = Ref::steal(v ? PyUnicodeEncodeError_GetReason(v.get()) : nullptr);
  if (!v || !reason || PyUnicodeEncodeError_GetStart(v.get(), &start) < 0 ||
      PyUnicodeEncodeError_GetEnd(v.get(), &end) < 0) {
    PyErr_Clear();
    PyErr_Format(PyExc_UnicodeEncodeError, "%s cannot be encoded as UTF-8", what);
    throw PythonError();
  }
  Ref full = owned(PyUnicode_FromFormat("%U (in %s; fxcpp stores names and strings as UTF-8)", reason.get(), what));
  Ref e = owned(PyObject_CallFunction(PyExc_UnicodeEncodeError, "sOnnO", "utf-8", s, start, end, full.get()));
  PyErr_SetObject(PyExc_UnicodeEncodeError, e.get());
  throw PythonError();
}

bool utf8_if_encodable(PyObject* s, std::string_view* out) {
  if (encode_utf8(s, out)) return true;
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw PythonError();
  PyErr_Clear();
  return false;
}

std::string display_text_owned(PyObject* s) {
  Ref str = owned(s);
  if (!PyUnicode_Check(str.get())) return utf8_string(str.get(), "str() result");
  std::string_view text;
  if (utf8_if_encodable(str.get(), &text)) return std::string(text);
  Ref bytes = owned(PyUnicode_AsEncodedString(str.get(), "utf-8", "surrogatepass"));
  return std::string(PyBytes_AS_STRING(bytes.get()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.get())));
}

PyObject* str_from_display_text(std::string_view text) {
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogatepass");
}

int add_functions(PyObject* m, PyMethodDef* defs) { return PyModule_AddFunctions(m, defs); }

}  // namespace fxcpp::py
