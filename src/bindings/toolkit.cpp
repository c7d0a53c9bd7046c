// The binding toolkit's out-of-line parts (Note [Binding toolkit]) and the
// exception table (Note [Exception table]). Compiled into both extensions;
// FXCPP_BINDINGS_TORCH is defined for fxcpp._C_torch's copy.
#include "toolkit.h"

#include <cstring>

#include "fxcpp/passes/lint.h"
#include "fxcpp/passes/subgraph_matcher.h"
#ifdef FXCPP_BINDINGS_TORCH
#include <c10/util/Exception.h>

#include "fxcpp/torch/ops.h"
#else
#include "bindings.h"  // wrap_node, for the KeyError(node) rows
#endif

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

// Note [Exception table]
// ~~~~~~~~~~~~~~~~~~~~~~
// The one place where C++ exceptions become Python exceptions: every def<> /
// guard<> boundary of both extensions calls set_python_error_from_cpp, whose
// rows below are tried in order (most derived first). Messages are decoded as
// UTF-8 with backslashreplace, so one that quotes bytes from a file stays
// readable. Rows for types only one extension can name are compiled into that
// extension alone: the runtime's errors into fxcpp._C_torch, the errors that
// carry a node (raised as torch.fx's KeyError(node), which needs _C's node
// wrappers) into fxcpp._C.
namespace {

// Sets a Python exception of `type` whose message is `text` (never an empty
// message when decoding fails).
void set_error(PyObject* type, const char* text) {
  PyObject* msg = PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(std::strlen(text)), "backslashreplace");
  if (!msg) {
    PyErr_Clear();
    msg = PyUnicode_FromString("fxcpp: an error whose message could not be decoded");
    if (!msg) return;  // MemoryError is set
  }
  PyErr_SetObject(type, msg);
  Py_DECREF(msg);
}

// AssertionError with `text`, or bare when it is empty (torch.fx's `assert x`).
void set_assertion_error(const char* text) {
  if (*text) set_error(PyExc_AssertionError, text);
  else PyErr_SetNone(PyExc_AssertionError);
}

#ifdef FXCPP_BINDINGS_TORCH
// OSError(code, text): Python picks the subclass of the errno (IsADirectoryError, ...).
void set_os_error(int code, const char* text) {
  PyObject* msg = PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(std::strlen(text)), "backslashreplace");
  if (!msg) return;
  PyObject* exc = PyObject_CallFunction(PyExc_OSError, "iN", code, msg);
  if (!exc) return;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
  Py_DECREF(exc);
}
#else
// torch.fx's KeyError(node) (from `val_map[node]`, the matcher's lookups);
// KeyError(text) when the node cannot be wrapped.
void set_key_error_of(const Node* node, const char* text) {
  try {
    Ref w = Ref::steal(wrap_node(const_cast<Node*>(node)));
    PyErr_SetObject(PyExc_KeyError, w.get());
  } catch (...) {
    if (!PyErr_Occurred()) set_error(PyExc_KeyError, text);
  }
}
#endif

}  // namespace

void set_python_error_from_cpp() {
  try {
    throw;
  } catch (const PythonError&) {
    // already set
#ifdef FXCPP_BINDINGS_TORCH
  } catch (const torch::FileError& e) {
    set_os_error(e.code(), e.what());
  } catch (const torch::InputError& e) {
    set_error(PyExc_TypeError, e.what());
  } catch (const torch::FormatError& e) {
    set_error(PyExc_ValueError, e.what());
  } catch (const c10::Error& e) {
    set_error(PyExc_RuntimeError, e.what_without_backtrace());
#else
  } catch (const UnmappedNode& e) {
    set_key_error_of(e.node, e.what());
  } catch (const UnmatchedPatternNode& e) {
    set_key_error_of(e.node, e.what());
#endif
  } catch (const SubgraphAssertion& e) {
    set_assertion_error(e.what());
  } catch (const AssertionFailure& e) {
    set_assertion_error(e.what());
  } catch (const LintError& e) {
    set_error(PyExc_RuntimeError, e.what());
  } catch (const std::out_of_range& e) {
    set_error(PyExc_IndexError, e.what());
  } catch (const std::invalid_argument& e) {
    set_error(PyExc_ValueError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    set_error(PyExc_RuntimeError, e.what());
  }
}

int add_functions(PyObject* m, PyMethodDef* defs) { return PyModule_AddFunctions(m, defs); }

bool parse_fast(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                std::initializer_list<const char*> names, size_t required, PyObject** out) {
  size_t n = names.size();
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  if (static_cast<size_t>(nargs) > n) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %zu arguments (%zd given)", fname, n, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      size_t idx = 0;
      bool found = false;
      for (const char* nm : names) {
        if (PyUnicode_CompareWithASCIIString(key, nm) == 0) {
          found = true;
          break;
        }
        ++idx;
      }
      if (!found) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
        return false;
      }
      if (out[idx]) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fname, key);
        return false;
      }
      out[idx] = args[nargs + k];
    }
  }
  size_t i = 0;
  for (const char* nm : names) {
    if (i < required && !out[i]) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, nm);
      return false;
    }
    ++i;
  }
  return true;
}

}  // namespace fxcpp::py
