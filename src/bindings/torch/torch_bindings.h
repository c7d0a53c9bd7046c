// fxcpp._C_torch: declarations its binding files share.
#pragma once

#include "toolkit.h"  // first: Python.h with PY_SSIZE_T_CLEAN

#include <string>

#include "fxcpp/torch/format.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/ops.h"

namespace fxcpp::py {

// Runs `fn` with the GIL released (it touches no Python object). Loading
// errors that are not already FormatErrors (a kernel the planner runs failing
// on a constant, say) are a bad file too: they become FormatError
// (ValueError); only running out of memory stays MemoryError.
template <typename F>
void load_without_gil(F&& fn) {
  PyThreadState* ts = PyEval_SaveThread();
  try {
    try {
      fn();
    } catch (const torch::FormatError&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const c10::Error& e) {
      throw torch::FormatError(std::string("fxcpp::torch: cannot load this file: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw torch::FormatError(std::string("fxcpp::torch: cannot load this file: ") + e.what());
    }
  } catch (...) {
    PyEval_RestoreThread(ts);
    throw;
  }
  PyEval_RestoreThread(ts);
}

// The source of load() and graph_json(): a path (str or os.PathLike) or the
// whole file as a bytes-like object. Holds the buffer while it lives.
struct Source {
  std::string path;
  Py_buffer view{};
  bool is_buffer = false;
  explicit Source(PyObject* o) {
    if (PyUnicode_Check(o) || (!PyObject_CheckBuffer(o) && PyObject_HasAttrString(o, "__fspath__"))) {
      Ref fs = owned(PyOS_FSPath(o));
      if (!PyUnicode_Check(fs.get())) throw torch::InputError("fxcpp: a path must be a str or return one from __fspath__");
      path = std::string(utf8(fs.get(), "path"));
    } else if (PyObject_CheckBuffer(o)) {
      check(PyObject_GetBuffer(o, &view, PyBUF_SIMPLE));
      is_buffer = true;
    } else {
      Ref t = owned(PyObject_Repr(reinterpret_cast<PyObject*>(Py_TYPE(o))));
      throw torch::InputError("fxcpp: expected a path (str or os.PathLike) or the file's bytes, got " +
                              std::string(utf8(t.get(), "type name")));
    }
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (is_buffer) PyBuffer_Release(&view);
  }
};

/// Adds the .fxpt codec for Python graphs (file_bindings.cpp:
/// read_graph, write_graph) to module `m`. Returns 0, or -1 with an exception set.
int init_files(PyObject* m);

}  // namespace fxcpp::py
