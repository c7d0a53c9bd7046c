// fxcpp Python bindings: shared declarations. Binding code only; the logic
// lives in the core.
//
// Note [Python object model]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// * Each core Node has at most one Python wrapper (Node::binding()), created
//   on first use and then kept alive by the core node (one strong reference)
//   for the node's lifetime, so identity and user attributes are stable.
// * A wrapper holds a strong reference to its Python Graph, which owns the
//   core Graph. The resulting cycle is visible to the GC: GraphBase traverses
//   the wrappers of its live nodes.
// * Erasing a node that has a wrapper turns it into a tombstone (see Note
//   [Erased nodes and tombstones]); the core drops its reference and the
//   wrapper releases the tombstone when it dies.
// * Hot fields are C getsets over caches validated by the dirty bits the
//   core sets in the wrapper's NodeBinding; reading node.args twice returns
//   the same tuple.
//
// Note [Binding dirty bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The core keeps no version counters. A wrapper embeds a NodeBinding whose
// address is the node's binding(); when the node's args/kwargs, users or
// name/target change, the core sets the matching bit. A getter serves its
// cache while its bit is clear and clears the bit when it rebuilds. A fresh
// wrapper starts with every bit set.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/graph.h"

namespace fxcpp::py {

/// Thrown when a Python exception is already set; converted back at the boundary.
struct PythonError : std::exception {
  const char* what() const noexcept override { return "Python error"; }
};

/// Converts the active C++ exception into a Python exception.
void set_python_error_from_cpp();
#define FXCPP_TRY try {
#define FXCPP_CATCH(ret)            \
  }                                 \
  catch (...) {                     \
    ::fxcpp::py::set_python_error_from_cpp(); \
    return ret;                     \
  }

/// Caches a wrapper needs only once they are read (allocated on first use).
struct PyNodeAux {
  PyObject* name_cache;
  PyObject* kwargs_cache;
  PyObject* users_cache;
};

/// 96 bytes with the GC header: the fields read on every iteration step
/// inline, rarer caches in `aux`.
struct PyNode {
  PyObject_HEAD
  Node* node;          // null once detached (graph destroyed)
  PyObject* graph;     // owning Python Graph (strong)
  PyObject* dict;
  PyObject* meta;
  PyObject* weakrefs;
  PyObject* args_cache;
  PyNodeAux* aux;      // null until a name/kwargs/users cache is needed
  NodeBinding b;       // the core's view of this wrapper (Note [Binding dirty bits])
};

/// The aux block of `p`, allocated on first use. Throws PythonError on OOM.
PyNodeAux& node_aux(PyNode* p);

/// The wrapper that owns binding `b` (null for null).
inline PyNode* pynode_of(NodeBinding* b) {
  return b ? reinterpret_cast<PyNode*>(reinterpret_cast<char*>(b) - offsetof(PyNode, b)) : nullptr;
}
/// The node's wrapper (borrowed), or null when it has none.
inline PyObject* wrapper_of(const Node& n) {
  NodeBinding* b = n.binding();
  return b ? reinterpret_cast<PyObject*>(pynode_of(b)) : nullptr;
}

struct PyGraph {
  PyObject_HEAD
  Graph* graph;
  GraphObserver* link;
};

extern PyTypeObject* NodeBaseType;
extern PyTypeObject* GraphBaseType;
extern PyTypeObject* NodeListType;
extern PyTypeObject* NodeIterType;
/// Python classes registered by the package (subclasses used for instances).
extern PyObject* g_node_class;
extern PyObject* g_immutable_list;
extern PyObject* g_immutable_dict;

/// The ObjectInterface for PyObject*.
const ObjectInterface* py_iface();
inline Object borrow_obj(PyObject* o) { return Object::borrow(py_iface(), o); }
inline PyObject* obj_ptr(const Object& o) { return static_cast<PyObject*>(o.get()); }

/// The wrapper of `n` (new reference), creating it on first use.
PyObject* wrap_node(Node* n);
/// The Graph python object owning `g`.
PyObject* graph_pyobject(Graph* g);
inline bool is_node(PyObject* o) { return PyObject_TypeCheck(o, NodeBaseType); }
/// The live core node of a wrapper; sets RuntimeError and returns null if detached.
Node* node_of(PyObject* o);

/// Python value -> Argument. `canonical` (optional) is cleared when
/// from_arg(result) would not be equal to the input object structurally.
Argument to_arg(PyObject* o, bool* canonical = nullptr);
/// to_arg for tuples, lists, dicts and slices (recursion-guarded).
Argument to_arg_container(PyObject* o, bool* canonical);
/// Argument -> Python value (new reference).
PyObject* from_arg(const Argument& a);
PyObject* args_to_tuple(ArgSpan args);
PyObject* kwargs_to_dict(const KwArgs& kwargs);
std::vector<Argument> tuple_to_args(PyObject* tuple, bool* canonical = nullptr);
KwArgs dict_to_kwargs(PyObject* dict);

/// Invalidates per-object caches of the interface (called on module cleanup).
void clear_object_caches();
/// The Python-side repr override for nodes during codegen (null otherwise).
extern const std::function<std::string(const Node*)>* g_codegen_node_repr;

/// Helper Python callables registered by the package.
extern PyObject* g_helpers;  // dict name -> callable
PyObject* helper(const char* name);  // borrowed; sets error if missing

int init_node_type(PyObject* m);
int init_graph_type(PyObject* m);
/// Module functions of the transformation toolkit (transform_bindings.cpp).
int init_transform(PyObject* m);
/// Module functions for tooling such as DOT export (tools_bindings.cpp).
int init_tools(PyObject* m);
int init_code(PyObject* m);
/// Module functions for symbolic tracing (trace_bindings.cpp).
int init_trace(PyObject* m);
/// The core graph of a fxcpp.Graph object (borrowed), or null with TypeError set.
Graph* core_graph_of(PyObject* graph);

}  // namespace fxcpp::py
