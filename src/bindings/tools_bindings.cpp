// Bindings for tooling (DOT export and other product features).
#include "bindings.h"

#include "fxcpp/core/dot.h"

namespace fxcpp::py {
namespace {

// _graph_to_dot(graph, name="fxcpp", *, rankdir="TB", show_args=True,
//               max_arg_chars=48, extra=None) -> str
// `extra(node)` (optional) returns an iterable of str label fields (or None).
PyObject* graph_to_dot(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"graph", "name", "rankdir", "show_args", "max_arg_chars", "extra", nullptr};
  PyObject* graph = nullptr;
  const char* name = "fxcpp";
  const char* rankdir = "TB";
  int show_args = 1;
  Py_ssize_t max_arg_chars = 48;
  PyObject* extra = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|s$spnO:_graph_to_dot", const_cast<char**>(kwlist), &graph, &name,
                                   &rankdir, &show_args, &max_arg_chars, &extra))
    return nullptr;
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  if (extra != Py_None && !PyCallable_Check(extra)) {
    PyErr_SetString(PyExc_TypeError, "_graph_to_dot: extra must be callable or None");
    return nullptr;
  }
  FXCPP_TRY
  DotOptions o;
  o.graph_name = name;
  o.rankdir = rankdir;
  o.show_args = show_args != 0;
  o.max_arg_chars = max_arg_chars < 0 ? 0 : static_cast<size_t>(max_arg_chars);
  if (extra != Py_None) {
    o.extra_fields = [extra](const Node& n) {
      std::vector<std::string> out;
      PyObject* w = wrap_node(const_cast<Node*>(&n));
      if (!w) throw PythonError();
      PyObject* r = PyObject_CallOneArg(extra, w);
      Py_DECREF(w);
      if (!r) throw PythonError();
      if (r == Py_None) {
        Py_DECREF(r);
        return out;
      }
      PyObject* seq = PySequence_Fast(r, "_graph_to_dot: extra(node) must return an iterable of str or None");
      Py_DECREF(r);
      if (!seq) throw PythonError();
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
        PyObject* s = PyObject_Str(PySequence_Fast_GET_ITEM(seq, i));
        const char* c = s ? PyUnicode_AsUTF8(s) : nullptr;
        if (!c) {
          Py_XDECREF(s);
          Py_DECREF(seq);
          throw PythonError();
        }
        out.emplace_back(c);
        Py_DECREF(s);
      }
      Py_DECREF(seq);
      return out;
    };
  }
  std::string text = to_dot(*g, o);
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  FXCPP_CATCH(nullptr)
}

PyMethodDef tools_methods[] = {
    {"_graph_to_dot", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_to_dot)),
     METH_VARARGS | METH_KEYWORDS,
     "_graph_to_dot(graph, name='fxcpp', *, rankdir='TB', show_args=True, max_arg_chars=48, extra=None) -> str\n"
     "Graphviz DOT text for an fxcpp Graph (rendered by the C++ core)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_tools(PyObject* m) { return PyModule_AddFunctions(m, tools_methods); }

}  // namespace fxcpp::py
