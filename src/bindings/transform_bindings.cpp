// Bindings for the transformation toolkit: the Interpreter node loop and the
// subgraph matcher / rewriter (fxcpp.interpreter, fxcpp.subgraph_rewriter).
//
// Note [Interpreter fast paths]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx's Interpreter is a Python loop calling overridable methods. Here the
// loop (run) and run_node are C++, and each overridable method is checked once
// per run: a method is "default" when the attribute found on type(self) is the
// very function object defined on fxcpp.Interpreter and the instance dict does
// not shadow it. Default methods are executed inline:
//  * fetch_args_kwargs_from_env / map_nodes_to_values: the argument tuple is
//    rebuilt from the core Argument tree, looking Node references up in
//    self.env (a real dict keyed by Node objects, as in torch.fx);
//  * call_function / call_method / call_module: when run_node and argument
//    fetching are default too, arguments go on a C stack and the callee is
//    invoked with vectorcall (no args tuple, no kwargs dict);
//  * placeholder / get_attr / output / fetch_attr: their torch.fx semantics.
// Anything overridden is called as a Python method with exactly torch.fx's
// arguments (args tuple, kwargs immutable_dict). The observable state --
// self.env, self.args_iter, self.user_to_last_uses -- is the same as torch.fx's
// at every Python-visible point; the per-run snapshot of self.env and
// self.user_to_last_uses is the only difference (rebinding those attributes
// mid-run is not seen by the loop).
//
// Exceptions escaping a node are annotated by the Python helper registered with
// _interp_register (torch.fx's message format), on the slow path only.
#include "bindings.h"
#include "fxcpp/passes/subgraph_matcher.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace fxcpp::py {

namespace {

// ---------------------------------------------------------------------------
// Small RAII helper for owned references.
struct Ref {
  PyObject* p = nullptr;
  Ref() = default;
  explicit Ref(PyObject* o) : p(o) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p(o.p) { o.p = nullptr; }
  ~Ref() { Py_XDECREF(p); }
  PyObject* get() const { return p; }
  PyObject* release() { PyObject* r = p; p = nullptr; return r; }
  void reset(PyObject* o) { Py_XSETREF(p, o); }
  explicit operator bool() const { return p != nullptr; }
};

PyObject* check(PyObject* o) {
  if (!o) throw PythonError();
  return o;
}

// ---------------------------------------------------------------------------
// Registered Interpreter state.

enum Method : int {
  kRunNode,
  kPlaceholder,
  kGetAttr,
  kCallFunction,
  kCallMethod,
  kCallModule,
  kOutput,
  kFetchAttr,
  kFetchArgs,
  kMapNodes,
  kNumMethods
};
const char* const kMethodNames[kNumMethods] = {
    "run_node", "placeholder", "get_attr", "call_function", "call_method", "call_module",
    "output",   "fetch_attr",  "fetch_args_kwargs_from_env", "map_nodes_to_values"};

PyObject* g_method_names[kNumMethods] = {};
PyObject* g_base_methods[kNumMethods] = {};  // functions defined on fxcpp.Interpreter
PyObject* g_annotate = nullptr;              // _annotate_exception(e, node)
PyObject* g_traceback_mod = nullptr;         // fxcpp.traceback
PyObject* s_env = nullptr;
PyObject* s_args_iter = nullptr;
PyObject* s_module = nullptr;
PyObject* s_user_to_last_uses = nullptr;
PyObject* s_garbage_collect_values = nullptr;
PyObject* s_process_outputs = nullptr;
PyObject* s_is_overridden = nullptr;
PyObject* s_current_stack = nullptr;
PyObject* s_stack_trace = nullptr;

/// Which overridable methods are the defaults, for one Interpreter object.
struct Dispatch {
  bool fast[kNumMethods] = {};
  bool args_fast = false;  ///< fetch_args_kwargs_from_env and map_nodes_to_values both default
};

Dispatch compute_dispatch(PyObject* self) {
  Dispatch d;
  PyTypeObject* tp = Py_TYPE(self);
  PyObject* idict = nullptr;
  PyObject** dp = _PyObject_GetDictPtr(self);
  if (dp && *dp && PyDict_GET_SIZE(*dp) > 0) idict = *dp;
  for (int i = 0; i < kNumMethods; ++i) {
    PyObject* f = _PyType_Lookup(tp, g_method_names[i]);  // borrowed, no error set
    bool fast = f && f == g_base_methods[i];
    if (fast && idict) {
      PyObject* v = PyDict_GetItemWithError(idict, g_method_names[i]);
      if (v) fast = false;
      else if (PyErr_Occurred()) throw PythonError();
    }
    d.fast[i] = fast;
  }
  d.args_fast = d.fast[kFetchArgs] && d.fast[kMapNodes];
  return d;
}

/// The run in progress for an interpreter object (lets run_node, called from a
/// Python override, reuse the loop's dispatch and env snapshot).
struct RunFrame {
  PyObject* self = nullptr;
  Dispatch dispatch;
  PyObject* env = nullptr;  // borrowed (the frame holds self.env alive through `env_ref`)
  RunFrame* prev = nullptr;
};
RunFrame* g_run_top = nullptr;

// ---------------------------------------------------------------------------
// Argument loading (torch.fx map_arg over the core Argument tree).

[[noreturn]] void missing_value(Node* owner, Node* n) {
  PyErr_Format(PyExc_RuntimeError,
               "Node %s referenced nonexistent value %s! Run Graph.lint() to diagnose such issues",
               owner->name_c_str(), n->name_c_str());
  throw PythonError();
}

/// The value of `n` in `env` (new reference).
PyObject* env_value(PyObject* env, Node* owner, Node* n) {
  PyObject* w = wrap_node(n);
  PyObject* v = PyDict_GetItemWithError(env, w);
  Py_DECREF(w);
  if (!v) {
    if (PyErr_Occurred()) throw PythonError();
    missing_value(owner, n);
  }
  Py_INCREF(v);
  return v;
}

PyObject* load_arg(const Argument& a, PyObject* env, Node* owner) {
  switch (a.kind()) {
    case ArgKind::NodeRef: return env_value(env, owner, a.as_node());
    case ArgKind::Tuple: {
      if (!a.contains_nodes()) return from_arg(a);
      const auto& items = a.items();
      Ref t(check(PyTuple_New(static_cast<Py_ssize_t>(items.size()))));
      for (size_t i = 0; i < items.size(); ++i)
        PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), load_arg(items[i], env, owner));
      if (a.tuple_type()) return check(PyObject_CallObject(obj_ptr(a.tuple_type()), t.get()));
      return t.release();
    }
    case ArgKind::List: {
      if (!a.contains_nodes()) return from_arg(a);
      const auto& items = a.items();
      Ref l(check(PyList_New(static_cast<Py_ssize_t>(items.size()))));
      for (size_t i = 0; i < items.size(); ++i)
        PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), load_arg(items[i], env, owner));
      if (!g_immutable_list) return l.release();
      return check(PyObject_CallOneArg(g_immutable_list, l.get()));
    }
    case ArgKind::Dict: {
      if (!a.contains_nodes()) return from_arg(a);
      Ref d(check(g_immutable_dict ? PyObject_CallNoArgs(g_immutable_dict) : PyDict_New()));
      for (auto& kv : a.pairs()) {
        Ref k(from_arg(kv.first));
        Ref v(load_arg(kv.second, env, owner));
        if (PyDict_SetItem(d.get(), k.get(), v.get()) < 0) throw PythonError();
      }
      return d.release();
    }
    case ArgKind::Slice: {
      if (!a.contains_nodes()) return from_arg(a);
      Ref s(load_arg(a.slice_start(), env, owner));
      Ref e(load_arg(a.slice_stop(), env, owner));
      Ref st(load_arg(a.slice_step(), env, owner));
      return check(PySlice_New(s.get(), e.get(), st.get()));
    }
    default: return from_arg(a);
  }
}

PyObject* load_args_tuple(Node* n, PyObject* env) {
  const auto& args = n->args();
  Ref t(check(PyTuple_New(static_cast<Py_ssize_t>(args.size()))));
  for (size_t i = 0; i < args.size(); ++i)
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), load_arg(args[i], env, n));
  return t.release();
}

PyObject* load_kwargs_dict(Node* n, PyObject* env) {
  Ref d(check(g_immutable_dict ? PyObject_CallNoArgs(g_immutable_dict) : PyDict_New()));
  for (auto& kv : n->kwargs()) {
    Ref v(load_arg(kv.second, env, n));
    if (PyDict_SetItemString(d.get(), kv.first.c_str(), v.get()) < 0) throw PythonError();
  }
  return d.release();
}

/// Argument values on a C stack (slot 0 reserved for vectorcall's offset
/// convention), kwargs values appended after positional ones.
struct ArgStack {
  std::vector<PyObject*> v;
  size_t nargs = 0;
  Ref kwnames;
  ArgStack() { v.reserve(8); v.push_back(nullptr); }
  ~ArgStack() {
    for (size_t i = 1; i < v.size(); ++i) Py_XDECREF(v[i]);
  }
  PyObject** args() { return v.data() + 1; }
  size_t nkw() const { return v.size() - 1 - nargs; }
};

void load_stack(Node* n, PyObject* env, ArgStack& st, size_t skip = 0) {
  const auto& args = n->args();
  for (size_t i = skip; i < args.size(); ++i) st.v.push_back(load_arg(args[i], env, n));
  st.nargs = st.v.size() - 1;
  const auto& kw = n->kwargs();
  if (!kw.empty()) {
    st.kwnames.reset(check(PyTuple_New(static_cast<Py_ssize_t>(kw.size()))));
    for (size_t i = 0; i < kw.size(); ++i) {
      PyObject* k = check(PyUnicode_FromStringAndSize(kw[i].first.data(), static_cast<Py_ssize_t>(kw[i].first.size())));
      PyTuple_SET_ITEM(st.kwnames.get(), static_cast<Py_ssize_t>(i), k);
      st.v.push_back(load_arg(kw[i].second, env, n));
    }
  }
}

// ---------------------------------------------------------------------------
// Default method bodies.

PyObject* str_target(Node* n) {
  const std::string& s = n->target().str();
  return check(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

PyObject* target_object(Node* n) {
  if (n->target().is_object()) {
    PyObject* o = obj_ptr(n->target().fn());
    Py_INCREF(o);
    return o;
  }
  return str_target(n);
}

PyObject* fetch_attr_default(PyObject* self, const std::string& target) {
  Ref itr(check(PyObject_GetAttr(self, s_module)));
  size_t start = 0;
  while (true) {
    size_t dot = target.find('.', start);
    std::string atom = target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Ref name(check(PyUnicode_FromStringAndSize(atom.data(), static_cast<Py_ssize_t>(atom.size()))));
    PyObject* nxt = PyObject_GetAttr(itr.get(), name.get());
    if (!nxt) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonError();
      PyErr_Clear();
      std::string seen = start == 0 ? std::string() : target.substr(0, start - 1);
      PyErr_Format(PyExc_RuntimeError, "Node referenced nonexistent target %s", seen.c_str());
      throw PythonError();
    }
    itr.reset(nxt);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return itr.release();
}

PyObject* fetch_attr(PyObject* self, const Dispatch& d, Node* n) {
  if (d.fast[kFetchAttr]) return fetch_attr_default(self, n->target().str());
  Ref t(str_target(n));
  return check(PyObject_CallMethodOneArg(self, g_method_names[kFetchAttr], t.get()));
}

PyObject* placeholder_default(PyObject* self, Node* n, PyObject* args) {
  const std::string& target = n->target().str();
  Ref it(check(PyObject_GetAttr(self, s_args_iter)));
  if (!target.empty() && target[0] == '*') return check(PySequence_List(it.get()));
  if (!PyIter_Check(it.get())) {
    PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator", Py_TYPE(it.get())->tp_name);
    throw PythonError();
  }
  PyObject* v = PyIter_Next(it.get());
  if (v) return v;
  if (PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) throw PythonError();
    PyErr_Clear();
  }
  if (PyTuple_GET_SIZE(args) > 0) {
    PyObject* a0 = PyTuple_GET_ITEM(args, 0);
    Py_INCREF(a0);
    return a0;
  }
  // Raised while handling StopIteration in torch.fx: keep it as the context.
  PyErr_Format(PyExc_RuntimeError, "Expected positional argument for parameter %s, but one was not passed in!",
               target.c_str());
  PyObject *et, *ev, *etb;
  PyErr_Fetch(&et, &ev, &etb);
  PyErr_NormalizeException(&et, &ev, &etb);
  if (PyObject* si = PyObject_CallNoArgs(PyExc_StopIteration)) PyException_SetContext(ev, si);
  else PyErr_Clear();
  PyErr_Restore(et, ev, etb);
  throw PythonError();
}

PyObject* call_with(PyObject* fn, PyObject* args, PyObject* kwargs) {
  return check(PyObject_Call(fn, args, PyDict_GET_SIZE(kwargs) ? kwargs : nullptr));
}

/// Executes op method `m` for node n given loaded (args, kwargs).
PyObject* dispatch_op(PyObject* self, const Dispatch& d, Node* n, PyObject* args, PyObject* kwargs) {
  int m;
  switch (n->op()) {
    case Op::Placeholder: m = kPlaceholder; break;
    case Op::GetAttr: m = kGetAttr; break;
    case Op::CallFunction: m = kCallFunction; break;
    case Op::CallMethod: m = kCallMethod; break;
    case Op::CallModule: m = kCallModule; break;
    case Op::Output: m = kOutput; break;
    default: PyErr_SetString(PyExc_RuntimeError, "cannot run the root node"); throw PythonError();
  }
  if (!d.fast[m]) {
    Ref target(target_object(n));
    PyObject* fn_args[4] = {self, target.get(), args, kwargs};
    return check(PyObject_VectorcallMethod(g_method_names[m], fn_args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
  }
  switch (m) {
    case kPlaceholder: return placeholder_default(self, n, args);
    case kGetAttr: return fetch_attr(self, d, n);
    case kCallFunction: return call_with(obj_ptr(n->target().fn()), args, kwargs);
    case kCallMethod: {
      Py_ssize_t na = PyTuple_GET_SIZE(args);
      if (na < 1) {
        PyErr_SetString(PyExc_ValueError, "not enough values to unpack (expected at least 1, got 0)");
        throw PythonError();
      }
      Ref name(str_target(n));
      Ref bound(check(PyObject_GetAttr(PyTuple_GET_ITEM(args, 0), name.get())));
      Ref tail(check(PyTuple_GetSlice(args, 1, na)));
      return call_with(bound.get(), tail.get(), kwargs);
    }
    case kCallModule: {
      Ref submod(fetch_attr(self, d, n));
      return call_with(submod.get(), args, kwargs);
    }
    case kOutput: {
      if (PyTuple_GET_SIZE(args) < 1) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        throw PythonError();
      }
      PyObject* r = PyTuple_GET_ITEM(args, 0);
      Py_INCREF(r);
      return r;
    }
  }
  return nullptr;
}

/// Pushes node.stack_trace while a stack-trace override is active (torch.fx's
/// fx_traceback.append_stack_trace around run_node).
struct StackTraceScope {
  PyObject* stack = nullptr;
  StackTraceScope(PyObject* w) {
    if (!g_traceback_mod) return;
    Ref ov(check(PyObject_GetAttr(g_traceback_mod, s_is_overridden)));
    int t = PyObject_IsTrue(ov.get());
    if (t < 0) throw PythonError();
    if (!t) return;
    PyObject* meta = reinterpret_cast<PyNode*>(w)->meta;
    if (!meta) {
      // Materialize through the getter (meta may be lazily created).
      Ref m(check(PyObject_GetAttrString(w, "meta")));
      push(m.get());
      return;
    }
    push(meta);
  }
  void push(PyObject* meta) {
    if (!PyDict_Check(meta)) return;
    PyObject* st = PyDict_GetItemWithError(meta, s_stack_trace);
    if (!st) {
      if (PyErr_Occurred()) throw PythonError();
      return;
    }
    int t = PyObject_IsTrue(st);
    if (t < 0) throw PythonError();
    if (!t) return;
    stack = check(PyObject_GetAttr(g_traceback_mod, s_current_stack));
    if (PyList_Append(stack, st) < 0) {
      Py_CLEAR(stack);
      throw PythonError();
    }
  }
  ~StackTraceScope() {
    if (!stack) return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n > 0) PyList_SetSlice(stack, n - 1, n, nullptr);
    PyErr_Restore(t, v, tb);
    Py_DECREF(stack);
  }
};

/// run_node for node `n` (wrapper `w`) with default run_node semantics.
PyObject* run_node_impl(PyObject* self, const Dispatch& d, PyObject* env, Node* n, PyObject* w) {
  StackTraceScope scope(w);
  Op op = n->op();
  // Fully inline calls: vectorcall from a C stack.
  if (d.args_fast) {
    if (op == Op::CallFunction && d.fast[kCallFunction]) {
      ArgStack st;
      load_stack(n, env, st);
      return check(PyObject_Vectorcall(obj_ptr(n->target().fn()), st.args(), st.nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                       st.kwnames.get()));
    }
    if (op == Op::CallMethod && d.fast[kCallMethod] && !n->args().empty()) {
      ArgStack st;
      load_stack(n, env, st);
      Ref name(str_target(n));
      return check(PyObject_VectorcallMethod(name.get(), st.args(), st.nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                             st.kwnames.get()));
    }
    if (op == Op::CallModule && d.fast[kCallModule]) {
      ArgStack st;
      load_stack(n, env, st);
      Ref submod(fetch_attr(self, d, n));
      return check(PyObject_Vectorcall(submod.get(), st.args(), st.nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                       st.kwnames.get()));
    }
  }
  Ref args, kwargs;
  if (d.args_fast) {
    args.reset(load_args_tuple(n, env));
    kwargs.reset(load_kwargs_dict(n, env));
  } else {
    Ref r(d.fast[kFetchArgs]
              ? nullptr
              : check(PyObject_CallMethodOneArg(self, g_method_names[kFetchArgs], w)));
    if (!r) {
      // Default fetch_args_kwargs_from_env over an overridden map_nodes_to_values.
      Ref a(check(PyObject_GetAttrString(w, "args")));
      Ref k(check(PyObject_GetAttrString(w, "kwargs")));
      PyObject* m = g_method_names[kMapNodes];
      args.reset(check(PyObject_CallMethodObjArgs(self, m, a.get(), w, nullptr)));
      if (!PyTuple_Check(args.get())) {
        PyErr_SetNone(PyExc_AssertionError);
        throw PythonError();
      }
      kwargs.reset(check(PyObject_CallMethodObjArgs(self, m, k.get(), w, nullptr)));
      if (!PyDict_Check(kwargs.get())) {
        PyErr_SetNone(PyExc_AssertionError);
        throw PythonError();
      }
    } else {
      Ref it(check(PyObject_GetIter(r.get())));
      args.reset(PyIter_Next(it.get()));
      if (args) kwargs.reset(PyIter_Next(it.get()));
      if (PyErr_Occurred()) throw PythonError();
      Ref extra(kwargs ? PyIter_Next(it.get()) : nullptr);
      if (PyErr_Occurred()) throw PythonError();
      if (!args || !kwargs || extra) {
        PyErr_SetString(PyExc_ValueError, !kwargs ? "not enough values to unpack (expected 2)"
                                                  : "too many values to unpack (expected 2)");
        throw PythonError();
      }
    }
  }
  if (!PyTuple_Check(args.get()) || !PyDict_Check(kwargs.get())) {
    PyErr_SetNone(PyExc_AssertionError);
    throw PythonError();
  }
  return dispatch_op(self, d, n, args.get(), kwargs.get());
}

/// Re-raises the active exception annotated with the node being executed.
void annotate_active_exception(PyObject* w) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (tb && v) PyException_SetTraceback(v, tb);
  if (!g_annotate || !v || !PyErr_GivenExceptionMatches(t, PyExc_Exception)) {
    PyErr_Restore(t, v, tb);
    return;
  }
  PyObject* r = PyObject_CallFunctionObjArgs(g_annotate, v, w, nullptr);
  if (!r) {
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    return;
  }
  if (r == v) {
    Py_DECREF(r);
    PyErr_Restore(t, v, tb);
    return;
  }
  Py_XDECREF(t);
  Py_XDECREF(v);
  Py_XDECREF(tb);
  PyObject* rt = reinterpret_cast<PyObject*>(Py_TYPE(r));
  Py_INCREF(rt);
  PyErr_Restore(rt, r, nullptr);
}

struct FramePush {
  RunFrame f;
  FramePush(PyObject* self, const Dispatch& d, PyObject* env) {
    f.self = self;
    f.dispatch = d;
    f.env = env;
    f.prev = g_run_top;
    g_run_top = &f;
  }
  ~FramePush() { g_run_top = f.prev; }
};

// ---------------------------------------------------------------------------
// Module functions.

PyObject* interp_register(PyObject*, PyObject* args) {
  PyObject *cls, *annotate, *tbmod;
  if (!PyArg_ParseTuple(args, "OOO", &cls, &annotate, &tbmod)) return nullptr;
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "expected the Interpreter class");
    return nullptr;
  }
  for (int i = 0; i < kNumMethods; ++i) {
    if (!g_method_names[i]) g_method_names[i] = PyUnicode_InternFromString(kMethodNames[i]);
    PyObject* f = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), g_method_names[i]);
    if (!f) {
      PyErr_Format(PyExc_TypeError, "Interpreter lacks %s", kMethodNames[i]);
      return nullptr;
    }
    Py_INCREF(f);
    Py_XSETREF(g_base_methods[i], f);
  }
  Py_INCREF(annotate);
  Py_XSETREF(g_annotate, annotate);
  Py_INCREF(tbmod);
  Py_XSETREF(g_traceback_mod, tbmod);
  Py_RETURN_NONE;
}

PyObject* interp_last_uses(PyObject*, PyObject* graph) {
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  FXCPP_TRY
  Ref result(check(PyDict_New()));
  // Reverse walk: the first user met of each value is its last use. Inputs are
  // visited in first-appearance order over args then kwargs (== all_input_nodes).
  std::unordered_map<const Node*, bool> seen;
  seen.reserve(g->size() * 2);
  for (Node* user : g->nodes().reversed()) {
    Ref lst;
    for (Node* in : user->all_input_nodes()) {
      if (!seen.emplace(in, true).second) continue;
      if (!lst) lst.reset(check(PyList_New(0)));
      Ref w(wrap_node(in));
      if (PyList_Append(lst.get(), w.get()) < 0) throw PythonError();
    }
    if (lst) {
      Ref uw(wrap_node(user));
      if (PyDict_SetItem(result.get(), uw.get(), lst.get()) < 0) throw PythonError();
    }
  }
  return result.release();
  FXCPP_CATCH(nullptr)
}

PyObject* interp_run(PyObject*, PyObject* args) {
  PyObject *self, *graph;
  int enable_io = 1;
  if (!PyArg_ParseTuple(args, "OO|p", &self, &graph, &enable_io)) return nullptr;
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  FXCPP_TRY
  Dispatch d = compute_dispatch(self);
  Ref env(check(PyObject_GetAttr(self, s_env)));
  if (!PyDict_Check(env.get())) {
    PyErr_SetString(PyExc_TypeError, "Interpreter.env must be a dict");
    return nullptr;
  }
  Ref gcflag(check(PyObject_GetAttr(self, s_garbage_collect_values)));
  int gc = PyObject_IsTrue(gcflag.get());
  if (gc < 0) return nullptr;
  Ref last_uses;
  if (gc) {
    last_uses.reset(check(PyObject_GetAttr(self, s_user_to_last_uses)));
    if (!PyDict_Check(last_uses.get())) {
      PyErr_SetString(PyExc_TypeError, "Interpreter.user_to_last_uses must be a dict");
      return nullptr;
    }
  }
  FramePush frame(self, d, env.get());
  for (Node* n : g->nodes()) {
    Ref w(wrap_node(n));
    int has = PyDict_Contains(env.get(), w.get());
    if (has < 0) return nullptr;
    if (has) continue;
    PyObject* r;
    try {
      r = d.fast[kRunNode] ? run_node_impl(self, d, env.get(), n, w.get())
                           : check(PyObject_CallMethodOneArg(self, g_method_names[kRunNode], w.get()));
    } catch (PythonError&) {
      annotate_active_exception(w.get());
      return nullptr;
    }
    int rc = PyDict_SetItem(env.get(), w.get(), r);
    Py_DECREF(r);
    if (rc < 0) {
      annotate_active_exception(w.get());
      return nullptr;
    }
    if (gc) {
      PyObject* dels = PyDict_GetItemWithError(last_uses.get(), w.get());
      if (dels) {
        Ref it(check(PyObject_GetIter(dels)));
        while (PyObject* x = PyIter_Next(it.get())) {
          int drc = PyDict_DelItem(env.get(), x);
          Py_DECREF(x);
          if (drc < 0) return nullptr;
        }
        if (PyErr_Occurred()) return nullptr;
      } else if (PyErr_Occurred()) {
        return nullptr;
      }
    }
    if (n->op() == Op::Output) {
      PyObject* out = PyDict_GetItemWithError(env.get(), w.get());
      if (!out) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, w.get());
        return nullptr;
      }
      if (!enable_io) {
        Py_INCREF(out);
        return out;
      }
      Ref gr(check(PyObject_GetAttrString(self, "module")));
      Ref gg(check(PyObject_GetAttrString(gr.get(), "graph")));
      return PyObject_CallMethodOneArg(gg.get(), s_process_outputs, out);
    }
  }
  Py_RETURN_NONE;
  FXCPP_CATCH(nullptr)
}

PyObject* interp_run_node(PyObject*, PyObject* args) {
  PyObject *self, *w;
  if (!PyArg_ParseTuple(args, "OO", &self, &w)) return nullptr;
  if (!is_node(w)) {
    PyErr_SetString(PyExc_TypeError, "run_node expects a Node");
    return nullptr;
  }
  Node* n = node_of(w);
  if (!n) return nullptr;
  FXCPP_TRY
  if (g_run_top && g_run_top->self == self) {
    // Called back from a Python override during our own loop: the dispatch
    // computed for this run applies (run_node itself is being overridden).
    Ref env(check(PyObject_GetAttr(self, s_env)));
    if (!PyDict_Check(env.get())) {
      PyErr_SetString(PyExc_TypeError, "Interpreter.env must be a dict");
      return nullptr;
    }
    return run_node_impl(self, g_run_top->dispatch, env.get(), n, w);
  }
  Dispatch d = compute_dispatch(self);
  Ref env(check(PyObject_GetAttr(self, s_env)));
  if (!PyDict_Check(env.get())) {
    PyErr_SetString(PyExc_TypeError, "Interpreter.env must be a dict");
    return nullptr;
  }
  return run_node_impl(self, d, env.get(), n, w);
  FXCPP_CATCH(nullptr)
}

// ---------------------------------------------------------------------------
// Subgraph matching / rewriting.

/// Converts the matcher's exceptions into torch.fx's Python exceptions.
void set_matcher_error() {
  try {
    throw;
  } catch (const SubgraphAssertion& e) {
    if (*e.what()) PyErr_SetString(PyExc_AssertionError, e.what());
    else PyErr_SetNone(PyExc_AssertionError);
  } catch (const UnmatchedPatternNode& e) {
    PyObject* w = nullptr;
    try {
      w = wrap_node(const_cast<Node*>(e.node));
    } catch (...) {
      set_python_error_from_cpp();
      return;
    }
    PyErr_SetObject(PyExc_KeyError, w);
    Py_DECREF(w);
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (...) {
    set_python_error_from_cpp();
  }
}

PyObject* list_of(const std::vector<Argument>& v) {
  Ref l(check(PyList_New(static_cast<Py_ssize_t>(v.size()))));
  for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), from_arg(v[i]));
  return l.release();
}

PyObject* nodes_map_dict(const InternalMatch& im) {
  Ref d(check(PyDict_New()));
  for (const auto& kv : im.nodes_map) {
    Ref k(wrap_node(const_cast<Node*>(kv.first)));
    Ref v(from_arg(kv.second));
    if (PyDict_SetItem(d.get(), k.get(), v.get()) < 0) throw PythonError();
  }
  return d.release();
}

/// _subgraph_match(pattern, graph, match_output, match_placeholder, remove_overlapping)
///   -> [(anchors, nodes_map, placeholder_nodes, returning_nodes)]
PyObject* subgraph_match(PyObject*, PyObject* args) {
  PyObject *pattern, *graph;
  int match_output = 0, match_placeholder = 0, remove_overlapping = 1;
  if (!PyArg_ParseTuple(args, "OO|ppp", &pattern, &graph, &match_output, &match_placeholder, &remove_overlapping))
    return nullptr;
  Graph* pg = core_graph_of(pattern);
  if (!pg) return nullptr;
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  try {
    SubgraphMatcherOptions opts;
    opts.match_output = match_output;
    opts.match_placeholder = match_placeholder;
    opts.remove_overlapping_matches = remove_overlapping;
    SubgraphMatcher m(*pg, opts);
    std::vector<InternalMatch> matches = m.match(*g);
    Ref out(check(PyList_New(static_cast<Py_ssize_t>(matches.size()))));
    for (size_t i = 0; i < matches.size(); ++i) {
      const InternalMatch& im = matches[i];
      Ref anchors(check(PyList_New(0)));
      for (const Node* a : im.anchors) {
        Ref w(wrap_node(const_cast<Node*>(a)));
        if (PyList_Append(anchors.get(), w.get()) < 0) throw PythonError();
      }
      Ref nm(nodes_map_dict(im));
      Ref ph(list_of(im.placeholder_nodes));
      Ref rn(list_of(im.returning_nodes));
      PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i),
                      check(PyTuple_Pack(4, anchors.get(), nm.get(), ph.get(), rn.get())));
    }
    return out.release();
  } catch (...) {
    set_matcher_error();
    return nullptr;
  }
}

/// Copies node.meta of `src` (if any) onto `dst`, as torch.fx's node_copy does.
void copy_node_meta(const Node& src, Node& dst) {
  auto* sw = pynode_of(src.binding());
  if (!sw || !sw->meta) return;
  if (PyDict_Check(sw->meta) && PyDict_GET_SIZE(sw->meta) == 0) return;
  Ref m(check(PyDict_CheckExact(sw->meta) ? PyDict_Copy(sw->meta) : PyObject_CallOneArg(helper("_copy"), sw->meta)));
  Ref dw(wrap_node(&dst));
  Py_XSETREF(reinterpret_cast<PyNode*>(dw.get())->meta, m.release());
}

/// _replace_pattern(graph, pattern_graph, replacement_graph, Match) -> [Match]
PyObject* replace_pattern_graphs(PyObject*, PyObject* args) {
  PyObject *graph, *pattern, *replacement, *match_cls;
  if (!PyArg_ParseTuple(args, "OOOO", &graph, &pattern, &replacement, &match_cls)) return nullptr;
  Graph* g = core_graph_of(graph);
  if (!g) return nullptr;
  Graph* pg = core_graph_of(pattern);
  if (!pg) return nullptr;
  Graph* rg = core_graph_of(replacement);
  if (!rg) return nullptr;
  try {
    SubgraphMatcher m(*pg);
    std::vector<InternalMatch> matches = m.match(*g);
    // Build the Match objects first: wrapping the matched nodes keeps them
    // alive (as tombstones) once erased, like torch.fx's Match objects.
    Ref out(check(PyList_New(static_cast<Py_ssize_t>(matches.size()))));
    for (size_t i = 0; i < matches.size(); ++i) {
      const InternalMatch& im = matches[i];
      if (im.anchors.empty()) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        throw PythonError();
      }
      Ref anchor(wrap_node(const_cast<Node*>(im.anchors[0])));
      Ref nm(nodes_map_dict(im));
      PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i),
                      check(PyObject_CallFunctionObjArgs(match_cls, anchor.get(), nm.get(), nullptr)));
    }
    ReplacePatternHooks hooks;
    hooks.on_copy = copy_node_meta;
    replace_matches(*g, m, *rg, matches, hooks);
    return out.release();
  } catch (...) {
    set_matcher_error();
    return nullptr;
  }
}

PyMethodDef transform_methods[] = {
    {"_interp_register", interp_register, METH_VARARGS,
     "_interp_register(Interpreter, annotate_fn, traceback_module): record the default methods."},
    {"_interp_last_uses", interp_last_uses, METH_O,
     "_interp_last_uses(graph) -> {user: [values last used by user]} (torch.fx user_to_last_uses)."},
    {"_interp_run", interp_run, METH_VARARGS, "_interp_run(interp, graph, enable_io_processing): the run() loop."},
    {"_interp_run_node", interp_run_node, METH_VARARGS, "_interp_run_node(interp, node): Interpreter.run_node."},
    {"_subgraph_match", subgraph_match, METH_VARARGS,
     "_subgraph_match(pattern, graph, match_output, match_placeholder, remove_overlapping_matches)."},
    {"_replace_pattern", replace_pattern_graphs, METH_VARARGS,
     "_replace_pattern(graph, pattern_graph, replacement_graph, Match): match and rewrite in C++."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_transform(PyObject* m) {
  s_env = PyUnicode_InternFromString("env");
  s_args_iter = PyUnicode_InternFromString("args_iter");
  s_module = PyUnicode_InternFromString("module");
  s_user_to_last_uses = PyUnicode_InternFromString("user_to_last_uses");
  s_garbage_collect_values = PyUnicode_InternFromString("garbage_collect_values");
  s_process_outputs = PyUnicode_InternFromString("process_outputs");
  s_is_overridden = PyUnicode_InternFromString("is_overridden");
  s_current_stack = PyUnicode_InternFromString("current_stack");
  s_stack_trace = PyUnicode_InternFromString("stack_trace");
  for (int i = 0; i < kNumMethods; ++i) g_method_names[i] = PyUnicode_InternFromString(kMethodNames[i]);
  for (PyMethodDef* d = transform_methods; d->ml_name; ++d) {
    PyObject* f = PyCFunction_NewEx(d, nullptr, nullptr);
    if (!f || PyModule_AddObject(m, d->ml_name, f) < 0) {
      Py_XDECREF(f);
      return -1;
    }
  }
  return 0;
}

}  // namespace fxcpp::py
