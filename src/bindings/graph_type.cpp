// fxcpp._C.GraphBase: the Python face of a core Graph (Note [Python object model]).
#include <unordered_map>

#include "bindings.h"
#include "fxcpp/passes/dce.h"
#include "fxcpp/passes/lint.h"

namespace fxcpp::py {

PyTypeObject* GraphBaseType = nullptr;
PyObject* node_list_of(PyObject* graph);

namespace {

// Per-graph observer: knows the Python object and keeps wrappers coherent.
class Link final : public GraphObserver {
 public:
  explicit Link(PyObject* self) : self_(self) {}
  void on_tombstone(Node& n) override {
    // The core gives up its reference; the wrapper releases the tombstone
    // when it dies (possibly right now).
    PyObject* w = wrapper_of(n);
    Py_DECREF(w);
  }
  void on_destroy(Node& n) override {
    auto* w = pynode_of(n.binding());
    n.set_binding(nullptr);
    w->node = nullptr;
    if (!n.erased()) Py_DECREF(reinterpret_cast<PyObject*>(w));
  }
  PyObject* self_;
};

PyGraph* as_pygraph(PyObject* o) { return reinterpret_cast<PyGraph*>(o); }

PyObject* graph_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  PyGraph* g = as_pygraph(self);
  try {
    g->graph = new Graph();
    g->link = new Link(self);
  } catch (...) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  g->graph->set_observer(g->link);
  return self;
}

int graph_init(PyObject*, PyObject*, PyObject*) { return 0; }

template <typename F>
void for_bound_nodes(Graph* g, F&& f) {
  if (!g) return;
  for (Node* n : g->nodes())
    if (n->binding()) f(n);
  if (g->root()->binding()) f(g->root());
}

int graph_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Graph* g = as_pygraph(self)->graph;
  if (g) {
    for (Node* n : g->nodes())
      if (n->binding()) Py_VISIT(wrapper_of(*n));
    if (g->root()->binding()) Py_VISIT(wrapper_of(*g->root()));
  }
  return 0;
}

int graph_clear(PyObject* self) {
  Graph* g = as_pygraph(self)->graph;
  std::vector<Node*> bound;
  for_bound_nodes(g, [&](Node* n) { bound.push_back(n); });
  for (Node* n : bound) {
    auto* w = pynode_of(n->binding());
    n->set_binding(nullptr);
    w->node = nullptr;
    Py_DECREF(reinterpret_cast<PyObject*>(w));
  }
  return 0;
}

void graph_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  graph_clear(self);
  PyGraph* g = as_pygraph(self);
  delete g->graph;  // detaches tombstone wrappers through the observer
  delete g->link;
  g->graph = nullptr;
  g->link = nullptr;
  tp->tp_free(self);
  Py_DECREF(tp);
}

Graph* graph_of(PyObject* self) { return as_pygraph(self)->graph; }

// Parses METH_FASTCALL|METH_KEYWORDS arguments into `out` by name.
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

// ------------------------------------------------------------------ methods

PyObject* graph_create_node(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[6];
  if (!parse_fast("create_node", fargs, nargs, kwnames, {"op", "target", "args", "kwargs", "name", "type_expr"}, 2, a))
    return nullptr;
  PyObject *op_o = a[0], *target = a[1], *args = a[2], *kwargs = a[3], *name = a[4], *type_expr = a[5];
  Graph* g = graph_of(self);
  FXCPP_TRY
  std::optional<Op> op;
  if (PyUnicode_Check(op_o)) {
    Py_ssize_t len;
    const char* s = PyUnicode_AsUTF8AndSize(op_o, &len);
    if (!s) return nullptr;
    op = parse_op(std::string_view(s, static_cast<size_t>(len)));
  }
  if (!op) {
    PyErr_SetNone(PyExc_AssertionError);
    return nullptr;
  }
  if (args && args != Py_None && !PyTuple_Check(args)) {
    PyErr_SetString(PyExc_AssertionError, "args must be a tuple");
    return nullptr;
  }
  if (kwargs && kwargs != Py_None && !PyDict_Check(kwargs)) {
    PyErr_SetString(PyExc_AssertionError, "kwargs must be a dict");
    return nullptr;
  }
  bool str_target = PyUnicode_Check(target);
  bool ok = *op == Op::CallFunction ? PyCallable_Check(target) && !str_target : str_target;
  std::optional<std::string> nm;
  if (name && name != Py_None) {
    if (!PyUnicode_Check(name)) {
      PyErr_SetString(PyExc_TypeError, "expected string or bytes-like object");
      return nullptr;
    }
    nm = PyUnicode_AsUTF8(name);
  }
  if (!ok) {
    // torch.fx names the node before validating its target; so do we.
    if (!nm && !str_target && !PyCallable_Check(target)) {
      PyErr_SetNone(PyExc_AssertionError);  // torch.fx's _target_to_str assertion (naming from the target)
      return nullptr;
    }
    std::string cand;
    if (nm) {
      cand = *nm;
    } else if (str_target) {
      std::string t = PyUnicode_AsUTF8(target);
      if (t.size() >= 4 && t.rfind("__", 0) == 0 && t.compare(t.size() - 2, 2, "__") == 0) t = t.substr(2, t.size() - 4);
      cand = snake_case(t);
    } else {
      cand = snake_case(py_iface()->name(target));
    }
    std::string uniq = g->names().create_name(cand, nullptr).str();
    PyObject* h = helper("_bad_target");
    if (!h) return nullptr;
    PyObject* r = PyObject_CallFunction(h, "OsOO", self, uniq.c_str(), target,
                                        *op == Op::CallFunction ? Py_True : Py_False);
    Py_XDECREF(r);
    return nullptr;
  }
  // The Python args tuple is not kept: node.args is rebuilt from the core on
  // first read and cached from then on (Note [Binding dirty bits]), so a
  // freshly built graph holds no per-node tuples.
  std::vector<Argument> av;
  if (args && args != Py_None) av = tuple_to_args(args, nullptr);
  KwArgs kv;
  if (kwargs && kwargs != Py_None) kv = dict_to_kwargs(kwargs);
  Target t = str_target ? Target(std::string(PyUnicode_AsUTF8(target))) : Target(borrow_obj(target));
  Object ty = (type_expr && type_expr != Py_None) ? borrow_obj(type_expr) : Object();
  Node* n = g->create_node(*op, std::move(t), std::move(av), std::move(kv), nm, std::move(ty));
  return wrap_node(n);
  FXCPP_CATCH(nullptr)
}

PyObject* graph_erase_node(PyObject* self, PyObject* node) {
  if (!is_node(node)) {
    PyErr_SetString(PyExc_TypeError, "erase_node expects a Node");
    return nullptr;
  }
  Node* n = reinterpret_cast<PyNode*>(node)->node;
  if (!n) return node_of(node), nullptr;
  Graph* g = graph_of(self);
  if (n->graph() != g) {
    PyErr_SetString(PyExc_RuntimeError, "erase_node: the node does not belong to this graph");
    return nullptr;
  }
  FXCPP_TRY
  if (n->num_users() > 0) {
    // torch.fx's message: users printed as a dict of nodes.
    PyObject* users = PyObject_GetAttrString(node, "users");
    if (!users) return nullptr;
    PyObject* r = PyObject_Repr(users);
    Py_DECREF(users);
    if (!r) return nullptr;
    PyErr_Format(PyExc_RuntimeError, "Tried to erase Node %s but it still had %zu users in the graph: %U!",
                 n->name_c_str(), n->num_users(), r);
    Py_DECREF(r);
    return nullptr;
  }
  g->erase_node(n);
  Py_RETURN_NONE;
  FXCPP_CATCH(nullptr)
}

PyObject* graph_set_insert_point(PyObject* self, PyObject* args) {
  PyObject* node;
  int after;
  if (!PyArg_ParseTuple(args, "Op:_set_insert_point", &node, &after)) return nullptr;
  Graph* g = graph_of(self);
  Node* anchor = g->root();
  if (node != Py_None) {
    if (!is_node(node)) {
      PyErr_SetString(PyExc_TypeError, "insertion point must be a Node or None");
      return nullptr;
    }
    anchor = reinterpret_cast<PyNode*>(node)->node;
    if (!anchor || anchor->graph() != g) {
      PyErr_SetString(PyExc_AssertionError,
                      after ? "Node to insert after is not in graph." : "Node to insert before is not in graph.");
      return nullptr;
    }
  }
  g->set_insert_point(anchor, after != 0);
  Py_RETURN_NONE;
}

PyObject* graph_insert_point(PyObject* self, PyObject*) {
  Graph* g = graph_of(self);
  FXCPP_TRY
  PyObject* w = wrap_node(g->insert_anchor());
  return Py_BuildValue("(NO)", w, g->insert_after() ? Py_True : Py_False);
  FXCPP_CATCH(nullptr)
}

PyObject* copy_meta(PyObject* src_w, PyObject* dst_w) {
  auto* s = reinterpret_cast<PyNode*>(src_w);
  auto* d = reinterpret_cast<PyNode*>(dst_w);
  if (!s->meta) return dst_w;
  PyObject* m = PyDict_CheckExact(s->meta) ? PyDict_Copy(s->meta) : nullptr;
  if (!m) {
    PyObject* h = helper("_copy");
    if (!h) return nullptr;
    m = PyObject_CallOneArg(h, s->meta);
    if (!m) return nullptr;
  }
  Py_XSETREF(d->meta, m);
  return dst_w;
}

std::function<Argument(Node*)> py_transform(PyObject* fn) {
  return [fn](Node* n) -> Argument {
    PyObject* w = wrap_node(n);
    PyObject* r = PyObject_CallOneArg(fn, w);
    Py_DECREF(w);
    if (!r) throw PythonError();
    Argument a = to_arg(r);
    Py_DECREF(r);
    return a;
  };
}

PyObject* graph_node_copy(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"node", "arg_transform", nullptr};
  PyObject* node;
  PyObject* fn = nullptr;  // not given: identity
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:node_copy", const_cast<char**>(kwlist), &node, &fn)) return nullptr;
  if (!is_node(node)) {
    PyErr_SetString(PyExc_TypeError, "node_copy expects a Node");
    return nullptr;
  }
  if (fn && !PyCallable_Check(fn)) {  // torch.fx's map_arg assertion (None included)
    PyErr_SetString(PyExc_AssertionError, "torch.fx.map_arg(a, fn): fn must be a callable");
    return nullptr;
  }
  Node* src = reinterpret_cast<PyNode*>(node)->node;
  if (!src) return node_of(node), nullptr;
  FXCPP_TRY
  std::function<Argument(Node*)> tf;
  if (fn) tf = py_transform(fn);
  Node* n = graph_of(self)->node_copy(*src, tf);
  PyObject* w = wrap_node(n);
  if (!copy_meta(node, w)) {
    Py_DECREF(w);
    return nullptr;
  }
  return w;
  FXCPP_CATCH(nullptr)
}

PyObject* graph_graph_copy(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"g", "val_map", "return_output_node", nullptr};
  PyObject* other;
  PyObject* val_map;
  int return_output = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|p:graph_copy", const_cast<char**>(kwlist), &other, &val_map,
                                   &return_output))
    return nullptr;
  if (!PyObject_TypeCheck(other, GraphBaseType)) {
    PyErr_SetString(PyExc_TypeError, "graph_copy expects an fxcpp Graph");
    return nullptr;
  }
  if (!PyDict_Check(val_map)) {
    PyErr_SetString(PyExc_TypeError, "val_map must be a dict");
    return nullptr;
  }
  Graph* src = graph_of(other);
  Graph* dst = graph_of(self);
  FXCPP_TRY
  std::unordered_map<const Node*, Argument> vm;
  {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(val_map, &pos, &k, &v)) {
      if (!is_node(k)) continue;
      Node* kn = reinterpret_cast<PyNode*>(k)->node;
      if (kn && kn->graph() == src) vm.emplace(kn, to_arg(v));
    }
  }
  // Writes the new mappings back (in source order, skipping keys val_map
  // already holds) and copies Python metadata; also after a failed copy,
  // which leaves val_map as torch.fx's in-place updates do.
  auto write_back = [&]() {
    for (Node* s : src->nodes()) {  // past a pre-mapped output too: torch.fx copies on
      auto it = vm.find(s);
      if (it == vm.end()) continue;
      Ref sw = Ref::steal(wrap_node(s));
      if (check(PyDict_Contains(val_map, sw.get()))) continue;
      Ref dw = owned(from_arg(it->second));
      if (it->second.is_node() && !copy_meta(sw.get(), dw.get())) throw PythonError();
      check(PyDict_SetItem(val_map, sw.get(), dw.get()));
    }
  };
  const Node* out_node = nullptr;
  std::optional<Argument> rv;
  try {
    rv = dst->graph_copy(*src, vm, &out_node);
  } catch (...) {
    write_back();
    throw;
  }
  write_back();
  if (!rv) Py_RETURN_NONE;
  PyObject* r = from_arg(*rv);
  if (!return_output) return r;
  PyObject* ow = wrap_node(const_cast<Node*>(out_node));
  return Py_BuildValue("(NN)", r, ow);
  FXCPP_CATCH(nullptr)
}

PyObject* graph_lint_core(PyObject* self, PyObject*) {
  FXCPP_TRY
  lint(*graph_of(self));
  Py_RETURN_NONE;
  FXCPP_CATCH(nullptr)
}

PyObject* graph_dce(PyObject* self, PyObject*) {
  Graph* g = graph_of(self);
  FXCPP_TRY
  DceOptions opts;
  opts.lint_first = false;  // the Python layer lints (with its module checks) first
  opts.is_impure = [](const Node& n) -> bool {
    if (n.op() != Op::CallModule) return false;
    PyObject* w = wrap_node(const_cast<Node*>(&n));
    PyObject* r = PyObject_CallMethod(w, "is_impure", nullptr);
    Py_DECREF(w);
    if (!r) throw PythonError();
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (t < 0) throw PythonError();
    return t == 1;
  };
  bool changed = eliminate_dead_code(*g, opts);
  return PyBool_FromLong(changed);
  FXCPP_CATCH(nullptr)
}

PyObject* graph_str(PyObject* self) {
  FXCPP_TRY
  std::string s = graph_of(self)->to_string();
  return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  FXCPP_CATCH(nullptr)
}

PyObject* method_if_overridden(PyObject* codegen, const char* name) {
  // Returns a bound method when type(codegen).name is not CodeGen's own.
  PyObject* base = helper("CodeGen");
  if (!base) return nullptr;
  PyObject* mine = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(codegen)), name);
  PyObject* theirs = PyObject_GetAttrString(base, name);
  if (!mine || !theirs) {
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    return nullptr;
  }
  bool same = mine == theirs;
  Py_DECREF(mine);
  Py_DECREF(theirs);
  if (same) Py_RETURN_NONE;
  return PyObject_GetAttrString(codegen, name);
}

struct PyRef {
  PyObject* p = nullptr;
  ~PyRef() { Py_XDECREF(p); }
};

std::vector<std::string> list_to_strings(PyObject* l) {
  std::vector<std::string> out;
  PyObject* seq = PySequence_Fast(l, "expected a list of str");
  if (!seq) throw PythonError();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const char* c = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
    if (!c) {
      Py_DECREF(seq);
      throw PythonError();
    }
    out.emplace_back(c);
  }
  Py_DECREF(seq);
  return out;
}

PyObject* strings_to_list(const std::vector<std::string>& v) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
  if (!l) throw PythonError();
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(v[i].data(), static_cast<Py_ssize_t>(v[i].size()));
    if (!s) {
      Py_DECREF(l);
      throw PythonError();
    }
    PyList_SET_ITEM(l, static_cast<Py_ssize_t>(i), s);
  }
  return l;
}

std::string to_str(PyObject* r) {
  if (!r) throw PythonError();
  const char* c = PyUnicode_AsUTF8(r);
  if (!c) {
    Py_DECREF(r);
    throw PythonError();
  }
  std::string s(c);
  Py_DECREF(r);
  return s;
}

// _python_code(root_module, verbose, codegen) -> (src, globals)
PyObject* graph_python_code(PyObject* self, PyObject* args) {
  const char* root_module;
  int verbose;
  PyObject* codegen;
  if (!PyArg_ParseTuple(args, "spO:_python_code", &root_module, &verbose, &codegen)) return nullptr;
  Graph* g = graph_of(self);
  FXCPP_TRY
  PythonCodeOptions opts;
  opts.root_module = root_module;
  opts.verbose = verbose != 0;
  opts.hooks.is_wrapped = [](const Node& n) {
    auto* w = pynode_of(n.binding());
    if (!w || !w->meta) return false;
    PyObject* v = PyDict_GetItemString(w->meta, "is_wrapped");
    return v && PyObject_IsTrue(v) == 1;
  };
  opts.hooks.stack_trace = [](const Node& n) -> std::optional<std::string> {
    auto* w = pynode_of(n.binding());
    if (!w || !w->meta) return std::nullopt;
    PyObject* v = PyDict_GetItemString(w->meta, "stack_trace");
    if (!v || !PyUnicode_Check(v)) return std::nullopt;
    return std::string(PyUnicode_AsUTF8(v));
  };
  PyObject* wrap = helper("wrap");
  if (!wrap) return nullptr;
  opts.hooks.wrap_fn = borrow_obj(wrap);

  PyRef gen_fn_def, gen_out, add_globals, body_tf;
  if (codegen != Py_None) {
    if (!(gen_fn_def.p = method_if_overridden(codegen, "gen_fn_def"))) return nullptr;
    if (!(gen_out.p = method_if_overridden(codegen, "generate_output"))) return nullptr;
    if (!(add_globals.p = method_if_overridden(codegen, "additional_globals"))) return nullptr;
    body_tf.p = PyObject_GetAttrString(codegen, "_body_transformer");
    if (!body_tf.p) PyErr_Clear();
  }
  std::function<std::string(const Node*)> node_namer;
  if (gen_fn_def.p != Py_None && gen_fn_def.p) {
    PyObject* f = gen_fn_def.p;
    opts.hooks.gen_fn_def = [f](std::vector<std::string>& free_vars, const std::string& ret) {
      PyObject* l = strings_to_list(free_vars);
      PyObject* r = PyObject_CallFunction(f, "Os", l, ret.c_str());
      free_vars = list_to_strings(l);
      Py_DECREF(l);
      return to_str(r);
    };
  }
  if (gen_out.p != Py_None && gen_out.p) {
    PyObject* f = gen_out.p;
    opts.hooks.generate_output = [f, &node_namer](const Argument& out, const ArgReprFn&) {
      PyObject* o = from_arg(out);
      PyObject* r = PyObject_CallOneArg(f, o);
      Py_DECREF(o);
      return to_str(r);
    };
  }
  if (add_globals.p != Py_None && add_globals.p) {
    PyObject* f = add_globals.p;
    opts.hooks.additional_globals = [f]() {
      std::vector<std::pair<std::string, Object>> out;
      PyObject* r = PyObject_CallNoArgs(f);
      if (!r) throw PythonError();
      PyObject* seq = PySequence_Fast(r, "additional_globals() must return a sequence");
      Py_DECREF(r);
      if (!seq) throw PythonError();
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *k, *v;
        if (!PyArg_ParseTuple(item, "OO", &k, &v)) {
          Py_DECREF(seq);
          throw PythonError();
        }
        out.emplace_back(PyUnicode_AsUTF8(k), borrow_obj(v));
      }
      Py_DECREF(seq);
      return out;
    };
  }
  if (body_tf.p && body_tf.p != Py_None) {
    PyObject* f = body_tf.p;
    opts.hooks.body_transformer = [f](std::vector<std::string> body) {
      PyObject* l = strings_to_list(body);
      PyObject* r = PyObject_CallOneArg(f, l);
      Py_DECREF(l);
      if (!r) throw PythonError();
      auto out = list_to_strings(r);
      Py_DECREF(r);
      return out;
    };
  }
  // While Python hooks run, repr(node) must give codegen names. The core
  // exposes them through the ArgReprFn; we route Node.__repr__ through the
  // generator's namespace by rendering a node reference.
  const ArgReprFn* current_repr = nullptr;
  std::function<std::string(const Node*)> via_gen = [&current_repr](const Node* n) {
    return (*current_repr)(Argument::node(const_cast<Node*>(n)));
  };
  if (opts.hooks.generate_output) {
    auto inner = opts.hooks.generate_output;
    opts.hooks.generate_output = [inner, &current_repr, &via_gen](const Argument& out, const ArgReprFn& repr) {
      current_repr = &repr;
      const auto* saved = g_codegen_node_repr;
      g_codegen_node_repr = &via_gen;
      try {
        std::string s = inner(out, repr);
        g_codegen_node_repr = saved;
        return s;
      } catch (...) {
        g_codegen_node_repr = saved;
        throw;
      }
    };
  }
  PythonCode pc = python_code(*g, opts);
  PyObject* globals = PyDict_New();
  if (!globals) return nullptr;
  for (auto& kv : pc.globals) {
    if (PyDict_SetItemString(globals, kv.first.c_str(), obj_ptr(kv.second)) < 0) {
      Py_DECREF(globals);
      return nullptr;
    }
  }
  PyObject* src = PyUnicode_FromStringAndSize(pc.src.data(), static_cast<Py_ssize_t>(pc.src.size()));
  if (!src) {
    Py_DECREF(globals);
    return nullptr;
  }
  return Py_BuildValue("(NN)", src, globals);
  FXCPP_CATCH(nullptr)
}

PyObject* graph_find_nodes(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"op", "target", "sort", nullptr};
  const char* op_s;
  PyObject* target = nullptr;
  int sort = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$sOp:find_nodes", const_cast<char**>(kwlist), &op_s, &target, &sort))
    return nullptr;
  auto op = parse_op(op_s);
  if (!op) return PyList_New(0);
  FXCPP_TRY
  std::vector<Node*> found;
  if (target && target != Py_None) {
    Target t = PyUnicode_Check(target) ? Target(std::string(PyUnicode_AsUTF8(target))) : Target(borrow_obj(target));
    found = graph_of(self)->find_nodes(*op, &t);
  } else {
    found = graph_of(self)->find_nodes(*op);
  }
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(found.size()));
  if (!l) return nullptr;
  for (size_t i = 0; i < found.size(); ++i) PyList_SET_ITEM(l, static_cast<Py_ssize_t>(i), wrap_node(found[i]));
  return l;
  FXCPP_CATCH(nullptr)
}

PyObject* get_nodes(PyObject* self, void*) { return node_list_of(self); }
PyObject* get_len(PyObject* self, void*) { return PyLong_FromSize_t(graph_of(self)->size()); }
PyObject* get_root(PyObject* self, void*) {
  FXCPP_TRY
  return wrap_node(graph_of(self)->root());
  FXCPP_CATCH(nullptr)
}

PyGetSetDef graph_getset[] = {
    {"nodes", get_nodes, nullptr, "The nodes, in order (iterable, reversible, len()).", nullptr},
    {"_len", get_len, nullptr, nullptr, nullptr},
    {"_root", get_root, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef graph_methods[] = {
    {"create_node", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_create_node)),
     METH_FASTCALL | METH_KEYWORDS, "create_node(op, target, args=None, kwargs=None, name=None, type_expr=None)"},
    {"erase_node", graph_erase_node, METH_O, "Erase a node without users."},
    {"_set_insert_point", graph_set_insert_point, METH_VARARGS, nullptr},
    {"_insert_point", graph_insert_point, METH_NOARGS, nullptr},
    {"node_copy", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_node_copy)),
     METH_VARARGS | METH_KEYWORDS, "Copy a node into this graph."},
    {"graph_copy", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_graph_copy)),
     METH_VARARGS | METH_KEYWORDS, "Copy all nodes of g into this graph."},
    {"_lint_core", graph_lint_core, METH_NOARGS, nullptr},
    {"_dce_core", graph_dce, METH_NOARGS, nullptr},
    {"_python_code", graph_python_code, METH_VARARGS, nullptr},
    {"find_nodes", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_find_nodes)),
     METH_VARARGS | METH_KEYWORDS, "find_nodes(*, op, target=None, sort=True): nodes by op (and target)."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot graph_slots[] = {{Py_tp_new, reinterpret_cast<void*>(graph_new)},
                             {Py_tp_init, reinterpret_cast<void*>(graph_init)},
                             {Py_tp_dealloc, reinterpret_cast<void*>(graph_dealloc)},
                             {Py_tp_traverse, reinterpret_cast<void*>(graph_traverse)},
                             {Py_tp_clear, reinterpret_cast<void*>(graph_clear)},
                             {Py_tp_str, reinterpret_cast<void*>(graph_str)},
                             {Py_tp_getset, graph_getset},
                             {Py_tp_methods, graph_methods},
                             {0, nullptr}};
PyType_Spec graph_spec = {"fxcpp._C.GraphBase", sizeof(PyGraph), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, graph_slots};

}  // namespace

PyObject* graph_pyobject(Graph* g) {
  auto* link = static_cast<Link*>(g->observer());
  return link ? link->self_ : nullptr;
}

Graph* core_graph_of(PyObject* graph) {
  if (!PyObject_TypeCheck(graph, GraphBaseType)) {
    PyErr_SetString(PyExc_TypeError, "expected an fxcpp Graph");
    return nullptr;
  }
  return reinterpret_cast<PyGraph*>(graph)->graph;
}

int init_graph_type(PyObject* m) {
  GraphBaseType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&graph_spec));
  if (!GraphBaseType) return -1;
  return PyModule_AddObjectRef(m, "GraphBase", reinterpret_cast<PyObject*>(GraphBaseType));
}

}  // namespace fxcpp::py
