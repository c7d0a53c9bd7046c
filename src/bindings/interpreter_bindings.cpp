// Bindings for fxcpp.interpreter: the Interpreter / Transformer node loop
// (Interpreter.run and run_node) and the last-use table behind
// Interpreter.user_to_last_uses (the core pass fxcpp::last_uses).
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
// The per-node work of the default path is: one wrapper lookup, one env
// membership test, the call itself (arguments on an inline C stack, no heap
// allocation for up to ArgStack::kInline of them), one env store and, with
// garbage collection, one user_to_last_uses lookup. Keep it that way: no
// per-node Python calls or allocations beyond what torch.fx's semantics need.
//
// Exceptions escaping a node are annotated by the Python helper registered with
// _interp_register (torch.fx's message format), on the slow path only.
#include "bindings.h"
#include "fxcpp/core/dialect.h"
#include "fxcpp/core/last_uses.h"

#include <algorithm>
#include <string>
#include <vector>

namespace fxcpp::py {
namespace {

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

// Interned names, created by init_interpreter and kept for the process.
PyObject* g_method_names[kNumMethods] = {};
PyObject* s_env = nullptr;
PyObject* s_args_iter = nullptr;
PyObject* s_module = nullptr;
PyObject* s_args = nullptr;
PyObject* s_kwargs = nullptr;
PyObject* s_meta = nullptr;
PyObject* s_user_to_last_uses = nullptr;
PyObject* s_garbage_collect_values = nullptr;
PyObject* s_process_outputs = nullptr;
PyObject* s_is_overridden = nullptr;
PyObject* s_current_stack = nullptr;
PyObject* s_stack_trace = nullptr;

// Set by _interp_register (strong references, kept for the process).
PyObject* g_base_methods[kNumMethods] = {};  // functions defined on fxcpp.Interpreter
PyObject* g_annotate = nullptr;              // _annotate_exception(e, node)
PyObject* g_traceback_mod = nullptr;         // fxcpp.traceback

/// The core graph of a fxcpp.Graph argument; throws PythonError (TypeError) otherwise.
Graph& graph_arg(PyObject* graph) {
  Graph* g = core_graph_of(graph);
  if (!g) throw PythonError();
  return *g;
}

/// self.env, which must be a dict.
Ref env_of(PyObject* self) {
  Ref env = owned(PyObject_GetAttr(self, s_env));
  if (!PyDict_Check(env.get())) {
    PyErr_SetString(PyExc_TypeError, "Interpreter.env must be a dict");
    throw PythonError();
  }
  return env;
}

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
      if (PyDict_GetItemWithError(idict, g_method_names[i])) {
        fast = false;
      } else if (PyErr_Occurred()) {
        throw PythonError();
      }
    }
    d.fast[i] = fast;
  }
  d.args_fast = d.fast[kFetchArgs] && d.fast[kMapNodes];
  return d;
}

/// The run in progress for an interpreter object (lets run_node, called from a
/// Python override, reuse the loop's dispatch).
struct RunFrame {
  PyObject* self = nullptr;
  Dispatch dispatch;
  RunFrame* prev = nullptr;
};
RunFrame* g_run_top = nullptr;

/// Pushes a RunFrame for the duration of one run() call.
class FramePush {
 public:
  FramePush(PyObject* self, const Dispatch& d) {
    f_.self = self;
    f_.dispatch = d;
    f_.prev = g_run_top;
    g_run_top = &f_;
  }
  FramePush(const FramePush&) = delete;
  FramePush& operator=(const FramePush&) = delete;
  ~FramePush() { g_run_top = f_.prev; }

 private:
  RunFrame f_;
};

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
  Ref w = owned(wrap_node(n));
  PyObject* v = PyDict_GetItemWithError(env, w.get());
  if (!v) {
    if (PyErr_Occurred()) throw PythonError();
    missing_value(owner, n);
  }
  return Py_NewRef(v);
}

/// The value of argument `a` of node `owner` (new reference).
PyObject* load_arg(const Argument& a, PyObject* env, Node* owner) {
  switch (a.kind()) {
    case ArgKind::NodeRef: return env_value(env, owner, a.as_node());
    case ArgKind::Tuple: {
      if (!a.contains_nodes()) return check(from_arg(a));
      const auto& items = a.items();
      Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
      for (size_t i = 0; i < items.size(); ++i)
        PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), load_arg(items[i], env, owner));
      if (a.tuple_type()) return check(PyObject_CallObject(obj_ptr(a.tuple_type()), t.get()));
      return t.release();
    }
    case ArgKind::List: {
      if (!a.contains_nodes()) return check(from_arg(a));
      const auto& items = a.items();
      Ref l = owned(PyList_New(static_cast<Py_ssize_t>(items.size())));
      for (size_t i = 0; i < items.size(); ++i)
        PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), load_arg(items[i], env, owner));
      if (!g_immutable_list) return l.release();
      return check(PyObject_CallOneArg(g_immutable_list, l.get()));
    }
    case ArgKind::Dict: {
      if (!a.contains_nodes()) return check(from_arg(a));
      Ref d = owned(g_immutable_dict ? PyObject_CallNoArgs(g_immutable_dict) : PyDict_New());
      for (auto& kv : a.pairs()) {
        Ref k = owned(from_arg(kv.first));
        Ref v = Ref::steal(load_arg(kv.second, env, owner));
        check(PyDict_SetItem(d.get(), k.get(), v.get()));
      }
      return d.release();
    }
    case ArgKind::Slice: {
      if (!a.contains_nodes()) return check(from_arg(a));
      Ref start = Ref::steal(load_arg(a.slice_start(), env, owner));
      Ref stop = Ref::steal(load_arg(a.slice_stop(), env, owner));
      Ref step = Ref::steal(load_arg(a.slice_step(), env, owner));
      return check(PySlice_New(start.get(), stop.get(), step.get()));
    }
    default: return check(from_arg(a));
  }
}

/// n.args with every node replaced by its env value (new tuple).
Ref load_args_tuple(Node* n, PyObject* env) {
  ArgSpan args = n->args();
  Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i)
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), load_arg(args[i], env, n));
  return t;
}

/// n.kwargs with every node replaced by its env value (new immutable_dict).
Ref load_kwargs_dict(Node* n, PyObject* env) {
  Ref d = owned(g_immutable_dict ? PyObject_CallNoArgs(g_immutable_dict) : PyDict_New());
  for (auto& kv : n->kwargs()) {
    Ref v = Ref::steal(load_arg(kv.second, env, n));
    Ref k = owned(PyUnicode_FromStringAndSize(kv.first.data(), static_cast<Py_ssize_t>(kv.first.size())));
    check(PyDict_SetItem(d.get(), k.get(), v.get()));
  }
  return d;
}

/// Argument values laid out for vectorcall: slot 0 stays free for
/// PY_VECTORCALL_ARGUMENTS_OFFSET, then the positional values, then the
/// kwargs values (named by `kwnames`). Owns the values; up to kInline of them
/// need no heap allocation.
class ArgStack {
 public:
  static constexpr size_t kInline = 8;
  ArgStack() = default;
  ArgStack(const ArgStack&) = delete;
  ArgStack& operator=(const ArgStack&) = delete;
  ~ArgStack() {
    for (size_t i = 1; i < size_; ++i) Py_DECREF(data_[i]);
  }
  /// Appends `v` (a new reference, never null).
  void push(PyObject* v) {
    Ref owner = Ref::steal(v);
    if (size_ == cap_) grow();
    data_[size_++] = owner.release();
  }
  PyObject* const* args() const { return data_ + 1; }
  size_t size() const { return size_ - 1; }
  size_t nargs = 0;
  Ref kwnames;

 private:
  void grow() {
    std::vector<PyObject*> bigger(cap_ * 2);
    std::copy(data_, data_ + size_, bigger.begin());
    heap_.swap(bigger);
    data_ = heap_.data();
    cap_ = heap_.size();
  }
  PyObject* inline_[kInline + 1] = {};
  std::vector<PyObject*> heap_;
  PyObject** data_ = inline_;
  size_t size_ = 1;
  size_t cap_ = kInline + 1;
};

/// Loads n's arguments (from positional index `skip` on) and kwargs onto `st`.
void load_stack(Node* n, PyObject* env, ArgStack& st, size_t skip = 0) {
  ArgSpan args = n->args();
  for (size_t i = skip; i < args.size(); ++i) st.push(load_arg(args[i], env, n));
  st.nargs = st.size();
  const KwArgs& kw = n->kwargs();
  if (kw.empty()) return;
  st.kwnames = owned(PyTuple_New(static_cast<Py_ssize_t>(kw.size())));
  for (size_t i = 0; i < kw.size(); ++i) {
    const std::string& key = kw[i].first;
    PyTuple_SET_ITEM(st.kwnames.get(), static_cast<Py_ssize_t>(i),
                     check(PyUnicode_FromStringAndSize(key.data(), static_cast<Py_ssize_t>(key.size()))));
    st.push(load_arg(kw[i].second, env, n));
  }
}

/// Calls `fn` with the values on `st`.
PyObject* call_stack(PyObject* fn, const ArgStack& st) {
  return check(PyObject_Vectorcall(fn, st.args(), st.nargs | PY_VECTORCALL_ARGUMENTS_OFFSET, st.kwnames.get()));
}

// ---------------------------------------------------------------------------
// Default method bodies.

Ref str_target(Node* n) {
  const std::string& s = n->target().str();
  return owned(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

/// node.target as torch.fx passes it to the op methods.
Ref target_object(Node* n) {
  if (n->target().is_object()) return Ref::borrow(obj_ptr(n->target().fn()));
  return str_target(n);
}

/// torch.fx Interpreter.fetch_attr: walks self.module along the dotted path.
PyObject* fetch_attr_default(PyObject* self, const std::string& target) {
  Ref itr = owned(PyObject_GetAttr(self, s_module));
  size_t start = 0;
  while (true) {
    size_t dot = target.find('.', start);
    size_t len = (dot == std::string::npos ? target.size() : dot) - start;
    Ref name = owned(PyUnicode_FromStringAndSize(target.data() + start, static_cast<Py_ssize_t>(len)));
    Ref next = Ref::steal(PyObject_GetAttr(itr.get(), name.get()));
    if (!next) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw PythonError();
      PyErr_Clear();
      // The path walked so far: torch.fx 2.x includes the missing atom, 1.13 stops before it.
      std::string seen = dialect() == Dialect::fx_2 ? target.substr(0, start + len)
                                                    : start == 0 ? std::string() : target.substr(0, start - 1);
      PyErr_Format(PyExc_RuntimeError, "Node referenced nonexistent target %s", seen.c_str());
      throw PythonError();
    }
    itr = std::move(next);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return itr.release();
}

PyObject* fetch_attr(PyObject* self, const Dispatch& d, Node* n) {
  if (d.fast[kFetchAttr]) return fetch_attr_default(self, n->target().str());
  Ref t = str_target(n);
  return check(PyObject_CallMethodOneArg(self, g_method_names[kFetchAttr], t.get()));
}

PyObject* placeholder_default(PyObject* self, Node* n, PyObject* args) {
  const std::string& target = n->target().str();
  Ref it = owned(PyObject_GetAttr(self, s_args_iter));
  if (!target.empty() && target[0] == '*') return check(PySequence_List(it.get()));
  if (!PyIter_Check(it.get())) {
    PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator", Py_TYPE(it.get())->tp_name);
    throw PythonError();
  }
  if (PyObject* v = PyIter_Next(it.get())) return v;
  if (PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) throw PythonError();
    PyErr_Clear();
  }
  if (PyTuple_GET_SIZE(args) > 0) return Py_NewRef(PyTuple_GET_ITEM(args, 0));
  // Raised while handling StopIteration in torch.fx: keep it as the context.
  // Restored rather than set, so that no handled exception replaces it.
  Ref error = owned(PyObject_CallFunction(
      PyExc_RuntimeError, "s", ("Expected positional argument for parameter " + target + ", but one was not passed in!").c_str()));
  Ref stop = owned(PyObject_CallNoArgs(PyExc_StopIteration));
  PyException_SetContext(error.get(), stop.release());
  PyErr_Restore(Py_NewRef(PyExc_RuntimeError), error.release(), nullptr);
  throw PythonError();
}

/// fn(*args, **kwargs).
PyObject* call_with(PyObject* fn, PyObject* args, PyObject* kwargs) {
  return check(PyObject_Call(fn, args, PyDict_GET_SIZE(kwargs) ? kwargs : nullptr));
}

/// Executes n's op method on loaded (args, kwargs): the default body inline,
/// or the override with torch.fx's arguments.
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
    Ref target = target_object(n);
    PyObject* stack[5] = {nullptr, self, target.get(), args, kwargs};  // [0]: vectorcall offset slot
    return check(PyObject_VectorcallMethod(g_method_names[m], stack + 1, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
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
      Ref name = str_target(n);
      Ref bound = owned(PyObject_GetAttr(PyTuple_GET_ITEM(args, 0), name.get()));
      Ref tail = owned(PyTuple_GetSlice(args, 1, na));
      return call_with(bound.get(), tail.get(), kwargs);
    }
    case kCallModule: {
      Ref submod = Ref::steal(fetch_attr(self, d, n));
      return call_with(submod.get(), args, kwargs);
    }
    default: {  // kOutput
      if (PyTuple_GET_SIZE(args) < 1) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        throw PythonError();
      }
      return Py_NewRef(PyTuple_GET_ITEM(args, 0));
    }
  }
}

// ---------------------------------------------------------------------------
// run_node.

/// torch.fx's fx_traceback.append_stack_trace(node.stack_trace) around
/// run_node: pushes the node's stack trace onto fx_traceback.current_stack
/// and returns that list, or returns null when no stack-trace override is
/// active or the node has no stack trace (the common case: one attribute read).
Ref push_stack_trace(PyObject* w) {
  if (!g_traceback_mod) return Ref();
  Ref overridden = owned(PyObject_GetAttr(g_traceback_mod, s_is_overridden));
  if (!check(PyObject_IsTrue(overridden.get()))) return Ref();
  // Through the getter when the wrapper has no meta dict yet (created lazily).
  PyObject* cached = reinterpret_cast<PyNode*>(w)->meta;
  Ref meta = cached ? Ref::borrow(cached) : owned(PyObject_GetAttr(w, s_meta));
  if (!PyDict_Check(meta.get())) return Ref();
  Ref trace = Ref::borrow(PyDict_GetItemWithError(meta.get(), s_stack_trace));
  if (!trace) {
    if (PyErr_Occurred()) throw PythonError();
    return Ref();
  }
  if (!check(PyObject_IsTrue(trace.get()))) return Ref();
  Ref stack = owned(PyObject_GetAttr(g_traceback_mod, s_current_stack));
  check(PyList_Append(stack.get(), trace.get()));
  return stack;
}

/// Removes the last entry of `stack` (a list push_stack_trace appended to).
void pop_stack_trace(PyObject* stack) {
  Py_ssize_t n = PyList_GET_SIZE(stack);
  if (n > 0) check(PyList_SetSlice(stack, n - 1, n, nullptr));
}

/// pop_stack_trace while an exception propagates: that exception wins over
/// any error of the pop itself.
void pop_stack_trace_keeping_error(PyObject* stack) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  Py_ssize_t n = PyList_GET_SIZE(stack);
  if (n > 0 && PyList_SetSlice(stack, n - 1, n, nullptr) < 0) PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

/// run_node for node `n` (wrapper `w`) with default run_node semantics, the
/// stack trace aside.
PyObject* run_node_body(PyObject* self, const Dispatch& d, PyObject* env, Node* n, PyObject* w) {
  Op op = n->op();
  // Fully inline calls: vectorcall from a C stack.
  if (d.args_fast) {
    if (op == Op::CallFunction && d.fast[kCallFunction]) {
      ArgStack st;
      load_stack(n, env, st);
      return call_stack(obj_ptr(n->target().fn()), st);
    }
    if (op == Op::CallMethod && d.fast[kCallMethod] && !n->args().empty()) {
      ArgStack st;
      load_stack(n, env, st);
      Ref name = str_target(n);
      return check(PyObject_VectorcallMethod(name.get(), st.args(), st.nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                             st.kwnames.get()));
    }
    if (op == Op::CallModule && d.fast[kCallModule]) {
      ArgStack st;
      load_stack(n, env, st);
      Ref submod = Ref::steal(fetch_attr(self, d, n));
      return call_stack(submod.get(), st);
    }
  }
  Ref args, kwargs;
  if (d.args_fast) {
    args = load_args_tuple(n, env);
    kwargs = load_kwargs_dict(n, env);
  } else if (d.fast[kFetchArgs]) {
    // Default fetch_args_kwargs_from_env over an overridden map_nodes_to_values.
    Ref a = owned(PyObject_GetAttr(w, s_args));
    Ref k = owned(PyObject_GetAttr(w, s_kwargs));
    PyObject* map = g_method_names[kMapNodes];
    args = owned(PyObject_CallMethodObjArgs(self, map, a.get(), w, nullptr));
    if (!PyTuple_Check(args.get())) {
      PyErr_SetNone(PyExc_AssertionError);
      throw PythonError();
    }
    kwargs = owned(PyObject_CallMethodObjArgs(self, map, k.get(), w, nullptr));
    if (!PyDict_Check(kwargs.get())) {
      PyErr_SetNone(PyExc_AssertionError);
      throw PythonError();
    }
  } else {
    // `args, kwargs = self.fetch_args_kwargs_from_env(n)`.
    Ref pair = owned(PyObject_CallMethodOneArg(self, g_method_names[kFetchArgs], w));
    Ref it = owned(PyObject_GetIter(pair.get()));
    args = Ref::steal(PyIter_Next(it.get()));
    if (args) kwargs = Ref::steal(PyIter_Next(it.get()));
    if (PyErr_Occurred()) throw PythonError();
    Ref extra = kwargs ? Ref::steal(PyIter_Next(it.get())) : Ref();
    if (PyErr_Occurred()) throw PythonError();
    if (!args || !kwargs || extra) {
      PyErr_SetString(PyExc_ValueError, !kwargs ? "not enough values to unpack (expected 2)"
                                                : "too many values to unpack (expected 2)");
      throw PythonError();
    }
  }
  if (!PyTuple_Check(args.get()) || !PyDict_Check(kwargs.get())) {
    PyErr_SetNone(PyExc_AssertionError);
    throw PythonError();
  }
  return dispatch_op(self, d, n, args.get(), kwargs.get());
}

/// run_node for node `n` (wrapper `w`) with default run_node semantics.
PyObject* run_node_impl(PyObject* self, const Dispatch& d, PyObject* env, Node* n, PyObject* w) {
  Ref stack = push_stack_trace(w);
  if (!stack) return run_node_body(self, d, env, n, w);
  Ref result;
  try {
    result = Ref::steal(run_node_body(self, d, env, n, w));
  } catch (...) {
    pop_stack_trace_keeping_error(stack.get());
    throw;
  }
  pop_stack_trace(stack.get());
  return result.release();
}

/// Replaces the active exception (set) by the one torch.fx raises for it
/// when it escapes node `w`: annotated by the registered helper. Leaves an
/// exception set in every case.
void annotate_active_exception(PyObject* w) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  Ref type = Ref::steal(t), value = Ref::steal(v), trace = Ref::steal(tb);
  if (trace && value && PyException_SetTraceback(value.get(), trace.get()) < 0) return;  // its error replaces
  if (!g_annotate || !value || !PyErr_GivenExceptionMatches(type.get(), PyExc_Exception)) {
    PyErr_Restore(type.release(), value.release(), trace.release());
    return;
  }
  Ref annotated = Ref::steal(PyObject_CallFunctionObjArgs(g_annotate, value.get(), w, nullptr));
  if (!annotated) return;  // the helper's own error replaces the original
  if (annotated.get() == value.get()) {
    PyErr_Restore(type.release(), value.release(), trace.release());
    return;
  }
  PyObject* annotated_type = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(annotated.get())));
  PyErr_Restore(annotated_type, annotated.release(), nullptr);
}

/// Frees the values `dels` (user_to_last_uses[user]) lists from `env`
/// (torch.fx: `for to_delete in ...: del self.env[to_delete]`).
void free_last_uses(PyObject* env, PyObject* dels) {
  Ref keep = Ref::borrow(dels);  // deleting values may run code that rebinds the entry
  if (PyList_CheckExact(dels)) {
    // A list iterator's walk, without allocating the iterator.
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dels); ++i) {
      Ref x = Ref::borrow(PyList_GET_ITEM(dels, i));
      check(PyDict_DelItem(env, x.get()));
    }
    return;
  }
  Ref it = owned(PyObject_GetIter(dels));
  while (Ref x = Ref::steal(PyIter_Next(it.get()))) check(PyDict_DelItem(env, x.get()));
  if (PyErr_Occurred()) throw PythonError();
}

// ---------------------------------------------------------------------------
// Module functions.

/// _interp_register(Interpreter, annotate_fn, traceback_module)
PyObject* interp_register(PyObject*, PyObject* args) {
  PyObject *cls, *annotate, *tbmod;
  if (!PyArg_ParseTuple(args, "OOO:_interp_register", &cls, &annotate, &tbmod)) throw PythonError();
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "expected the Interpreter class");
    throw PythonError();
  }
  PyObject* found[kNumMethods];
  for (int i = 0; i < kNumMethods; ++i) {
    found[i] = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), g_method_names[i]);  // borrowed
    if (!found[i]) {
      PyErr_Format(PyExc_TypeError, "Interpreter lacks %s", kMethodNames[i]);
      throw PythonError();
    }
  }
  for (int i = 0; i < kNumMethods; ++i) Py_XSETREF(g_base_methods[i], Py_NewRef(found[i]));
  Py_XSETREF(g_annotate, Py_NewRef(annotate));
  Py_XSETREF(g_traceback_mod, Py_NewRef(tbmod));
  Py_RETURN_NONE;
}

/// _interp_last_uses(graph) -> {user: [values last used by user]}: torch.fx's
/// user_to_last_uses from the core pass, users in reverse graph order.
PyObject* interp_last_uses(PyObject*, PyObject* graph) {
  const Graph& g = graph_arg(graph);
  LastUses lu = last_uses(g);
  Ref result = owned(PyDict_New());
  for (Node* user : g.nodes().reversed()) {
    LastUses::Range freed = lu.freed_after(*user);
    if (freed.empty()) continue;
    Ref values = owned(PyList_New(static_cast<Py_ssize_t>(freed.size())));
    for (size_t i = 0; i < freed.size(); ++i)
      PyList_SET_ITEM(values.get(), static_cast<Py_ssize_t>(i), check(wrap_node(freed[i])));
    Ref key = owned(wrap_node(user));
    check(PyDict_SetItem(result.get(), key.get(), values.get()));
  }
  return result.release();
}

/// _interp_run(interp, graph, enable_io_processing=True): Interpreter.run's loop.
PyObject* interp_run(PyObject*, PyObject* args) {
  PyObject *self, *graph;
  int enable_io = 1;
  if (!PyArg_ParseTuple(args, "OO|p:_interp_run", &self, &graph, &enable_io)) throw PythonError();
  Graph& g = graph_arg(graph);
  Dispatch d = compute_dispatch(self);
  Ref env = env_of(self);
  Ref gc_flag = owned(PyObject_GetAttr(self, s_garbage_collect_values));
  const bool gc = check(PyObject_IsTrue(gc_flag.get()));
  Ref last_uses;
  if (gc) {
    last_uses = owned(PyObject_GetAttr(self, s_user_to_last_uses));
    if (!PyDict_Check(last_uses.get())) {
      PyErr_SetString(PyExc_TypeError, "Interpreter.user_to_last_uses must be a dict");
      throw PythonError();
    }
  }
  FramePush frame(self, d);
  for (Node* n : g.nodes()) {
    Ref w = owned(wrap_node(n));
    if (check(PyDict_Contains(env.get(), w.get()))) continue;
    try {
      Ref r = Ref::steal(d.fast[kRunNode] ? run_node_impl(self, d, env.get(), n, w.get())
                                          : check(PyObject_CallMethodOneArg(self, g_method_names[kRunNode], w.get())));
      check(PyDict_SetItem(env.get(), w.get(), r.get()));
    } catch (...) {
      set_python_error_from_cpp();
      annotate_active_exception(w.get());
      throw PythonError();
    }
    if (gc) {
      if (PyObject* dels = PyDict_GetItemWithError(last_uses.get(), w.get())) {
        free_last_uses(env.get(), dels);
      } else if (PyErr_Occurred()) {
        throw PythonError();
      }
    }
    if (n->op() == Op::Output) {
      Ref out = Ref::borrow(PyDict_GetItemWithError(env.get(), w.get()));
      if (!out) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, w.get());
        throw PythonError();
      }
      if (!enable_io) return out.release();
      return check(PyObject_CallMethodOneArg(graph, s_process_outputs, out.get()));
    }
  }
  Py_RETURN_NONE;
}

/// _interp_run_node(interp, node): Interpreter.run_node.
PyObject* interp_run_node(PyObject*, PyObject* args) {
  PyObject *self, *w;
  if (!PyArg_ParseTuple(args, "OO:_interp_run_node", &self, &w)) throw PythonError();
  if (!is_node(w)) {
    PyErr_SetString(PyExc_TypeError, "run_node expects a Node");
    throw PythonError();
  }
  Node* n = node_of(w);
  if (!n) throw PythonError();
  // Called back from a Python override during our own loop: the dispatch
  // computed for this run applies (run_node itself is being overridden).
  const bool in_run = g_run_top && g_run_top->self == self;
  Dispatch d = in_run ? g_run_top->dispatch : compute_dispatch(self);
  Ref env = env_of(self);
  return run_node_impl(self, d, env.get(), n, w);
}

PyMethodDef interpreter_methods[] = {
    def<interp_register>("_interp_register", METH_VARARGS,
                         "_interp_register(Interpreter, annotate_fn, traceback_module): record the default methods."),
    def<interp_last_uses>("_interp_last_uses", METH_O,
                          "_interp_last_uses(graph) -> {user: [values last used by user]} "
                          "(torch.fx user_to_last_uses, from the core pass last_uses)."),
    def<interp_run>("_interp_run", METH_VARARGS, "_interp_run(interp, graph, enable_io_processing): the run() loop."),
    def<interp_run_node>("_interp_run_node", METH_VARARGS, "_interp_run_node(interp, node): Interpreter.run_node."),
    kEndOfMethods};

/// Interns `text` into `slot` once.
void intern(PyObject*& slot, const char* text) {
  if (!slot) slot = check(PyUnicode_InternFromString(text));
}

int init_interpreter_impl(PyObject* m) {
  intern(s_env, "env");
  intern(s_args_iter, "args_iter");
  intern(s_module, "module");
  intern(s_args, "args");
  intern(s_kwargs, "kwargs");
  intern(s_meta, "meta");
  intern(s_user_to_last_uses, "user_to_last_uses");
  intern(s_garbage_collect_values, "garbage_collect_values");
  intern(s_process_outputs, "process_outputs");
  intern(s_is_overridden, "is_overridden");
  intern(s_current_stack, "current_stack");
  intern(s_stack_trace, "stack_trace");
  for (int i = 0; i < kNumMethods; ++i) intern(g_method_names[i], kMethodNames[i]);
  return check(add_functions(m, interpreter_methods));
}

}  // namespace

int init_interpreter(PyObject* m) { return guard<init_interpreter_impl>(m); }

}  // namespace fxcpp::py
