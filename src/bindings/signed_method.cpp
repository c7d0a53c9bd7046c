// fxcpp._C.SignedMethod: a C method shown with a Python method's signature.
//
// Note [Method signatures]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// inspect.signature of a C method shows `self` as positional-only (`(self, /, op, ...)`),
// torch.fx's Python methods show it as positional-or-keyword. Tools compare signatures
// (BC checks, wrappers that forward by signature), so the package stores each public C
// method that torch.fx writes in Python (on torch 2.14: Graph.create_node, erase_node;
// Node.append, prepend, update_arg, update_kwarg; node._python_signatures finds them on the
// installed torch) as SignedMethod objects: a descriptor over the C
// method with `__signature__` set by the package. Looked up on the class it is itself (so
// inspect reads that signature); on an instance, the C method's own bound method. It is a
// method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), so `g.create_node(...)` calls straight
// through it with no bound object: one vectorcall forwarded, no Python frame.
#include "bindings.h"  // first: Python.h

#include <structmember.h>

namespace fxcpp::py {
namespace {

struct PySignedMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* method;     // the C method (a method_descriptor)
  PyObject* signature;  // what inspect.signature shows (an inspect.Signature)
};

PySignedMethod* as_signed(PyObject* o) { return reinterpret_cast<PySignedMethod*>(o); }

PyObject* sm_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(as_signed(self)->method, args, nargsf, kwnames);
}

PyObject* sm_descr_get(PyObject* self, PyObject* obj, PyObject* type) {
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  PyObject* m = as_signed(self)->method;
  descrgetfunc get = Py_TYPE(m)->tp_descr_get;
  if (!get) {
    Py_INCREF(m);
    return m;
  }
  return get(m, obj, type);
}

// __name__, __qualname__, __doc__, __objclass__, ... are the C method's.
PyObject* sm_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(as_signed(self)->method, name);
}

PyObject* sm_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *method, *signature;
  static const char* names[] = {"method", "signature", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:SignedMethod", const_cast<char**>(names), &method, &signature))
    return nullptr;
  if (!PyCallable_Check(method)) {
    PyErr_SetString(PyExc_TypeError, "SignedMethod(method, signature): method must be callable");
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  PySignedMethod* s = as_signed(self);
  s->vectorcall = sm_vectorcall;
  Py_INCREF(method);
  s->method = method;
  Py_INCREF(signature);
  s->signature = signature;
  return self;
}

int sm_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(as_signed(self)->method);
  Py_VISIT(as_signed(self)->signature);
  return 0;
}

int sm_clear(PyObject* self) {
  Py_CLEAR(as_signed(self)->method);
  Py_CLEAR(as_signed(self)->signature);
  return 0;
}

void sm_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  sm_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* sm_repr(PyObject* self) { return PyObject_Repr(as_signed(self)->method); }

PyMemberDef sm_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(PySignedMethod, vectorcall), READONLY, nullptr},
    {"__signature__", T_OBJECT, offsetof(PySignedMethod, signature), READONLY, nullptr},
    {"__wrapped_method__", T_OBJECT, offsetof(PySignedMethod, method), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot sm_slots[] = {{Py_tp_new, reinterpret_cast<void*>(sm_new)},
                          {Py_tp_dealloc, reinterpret_cast<void*>(sm_dealloc)},
                          {Py_tp_traverse, reinterpret_cast<void*>(sm_traverse)},
                          {Py_tp_clear, reinterpret_cast<void*>(sm_clear)},
                          {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                          {Py_tp_descr_get, reinterpret_cast<void*>(sm_descr_get)},
                          {Py_tp_getattro, reinterpret_cast<void*>(sm_getattro)},
                          {Py_tp_repr, reinterpret_cast<void*>(sm_repr)},
                          {Py_tp_members, sm_members},
                          {Py_tp_doc, const_cast<char*>("SignedMethod(method, signature): Note [Method signatures].")},
                          {0, nullptr}};

PyType_Spec sm_spec = {"fxcpp._C.SignedMethod", sizeof(PySignedMethod), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                           Py_TPFLAGS_METHOD_DESCRIPTOR,
                       sm_slots};

}  // namespace

int init_signed_method(PyObject* m) {
  PyObject* type = PyType_FromSpec(&sm_spec);
  if (!type) return -1;
  return PyModule_AddObject(m, "SignedMethod", type) < 0 ? (Py_DECREF(type), -1) : 0;
}

}  // namespace fxcpp::py
