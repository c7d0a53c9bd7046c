// fxcpp._C's side of Note [Graph handover] (handover.h): the capsule.
#include "handover.h"

#include "bindings.h"

namespace fxcpp::py {
namespace {

Graph* handover_graph_of(PyObject* graph) { return core_graph_of(graph); }

PyObject* handover_node_meta(Node* n) {
  Ref w = Ref::steal(wrap_node(n));
  if (!w) return nullptr;
  return PyObject_GetAttrString(w.get(), "meta");
}

PyObject* handover_node_meta_if_any(const Node* n) {
  PyObject* w = wrapper_of(*n);
  return w ? reinterpret_cast<PyNode*>(w)->meta : nullptr;
}

const HandoverApi kApi = {kHandoverVersion, py_iface, handover_graph_of, handover_node_meta,
                          handover_node_meta_if_any};

}  // namespace

int init_handover(PyObject* m) {
  PyObject* capsule = PyCapsule_New(const_cast<HandoverApi*>(&kApi), kHandoverCapsule, nullptr);
  if (!capsule) return -1;
  int rc = PyModule_AddObjectRef(m, "_handover_api", capsule);
  Py_DECREF(capsule);
  return rc;
}

}  // namespace fxcpp::py
