// Bindings for the subgraph matcher and rewriter (fxcpp.passes.utils.
// matcher_utils.SubgraphMatcher.match and fxcpp.subgraph_rewriter.
// replace_pattern): both run the core SubgraphMatcher (Note [Subgraph matching
// semantics]) and turn its results into the Python objects torch.fx returns.
#include "bindings.h"
#include "fxcpp/passes/subgraph_matcher.h"

#include <vector>

namespace fxcpp::py {
namespace {

/// The core graph of a fxcpp.Graph argument; throws PythonError (TypeError) otherwise.
Graph& graph_arg(PyObject* graph) {
  Graph* g = core_graph_of(graph);
  if (!g) throw PythonError();
  return *g;
}

/// A new list of the Python values of `v`.
Ref list_of(const std::vector<Argument>& v) {
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(v.size())));
  for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), check(from_arg(v[i])));
  return l;
}

/// {pattern node: graph value} of a match, in the core's (torch.fx's) order.
Ref nodes_map_dict(const InternalMatch& im) {
  Ref d = owned(PyDict_New());
  for (const auto& kv : im.nodes_map) {
    Ref k = owned(wrap_node(const_cast<Node*>(kv.first)));
    Ref v = owned(from_arg(kv.second));
    check(PyDict_SetItem(d.get(), k.get(), v.get()));
  }
  return d;
}

/// Copies node.meta of `src` (if any) onto `dst`, as torch.fx's node_copy does
/// (ReplacePatternHooks::on_copy).
void copy_node_meta(const Node& src, Node& dst) {
  PyNode* sw = pynode_of(src.binding());
  if (!sw || !sw->meta) return;
  if (PyDict_Check(sw->meta) && PyDict_GET_SIZE(sw->meta) == 0) return;
  Ref m = owned(PyDict_CheckExact(sw->meta) ? PyDict_Copy(sw->meta)
                                             : PyObject_CallOneArg(helpers().copy, sw->meta));
  Ref dw = owned(wrap_node(&dst));
  Py_XSETREF(reinterpret_cast<PyNode*>(dw.get())->meta, m.release());
}

/// _subgraph_match(pattern, graph, match_output=False, match_placeholder=False,
///                 remove_overlapping_matches=True)
///   -> [(anchors, nodes_map, placeholder_nodes, returning_nodes)]
PyObject* subgraph_match(PyObject*, PyObject* args) {
  PyObject *pattern, *graph;
  int match_output = 0, match_placeholder = 0, remove_overlapping = 1;
  if (!PyArg_ParseTuple(args, "OO|ppp:_subgraph_match", &pattern, &graph, &match_output, &match_placeholder,
                        &remove_overlapping))
    throw PythonError();
  Graph& pg = graph_arg(pattern);
  Graph& g = graph_arg(graph);
  // SubgraphAssertion and UnmatchedPatternNode: Note [Exception table] in toolkit.cpp.
  return [&] {
    SubgraphMatcherOptions opts;
    opts.match_output = match_output;
    opts.match_placeholder = match_placeholder;
    opts.remove_overlapping_matches = remove_overlapping;
    SubgraphMatcher m(pg, opts);
    std::vector<InternalMatch> matches = m.match(g);
    Ref out = owned(PyList_New(static_cast<Py_ssize_t>(matches.size())));
    for (size_t i = 0; i < matches.size(); ++i) {
      const InternalMatch& im = matches[i];
      Ref anchors = owned(PyList_New(static_cast<Py_ssize_t>(im.anchors.size())));
      for (size_t j = 0; j < im.anchors.size(); ++j)
        PyList_SET_ITEM(anchors.get(), static_cast<Py_ssize_t>(j), wrap_node(const_cast<Node*>(im.anchors[j])));
      Ref nm = nodes_map_dict(im);
      Ref ph = list_of(im.placeholder_nodes);
      Ref rn = list_of(im.returning_nodes);
      PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i),
                      check(PyTuple_Pack(4, anchors.get(), nm.get(), ph.get(), rn.get())));
    }
    return out.release();
  }();
}

/// _core_matcher_agrees_on(pattern, graph) -> bool: agrees_with_fx2_on (Note [Core
/// matches under torch.fx 2.x]) for a matcher with the default flags.
PyObject* core_matcher_agrees_on(PyObject*, PyObject* args) {
  PyObject *pattern, *graph;
  if (!PyArg_ParseTuple(args, "OO:_core_matcher_agrees_on", &pattern, &graph)) throw PythonError();
  Graph& pg = graph_arg(pattern);
  Graph& g = graph_arg(graph);
  return [&] {
    SubgraphMatcher m(pg);
    return PyBool_FromLong(agrees_with_fx2_on(m, g));
  }();
}

/// _replace_pattern(graph, pattern_graph, replacement_graph, Match, fx2=False) -> [Match]
/// With fx2: None (and the graph untouched) where the core's result would not be torch.fx
/// 2.x's (agrees_with_fx2_on before matching, replace_agrees_with_fx2 after).
PyObject* replace_pattern(PyObject*, PyObject* args) {
  PyObject *graph, *pattern, *replacement, *match_cls;
  int fx2 = 0;
  if (!PyArg_ParseTuple(args, "OOOO|p:_replace_pattern", &graph, &pattern, &replacement, &match_cls, &fx2))
    throw PythonError();
  Graph& g = graph_arg(graph);
  Graph& pg = graph_arg(pattern);
  Graph& rg = graph_arg(replacement);
  // SubgraphAssertion and UnmatchedPatternNode: Note [Exception table] in toolkit.cpp.
  return [&]() -> PyObject* {
    SubgraphMatcher m(pg);
    if (fx2 && !agrees_with_fx2_on(m, g)) Py_RETURN_NONE;
    std::vector<InternalMatch> matches = m.match(g);
    if (fx2 && !replace_agrees_with_fx2(matches)) Py_RETURN_NONE;
    // Build the Match objects first: wrapping the matched nodes keeps them
    // alive (as tombstones) once erased, like torch.fx's Match objects.
    Ref out = owned(PyList_New(static_cast<Py_ssize_t>(matches.size())));
    for (size_t i = 0; i < matches.size(); ++i) {
      const InternalMatch& im = matches[i];
      if (im.anchors.empty()) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        throw PythonError();
      }
      Ref anchor = owned(wrap_node(const_cast<Node*>(im.anchors[0])));
      Ref nm = nodes_map_dict(im);
      PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i),
                      check(PyObject_CallFunctionObjArgs(match_cls, anchor.get(), nm.get(), nullptr)));
    }
    ReplacePatternHooks hooks;
    hooks.on_copy = copy_node_meta;
    replace_matches(g, m, rg, matches, hooks);
    return out.release();
  }();
}

PyMethodDef matcher_methods[] = {
    def<subgraph_match>("_subgraph_match", METH_VARARGS,
                        "_subgraph_match(pattern, graph, match_output, match_placeholder, "
                        "remove_overlapping_matches) -> [(anchors, nodes_map, placeholder_nodes, returning_nodes)]"),
    def<replace_pattern>("_replace_pattern", METH_VARARGS,
                         "_replace_pattern(graph, pattern_graph, replacement_graph, Match, fx2=False) -> [Match]: "
                         "match and rewrite in C++ (fx2: None where torch.fx 2.x's result would differ)."),
    def<core_matcher_agrees_on>("_core_matcher_agrees_on", METH_VARARGS,
                                "_core_matcher_agrees_on(pattern, graph) -> bool: the graph-side conditions "
                                "under which the core matcher gives torch.fx 2.x's matches."),
    kEndOfMethods};

}  // namespace

int init_matcher(PyObject* m) { return add_functions(m, matcher_methods); }

}  // namespace fxcpp::py
