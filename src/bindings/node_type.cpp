// fxcpp._C.NodeBase: the Python face of a core Node (Note [Python object model]).
#include "bindings.h"

#include <structmember.h>

namespace fxcpp::py {

PyTypeObject* NodeBaseType = nullptr;
PyTypeObject* NodeListType = nullptr;
PyTypeObject* NodeIterType = nullptr;
PyObject* g_node_class = nullptr;

namespace {
PyObject* g_op_strings[7] = {};

PyObject* op_string(Op op) {
  PyObject* s = g_op_strings[static_cast<int>(op)];
  Py_INCREF(s);
  return s;
}

PyNode* as_pynode(PyObject* o) { return reinterpret_cast<PyNode*>(o); }

Node* live_node(PyObject* self) {
  Node* n = as_pynode(self)->node;
  if (!n) PyErr_SetString(PyExc_RuntimeError, "this Node belongs to a Graph that has been destroyed");
  return n;
}
}  // namespace

Node* node_of(PyObject* o) {
  Node* n = as_pynode(o)->node;
  if (!n) {
    PyErr_SetString(PyExc_RuntimeError, "this Node belongs to a Graph that has been destroyed");
    return nullptr;
  }
  if (n->erased()) {
    PyErr_Format(PyExc_RuntimeError,
                 "Node '%s' was erased from its graph and cannot be used as an argument; "
                 "use a live node instead", n->name_c_str());
    return nullptr;
  }
  return n;
}

bool py_module_is_impure(const Node& n) {
  Ref w = Ref::steal(wrap_node(const_cast<Node*>(&n)));
  Ref r = owned(PyObject_CallOneArg(helpers().module_is_impure, w.get()));
  return check(PyObject_IsTrue(r.get())) == 1;
}

PyNodeAux& node_aux(PyNode* p) {
  if (!p->aux) {
    p->aux = static_cast<PyNodeAux*>(PyMem_Calloc(1, sizeof(PyNodeAux)));
    if (!p->aux) {
      PyErr_NoMemory();
      throw PythonError();
    }
  }
  return *p->aux;
}

PyObject* wrap_node(Node* n) {
  if (PyObject* w = wrapper_of(*n)) {
    Py_INCREF(w);
    return w;
  }
  PyObject* g = graph_pyobject(n->graph());
  if (!g) {
    PyErr_SetString(PyExc_RuntimeError, "node's graph has no Python object");
    throw PythonError();
  }
  auto* cls = reinterpret_cast<PyTypeObject*>(g_node_class ? g_node_class : reinterpret_cast<PyObject*>(NodeBaseType));
  PyObject* w = cls->tp_alloc(cls, 0);
  if (!w) throw PythonError();
  PyNode* p = as_pynode(w);
  p->op = g_op_strings[static_cast<int>(n->op())];  // borrowed (see PyNode::op)
  p->node = n;
  Py_INCREF(g);
  p->graph = g;
  p->b.dirty = NodeBinding::kAll;
  n->set_binding(&p->b);
  Py_INCREF(w);  // the core node's reference
  return w;
}

PyObject* wrap_nodes(const std::vector<Node*>& nodes) {
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(nodes.size())));
  for (size_t i = 0; i < nodes.size(); ++i) PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), wrap_node(nodes[i]));
  return l.release();
}

namespace {

// ------------------------------------------------------------------ lifecycle

int node_traverse(PyObject* self, visitproc visit, void* arg) {
  PyNode* p = as_pynode(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(p->graph);
  Py_VISIT(p->dict);
  Py_VISIT(p->meta);
  Py_VISIT(p->args_cache);
  if (p->aux) {
    Py_VISIT(p->aux->kwargs_cache);
    Py_VISIT(p->aux->users_cache);
  }
  return 0;
}

int node_clear(PyObject* self) {
  PyNode* p = as_pynode(self);
  Py_CLEAR(p->dict);
  Py_CLEAR(p->meta);
  Py_CLEAR(p->args_cache);
  if (PyNodeAux* aux = p->aux) {
    p->aux = nullptr;
    Py_CLEAR(aux->kwargs_cache);
    Py_CLEAR(aux->users_cache);
    Py_CLEAR(aux->name_cache);
    PyMem_Free(aux);
  }
  // The graph reference is dropped last: the core node may need the graph.
  if (p->node && p->node->erased()) {
    Node* n = p->node;
    p->node = nullptr;
    n->set_binding(nullptr);
    n->graph()->release_tombstone(n);
  }
  Py_CLEAR(p->graph);
  return 0;
}

void node_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  PyNode* p = as_pynode(self);
  if (p->weakrefs) PyObject_ClearWeakRefs(self);
  if (p->node) {
    Node* n = p->node;
    p->node = nullptr;
    n->set_binding(nullptr);
    if (n->erased()) n->graph()->release_tombstone(n);
  }
  node_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* node_new(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError,
                  "fxcpp Nodes are created by a Graph: use graph.create_node(op, target, args, kwargs) "
                  "or graph.call_function(...) and friends");
  return nullptr;
}

// ------------------------------------------------------------------ getters

PyObject* get_name(PyObject* self, void*) {
  PyNode* p = as_pynode(self);
  Node* n = p->node;
  if (!n) return live_node(self), nullptr;
  if (p->aux && p->aux->name_cache && !(p->b.dirty & NodeBinding::kAttrs)) {
    Py_INCREF(p->aux->name_cache);
    return p->aux->name_cache;
  }
  PyNodeAux& aux = node_aux(p);
  PyObject* s = check(PyUnicode_FromStringAndSize(n->name().data(), static_cast<Py_ssize_t>(n->name().size())));
  Py_XSETREF(aux.name_cache, s);
  p->b.dirty &= ~NodeBinding::kAttrs;
  Py_INCREF(s);
  return s;
}

int set_name(PyObject* self, PyObject* v, void*) {
  Node* n = live_node(self);
  if (!n) return -1;
  if (!v) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete Node.name");
    return -1;
  }
  if (helpers().rename_2x != Py_None) {
    // torch.fx 2.x: the owning module's replace hooks see each user first (Note [GraphModule
    // node hooks] in graph.py).
    Ref r = Ref::steal(PyObject_CallFunctionObjArgs(helpers().rename_2x, self, v, nullptr));
    if (!r) return -1;
    n = live_node(self);
    if (!n) return -1;
  }
  n->set_name(utf8(v, "Node.name"));  // marks the name cache dirty
  return 0;
}

PyObject* get_target(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  const Target& t = n->target();
  if (t.fn()) {
    PyObject* o = obj_ptr(t.fn());
    Py_INCREF(o);
    return o;
  }
  return PyUnicode_FromStringAndSize(t.str().data(), static_cast<Py_ssize_t>(t.str().size()));
}

int set_target(PyObject* self, PyObject* v, void*) {
  Node* n = live_node(self);
  if (!n) return -1;
  if (!v) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete Node.target");
    return -1;
  }
  // Validated as at creation, with torch.fx's ValueError (torch.fx checks only
  // there and fails later, printing): the core's printer and codegen rely on it.
  bool want_callable = n->op() == Op::CallFunction;
  if (want_callable ? PyUnicode_Check(v) || !PyCallable_Check(v) : !PyUnicode_Check(v)) {
    Ref r = owned(PyObject_CallFunction(helpers().bad_target, "OsOO", graph_pyobject(n->graph()),
                                        n->name_c_str(), v, want_callable ? Py_True : Py_False));
    PyErr_SetString(PyExc_RuntimeError, "_bad_target returned instead of raising");
    return -1;
  }
  if (PyUnicode_Check(v)) n->set_target(Target(InternedString(utf8(v, "Node.target"))));
  else n->set_target(Target(borrow_obj(v)));
  return 0;
}

PyObject* get_args(PyObject* self, void*) {
  PyNode* p = as_pynode(self);
  Node* n = p->node;
  if (!n) return live_node(self), nullptr;
  if (p->args_cache && !(p->b.dirty & NodeBinding::kArgs)) {
    Py_INCREF(p->args_cache);
    return p->args_cache;
  }
  PyObject* t = args_to_tuple(n->args());
  Py_XSETREF(p->args_cache, t);
  p->b.dirty &= ~NodeBinding::kArgs;
  Py_INCREF(t);
  return t;
}

PyObject* get_kwargs(PyObject* self, void*) {
  PyNode* p = as_pynode(self);
  Node* n = p->node;
  if (!n) return live_node(self), nullptr;
  if (p->aux && p->aux->kwargs_cache && !(p->b.dirty & NodeBinding::kKwargs)) {
    Py_INCREF(p->aux->kwargs_cache);
    return p->aux->kwargs_cache;
  }
  Ref d = Ref::steal(kwargs_to_dict(n->kwargs()));
  Py_XSETREF(node_aux(p).kwargs_cache, d.new_ref());
  p->b.dirty &= ~NodeBinding::kKwargs;
  return d.release();
}

int set_args(PyObject* self, PyObject* v, void*) {
  PyNode* p = as_pynode(self);
  Node* n = live_node(self);
  if (!n) return -1;
  if (!v) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete Node.args");
    return -1;
  }
  bool canonical = PyTuple_CheckExact(v);
  std::vector<Argument> a;
  if (PyTuple_Check(v)) {
    a = tuple_to_args(v, &canonical);
  } else {
    // torch.fx maps whatever it is given; a list becomes a tuple of its items,
    // anything else (a dict, a str, an int) is refused.
    if (!PyList_Check(v)) {
      PyErr_Format(PyExc_TypeError, "Node.args must be a tuple or a list, not %.200s", Py_TYPE(v)->tp_name);
      return -1;
    }
    Ref t = owned(PySequence_Tuple(v));
    a = tuple_to_args(t.get(), nullptr);
    canonical = false;
  }
  n->set_args(std::move(a));
  if (canonical) {
    Py_INCREF(v);
    Py_XSETREF(p->args_cache, v);
    p->b.dirty &= ~NodeBinding::kArgs;
  }
  return 0;
}

int set_kwargs(PyObject* self, PyObject* v, void*) {
  Node* n = live_node(self);
  if (!n) return -1;
  if (!v || !PyDict_Check(v)) {
    PyErr_SetString(PyExc_TypeError, "Node.kwargs must be a dict");
    return -1;
  }
  n->set_kwargs(dict_to_kwargs(v));
  return 0;
}

PyObject* get_users(PyObject* self, void*) {
  PyNode* p = as_pynode(self);
  Node* n = p->node;
  if (!n) return live_node(self), nullptr;
  if (p->aux && p->aux->users_cache && !(p->b.dirty & NodeBinding::kUsers)) {
    Py_INCREF(p->aux->users_cache);
    return p->aux->users_cache;
  }
  Ref d = owned(PyDict_New());
  for (Node* u : n->users()) {
    Ref w = Ref::steal(wrap_node(u));
    check(PyDict_SetItem(d.get(), w.get(), Py_None));
  }
  Py_XSETREF(node_aux(p).users_cache, d.new_ref());
  p->b.dirty &= ~NodeBinding::kUsers;
  return d.release();
}

PyObject* get_input_nodes_dict(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  Ref d = owned(PyDict_New());
  for (Node* i : n->all_input_nodes()) {
    Ref w = Ref::steal(wrap_node(i));
    check(PyDict_SetItem(d.get(), w.get(), Py_None));
  }
  return d.release();
}

PyObject* get_all_input_nodes(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  return wrap_nodes(n->all_input_nodes());
}

PyObject* get_next(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  return wrap_node(n->next());
}

PyObject* get_prev(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  return wrap_node(n->prev());
}

PyObject* get_graph(PyObject* self, void*) {
  PyObject* g = as_pynode(self)->graph;
  if (!g) g = Py_None;
  Py_INCREF(g);
  return g;
}

PyObject* get_meta(PyObject* self, void*) {
  PyNode* p = as_pynode(self);
  if (!p->meta) {
    p->meta = PyDict_New();
    if (!p->meta) return nullptr;
  }
  Py_INCREF(p->meta);
  return p->meta;
}

int set_meta(PyObject* self, PyObject* v, void*) {
  PyNode* p = as_pynode(self);
  if (v && !PyDict_Check(v)) {  // codegen and passes read it as a dict (torch.fx fails there)
    PyErr_Format(PyExc_TypeError, "Node.meta must be a dict, not %.200s", Py_TYPE(v)->tp_name);
    return -1;
  }
  Py_XINCREF(v);
  Py_XSETREF(p->meta, v);
  return 0;
}

PyObject* get_type(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  PyObject* o = n->type() ? obj_ptr(n->type()) : Py_None;
  Py_INCREF(o);
  return o;
}

int set_type(PyObject* self, PyObject* v, void*) {
  Node* n = live_node(self);
  if (!n) return -1;
  n->set_type(!v || v == Py_None ? Object() : borrow_obj(v));
  return 0;
}

/// (order key,): the node's position in its graph's list, for Python's ordering of nodes
/// (torch.fx 2.x's Node._sort_key is a tuple too; only comparisons within one graph mean anything).
PyObject* get_sort_key(PyObject* self, void*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  return Py_BuildValue("(K)", static_cast<unsigned long long>(n->order_key()));
}

PyObject* get_erased(PyObject* self, void*) {
  Node* n = as_pynode(self)->node;
  return PyBool_FromLong(!n || n->erased());
}

PyGetSetDef node_getset[] = {
    {"name", guard<get_name>, guard<set_name>, "unique value name", nullptr},
    {"target", guard<get_target>, guard<set_target>, "call target", nullptr},
    {"args", guard<get_args>, guard<set_args>, "positional arguments (assigning rewires users)", nullptr},
    {"kwargs", guard<get_kwargs>, guard<set_kwargs>, "keyword arguments (assigning rewires users)", nullptr},
    {"_args", guard<get_args>, nullptr, nullptr, nullptr},
    {"_kwargs", guard<get_kwargs>, nullptr, nullptr, nullptr},
    {"users", guard<get_users>, nullptr, "dict of users, in torch.fx order", nullptr},
    {"_input_nodes", guard<get_input_nodes_dict>, nullptr, nullptr, nullptr},
    {"all_input_nodes", guard<get_all_input_nodes>, nullptr, "unique input nodes", nullptr},
    {"next", guard<get_next>, nullptr, "next node (the graph root at the end)", nullptr},
    {"prev", guard<get_prev>, nullptr, "previous node (the graph root at the start)", nullptr},
    {"_next", guard<get_next>, nullptr, nullptr, nullptr},
    {"_prev", guard<get_prev>, nullptr, nullptr, nullptr},
    {"graph", guard<get_graph>, nullptr, "owning Graph", nullptr},
    {"meta", guard<get_meta>, guard<set_meta>, "metadata dict", nullptr},
    {"type", guard<get_type>, guard<set_type>, "type annotation", nullptr},
    {"_erased", guard<get_erased>, nullptr, nullptr, nullptr},
    {"_sort_key", guard<get_sort_key>, nullptr, "(position key,): orders the nodes of one graph", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef node_members[] = {
    // A member, not a getset: CPython specializes member loads (LOAD_ATTR_SLOT), and `op` is
    // read in every pass's loop. A node's opcode never changes.
    {"op", T_OBJECT_EX, offsetof(PyNode, op), READONLY, "opcode"},
    {"__dictoffset__", T_PYSSIZET, offsetof(PyNode, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyNode, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

// ------------------------------------------------------------------ methods

PyObject* node_repr(PyObject* self) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  if (g_codegen_node_repr) {
    std::string s = (*g_codegen_node_repr)(n);
    return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  }
  return get_name(self, nullptr);
}

bool same_graph_or_fail(Node* a, PyObject* xo, Node** out) {
  if (!is_node(xo)) {
    PyErr_SetString(PyExc_TypeError, "expected a Node");
    return false;
  }
  Node* x = live_node(xo);
  if (!x) return false;
  if (a->graph() != x->graph()) {
    PyErr_SetString(PyExc_AssertionError, "Attempting to move a Node into a different Graph");
    return false;
  }
  *out = x;
  return true;
}

PyObject* node_prepend(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* xo;
  if (!parse_fast("prepend", fargs, nargs, kwnames, {"x"}, 1, &xo)) return nullptr;
  Node* n = live_node(self);
  Node* x;
  if (!n || !same_graph_or_fail(n, xo, &x)) return nullptr;
  if (n == x) {
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "Trying to prepend a node to itself. This behavior has no effect on the graph.", 1) < 0)
      return nullptr;
    Py_RETURN_NONE;
  }
  n->prepend(x);
  Py_RETURN_NONE;
}

PyObject* node_append(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* xo;
  if (!parse_fast("append", fargs, nargs, kwnames, {"x"}, 1, &xo)) return nullptr;
  Node* n = live_node(self);
  Node* x;
  if (!n || !same_graph_or_fail(n, xo, &x)) return nullptr;
  Node* nx = n->next();
  if (nx == x && !x->erased()) {  // an erased x (a tombstone right after n) is refused by append
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "Trying to prepend a node to itself. This behavior has no effect on the graph.", 1) < 0)
      return nullptr;
    Py_RETURN_NONE;
  }
  n->append(x);
  Py_RETURN_NONE;
}

PyObject* node_replace_all_uses_with(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"replace_with", "delete_user_cb", nullptr};
  PyObject* with = nullptr;
  PyObject* cb = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:_replace_all_uses_with", const_cast<char**>(kwlist), &with, &cb))
    return nullptr;
  Node* n = live_node(self);
  if (!n) return nullptr;
  Argument w = to_arg(with);
  std::function<bool(Node*)> filter;
  std::vector<Ref> pinned;  // the callback may erase users: their wrappers keep them readable
  if (cb && cb != Py_None) {
    for (Node* u : n->users()) pinned.push_back(Ref::steal(wrap_node(u)));
    filter = [cb](Node* u) {
      Ref wu = Ref::steal(wrap_node(u));
      Ref r = owned(PyObject_CallOneArg(cb, wu.get()));
      return check(PyObject_IsTrue(r.get())) == 1;
    };
  }
  return wrap_nodes(n->replace_all_uses_with(w, filter));
}

// Node.replace_all_uses_with in its common case (every user; meta already propagated by
// the Python method): rewired in the core when `with` is another live node and the
// owning module has no replace hooks; None otherwise, and the Python method goes the general way.
PyObject* node_replace_all_uses_with_plain(PyObject* self, PyObject* with) {
  static PyObject* replace_hooks_key = check(PyUnicode_InternFromString("_replace_hooks"));
  Node* n = live_node(self);
  if (!n) return nullptr;
  // (an erased `with` goes the general way too, whose argument conversion refuses it)
  if (with == self || !is_node(with) || !as_pynode(with)->node || as_pynode(with)->node->erased()) Py_RETURN_NONE;
  PyObject* graph = as_pynode(self)->graph;
  if (graph && owner_has_hooks(graph, replace_hooks_key)) Py_RETURN_NONE;
  return wrap_nodes(n->replace_all_uses_with(as_pynode(with)->node));
}

PyObject* node_replace_input_with(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2];
  if (!parse_fast("replace_input_with", fargs, nargs, kwnames, {"old_input", "new_input"}, 2, a)) return nullptr;
  PyObject *old_in = a[0], *new_in = a[1];
  Node* n = live_node(self);
  if (!n) return nullptr;
  // torch.fx compares with ==; a non-Node (or a destroyed one) never matches, but the
  // arguments are still re-registered (this node moves to the end of its inputs' users).
  Node* o = is_node(old_in) ? as_pynode(old_in)->node : nullptr;
  if (!o) {
    n->replace_input_with(nullptr, Argument());
    Py_RETURN_NONE;
  }
  n->replace_input_with(o, to_arg(new_in));
  Py_RETURN_NONE;
}

PyObject* node_update_arg(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2];
  if (!parse_fast("update_arg", fargs, nargs, kwnames, {"idx", "arg"}, 2, a)) return nullptr;
  PyObject *idx_obj = a[0], *v = a[1];
  // As list indexing in torch.fx's `args[idx] = arg`: an index too large is an IndexError.
  Py_ssize_t idx = PyNumber_AsSsize_t(idx_obj, PyExc_IndexError);
  if (idx == -1 && PyErr_Occurred()) return nullptr;
  Node* n = live_node(self);
  if (!n) return nullptr;
  Py_ssize_t size = static_cast<Py_ssize_t>(n->args().size());
  if (idx < 0) idx += size;
  if (idx < 0 || idx >= size) {
    PyErr_SetString(PyExc_IndexError, "list assignment index out of range");
    return nullptr;
  }
  n->update_arg(static_cast<size_t>(idx), to_arg(v));
  n->graph()->touch_lookup(n);  // torch.fx assigns node.args: Note [find_nodes order]
  Py_RETURN_NONE;
}

PyObject* node_update_kwarg(PyObject* self, PyObject* const* fargs, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2];
  if (!parse_fast("update_kwarg", fargs, nargs, kwnames, {"key", "arg"}, 2, a)) return nullptr;
  PyObject *key = a[0], *v = a[1];
  Node* n = live_node(self);
  if (!n) return nullptr;
  n->update_kwarg(utf8_string(key, "update_kwarg key"), to_arg(v));
  n->graph()->touch_lookup(n);  // torch.fx assigns node.kwargs: Note [find_nodes order]
  Py_RETURN_NONE;
}

PyObject* node_format_node(PyObject* self, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"placeholder_names", "maybe_return_typename", nullptr};
  PyObject* ph = Py_None;
  PyObject* rt = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:format_node", const_cast<char**>(kwlist), &ph, &rt)) return nullptr;
  Node* n = live_node(self);
  if (!n) return nullptr;
  // As torch.fx: `if placeholder_names: placeholder_names.append(...)` for
  // placeholders, `if self.type and maybe_return_typename: ...[0] = ...` for
  // outputs (any truthy object with append / item assignment).
  std::vector<std::string> names;
  bool use_names = n->op() == Op::Placeholder && ph != Py_None && check(PyObject_IsTrue(ph));
  if (use_names) names.push_back("");  // non-empty marker
  std::string ret;
  bool use_ret = n->op() == Op::Output && n->type() && rt != Py_None && check(PyObject_IsTrue(rt));
  auto s = n->format_node(use_names ? &names : nullptr, use_ret ? &ret : nullptr);
  if (use_names && names.size() > 1) {
    Ref v = owned(PyUnicode_FromStringAndSize(names.back().data(), static_cast<Py_ssize_t>(names.back().size())));
    Ref r = owned(PyObject_CallMethod(ph, "append", "O", v.get()));
  }
  if (use_ret && !ret.empty()) {
    Ref v = owned(PyUnicode_FromStringAndSize(ret.data(), static_cast<Py_ssize_t>(ret.size())));
    Ref zero = owned(PyLong_FromLong(0));
    check(PyObject_SetItem(rt, zero.get(), v.get()));
  }
  if (!s) Py_RETURN_NONE;
  return str_from_display_text(*s);
}

PyObject* node_is_impure(PyObject* self, PyObject*) {
  Node* n = live_node(self);
  if (!n) return nullptr;
  return PyBool_FromLong(n->is_impure(py_module_is_impure));
}

PyMethodDef node_methods[] = {
    // Docstrings open with a text signature (inspect.signature), torch.fx's parameters.
    def<node_prepend>("prepend", METH_FASTCALL | METH_KEYWORDS,
                      "prepend($self, x)\n--\n\nInsert x before this node (moving it)."),
    def<node_append>("append", METH_FASTCALL | METH_KEYWORDS,
                     "append($self, x)\n--\n\nInsert x after this node (moving it)."),
    def<node_replace_all_uses_with>("_replace_all_uses_with", METH_VARARGS | METH_KEYWORDS,
                                    "_replace_all_uses_with($self, replace_with, delete_user_cb=None, /)\n--\n\n"
                                    "Node.replace_all_uses_with without its default (None: every user)."),
    def<node_replace_all_uses_with_plain>("_replace_all_uses_with_plain", METH_O,
                                          "_replace_all_uses_with_plain($self, replace_with, /)\n--\n\n"
                                          "replace_all_uses_with(replace_with) of every user where no hook or "
                                          "special case applies; None where one does."),
    def<node_replace_input_with>("replace_input_with", METH_FASTCALL | METH_KEYWORDS,
                                 "replace_input_with($self, old_input, new_input)\n--\n\n"
                                 "Replace old_input by new_input in args/kwargs."),
    def<node_update_arg>("update_arg", METH_FASTCALL | METH_KEYWORDS,
                         "update_arg($self, idx, arg)\n--\n\nargs[idx] = arg"),
    def<node_update_kwarg>("update_kwarg", METH_FASTCALL | METH_KEYWORDS,
                           "update_kwarg($self, key, arg)\n--\n\nkwargs[key] = arg"),
    def<node_format_node>("format_node", METH_VARARGS | METH_KEYWORDS,
                          "format_node($self, placeholder_names=None, maybe_return_typename=None)\n--\n\n"
                          "One line of str(graph)."),
    def<node_is_impure>("_is_impure", METH_NOARGS,
                        "The core's impurity decision (Node::is_impure); call_module nodes ask the owning module."),
    kEndOfMethods};

// Assigning an attribute that the node already has moves it to the end of find_nodes'
// lookup order, as torch.fx's Node.__setattr__ does (Note [find_nodes order] in graph.cpp).
int node_setattro(PyObject* self, PyObject* name, PyObject* value) {
  bool had = false;
  if (value) {
    PyObject* old = PyObject_GenericGetAttr(self, name);
    had = old != nullptr;
    Py_XDECREF(old);
    if (!had) PyErr_Clear();
  }
  if (PyObject_GenericSetAttr(self, name, value) < 0) return -1;
  Node* n = as_pynode(self)->node;
  if (had && n) n->graph()->touch_lookup(n);
  return 0;
}

PyType_Slot node_slots[] = {
    {Py_tp_setattro, reinterpret_cast<void*>(node_setattro)},
    {Py_tp_dealloc, reinterpret_cast<void*>(node_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(node_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(node_clear)},
    {Py_tp_new, reinterpret_cast<void*>(node_new)},
    {Py_tp_repr, reinterpret_cast<void*>(guard<node_repr>)},
    {Py_tp_getset, node_getset},
    {Py_tp_members, node_members},
    {Py_tp_methods, node_methods},
    {Py_tp_doc, const_cast<char*>("Base of fxcpp.node.Node: a node of an fxcpp Graph.")},
    {0, nullptr}};

PyType_Spec node_spec = {"fxcpp._C.NodeBase", sizeof(PyNode), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, node_slots};

// ------------------------------------------------------------------ node list

struct PyNodeList {
  PyObject_HEAD
  PyObject* graph;
  int reverse;
};
struct PyNodeIter {
  PyObject_HEAD
  PyObject* graph;
  PyObject* cur;  // current node wrapper (null before the first step)
  int reverse;
  int done;
};

Graph* core_graph(PyObject* g) { return reinterpret_cast<PyGraph*>(g)->graph; }

int nl_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(reinterpret_cast<PyNodeList*>(self)->graph);
  return 0;
}
int nl_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<PyNodeList*>(self)->graph);
  return 0;
}
void nl_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  nl_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}
Py_ssize_t nl_len(PyObject* self) { return static_cast<Py_ssize_t>(core_graph(reinterpret_cast<PyNodeList*>(self)->graph)->size()); }

PyObject* make_iter(PyObject* graph, int reverse) {
  auto* it = reinterpret_cast<PyNodeIter*>(NodeIterType->tp_alloc(NodeIterType, 0));
  if (!it) return nullptr;
  Py_INCREF(graph);
  it->graph = graph;
  it->reverse = reverse;
  return reinterpret_cast<PyObject*>(it);
}

PyObject* nl_iter(PyObject* self) {
  auto* l = reinterpret_cast<PyNodeList*>(self);
  return make_iter(l->graph, l->reverse);
}

PyObject* make_node_list(PyObject* graph, int reverse);

PyObject* nl_reversed(PyObject* self, PyObject*) {
  auto* l = reinterpret_cast<PyNodeList*>(self);
  return make_node_list(l->graph, !l->reverse);
}

PyMethodDef nl_methods[] = {def<nl_reversed>("__reversed__", METH_NOARGS), kEndOfMethods};

PyType_Slot nl_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(nl_dealloc)},
                          {Py_tp_traverse, reinterpret_cast<void*>(nl_traverse)},
                          {Py_tp_clear, reinterpret_cast<void*>(nl_clear)},
                          {Py_tp_iter, reinterpret_cast<void*>(nl_iter)},
                          {Py_sq_length, reinterpret_cast<void*>(nl_len)},
                          {Py_tp_methods, nl_methods},
                          {0, nullptr}};
PyType_Spec nl_spec = {"fxcpp._C._node_list", sizeof(PyNodeList), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, nl_slots};

int it_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* it = reinterpret_cast<PyNodeIter*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(it->graph);
  Py_VISIT(it->cur);
  return 0;
}
int it_clear(PyObject* self) {
  auto* it = reinterpret_cast<PyNodeIter*>(self);
  Py_CLEAR(it->cur);
  Py_CLEAR(it->graph);
  return 0;
}
void it_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  it_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}
PyObject* it_next(PyObject* self) {
  auto* it = reinterpret_cast<PyNodeIter*>(self);
  if (it->done || !it->graph) return nullptr;
  Graph* g = core_graph(it->graph);
  Node* cur = it->cur ? as_pynode(it->cur)->node : g->root();
  if (!cur) {
    it->done = 1;
    return nullptr;
  }
  // From a tombstone the raw links are still valid (Note [Erased nodes and tombstones]).
  Node* nx = it->reverse ? cur->prev() : cur->next();
  if (nx == g->root()) {
    it->done = 1;
    Py_CLEAR(it->cur);
    return nullptr;
  }
  PyObject* w = wrap_node(nx);
  Py_XSETREF(it->cur, w);
  Py_INCREF(w);
  return w;
}
PyType_Slot it_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(it_dealloc)},
                          {Py_tp_traverse, reinterpret_cast<void*>(it_traverse)},
                          {Py_tp_clear, reinterpret_cast<void*>(it_clear)},
                          {Py_tp_iter, reinterpret_cast<void*>(PyObject_SelfIter)},
                          {Py_tp_iternext, reinterpret_cast<void*>(guard<it_next>)},
                          {0, nullptr}};
PyType_Spec it_spec = {"fxcpp._C._node_iter", sizeof(PyNodeIter), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, it_slots};

PyObject* make_node_list(PyObject* graph, int reverse) {
  auto* l = reinterpret_cast<PyNodeList*>(NodeListType->tp_alloc(NodeListType, 0));
  if (!l) return nullptr;
  Py_INCREF(graph);
  l->graph = graph;
  l->reverse = reverse;
  return reinterpret_cast<PyObject*>(l);
}

}  // namespace

PyObject* node_list_of(PyObject* graph) { return make_node_list(graph, 0); }

int init_node_type(PyObject* m) {
  for (int i = 0; i < 7; ++i) {
    g_op_strings[i] = PyUnicode_InternFromString(op_name(static_cast<Op>(i)));
    if (!g_op_strings[i]) return -1;
  }
  NodeBaseType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&node_spec));
  NodeListType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&nl_spec));
  NodeIterType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&it_spec));
  if (!NodeBaseType || !NodeListType || !NodeIterType) return -1;
  if (PyModule_AddObjectRef(m, "NodeBase", reinterpret_cast<PyObject*>(NodeBaseType)) < 0) return -1;
  if (PyModule_AddObjectRef(m, "_node_list", reinterpret_cast<PyObject*>(NodeListType)) < 0) return -1;
  return 0;
}

}  // namespace fxcpp::py
