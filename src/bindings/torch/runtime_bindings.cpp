// fxcpp._C_torch: Python bindings of the LibTorch runtime (fxcpp::torch).
// Binding code only: loading, planning and running live in src/torch.
//
// Note [Runtime and the GIL]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Runtime.run converts its Python arguments to IValues with the GIL held,
// releases the GIL for the whole forward (Module::forward is thread-safe and
// touches no Python object), and converts the result back with the GIL held
// again. So Python threads that call one loaded model run their forwards in
// parallel.
#include "toolkit.h"  // first: Python.h with PY_SSIZE_T_CLEAN

#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <memory>

#include "fxcpp/torch/capture.h"
#include "fxcpp/torch/module.h"
#include "fxcpp/torch/policy.h"
#include "torch_bindings.h"

namespace fxcpp::py {

namespace {

struct PyRuntime {
  PyObject_HEAD
  torch::Module* module;
};

PyTypeObject* RuntimeType = nullptr;

torch::Module& module_of(PyObject* self) {
  auto* r = reinterpret_cast<PyRuntime*>(self);
  if (!r->module) throw std::runtime_error("fxcpp: this Runtime holds no module");
  return *r->module;
}

// ---- values across the boundary ---------------------------------------------------

c10::IValue to_ivalue(PyObject* o, int depth = 0) {
  if (depth > 64) throw torch::InputError("fxcpp: an input is nested more than 64 deep");
  if (THPVariable_Check(o)) return THPVariable_Unpack(o);
  if (o == Py_None) return {};
  if (PyBool_Check(o)) return o == Py_True;
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) throw torch::InputError("fxcpp: an int input does not fit in 64 bits");
    if (v == -1 && PyErr_Occurred()) throw PythonError();
    return static_cast<int64_t>(v);
  }
  if (PyFloat_Check(o)) return PyFloat_AS_DOUBLE(o);
  if (PyUnicode_Check(o)) return std::string(utf8(o, "a str input"));
  if (PyTuple_Check(o) || PyList_Check(o)) {
    Ref seq = owned(PySequence_Fast(o, "a sequence"));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    std::vector<c10::IValue> items;
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(to_ivalue(PySequence_Fast_GET_ITEM(seq.get(), i), depth + 1));
    if (PyTuple_Check(o)) return c10::ivalue::Tuple::create(std::move(items));
    return torch::make_list(std::move(items));
  }
  Ref t = owned(PyObject_Repr(reinterpret_cast<PyObject*>(Py_TYPE(o))));
  throw torch::InputError(std::string("fxcpp: the runtime takes tensors, numbers, str, None, tuples and lists; got ") +
                          std::string(utf8(t.get(), "type name")));
}

PyObject* from_ivalue(const c10::IValue& v) {
  if (v.isTensor()) return THPVariable_Wrap(v.toTensor());
  if (v.isNone()) Py_RETURN_NONE;
  if (v.isBool()) return PyBool_FromLong(v.toBool());
  if (v.isInt()) return PyLong_FromLongLong(v.toInt());
  if (v.isDouble()) return PyFloat_FromDouble(v.toDouble());
  if (v.isString()) {
    const std::string& s = v.toStringRef();
    return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  }
  if (v.isTuple()) {
    auto elems = v.toTupleRef().elements();
    Ref t = owned(PyTuple_New(static_cast<Py_ssize_t>(elems.size())));
    for (size_t i = 0; i < elems.size(); ++i)
      PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), check(from_ivalue(elems[i])));
    return t.release();
  }
  if (v.isList()) {
    auto items = v.toListRef();
    Ref l = owned(PyList_New(static_cast<Py_ssize_t>(items.size())));
    for (size_t i = 0; i < items.size(); ++i)
      PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), check(from_ivalue(items[i])));
    return l.release();
  }
  if (v.isGenericDict()) {
    Ref d = owned(PyDict_New());
    for (auto& kv : v.toGenericDict()) {
      Ref k = owned(from_ivalue(kv.key())), val = owned(from_ivalue(kv.value()));
      check(PyDict_SetItem(d.get(), k.get(), val.get()));
    }
    return d.release();
  }
  if (v.isDevice()) {
    std::string s = v.toDevice().str();
    return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  }
  throw std::runtime_error(std::string("fxcpp: the runtime returned a value Python cannot take: ") + v.tagKind());
}

// ---- Runtime -----------------------------------------------------------------------

PyObject* make_runtime(torch::Module m) {
  Ref self = owned(PyType_GenericAlloc(RuntimeType, 0));
  reinterpret_cast<PyRuntime*>(self.get())->module = new torch::Module(std::move(m));
  return self.release();
}

// load(source, *, plan_memory=True, trusted=False, mmap=True) -> Runtime
PyObject* load(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"source", "plan_memory", "trusted", "mmap", nullptr};
  PyObject* obj = nullptr;
  int plan = 1, trusted = 0, map = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$ppp:load", const_cast<char**>(names), &obj, &plan, &trusted,
                                   &map))
    throw PythonError();
  Source source(obj);
  torch::LoadOptions options;
  options.plan_memory = plan != 0;
  options.trusted = trusted != 0;
  options.mmap = map != 0;
  std::unique_ptr<torch::Module> m;
  // Reading and planning touch no Python object.
  load_without_gil([&] {
    m = std::make_unique<torch::Module>(
        source.is_buffer ? torch::load_from_buffer(source.view.buf, static_cast<size_t>(source.view.len), options)
                         : torch::load(source.path, options));
  });
  return make_runtime(std::move(*m));
}

// load_bytes(data: bytes-like) -> Runtime: load(data) (kept for callers of the old name).
PyObject* load_bytes(PyObject*, PyObject* data) {
  Source source(data);
  if (!source.is_buffer) throw torch::InputError("fxcpp: load_bytes takes a bytes-like object");
  std::unique_ptr<torch::Module> m;
  load_without_gil([&] {
    m = std::make_unique<torch::Module>(
        torch::load_from_buffer(source.view.buf, static_cast<size_t>(source.view.len)));
  });
  return make_runtime(std::move(*m));
}

// graph_json(source) -> str: the file's graph record, pretty-printed.
PyObject* graph_json(PyObject*, PyObject* obj) {
  Source source(obj);
  std::string text;
  load_without_gil([&] {
    text = source.is_buffer ? torch::graph_json_from_buffer(source.view.buf, static_cast<size_t>(source.view.len))
                            : torch::graph_json(source.path);
  });
  return PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

// allowed_operators() -> list[str]: every registered overload a file may call
// without trusted=True ("aten::add.Tensor"; "aten::relu" for a default overload).
PyObject* allowed_operators(PyObject*, PyObject*) {
  std::vector<std::string> ops = torch::allowed_operators();
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(ops.size())));
  for (size_t i = 0; i < ops.size(); ++i)
    PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i),
                    check(PyUnicode_FromStringAndSize(ops[i].data(), static_cast<Py_ssize_t>(ops[i].size()))));
  return l.release();
}

// The argument guard of operator `target` ("aten::lstm.input"), or null.
const torch::ArgumentGuard* guard_of(PyObject* target) {
  const torch::AtenOp* op = torch::as_aten_op(torch::aten_op(std::string(utf8(target, "an operator name"))));
  return op ? torch::argument_guard(*op) : nullptr;
}

// argument_guarded(target: str) -> bool: whether the runtime checks the arguments of
// operator `target` before each call (Note [Argument guards]).
PyObject* argument_guarded(PyObject*, PyObject* target) { return PyBool_FromLong(guard_of(target) != nullptr); }

void free_written(PyObject* capsule) {
  delete static_cast<torch::WrittenGeometry*>(PyCapsule_GetPointer(capsule, "fxcpp.WrittenGeometry"));
}

// check_arguments(target: str, args: tuple) -> capsule | None: runs operator `target`'s
// argument guard on `args`, its arguments in schema order (the Python runtime's calls;
// Note [Argument guards in Python] in fxcpp/aten/_guards.py). A value the runtime could
// not take (a dtype, a device) is passed as None, which no guard reads. Where the
// operator writes tensors, returns their geometry for restore_written if the call fails
// (Note [A failed call leaves its written tensors as they were] in policy.h).
PyObject* check_arguments(PyObject*, PyObject* args) {
  PyObject *target, *values;
  if (!PyArg_ParseTuple(args, "UO!:check_arguments", &target, &PyTuple_Type, &values)) throw PythonError();
  const torch::ArgumentGuard* guard = guard_of(target);
  if (!guard) Py_RETURN_NONE;
  std::vector<c10::IValue> stack;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); ++i) {
    try {
      stack.push_back(to_ivalue(PyTuple_GET_ITEM(values, i)));
    } catch (const torch::InputError&) {
      stack.emplace_back();
    }
  }
  (*guard)(stack);
  if (!guard->writes()) Py_RETURN_NONE;
  auto saved = std::make_unique<torch::WrittenGeometry>();
  guard->save_written(stack, *saved);
  PyObject* capsule = PyCapsule_New(saved.get(), "fxcpp.WrittenGeometry", &free_written);
  if (!capsule) throw PythonError();
  saved.release();
  return capsule;
}

// restore_written(saved) -> None: puts back the geometry check_arguments saved.
PyObject* restore_written(PyObject*, PyObject* capsule) {
  auto* saved = static_cast<torch::WrittenGeometry*>(PyCapsule_GetPointer(capsule, "fxcpp.WrittenGeometry"));
  if (!saved) throw PythonError();
  saved->restore();
  Py_RETURN_NONE;
}

// Runs `fn` with the GIL released (it touches no Python object).
template <typename F>
void without_gil(F&& fn) {
  PyThreadState* ts = PyEval_SaveThread();
  try {
    fn();
  } catch (...) {
    PyEval_RestoreThread(ts);
    throw;
  }
  PyEval_RestoreThread(ts);
}

// from_torchscript(source: str | bytes, inputs: tuple[Tensor, ...], out_path,
//                  dead_code_elimination=True, execution='real') -> dict:
// captures a TorchScript module (a .pt path or its bytes) on `inputs` and
// writes the graph as a .fxpt file (fxcpp::torch::from_torchscript, save), or
// returns the file's bytes as 'data' when out_path is None.
// execution: 'real', 'meta' or 'meta_or_real' (TraceOptions::execution).
// Returns {'recorded_ops': int, 'ran_on_meta': bool, 'meta_fallback': str}.
PyObject* from_torchscript(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"source", "inputs", "out_path", "dead_code_elimination", "execution", nullptr};
  PyObject *source, *inputs, *out;
  int dce = 1;
  const char* execution = "real";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|ps:from_torchscript", const_cast<char**>(names), &source,
                                   &inputs, &out, &dce, &execution))
    throw PythonError();
  if (!PyTuple_Check(inputs)) throw torch::InputError("fxcpp: from_torchscript takes a tuple of example inputs");
  torch::TraceOptions options;
  options.dead_code_elimination = dce != 0;
  const std::string ex(execution);
  if (ex == "real") options.execution = torch::Execution::Real;
  else if (ex == "meta") options.execution = torch::Execution::Meta;
  else if (ex == "meta_or_real") options.execution = torch::Execution::MetaOrReal;
  else
    throw torch::InputError("fxcpp: from_torchscript's execution must be 'real', 'meta' or 'meta_or_real', not '" +
                            ex + "'");
  std::vector<at::Tensor> example;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); ++i) {
    PyObject* t = PyTuple_GET_ITEM(inputs, i);
    if (!THPVariable_Check(t)) throw torch::InputError("fxcpp: from_torchscript's example inputs must be tensors");
    example.push_back(THPVariable_Unpack(t));
  }
  // out_path None: the file is returned in memory (the 'data' entry), never written to disk.
  const bool to_memory = out == Py_None;
  std::string out_path;
  if (!to_memory) {
    Ref out_fs = owned(PyOS_FSPath(out));
    out_path = utf8(out_fs.get(), "out_path");
  }
  torch::Traced t;
  std::string data;
  auto emit = [&] {
    if (to_memory) data = torch::save_to_buffer(*t.graph, t.tensors);
    else torch::save(*t.graph, t.tensors, out_path);
  };
  if (PyBytes_Check(source)) {
    std::string bytes(PyBytes_AS_STRING(source), static_cast<size_t>(PyBytes_GET_SIZE(source)));
    without_gil([&] {
      t = torch::from_torchscript_buffer(bytes.data(), bytes.size(), example, options);
      emit();
    });
  } else {
    Ref fs = owned(PyOS_FSPath(source));
    std::string path(utf8(fs.get(), "source"));
    without_gil([&] {
      t = torch::from_torchscript(path, example, options);
      emit();
    });
  }
  Ref d = owned(PyDict_New());
  Ref n = owned(PyLong_FromSize_t(t.recorded_ops));
  check(PyDict_SetItemString(d.get(), "recorded_ops", n.get()));
  check(PyDict_SetItemString(d.get(), "ran_on_meta", t.ran_on_meta ? Py_True : Py_False));
  Ref why = owned(PyUnicode_DecodeUTF8(t.meta_fallback.data(), static_cast<Py_ssize_t>(t.meta_fallback.size()),
                                       "replace"));
  check(PyDict_SetItemString(d.get(), "meta_fallback", why.get()));
  if (to_memory) {
    Ref bytes = owned(PyBytes_FromStringAndSize(data.data(), static_cast<Py_ssize_t>(data.size())));
    check(PyDict_SetItemString(d.get(), "data", bytes.get()));
  }
  return d.release();
}

// Runtime.save(path): writes the loaded graph and tensors with the C++ writer.
PyObject* runtime_save(PyObject* self, PyObject* path) {
  Ref fs = owned(PyOS_FSPath(path));
  std::string p(utf8(fs.get(), "path"));
  const torch::Module& m = module_of(self);
  without_gil([&] { torch::save(m, p); });
  Py_RETURN_NONE;
}

// Runtime.run(args: tuple) -> outputs. Note [Runtime and the GIL].
PyObject* run(PyObject* self, PyObject* args) {
  if (!PyTuple_Check(args)) throw torch::InputError("fxcpp: Runtime.run takes a tuple of inputs");
  const torch::Module& m = module_of(self);
  std::vector<c10::IValue> inputs;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  inputs.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) inputs.push_back(to_ivalue(PyTuple_GET_ITEM(args, i)));
  c10::IValue out;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    out = m.forward(std::move(inputs));
  } catch (...) {
    PyEval_RestoreThread(ts);
    throw;
  }
  PyEval_RestoreThread(ts);
  return from_ivalue(out);
}

// Runtime.tensors() -> list of (name, kind, tensor); the tensors share storage.
PyObject* tensors(PyObject* self, PyObject*) {
  const auto& ts = module_of(self).named_tensors();
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(ts.size())));
  static const char* kinds[] = {"parameter", "buffer", "constant"};
  for (size_t i = 0; i < ts.size(); ++i) {
    Ref t = owned(THPVariable_Wrap(ts[i].tensor));
    PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i),
                    check(Py_BuildValue("(ssO)", ts[i].name.c_str(), kinds[static_cast<int>(ts[i].kind)], t.get())));
  }
  return l.release();
}

PyObject* input_names(PyObject* self, PyObject*) {
  auto names = module_of(self).input_names();
  Ref l = owned(PyList_New(static_cast<Py_ssize_t>(names.size())));
  for (size_t i = 0; i < names.size(); ++i)
    PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i),
                    check(PyUnicode_FromStringAndSize(names[i].data(), static_cast<Py_ssize_t>(names[i].size()))));
  return l.release();
}

PyObject* num_instructions(PyObject* self, PyObject*) {
  return PyLong_FromSize_t(module_of(self).num_instructions());
}

// plan_stats() -> {'instructions': n, 'managed': n, 'buffers': n}
PyObject* plan_stats(PyObject* self, PyObject*) {
  auto s = module_of(self).plan_stats();
  return Py_BuildValue("{snsnsn}", "instructions", static_cast<Py_ssize_t>(s.instructions), "managed",
                       static_cast<Py_ssize_t>(s.managed), "buffers", static_cast<Py_ssize_t>(s.buffers));
}

// str(runtime): the loaded graph as torch.fx prints graphs.
PyObject* runtime_str(PyObject* self) {
  std::string s = module_of(self).graph().to_string();
  return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
}

void runtime_dealloc(PyObject* self) {
  auto* r = reinterpret_cast<PyRuntime*>(self);
  delete r->module;
  r->module = nullptr;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of a heap type hold a reference to it
}

PyMethodDef runtime_methods[] = {
    def<run>("run", METH_VARARGS, "run(*inputs): the forward, in C++ with the GIL released."),
    def<runtime_save>("save", METH_O, "save(path): writes the graph and its tensors as a .fxpt file (C++ writer)."),
    def<tensors>("tensors", METH_NOARGS, "tensors() -> [(name, kind, tensor)]: the module's tensors (shared)."),
    def<input_names>("input_names", METH_NOARGS, "input_names() -> [str]: placeholder names in order."),
    def<num_instructions>("num_instructions", METH_NOARGS, "num_instructions() -> int: the plan's length."),
    def<plan_stats>("plan_stats", METH_NOARGS, "plan_stats() -> dict: what the memory planner decided."),
    kEndOfMethods};

PyMethodDef module_methods[] = {
    def<load>("load", METH_VARARGS | METH_KEYWORDS,
              "load(source, *, plan_memory=True, trusted=False, mmap=True) -> Runtime: reads a .fxpt or .pt2 file "
              "(a path, mapped unless mmap=False, or the whole file as bytes, copied) into the C++ runtime. Unless trusted, the file may call only the allow-listed "
              "operators (allowed_operators())."),
    def<load_bytes>("load_bytes", METH_O, "load_bytes(data) -> Runtime: load(data)."),
    def<graph_json>("graph_json", METH_O, "graph_json(source) -> str: the file's graph record (path or bytes)."),
    def<argument_guarded>("argument_guarded", METH_O,
                          "argument_guarded(target) -> bool: whether the runtime checks the arguments of operator "
                          "target ('aten::lstm.input') before each call."),
    def<check_arguments>("check_arguments", METH_VARARGS,
                         "check_arguments(target, args) -> capsule | None: runs operator target's argument guard on "
                         "args (schema order); raises RuntimeError as the C++ runtime does. Returns the geometry of "
                         "the tensors the call writes, if any, for restore_written."),
    def<restore_written>("restore_written", METH_O,
                         "restore_written(saved) -> None: puts back the sizes, strides and offsets check_arguments "
                         "saved (after a failed call)."),
    def<allowed_operators>("allowed_operators", METH_NOARGS,
                           "allowed_operators() -> [str]: the registered overloads a file may call unless trusted."),
    def<from_torchscript>("from_torchscript", METH_VARARGS | METH_KEYWORDS,
                          "from_torchscript(source, inputs, out_path, dead_code_elimination=True, execution='real') "
                          "-> dict: captures a TorchScript module (path or bytes) on the example inputs and saves "
                          "the graph to out_path (None: returned as the dict's 'data' bytes)."),
    kEndOfMethods};

// Note [Proxies that say they are tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// fxcpp.aten's TensorProxy answers torch.Tensor to __class__, so LibTorch's C
// code takes it for a THPVariable (THPVariable_Check is an isinstance) and
// reads its `cdata`: PyTorch's argument parser does so for a proxy passed
// where an overload takes a Scalar (torch.where(c, proxy, 0.0) tries
// where.ScalarSelf), before it hands the call to __torch_function__. The
// proxies' base class is this type: the layout of a THPVariable whose tensor
// is undefined (no data, no grad), so that read finds a real tensor whatever
// the torch (cdata is a MaybeOwned<Tensor> on 1.13, a Tensor on 2.x).
[[maybe_unused]] void init_cdata(at::Tensor* p) { new (p) at::Tensor(); }
[[maybe_unused]] void init_cdata(c10::MaybeOwned<at::Tensor>* p) {
  new (p) c10::MaybeOwned<at::Tensor>(c10::MaybeOwned<at::Tensor>::owned(at::Tensor()));
}

PyObject* proxy_base_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  auto* v = reinterpret_cast<THPVariable*>(self);
  init_cdata(&v->cdata);
  v->backward_hooks = nullptr;
  return self;
}

void proxy_base_dealloc(PyObject* self) {
  auto* v = reinterpret_cast<THPVariable*>(self);
  using Cdata = decltype(v->cdata);
  v->cdata.~Cdata();
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fxcpp._C_torch", "fxcpp's LibTorch runtime bindings.", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace fxcpp::py

PyMODINIT_FUNC PyInit__C_torch() {
  using namespace fxcpp::py;
  Ref m = Ref::steal(PyModule_Create(&module_def));
  if (!m) return nullptr;
  static PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(runtime_dealloc)},
                                {Py_tp_methods, runtime_methods},
                                {Py_tp_str, reinterpret_cast<void*>(guard<runtime_str>)},
                                {Py_tp_doc, const_cast<char*>("A graph loaded into the fxcpp LibTorch runtime.")},
                                {0, nullptr}};
  static PyType_Spec spec = {"fxcpp._C_torch.Runtime", sizeof(PyRuntime), 0, Py_TPFLAGS_DEFAULT, slots};
  RuntimeType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (!RuntimeType) return nullptr;
  if (PyModule_AddObject(m.get(), "Runtime", reinterpret_cast<PyObject*>(RuntimeType)) < 0) return nullptr;
  Py_INCREF(RuntimeType);
  static PyType_Slot proxy_slots[] = {
      {Py_tp_new, reinterpret_cast<void*>(proxy_base_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(proxy_base_dealloc)},
      {Py_tp_doc, const_cast<char*>("fxcpp.aten's proxies' base: a THPVariable layout holding an undefined tensor "
                                    "(Note [Proxies that say they are tensors]).")},
      {0, nullptr}};
  static PyType_Spec proxy_spec = {"fxcpp._C_torch.ProxyBase", sizeof(THPVariable), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, proxy_slots};
  PyObject* proxy_type = PyType_FromSpec(&proxy_spec);
  if (!proxy_type) return nullptr;
  if (PyModule_AddObject(m.get(), "ProxyBase", proxy_type) < 0) {
    Py_DECREF(proxy_type);
    return nullptr;
  }
  if (add_functions(m.get(), module_methods) < 0 || init_files(m.get()) < 0) return nullptr;
  return m.release();
}
