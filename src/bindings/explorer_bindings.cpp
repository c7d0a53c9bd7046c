// Bindings for the graph explorer's core passes (issue 22): the layered layout
// of one fold level and the before/after matching of two graphs. The explorer
// (python/fxcpp/explorer) builds the abstract inputs from fxcpp or torch.fx
// graphs; these functions only convert.
#include "bindings.h"

#include "fxcpp/passes/graph_diff.h"
#include "fxcpp/passes/layout.h"

namespace fxcpp::py {
namespace {

Ref fast_seq(PyObject* o, const char* what) { return owned(PySequence_Fast(o, what)); }

std::vector<double> doubles(PyObject* o, const char* what) {
  Ref s = fast_seq(o, what);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(s.get());
  std::vector<double> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(s.get(), i));
    if (out[static_cast<size_t>(i)] == -1.0 && PyErr_Occurred()) throw PythonError();
  }
  return out;
}

std::vector<uint32_t> indices(PyObject* o, const char* what) {
  Ref s = fast_seq(o, what);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(s.get());
  std::vector<uint32_t> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(s.get(), i));
    if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) throw PythonError();
    if (v > 0xFFFFFFFEul) {
      PyErr_Format(PyExc_OverflowError, "%s: an index is too large", what);
      throw PythonError();
    }
    out[static_cast<size_t>(i)] = static_cast<uint32_t>(v);
  }
  return out;
}

template <class T, class F>
Ref list_of(const std::vector<T>& v, F make) {
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(v.size())));
  for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), check(make(v[i])));
  return l;
}

Ref float_list(const std::vector<double>& v) { return list_of(v, [](double d) { return PyFloat_FromDouble(d); }); }
Ref uint_list(const std::vector<uint32_t>& v) {
  return list_of(v, [](uint32_t d) { return PyLong_FromUnsignedLong(d); });
}

// _layout(widths, heights, sources, targets, sweeps=6) -> dict
// One box per width/height pair, one edge per source/target pair
// (fxcpp::layout). The dict: boxes (flat [x, y, w, h, ...]), box_layer,
// points (flat [x, y, ...]), edge_begin, edge_reversed, width, height,
// num_layers, layer_top, layer_height, crossings, area.
PyObject* layout_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 && nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "_layout expects 4 or 5 arguments");
    return nullptr;
  }
  const std::vector<double> w = doubles(args[0], "_layout: widths must be a sequence of numbers");
  const std::vector<double> h = doubles(args[1], "_layout: heights must be a sequence of numbers");
  const std::vector<uint32_t> src = indices(args[2], "_layout: sources must be a sequence of box indices");
  const std::vector<uint32_t> tgt = indices(args[3], "_layout: targets must be a sequence of box indices");
  if (w.size() != h.size() || src.size() != tgt.size()) {
    PyErr_SetString(PyExc_ValueError, "_layout: widths/heights and sources/targets must have equal lengths");
    return nullptr;
  }
  LayoutOptions opt;
  if (nargs == 5) {
    const unsigned long s = PyLong_AsUnsignedLong(args[4]);
    if (s == static_cast<unsigned long>(-1) && PyErr_Occurred()) return nullptr;
    opt.sweeps = static_cast<uint32_t>(std::min(s, 1000ul));
  }
  LayoutGraph lg;
  lg.boxes.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) lg.boxes.push_back(LayoutBox{w[i], h[i], 1});
  for (size_t i = 0; i < src.size(); ++i) lg.edges.push_back(LayoutEdge{src[i], tgt[i], 1});
  LayoutResult r;
  {
    // Pure C++ on our own copies: let other threads run.
    PyThreadState* ts = PyEval_SaveThread();
    try {
      r = layout(lg, opt);
    } catch (...) {
      PyEval_RestoreThread(ts);
      throw;
    }
    PyEval_RestoreThread(ts);
  }
  std::vector<double> boxes, points, ltop(r.num_layers, 0), lh(r.num_layers, 0);
  boxes.reserve(4 * r.boxes.size());
  for (const LayoutRect& b : r.boxes) boxes.insert(boxes.end(), {b.x, b.y, b.width, b.height});
  points.reserve(2 * r.points.size());
  for (const LayoutPoint& p : r.points) points.insert(points.end(), {p.x, p.y});
  // Layer bands (top, height), as layout() computes them: each layer as tall
  // as its tallest box, boxes centred in it, layer_spacing between layers.
  for (size_t i = 0; i < r.boxes.size(); ++i) lh[r.box_layer[i]] = std::max(lh[r.box_layer[i]], r.boxes[i].height);
  for (uint32_t l = 1; l < r.num_layers; ++l) ltop[l] = ltop[l - 1] + lh[l - 1] + opt.layer_spacing;
  std::vector<uint32_t> rev(r.edge_reversed.begin(), r.edge_reversed.end());
  Ref d = owned(PyDict_New());
  auto put = [&](const char* k, Ref v) { check(PyDict_SetItemString(d.get(), k, v.get())); };
  put("boxes", float_list(boxes));
  put("box_layer", uint_list(r.box_layer));
  put("points", float_list(points));
  put("edge_begin", uint_list(r.edge_begin));
  put("edge_reversed", uint_list(rev));
  put("width", owned(PyFloat_FromDouble(r.width)));
  put("height", owned(PyFloat_FromDouble(r.height)));
  put("num_layers", owned(PyLong_FromUnsignedLong(r.num_layers)));
  put("layer_top", float_list(ltop));
  put("layer_height", float_list(lh));
  put("crossings", owned(PyLong_FromUnsignedLongLong(count_crossings(r))));
  put("area", owned(PyFloat_FromDouble(layout_area(r))));
  return d.release();
}

DiffGraph diff_graph_of(PyObject* o, const char* what) {
  Ref s = fast_seq(o, what);
  DiffGraph g;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(s.get());
  g.nodes.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    Ref t = fast_seq(PySequence_Fast_GET_ITEM(s.get(), i), what);
    if (PySequence_Fast_GET_SIZE(t.get()) != 4) {
      PyErr_Format(PyExc_ValueError, "%s: each node is (name, kind, detail, inputs)", what);
      throw PythonError();
    }
    PyObject** it = PySequence_Fast_ITEMS(t.get());
    g.nodes.push_back(DiffNode{utf8_string(it[0], "_graph_diff node name"), utf8_string(it[1], "_graph_diff kind"),
                               utf8_string(it[2], "_graph_diff detail"), indices(it[3], what)});
  }
  return g;
}

Ref matches(const std::vector<uint32_t>& m) {
  return list_of(m, [](uint32_t v) {
    if (v == GraphDiffResult::kNone) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(v);
  });
}

// _graph_diff(before, after) -> (before_to_after, after_to_before, changed, counts)
// before/after: sequences of (name, kind, detail, [input indices]) (fxcpp::graph_diff).
// The matches hold None for removed/added nodes; changed: bools per after-node;
// counts: dict added/removed/changed/matched_by_name/matched_by_structure.
PyObject* graph_diff_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_graph_diff expects 2 arguments");
    return nullptr;
  }
  const DiffGraph b = diff_graph_of(args[0], "_graph_diff: before");
  const DiffGraph a = diff_graph_of(args[1], "_graph_diff: after");
  const GraphDiffResult r = graph_diff(b, a);
  Ref changed = list_of(r.changed, [](uint8_t c) { return PyBool_FromLong(c); });
  Ref counts = owned(Py_BuildValue("{s:I,s:I,s:I,s:I,s:I}", "added", r.added, "removed", r.removed, "changed",
                                   r.num_changed, "matched_by_name", r.matched_by_name, "matched_by_structure",
                                   r.matched_by_structure));
  Ref ba = matches(r.before_to_after), ab = matches(r.after_to_before);
  return PyTuple_Pack(4, ba.get(), ab.get(), changed.get(), counts.get());
}

PyMethodDef explorer_methods[] = {
    def<layout_py>("_layout", METH_FASTCALL,
                   "_layout(widths, heights, sources, targets, sweeps=6) -> dict\n"
                   "A layered drawing of boxes and edges (fxcpp::layout in the C++ core)."),
    def<graph_diff_py>("_graph_diff", METH_FASTCALL,
                       "_graph_diff(before, after) -> (before_to_after, after_to_before, changed, counts)\n"
                       "Matches the nodes of two graphs by name and structure (fxcpp::graph_diff)."),
    kEndOfMethods};

}  // namespace

int init_explorer(PyObject* m) { return add_functions(m, explorer_methods); }

}  // namespace fxcpp::py
