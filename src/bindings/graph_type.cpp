// fxcpp._C.GraphBase: the Python face of a core Graph (Note [Python object model]).
#include <unordered_map>

#include "bindings.h"
#include "fxcpp/core/dialect.h"
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
  Ref self = owned(type->tp_alloc(type, 0));
  PyGraph* g = as_pygraph(self.get());
  g->graph = new Graph();
  g->link = new Link(self.get());  // on failure the dealloc deletes the graph
  g->graph->set_observer(g->link);
  return self.release();
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

}  // namespace

namespace {

// ------------------------------------------------------------------ methods

// The argument name used in errors about a string target, per op.
const char* target_what(Op op) {
  switch (op) {
    case Op::Placeholder: return "placeholder name";
    case Op::GetAttr: return "get_attr target";
    case Op::CallFunction: return "call_function target";
    case Op::CallMethod: return "call_method target";
    case Op::CallModule: return "call_module target";
    case Op::Output: return "output target";
    case Op::Root: break;
  }
  return "target";
}

// A string target (interned from the UTF-8 text) or a callable one.
Target to_target(PyObject* target, const char* what) {
  if (PyUnicode_Check(target)) return Target(InternedString(utf8(target, what)));
  return Target(borrow_obj(target));
}

// Raises torch.fx's AssertionError for a bad create_node input, worded as
// the installed torch.fx words it (_torch_compat.fx_assertion_message; kind:
// "op", "target", "args" or "kwargs"). Returns nullptr.
PyObject* raise_fx_assertion(const char* kind, PyObject* value) {
  PyObject* h = helpers().assertion_message;
  Ref msg = Ref::steal(PyObject_CallFunction(h, "sO", kind, value));
  if (!msg) return nullptr;
  if (msg.get() == Py_None) PyErr_SetNone(PyExc_AssertionError);
  else PyErr_SetObject(PyExc_AssertionError, msg.get());
  return nullptr;
}

// _target_to_str(target): torch.fx's Graph._target_to_str, by the core's one
// naming rule (Graph::target_to_str). torch.fx reads a callable's __name__ and
// asserts anything else is a str; so does this.
PyObject* graph_target_to_str(PyObject*, PyObject* target) {
  if (!PyUnicode_Check(target)) {
    if (!PyCallable_Check(target)) return raise_fx_assertion("target", target);
    Ref name = owned(PyObject_GetAttrString(target, "__name__"));
  }
  return str_from_display_text(Graph::target_to_str(to_target(target, "target")));
}

PyObject* graph_create_node(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[6];
  if (!parse_fast("create_node", fargs, nargs, kwnames, {"op", "target", "args", "kwargs", "name", "type_expr"}, 2, a))
    return nullptr;
  PyObject *op_o = a[0], *target = a[1], *args = a[2], *kwargs = a[3], *name = a[4], *type_expr = a[5];
  Graph* g = graph_of(self);
  // Every opcode is ASCII: a str that is not can only fail torch.fx's
  // `assert op in (...)`, never needs encoding.
  std::optional<Op> op;
  if (PyUnicode_Check(op_o) && PyUnicode_IS_ASCII(op_o)) op = parse_op(utf8(op_o, "create_node op"));
  if (!op) return raise_fx_assertion("op", op_o);
  // torch.fx 2.x takes any false args/kwargs ([], 0, '') as none (`if not args: args = ()`); 1.13
  // only None. The dialect is the installed torch.fx's (set from _torch_compat.FX_DIALECT).
  const bool empty_if_false = dialect() == Dialect::fx_2;
  if (args && args != Py_None && !PyTuple_Check(args)) {
    int truth = empty_if_false ? PyObject_IsTrue(args) : 1;
    if (truth < 0) return nullptr;
    if (truth) return raise_fx_assertion("args", args);
    args = nullptr;
  }
  if (kwargs && kwargs != Py_None && !PyDict_Check(kwargs)) {
    int truth = empty_if_false ? PyObject_IsTrue(kwargs) : 1;
    if (truth < 0) return nullptr;
    if (truth) return raise_fx_assertion("kwargs", kwargs);
    kwargs = nullptr;
  }
  bool str_target = PyUnicode_Check(target);
  bool ok = *op == Op::CallFunction ? PyCallable_Check(target) && !str_target : str_target;
  std::optional<std::string> nm;
  if (name && name != Py_None) {
    if (!PyUnicode_Check(name)) {
      // torch.fx's Namespace.create_name applies a str regex to the name.
      if (PyObject_CheckBuffer(name))
        PyErr_SetString(PyExc_TypeError, "cannot use a string pattern on a bytes-like object");
      else
        PyErr_Format(PyExc_TypeError, "expected string or bytes-like object, got '%.200s'", Py_TYPE(name)->tp_name);
      return nullptr;
    }
    nm = utf8_string(name, "create_node name");
  }
  if (!ok) {
    // torch.fx names the node before validating its target; so do we.
    // torch.fx's _target_to_str assertion (naming from the target)
    if (!nm && !str_target && !PyCallable_Check(target)) return raise_fx_assertion("target", target);
    std::string cand = nm ? *nm : Graph::target_to_str(to_target(target, target_what(*op)));
    std::string uniq = g->names().create_name(cand, nullptr).str();
    Ref r = Ref::steal(PyObject_CallFunction(helpers().bad_target, "OsOO", self, uniq.c_str(), target,
                                             *op == Op::CallFunction ? Py_True : Py_False));
    if (!r) return nullptr;
    PyErr_SetString(PyExc_RuntimeError, "_bad_target returned instead of raising");
    return nullptr;
  }
  // The Python args tuple is not kept: node.args is rebuilt from the core on
  // first read and cached from then on (Note [Binding dirty bits]), so a
  // freshly built graph holds no per-node tuples.
  std::vector<Argument> av;
  if (args && args != Py_None) av = tuple_to_args(args, nullptr);
  KwArgs kv;
  if (kwargs && kwargs != Py_None) kv = dict_to_kwargs(kwargs);
  Target t = to_target(target, target_what(*op));
  Object ty = (type_expr && type_expr != Py_None) ? borrow_obj(type_expr) : Object();
  Node* n = g->create_node(*op, std::move(t), std::move(av), std::move(kv), nm, std::move(ty));
  Ref w = Ref::steal(wrap_node(n));
  if (w && helpers().create_node_hooks != Py_None) {
    // torch.fx 2.x: the owning module's create-node hooks see the new node (Note [GraphModule
    // node hooks] in graph.py); the attribute read keeps the call off graphs without an owner.
    static PyObject* owner_key = check(PyUnicode_InternFromString("_owning_module"));
    Ref owner = Ref::steal(PyObject_GetAttr(self, owner_key));
    if (!owner) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
    } else if (owner.get() != Py_None) {
      Ref r = Ref::steal(PyObject_CallFunctionObjArgs(helpers().create_node_hooks, self, w.get(), nullptr));
      if (!r) return nullptr;
    }
  }
  return w.release();
}

PyObject* erase_hooks_key() {
  static PyObject* key = check(PyUnicode_InternFromString("_erase_node_hooks"));
  return key;
}

}  // namespace

bool owner_has_hooks(PyObject* graph, PyObject* attr) {
  static PyObject* owner_key = check(PyUnicode_InternFromString("_owning_module"));
  Ref owner = Ref::steal(PyObject_GetAttr(graph, owner_key));
  if (!owner) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return PyErr_Clear(), true;
    PyErr_Clear();
    return false;
  }
  if (owner.get() == Py_None) return false;
  Ref hooks = Ref::steal(PyObject_GetAttr(owner.get(), attr));
  if (!hooks) {
    bool missing = PyErr_ExceptionMatches(PyExc_AttributeError);
    PyErr_Clear();
    return !missing;
  }
  if (hooks.get() == Py_None) return false;
  int t = PyObject_IsTrue(hooks.get());
  if (t < 0) PyErr_Clear();
  return t != 0;
}

namespace {

PyObject* graph_erase_node(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* node;
  if (!parse_fast("erase_node", fargs, nargs, kwnames, {"to_erase"}, 1, &node)) return nullptr;
  if (!is_node(node)) {
    PyErr_SetString(PyExc_TypeError, "erase_node expects a Node");
    return nullptr;
  }
  Node* n = reinterpret_cast<PyNode*>(node)->node;
  if (!n) return node_of(node), nullptr;
  Graph* g = graph_of(self);
  if (helpers().erase_node_2x != Py_None && !(n && !n->erased() && n->graph() == g && n->num_users() == 0 &&
                                                !owner_has_hooks(self, erase_hooks_key()))) {
    // torch.fx 2.x's checks, order and messages, and its erase-node hooks (Note [GraphModule
    // node hooks] in graph.py); False: an erased node, which 2.x only warns about. A node that
    // passes every check, of a graph whose owner has no erase-node hook, is erased here.
    Ref go = Ref::steal(PyObject_CallFunctionObjArgs(helpers().erase_node_2x, self, node, nullptr));
    if (!go) return nullptr;
    int proceed = PyObject_IsTrue(go.get());
    if (proceed < 0) return nullptr;
    if (!proceed) Py_RETURN_NONE;
    n = reinterpret_cast<PyNode*>(node)->node;  // a hook may have edited the graph
    if (!n) return node_of(node), nullptr;
  }
  if (n->graph() != g) {
    PyErr_SetString(PyExc_RuntimeError, "erase_node: the node does not belong to this graph");
    return nullptr;
  }
  if (n->num_users() > 0) {
    // torch.fx's message: users printed as a dict of nodes.
    Ref users = owned(PyObject_GetAttrString(node, "users"));
    Ref r = owned(PyObject_Repr(users.get()));
    PyErr_Format(PyExc_RuntimeError, "Tried to erase Node %s but it still had %zu users in the graph: %U!",
                 n->name_c_str(), n->num_users(), r.get());
    return nullptr;
  }
  g->erase_node(n);
  Py_RETURN_NONE;
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
  Ref w = Ref::steal(wrap_node(g->insert_anchor()));
  return Py_BuildValue("(OO)", w.get(), g->insert_after() ? Py_True : Py_False);
}

// Copies the Python meta of wrapper `src_w` onto wrapper `dst_w` (torch.fx
// node_copy: `copy.copy(node.meta)`).
void copy_meta(PyObject* src_w, PyObject* dst_w) {
  auto* s = reinterpret_cast<PyNode*>(src_w);
  auto* d = reinterpret_cast<PyNode*>(dst_w);
  if (!s->meta) return;
  Ref m = PyDict_CheckExact(s->meta) ? owned(PyDict_Copy(s->meta))
                                     : owned(PyObject_CallOneArg(helpers().copy, s->meta));
  Py_XSETREF(d->meta, m.release());
}

std::function<Argument(Node*)> py_transform(PyObject* fn) {
  return [fn](Node* n) -> Argument {
    Ref w = Ref::steal(wrap_node(n));
    Ref r = owned(PyObject_CallOneArg(fn, w.get()));
    return to_arg(r.get());
  };
}

PyObject* graph_node_copy(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"node", "arg_transform", nullptr};
  PyObject* node;
  PyObject* fn = nullptr;  // not given: identity
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:_node_copy", const_cast<char**>(kwlist), &node, &fn)) return nullptr;
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
  std::function<Argument(Node*)> tf;
  if (fn) tf = py_transform(fn);
  Node* n = graph_of(self)->node_copy(*src, tf);
  Ref w = Ref::steal(wrap_node(n));
  copy_meta(node, w.get());
  return w.release();
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
      if (it->second.is_node()) copy_meta(sw.get(), dw.get());
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
  Ref r = Ref::steal(from_arg(*rv));
  if (!return_output) return r.release();
  Ref ow = Ref::steal(wrap_node(const_cast<Node*>(out_node)));
  return Py_BuildValue("(OO)", r.get(), ow.get());
}

PyObject* graph_lint_core(PyObject* self, PyObject*) {
  lint(*graph_of(self));
  Py_RETURN_NONE;
}

PyObject* graph_dce(PyObject* self, PyObject*) {
  DceOptions opts;
  opts.lint_first = false;  // the Python layer lints (with its module checks) first
  opts.module_is_impure = py_module_is_impure;
  return PyBool_FromLong(eliminate_dead_code(*graph_of(self), opts));
}

PyObject* graph_str(PyObject* self) {
  return str_from_display_text(graph_of(self)->to_string());
}

// A bound method when type(codegen).name is not CodeGen's own, else None.
Ref method_if_overridden(PyObject* codegen, const char* name) {
  PyObject* base = helpers().codegen;
  Ref mine = owned(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(codegen)), name));
  Ref theirs = owned(PyObject_GetAttrString(base, name));
  if (mine.get() == theirs.get()) return Ref::borrow(Py_None);
  return owned(PyObject_GetAttrString(codegen, name));
}

std::vector<std::string> list_to_strings(PyObject* l, const char* what) {
  std::vector<std::string> out;
  Ref seq = owned(PySequence_Fast(l, "expected a list of str"));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out.emplace_back(utf8(PySequence_Fast_GET_ITEM(seq.get(), i), what));
  return out;
}

Ref strings_to_list(const std::vector<std::string>& v) {
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(v.size())));
  for (size_t i = 0; i < v.size(); ++i)
    PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i),
                    check(PyUnicode_FromStringAndSize(v[i].data(), static_cast<Py_ssize_t>(v[i].size()))));
  return l;
}

// An interned str kept for the process lifetime (dict keys read per node).
PyObject* static_key(PyObject*& slot, const char* text) {
  if (!slot) slot = check(PyUnicode_InternFromString(text));
  return slot;
}
PyObject* g_key_is_wrapped = nullptr;
PyObject* g_key_stack_trace = nullptr;
PyObject* g_key_val = nullptr;
PyObject* g_key_tensor_meta = nullptr;
PyObject* g_key_example_value = nullptr;
PyObject* g_key_custom = nullptr;
PyObject* g_key_recompute = nullptr;
PyObject* g_key_ac_graph_id = nullptr;
PyObject* g_key_expanded_def = nullptr;
PyObject* g_key_desc = nullptr;

// The value of meta[key] (borrowed; null when absent or meta is not a dict).
PyObject* meta_item(const Node& n, PyObject* key) {
  auto* w = pynode_of(n.binding());
  if (!w || !w->meta || !PyDict_Check(w->meta)) return nullptr;
  PyObject* v = PyDict_GetItemWithError(w->meta, key);
  if (!v && PyErr_Occurred()) throw PythonError();
  return v;
}

// _python_code(root_module, verbose, codegen[, include_stride, include_device, colored, expanded_def,
// record_func, additional_meta]) -> (src, globals)
PyObject* graph_python_code(PyObject* self, PyObject* args) {
  PyObject* root_module;
  int verbose;
  PyObject* codegen;
  int include_stride = 0, include_device = 0, colored = 0, expanded_def = 0, record_func = 0;
  PyObject* additional_meta = Py_None;
  if (!PyArg_ParseTuple(args, "OpO|pppppO:_python_code", &root_module, &verbose, &codegen, &include_stride,
                        &include_device, &colored, &expanded_def, &record_func, &additional_meta))
    return nullptr;
  Graph* g = graph_of(self);
  PythonCodeOptions opts;
  opts.root_module = utf8_string(root_module, "root_module");
  opts.verbose = verbose != 0;
  opts.colored = colored != 0;
  opts.expanded_def = expanded_def != 0;
  opts.record_func = record_func != 0;
  // Note [Verbose annotations]: the metadata's value (the first of val, tensor_meta and
  // example_value the node has) is described by the Python helper.
  Ref annotation_flags = owned(Py_BuildValue("(OOO)", include_stride ? Py_True : Py_False,
                                             include_device ? Py_True : Py_False, colored ? Py_True : Py_False));
  opts.hooks.meta_annotation = [&annotation_flags](const Node& n) -> std::optional<std::string> {
    PyObject* v = meta_item(n, static_key(g_key_val, "val"));
    if (!v) v = meta_item(n, static_key(g_key_tensor_meta, "tensor_meta"));
    if (!v) v = meta_item(n, static_key(g_key_example_value, "example_value"));
    if (!v) return std::nullopt;
    Ref r = owned(PyObject_CallFunctionObjArgs(helpers().meta_annotation, v, PyTuple_GET_ITEM(annotation_flags.get(), 0),
                                               PyTuple_GET_ITEM(annotation_flags.get(), 1),
                                               PyTuple_GET_ITEM(annotation_flags.get(), 2), nullptr));
    if (r.get() == Py_None) return std::nullopt;
    return display_text_owned(PyObject_Str(r.get()));
  };
  opts.hooks.descs = [](const Node& n) -> std::optional<std::vector<std::string>> {
    PyObject* v = meta_item(n, static_key(g_key_desc, "desc"));
    if (!v || v == Py_None) return std::nullopt;
    std::vector<std::string> out;
    if (n.op() != Op::Output) {
      out.push_back(display_text_owned(PyObject_Str(v)));
      return out;
    }
    Ref it = owned(PyObject_GetIter(v));
    while (Ref item = Ref::steal(PyIter_Next(it.get()))) out.push_back(display_text_owned(PyObject_Str(item.get())));
    if (PyErr_Occurred()) throw PythonError();
    return out;
  };
  const bool want_additional = additional_meta != Py_None && check(PyObject_IsTrue(additional_meta)) == 1;
  opts.hooks.comment_parts = [want_additional, additional_meta](const Node& n) {
    std::pair<std::string, std::string> parts;
    auto* w = pynode_of(n.binding());
    if (!w || !w->meta || !PyDict_Check(w->meta)) return parts;
    if (!want_additional && !meta_item(n, static_key(g_key_custom, "custom")) &&
        !meta_item(n, static_key(g_key_recompute, "recompute")) &&
        !meta_item(n, static_key(g_key_ac_graph_id, "ac_graph_id")))
      return parts;
    Ref r = owned(PyObject_CallFunctionObjArgs(helpers().comment_parts, w->meta, additional_meta, nullptr));
    PyObject *prefix, *middle;
    if (!PyArg_ParseTuple(r.get(), "OO", &prefix, &middle)) throw PythonError();
    parts.first = display_text_owned(PyObject_Str(prefix));
    parts.second = display_text_owned(PyObject_Str(middle));
    return parts;
  };
  opts.hooks.is_wrapped = [](const Node& n) {
    PyObject* v = meta_item(n, static_key(g_key_is_wrapped, "is_wrapped"));
    return v && check(PyObject_IsTrue(v)) == 1;
  };
  opts.hooks.stack_trace = [](const Node& n) -> std::optional<std::string> {
    PyObject* v = meta_item(n, static_key(g_key_stack_trace, "stack_trace"));
    if (!v || !check(PyObject_IsTrue(v))) return std::nullopt;
    if (!PyUnicode_Check(v)) {
      // torch.fx calls node.stack_trace.strip().
      PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute 'strip'", Py_TYPE(v)->tp_name);
      throw PythonError();
    }
    // Display text, like a constant's repr: torch.fx copies it into a comment
    // as is, lone surrogates included, and so do we.
    return display_text_owned(Ref::borrow(v).release());
  };
  opts.hooks.wrap_fn = borrow_obj(helpers().wrap);

  Ref gen_fn_def, gen_out, add_globals, body_tf, gen_fn_def_kw;
  if (codegen != Py_None) {
    gen_fn_def = method_if_overridden(codegen, "gen_fn_def");
    gen_out = method_if_overridden(codegen, "generate_output");
    add_globals = method_if_overridden(codegen, "additional_globals");
    body_tf = Ref::steal(PyObject_GetAttrString(codegen, "_body_transformer"));
    if (!body_tf) PyErr_Clear();
  }
  if (gen_fn_def && gen_fn_def.get() != Py_None) {
    PyObject* f = gen_fn_def.get();
    // torch.fx 2.x passes expanded_def to an override that takes it.
    if (opts.expanded_def) {
      Ref params = owned(PyObject_CallFunctionObjArgs(helpers().keyword_params, f, nullptr));
      if (check(PySequence_Contains(params.get(), static_key(g_key_expanded_def, "expanded_def"))) == 1)
        gen_fn_def_kw = owned(Py_BuildValue("{s:O}", "expanded_def", Py_True));
    }
    PyObject* kw = gen_fn_def_kw.get();
    opts.hooks.gen_fn_def = [f, kw](std::vector<std::string>& free_vars, const std::string& ret) {
      Ref l = strings_to_list(free_vars);
      Ref a = owned(Py_BuildValue("(Os#)", l.get(), ret.data(), static_cast<Py_ssize_t>(ret.size())));
      Ref r = owned(PyObject_Call(f, a.get(), kw));
      free_vars = list_to_strings(l.get(), "gen_fn_def free_vars item");
      return utf8_string(r.get(), "gen_fn_def() result");
    };
  }
  if (gen_out && gen_out.get() != Py_None) {
    PyObject* f = gen_out.get();
    opts.hooks.generate_output = [f](const Argument& out, const ArgReprFn&) {
      Ref o = Ref::steal(from_arg(out));
      return utf8_owned(PyObject_CallOneArg(f, o.get()), "generate_output() result");
    };
  }
  if (add_globals && add_globals.get() != Py_None) {
    PyObject* f = add_globals.get();
    opts.hooks.additional_globals = [f]() {
      std::vector<std::pair<std::string, Object>> out;
      Ref r = owned(PyObject_CallNoArgs(f));
      Ref seq = owned(PySequence_Fast(r.get(), "additional_globals() must return a sequence"));
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        PyObject *k, *v;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq.get(), i), "OO", &k, &v)) throw PythonError();
        out.emplace_back(utf8(k, "additional_globals() name"), borrow_obj(v));
      }
      return out;
    };
  }
  if (body_tf && body_tf.get() != Py_None) {
    PyObject* f = body_tf.get();
    opts.hooks.body_transformer = [f](std::vector<std::string> body) {
      Ref l = strings_to_list(body);
      Ref r = owned(PyObject_CallOneArg(f, l.get()));
      return list_to_strings(r.get(), "body transformer result item");
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
      struct Restore {
        const std::function<std::string(const Node*)>* saved = g_codegen_node_repr;
        ~Restore() { g_codegen_node_repr = saved; }
      } restore;
      g_codegen_node_repr = &via_gen;
      return inner(out, repr);
    };
  }
  PythonCode pc = python_code(*g, opts);
  Ref globals = owned(PyDict_New());
  for (auto& kv : pc.globals) check(PyDict_SetItemString(globals.get(), kv.first.c_str(), obj_ptr(kv.second)));
  Ref src = owned(str_from_display_text(pc.src));  // constants' reprs are display text
  // Note [Line numbers of generated code]: (prologue_start, prologue_lines, body_lines,
  // bytes of native uint32 node lines or None, bytes of native int64 per-line nodes or None),
  // expanded in Python on demand.
  Ref node_lines = pc.node_lines.empty() && pc.body_lines == 0
                       ? Ref::borrow(Py_None)
                       : owned(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(pc.node_lines.data()),
                                                         static_cast<Py_ssize_t>(pc.node_lines.size() * sizeof(uint32_t))));
  Ref line_nodes = pc.line_nodes.empty()
                       ? Ref::borrow(Py_None)
                       : owned(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(pc.line_nodes.data()),
                                                         static_cast<Py_ssize_t>(pc.line_nodes.size() * sizeof(int64_t))));
  return Py_BuildValue("(OO(IIIOO))", src.get(), globals.get(), pc.prologue_start, pc.prologue_lines, pc.body_lines,
                       node_lines.get(), line_nodes.get());
}

PyObject* graph_find_nodes(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"op", "target", "sort", nullptr};
  PyObject* op_o = nullptr;
  PyObject* target = nullptr;
  int sort = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOp:find_nodes", const_cast<char**>(kwlist), &op_o, &target, &sort))
    return nullptr;
  if (!op_o) {
    PyErr_SetString(PyExc_TypeError, "find_nodes() missing required keyword-only argument: 'op'");
    return nullptr;
  }
  auto op = parse_op(utf8(op_o, "find_nodes op"));
  if (!op) return PyList_New(0);
  std::vector<Node*> found;
  if (target && target != Py_None) {
    Target t = to_target(target, "find_nodes target");
    found = graph_of(self)->find_nodes(*op, &t, sort != 0);
  } else {
    found = graph_of(self)->find_nodes(*op, nullptr, sort != 0);
  }
  return wrap_nodes(found);
}

// ------------------------------------------------------------------ pickling
//
// Note [Graph pickling]: torch.fx pickles a Graph as its __dict__, following
// the node links recursively. fxcpp's package Graph pickles its Python
// attributes plus one flat record per node, exported and imported here in a
// single linear pass: (op, name, target, args, kwargs, type, meta, __dict__),
// with every Node inside args/kwargs replaced by `_NodeRef(position)` (an int
// subclass defined in fxcpp.graph). Meta and __dict__ are pickled as they are.

// A node argument with nodes replaced by _NodeRef(position).
PyObject* export_arg(const Argument& a, const std::unordered_map<const Node*, Py_ssize_t>& pos, PyObject* ref_cls) {
  std::optional<RecursionGuard> guard;
  if (a.kind() >= ArgKind::Tuple) guard.emplace(" while pickling a graph argument");
  switch (a.kind()) {
    case ArgKind::NodeRef: {
      auto it = pos.find(a.as_node());
      if (it == pos.end()) {
        PyErr_Format(PyExc_RuntimeError, "cannot pickle a graph whose node uses '%s' of another graph",
                     a.as_node()->name_c_str());
        throw PythonError();
      }
      Ref i = owned(PyLong_FromSsize_t(it->second));
      return check(PyObject_CallOneArg(ref_cls, i.get()));
    }
    case ArgKind::Tuple: {
      Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(a.items().size())));
      for (size_t i = 0; i < a.items().size(); ++i)
        PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), export_arg(a.items()[i], pos, ref_cls));
      if (a.tuple_type()) return check(PyObject_CallObject(obj_ptr(a.tuple_type()), t.get()));
      return t.release();
    }
    case ArgKind::List: {
      Ref l = owned(PyList_New(static_cast<Py_ssize_t>(a.items().size())));
      for (size_t i = 0; i < a.items().size(); ++i)
        PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), export_arg(a.items()[i], pos, ref_cls));
      return l.release();
    }
    case ArgKind::Dict: {
      Ref d = owned(PyDict_New());
      for (auto& kv : a.pairs()) {
        Ref k = Ref::steal(from_arg(kv.first));
        Ref v = Ref::steal(export_arg(kv.second, pos, ref_cls));
        check(PyDict_SetItem(d.get(), k.get(), v.get()));
      }
      return d.release();
    }
    case ArgKind::Slice: {
      Ref s = Ref::steal(export_arg(a.slice_start(), pos, ref_cls));
      Ref e = Ref::steal(export_arg(a.slice_stop(), pos, ref_cls));
      Ref st = Ref::steal(export_arg(a.slice_step(), pos, ref_cls));
      return check(PySlice_New(s.get(), e.get(), st.get()));
    }
    default: return from_arg(a);
  }
}

// The inverse of export_arg: _NodeRef(i) becomes nodes[i].
Argument import_arg(PyObject* o, const std::vector<Node*>& nodes, PyObject* ref_cls) {
  PyTypeObject* t = Py_TYPE(o);
  if (reinterpret_cast<PyObject*>(t) == ref_cls) {
    Py_ssize_t i = PyLong_AsSsize_t(o);
    if (i == -1 && PyErr_Occurred()) throw PythonError();
    if (i < 0 || static_cast<size_t>(i) >= nodes.size()) {
      PyErr_Format(PyExc_ValueError, "corrupt pickled graph: node reference %zd is not an earlier node", i);
      throw PythonError();
    }
    return Argument::node(nodes[static_cast<size_t>(i)]);
  }
  if (!(PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o) || PySlice_Check(o))) return to_arg(o);
  RecursionGuard guard(" while unpickling a graph argument");
  if (PyTuple_Check(o)) {
    std::vector<Argument> items;
    items.reserve(static_cast<size_t>(PyTuple_GET_SIZE(o)));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) items.push_back(import_arg(PyTuple_GET_ITEM(o, i), nodes, ref_cls));
    if (t != &PyTuple_Type && PyObject_HasAttrString(reinterpret_cast<PyObject*>(t), "_fields"))
      return Argument::tuple(std::move(items), borrow_obj(reinterpret_cast<PyObject*>(t)));
    return Argument::tuple(std::move(items));
  }
  if (PyList_Check(o)) {
    std::vector<Argument> items;
    items.reserve(static_cast<size_t>(PyList_GET_SIZE(o)));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); ++i) items.push_back(import_arg(PyList_GET_ITEM(o, i), nodes, ref_cls));
    return Argument::list(std::move(items));
  }
  if (PyDict_Check(o)) {
    ArgPairs pairs;
    Py_ssize_t p = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &p, &k, &v)) pairs.emplace_back(to_arg(k), import_arg(v, nodes, ref_cls));
    return Argument::dict(std::move(pairs));
  }
  auto* sl = reinterpret_cast<PySliceObject*>(o);
  Argument start = import_arg(sl->start, nodes, ref_cls);
  Argument stop = import_arg(sl->stop, nodes, ref_cls);
  Argument step = import_arg(sl->step, nodes, ref_cls);
  return Argument::slice(std::move(start), std::move(stop), std::move(step));
}

// _export_nodes() -> (records, insert_position, insert_after): see Note [Graph pickling].
// insert_position is -1 for the root.
PyObject* graph_export_nodes(PyObject* self, PyObject*) {
  Graph* g = graph_of(self);
  PyObject* ref_cls = helpers().node_ref;
  std::unordered_map<const Node*, Py_ssize_t> pos;
  pos.reserve(g->size());
  Ref records = owned(PyList_New(0));
  Py_ssize_t i = 0;
  for (Node* n : g->nodes()) {
    Ref args = owned(PyTuple_New(static_cast<Py_ssize_t>(n->args().size())));
    for (size_t k = 0; k < n->args().size(); ++k)
      PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(k), export_arg(n->args()[k], pos, ref_cls));
    Ref kwargs = owned(PyDict_New());
    for (auto& kv : n->kwargs()) {
      Ref v = Ref::steal(export_arg(kv.second, pos, ref_cls));
      check(PyDict_SetItemString(kwargs.get(), kv.first.c_str(), v.get()));
    }
    // Nodes without a Python wrapper have no meta or attributes: none is made.
    PyNode* p = n->binding() ? pynode_of(n->binding()) : nullptr;
    Ref op = owned(PyUnicode_FromString(op_name(n->op())));
    Ref name = owned(PyUnicode_FromStringAndSize(n->name().data(), static_cast<Py_ssize_t>(n->name().size())));
    const Target& t = n->target();
    Ref target = t.fn() ? Ref::borrow(obj_ptr(t.fn()))
                        : owned(PyUnicode_FromStringAndSize(t.str().data(), static_cast<Py_ssize_t>(t.str().size())));
    PyObject* type = n->type() ? obj_ptr(n->type()) : Py_None;
    PyObject* meta = p && p->meta && PyDict_GET_SIZE(p->meta) ? p->meta : Py_None;
    PyObject* dict = p && p->dict && PyDict_GET_SIZE(p->dict) ? p->dict : Py_None;
    Ref rec = owned(PyTuple_Pack(8, op.get(), name.get(), target.get(), args.get(), kwargs.get(), type, meta, dict));
    check(PyList_Append(records.get(), rec.get()));
    pos.emplace(n, i++);
  }
  Py_ssize_t anchor = -1;
  if (g->insert_anchor() != g->root()) {
    auto it = pos.find(g->insert_anchor());
    if (it != pos.end()) anchor = it->second;
  }
  return Py_BuildValue("(NnO)", records.release(), anchor, g->insert_after() ? Py_True : Py_False);
}

// _import_nodes(records, insert_position, insert_after): appends the exported
// nodes to this (empty) graph, in one pass. Returns None.
PyObject* graph_import_nodes(PyObject* self, PyObject* args) {
  PyObject* records;
  Py_ssize_t anchor;
  int after;
  if (!PyArg_ParseTuple(args, "O!np:_import_nodes", &PyList_Type, &records, &anchor, &after)) return nullptr;
  Graph* g = graph_of(self);
  if (g->size() != 0) {
    PyErr_SetString(PyExc_RuntimeError, "_import_nodes: the graph is not empty");
    return nullptr;
  }
  PyObject* ref_cls = helpers().node_ref;
  std::vector<Node*> nodes;
  nodes.reserve(static_cast<size_t>(PyList_GET_SIZE(records)));
  g->names().reserve(static_cast<size_t>(PyList_GET_SIZE(records)));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); ++i) {
    PyObject *op_o, *name_o, *target, *a, *kw, *type, *meta, *dict;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(records, i), "UUOO!O!OOO:_import_nodes", &op_o, &name_o, &target,
                          &PyTuple_Type, &a, &PyDict_Type, &kw, &type, &meta, &dict))
      return nullptr;
    std::optional<Op> op = parse_op(utf8(op_o, "pickled op"));
    if (!op || *op == Op::Root) {
      PyErr_SetString(PyExc_ValueError, "corrupt pickled graph: bad opcode");
      return nullptr;
    }
    std::vector<Argument> av;
    av.reserve(static_cast<size_t>(PyTuple_GET_SIZE(a)));
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(a); ++k) av.push_back(import_arg(PyTuple_GET_ITEM(a, k), nodes, ref_cls));
    KwArgs kv;
    Py_ssize_t p = 0;
    PyObject *k, *v;
    while (PyDict_Next(kw, &p, &k, &v)) kv.emplace_back(utf8(k, "pickled kwargs key"), import_arg(v, nodes, ref_cls));
    std::string name = utf8_string(name_o, "pickled node name");
    Object ty = type != Py_None ? borrow_obj(type) : Object();
    Node* n = g->create_node(*op, to_target(target, target_what(*op)), std::move(av), std::move(kv), name, std::move(ty));
    if (n->name() != name) n->set_name(name);  // a name set through Node.name need not be in normal form
    nodes.push_back(n);
    if (meta != Py_None || dict != Py_None) {
      Ref w = Ref::steal(wrap_node(n));
      auto* pn = reinterpret_cast<PyNode*>(w.get());
      if (meta != Py_None) {
        if (!PyDict_Check(meta)) {
          PyErr_SetString(PyExc_TypeError, "corrupt pickled graph: node meta is not a dict");
          return nullptr;
        }
        Py_INCREF(meta);
        Py_XSETREF(pn->meta, meta);
      }
      if (dict != Py_None) {
        if (!PyDict_Check(dict)) {
          PyErr_SetString(PyExc_TypeError, "corrupt pickled graph: node __dict__ is not a dict");
          return nullptr;
        }
        Py_INCREF(dict);
        Py_XSETREF(pn->dict, dict);
      }
    }
  }
  if (anchor >= 0 && static_cast<size_t>(anchor) < nodes.size())
    g->set_insert_point(nodes[static_cast<size_t>(anchor)], after != 0);
  else
    g->set_insert_point(g->root(), after != 0);
  Py_RETURN_NONE;
}

PyObject* get_nodes(PyObject* self, void*) { return node_list_of(self); }
PyObject* get_len(PyObject* self, void*) { return PyLong_FromSize_t(graph_of(self)->size()); }
PyObject* get_root(PyObject* self, void*) { return wrap_node(graph_of(self)->root()); }

PyGetSetDef graph_getset[] = {
    {"nodes", guard<get_nodes>, nullptr, "The nodes, in order (iterable, reversible, len()).", nullptr},
    {"_len", guard<get_len>, nullptr, nullptr, nullptr},
    {"_root", guard<get_root>, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef graph_methods[] = {
    // Docstrings open with a text signature (inspect.signature), torch.fx's parameters.
    def<graph_create_node>("create_node", METH_FASTCALL | METH_KEYWORDS,
                           "create_node($self, op, target, args=None, kwargs=None, name=None, type_expr=None)\n--\n\n"
                           "Create a Node and insert it at the current insertion point."),
    def<graph_erase_node>("erase_node", METH_FASTCALL | METH_KEYWORDS,
                          "erase_node($self, to_erase)\n--\n\nErase a node without users."),
    def<graph_target_to_str>("_target_to_str", METH_O, "The default node name for a target."),
    def<graph_set_insert_point>("_set_insert_point", METH_VARARGS),
    def<graph_insert_point>("_insert_point", METH_NOARGS),
    def<graph_node_copy>("_node_copy", METH_VARARGS | METH_KEYWORDS,
                         "_node_copy($self, node, arg_transform=<identity>, /)\n--\n\n"
                         "Copy a node into this graph (Graph.node_copy without its default)."),
    def<graph_graph_copy>("graph_copy", METH_VARARGS | METH_KEYWORDS,
                          "graph_copy($self, g, val_map, return_output_node=False)\n--\n\n"
                          "Copy all nodes of g into this graph."),
    def<graph_lint_core>("_lint_core", METH_NOARGS),
    def<graph_dce>("_dce_core", METH_NOARGS),
    def<graph_python_code>("_python_code", METH_VARARGS),
    def<graph_export_nodes>("_export_nodes", METH_NOARGS, "Flat node records for pickling (Note [Graph pickling])."),
    def<graph_import_nodes>("_import_nodes", METH_VARARGS, "Rebuild nodes from _export_nodes() records."),
    def<graph_find_nodes>("find_nodes", METH_VARARGS | METH_KEYWORDS,
                          "find_nodes($self, /, *, op, target=None, sort=True)\n--\n\n"
                          "Nodes by op (and target)."),
    kEndOfMethods};

PyType_Slot graph_slots[] = {{Py_tp_new, reinterpret_cast<void*>(guard<graph_new>)},
                             {Py_tp_init, reinterpret_cast<void*>(graph_init)},
                             {Py_tp_dealloc, reinterpret_cast<void*>(graph_dealloc)},
                             {Py_tp_traverse, reinterpret_cast<void*>(graph_traverse)},
                             {Py_tp_clear, reinterpret_cast<void*>(graph_clear)},
                             {Py_tp_str, reinterpret_cast<void*>(guard<graph_str>)},
                             {Py_tp_getset, graph_getset},
                             {Py_tp_methods, graph_methods},
                             {0, nullptr}};
PyType_Spec graph_spec = {"fxcpp._C.GraphBase", sizeof(PyGraph), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, graph_slots};

// Module functions of the graph layer: the tracer names nodes by the same rule.
PyMethodDef graph_module_functions[] = {
    def<graph_target_to_str>("_target_to_str", METH_O, "The default node name for a target."),
    kEndOfMethods};

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
  if (add_functions(m, graph_module_functions) < 0) return -1;
  return PyModule_AddObjectRef(m, "GraphBase", reinterpret_cast<PyObject*>(GraphBaseType));
}

}  // namespace fxcpp::py
