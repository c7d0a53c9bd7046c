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
  PyObject* name = nullptr;
  PyObject* rankdir = nullptr;
  int show_args = 1;
  Py_ssize_t max_arg_chars = 48;
  PyObject* extra = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OpnO:_graph_to_dot", const_cast<char**>(kwlist), &graph, &name,
                                   &rankdir, &show_args, &max_arg_chars, &extra))
    return nullptr;
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  if (extra != Py_None && !PyCallable_Check(extra)) {
    PyErr_SetString(PyExc_TypeError, "_graph_to_dot: extra must be callable or None");
    return nullptr;
  }
  DotOptions o;
  o.graph_name = name ? utf8_string(name, "_graph_to_dot name") : "fxcpp";
  o.rankdir = rankdir ? utf8_string(rankdir, "_graph_to_dot rankdir") : "TB";
  o.show_args = show_args != 0;
  o.max_arg_chars = max_arg_chars < 0 ? 0 : static_cast<size_t>(max_arg_chars);
  if (extra != Py_None) {
    o.extra_fields = [extra](const Node& n) {
      std::vector<std::string> out;
      Ref w = Ref::steal(wrap_node(const_cast<Node*>(&n)));
      Ref r = owned(PyObject_CallOneArg(extra, w.get()));
      if (r.get() == Py_None) return out;
      Ref seq = owned(PySequence_Fast(r.get(), "_graph_to_dot: extra(node) must return an iterable of str or None"));
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i)
        out.push_back(utf8_owned(PyObject_Str(PySequence_Fast_GET_ITEM(seq.get(), i)), "_graph_to_dot extra field"));
      return out;
    };
  }
  std::string text = to_dot(*g, o);
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
}

PyMethodDef tools_methods[] = {
    def<graph_to_dot>("_graph_to_dot", METH_VARARGS | METH_KEYWORDS,
                      "_graph_to_dot(graph, name='fxcpp', *, rankdir='TB', show_args=True, max_arg_chars=48, "
                      "extra=None) -> str\n"
                      "Graphviz DOT text for an fxcpp Graph (rendered by the C++ core)."),
    kEndOfMethods};

}  // namespace

int init_tools(PyObject* m) { return add_functions(m, tools_methods); }

}  // namespace fxcpp::py
