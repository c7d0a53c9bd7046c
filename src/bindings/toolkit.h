// fxcpp Python bindings: the binding toolkit both extensions use (fxcpp._C and
// fxcpp._C_torch): owning references, C-API error checks, UTF-8, the def<> /
// guard<> boundary and its exception table, argument parsing. Nothing here
// knows a Node or a Graph (that is bindings.h, fxcpp._C's object model).
// Out-of-line parts: toolkit.cpp.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace fxcpp::py {

// Note [Binding toolkit]
// ~~~~~~~~~~~~~~~~~~~~~~
// Every binding file holds Python objects, reads strings and reports errors
// the same way:
// * `Ref` is the one owning reference type. `Ref::steal(p)` adopts a new
//   reference (the result of a C-API call), `Ref::borrow(p)` adds one. There
//   are no bare Py_DECREFs on error paths and no goto cleanup.
// * `check(p)` / `check(rc)` turn a C-API failure (null, or -1) into a C++
//   `PythonError`, which means "a Python exception is already set". `owned(p)`
//   is `Ref::steal(check(p))`.
// * `utf8(s, what)` is the only caller of PyUnicode_AsUTF8AndSize. A non-str
//   raises TypeError and a string UTF-8 cannot encode (lone surrogates)
//   raises UnicodeEncodeError; both name `what` (the argument), never a C++
//   message such as "basic_string: construction from null".
// * Display text is not a name: str()/repr() of graph values, printed
//   targets, type annotations and stack traces go through
//   `display_text_owned` / `str_from_display_text`, which keep lone
//   surrogates (as torch.fx prints them) by the "surrogatepass" codec. Names,
//   targets and kwargs keys stored in the core always go through `utf8`.
// * Functions and methods are registered through `def<F>(name, flags)`, which
//   wraps F so that any C++ exception becomes the matching Python exception
//   (set_python_error_from_cpp, Note [Exception table]) at one boundary;
//   `guard<F>` does the same for type slots and getsets. Bodies throw; they
//   never need try/catch.

/// Thrown when a Python exception is already set; converted back at the boundary.
struct PythonError : std::exception {
  const char* what() const noexcept override { return "Python error"; }
};

/// Converts the active C++ exception into a Python exception (the table of
/// Note [Exception table] in toolkit.cpp).
void set_python_error_from_cpp();

/// The owning reference to a Python object: releases it on destruction.
/// Move-only; null is a valid (empty) state. Cost: one pointer.
class Ref {
 public:
  Ref() = default;
  /// Adopts `o`, a new reference (may be null).
  static Ref steal(PyObject* o) noexcept { return Ref(o); }
  /// Takes a new reference to `o` (may be null).
  static Ref borrow(PyObject* o) noexcept {
    Py_XINCREF(o);
    return Ref(o);
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref&& o) noexcept {
    if (this != &o) {
      PyObject* old = p_;
      p_ = o.p_;
      o.p_ = nullptr;
      Py_XDECREF(old);
    }
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  /// The object, still owned by this Ref.
  PyObject* get() const noexcept { return p_; }
  /// Gives up ownership: the caller now owns the reference.
  PyObject* release() noexcept {
    PyObject* r = p_;
    p_ = nullptr;
    return r;
  }
  /// Replaces the held object with `o` (adopted), releasing the old one last.
  void reset(PyObject* o = nullptr) noexcept { Py_XSETREF(p_, o); }
  /// A new reference to the held object (for returning it while keeping it).
  PyObject* new_ref() const noexcept {
    Py_XINCREF(p_);
    return p_;
  }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  explicit Ref(PyObject* o) noexcept : p_(o) {}
  PyObject* p_ = nullptr;
};

/// Throws PythonError when a C-API call returned null (an exception is set).
inline PyObject* check(PyObject* o) {
  if (!o) throw PythonError();
  return o;
}
/// Throws PythonError when a C-API call returned -1 (an exception is set);
/// returns other results (PyObject_IsTrue's 0/1, a size) unchanged.
template <class Int, class = std::enable_if_t<std::is_integral_v<Int>>>
inline Int check(Int rc) {
  if (rc == static_cast<Int>(-1) && PyErr_Occurred()) throw PythonError();
  return rc;
}
/// `Ref::steal(check(o))`: adopts a new reference or throws.
inline Ref owned(PyObject* o) { return Ref::steal(check(o)); }

/// The UTF-8 text of str `s`, valid while `s` lives. Throws PythonError with
/// TypeError ("<what> must be str, not T") for a non-str, or UnicodeEncodeError
/// naming `what` for a string UTF-8 cannot encode (lone surrogates).
std::string_view utf8(PyObject* s, const char* what);
/// For values that may legitimately hold lone surrogates (graph constants):
/// sets `*out` to the UTF-8 text of str `s` and returns true, or returns
/// false with no exception set when UTF-8 cannot encode it. Throws
/// PythonError for other failures. `s` must be a str.
bool utf8_if_encodable(PyObject* s, std::string_view* out);
/// Display text (str()/repr() of a graph value, for str(graph), format_node and
/// generated code; never a node name or target):
/// the UTF-8 text of the new reference `s` (released), with lone surrogates
/// kept as their 3-byte forms ("surrogatepass") so that a string constant
/// torch.fx accepts prints as it does. Throws PythonError when `s` is null.
std::string display_text_owned(PyObject* s);
/// A new str from text assembled from display_text_owned pieces (decoded
/// "surrogatepass": identical to strict UTF-8 for text without surrogates).
PyObject* str_from_display_text(std::string_view text);
/// `utf8` copied into a std::string.
inline std::string utf8_string(PyObject* s, const char* what) { return std::string(utf8(s, what)); }
/// `utf8` of a new reference (a call result such as PyObject_Repr), released
/// after copying. Throws PythonError when `s` is null.
inline std::string utf8_owned(PyObject* s, const char* what) {
  Ref r = owned(s);
  return utf8_string(r.get(), what);
}

namespace detail {
template <class T>
struct Guard;
template <class R, class... A>
struct Guard<R (*)(A...)> {
  template <R (*F)(A...)>
  static R call(A... a) noexcept {
    try {
      return F(a...);
    } catch (...) {
      set_python_error_from_cpp();
      if constexpr (std::is_pointer_v<R>) {
        return nullptr;
      } else {
        return static_cast<R>(-1);
      }
    }
  }
};
}  // namespace detail

/// F wrapped so that a C++ exception becomes a Python exception and the
/// C-API error value (null, or -1). For type slots and getsets:
/// `guard<node_get_name>`.
template <auto F>
constexpr auto guard = &detail::Guard<decltype(F)>::template call<F>;

/// A PyMethodDef entry for F (any C-API method signature), guarded. `flags`
/// is METH_VARARGS, METH_O, METH_NOARGS, METH_FASTCALL or with METH_KEYWORDS.
template <auto F>
constexpr PyMethodDef def(const char* name, int flags, const char* doc = nullptr) {
  return PyMethodDef{name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(guard<F>)), flags, doc};
}
/// The terminating entry of a PyMethodDef table.
constexpr PyMethodDef kEndOfMethods{nullptr, nullptr, 0, nullptr};

/// Adds a kEndOfMethods-terminated table of module functions to `m`
/// (the one way init_* functions register them). Returns 0, or -1 with an
/// exception set.
int add_functions(PyObject* m, PyMethodDef* defs);

/// Py_EnterRecursiveCall for a scope (throws PythonError at the limit):
/// recursive argument conversions use it so deep nesting raises RecursionError.
struct RecursionGuard {
  explicit RecursionGuard(const char* where) {
    if (Py_EnterRecursiveCall(where)) throw PythonError();
  }
  ~RecursionGuard() { Py_LeaveRecursiveCall(); }
  RecursionGuard(const RecursionGuard&) = delete;
  RecursionGuard& operator=(const RecursionGuard&) = delete;
};

/// Parses METH_FASTCALL|METH_KEYWORDS arguments into `out[i]` by the names
/// (null when not given); the first `required` are mandatory. False with a
/// TypeError set on a bad call. No allocation: for hot methods.
bool parse_fast(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                std::initializer_list<const char*> names, size_t required, PyObject** out);

}  // namespace fxcpp::py
