// fxcpp Python bindings, fxcpp._C's object model: the Node and Graph types,
// value conversion, the package's helpers and the init_* table. Binding code
// only; the logic lives in the core. The generic toolkit (references, errors,
// strings, def<>) is toolkit.h, which this header includes.
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

#include "toolkit.h"  // first: Python.h with PY_SSIZE_T_CLEAN

#include <optional>
#include <string>
#include <string_view>

#include "fxcpp/core/codegen.h"
#include "fxcpp/core/graph.h"

namespace fxcpp::py {

/// Caches a wrapper needs only once they are read (allocated on first use).
struct PyNodeAux {
  PyObject* name_cache;
  PyObject* kwargs_cache;
  PyObject* users_cache;
};

/// 104 bytes with the GC header: the fields read on every iteration step
/// inline, rarer caches in `aux`.
struct PyNode {
  PyObject_HEAD
  PyObject* op;        // the opcode string (borrowed: g_op_strings, never freed); a member
                       // descriptor, so `node.op` is a specialized slot load
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
/// A new list of the wrappers of `nodes`, in order.
PyObject* wrap_nodes(const std::vector<Node*>& nodes);
/// The Graph python object owning `g`.
PyObject* graph_pyobject(Graph* g);
inline bool is_node(PyObject* o) { return PyObject_TypeCheck(o, NodeBaseType); }
/// The live core node of a wrapper; sets RuntimeError and returns null if detached.
Node* node_of(PyObject* o);
/// Node::ModuleImpurityFn of the package: the package helper
/// `_module_is_impure(node)` (torch.fx's owning-module assertions and the
/// submodule's `_is_impure`). Throws PythonError when it raises.
bool py_module_is_impure(const Node& n);

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

/// The package's helpers: Python callables and classes the bindings call up
/// into (the by-design up-calls of docs/design.md), registered once by
/// python/fxcpp/graph.py's _install_helpers through `_C._set_classes`, which
/// checks the dict against kHelperNames (py_object.cpp): a missing or unknown
/// name fails `import fxcpp` saying which. Strong references, held for the
/// process; every field is non-null once registered (the 2.x-only ones may be Py_None).
struct Helpers {
  PyObject* type_repr = nullptr;         ///< _type_repr(annotation) -> str
  PyObject* target_info = nullptr;       ///< _target_info(callable) -> 6-tuple of per-callable facts
  PyObject* bad_target = nullptr;        ///< _bad_target(graph, op, target, ...): raises torch.fx's error
  PyObject* module_is_impure = nullptr;  ///< _module_is_impure(node) -> bool
  PyObject* origin_type = nullptr;       ///< _origin_type(origin, annotation) -> type
  PyObject* snake_case = nullptr;        ///< _snake_case(name) -> str, for non-ASCII names
  PyObject* assertion_message = nullptr; ///< _assertion_message(kind, value) -> str | None (torch.fx's wording)
  PyObject* copy = nullptr;              ///< copy.copy (node meta of copied graphs)
  PyObject* node_ref = nullptr;          ///< _NodeRef, the pickled form of a node reference
  PyObject* codegen = nullptr;           ///< CodeGen, the base of graph codegens
  PyObject* wrap = nullptr;              ///< torch.fx's wrap, bound in generated code
  PyObject* code_repr = nullptr;         ///< _code_repr(obj) -> (kind, ...): a constant in 2.x generated code
  PyObject* meta_annotation = nullptr;   ///< _meta_annotation(value, stride, device, colored) -> str | None
  PyObject* comment_parts = nullptr;     ///< _comment_parts(meta, additional_meta) -> (prefix, middle)
  PyObject* keyword_params = nullptr;    ///< _keyword_params(callable) -> names it accepts by keyword
  PyObject* union_origin = nullptr;      ///< _union_origin(X | Y) -> typing.Union (torch.fx 2.x) or None
  // torch.fx 2.x's GraphModule node hooks (Note [GraphModule node hooks] in graph.py): Py_None
  // on torch 1.13, whose torch.fx has none, and then not called.
  PyObject* create_node_hooks = nullptr; ///< _create_node_hooks(graph, node): after create_node
  PyObject* erase_node_2x = nullptr;     ///< _erase_node_2x(graph, node) -> bool: 2.x checks and hooks
  PyObject* rename_2x = nullptr;         ///< _rename_2x(node, value): before node.name = value
};
/// The registered helpers. Throws PythonError (RuntimeError set) before the
/// package registered them.
const Helpers& helpers();
/// Registers the helpers from `dict` {name: object}: all of kHelperNames and
/// nothing else, or PythonError (RuntimeError naming the first missing or
/// unknown name) with the previous registration kept.
void set_helpers(PyObject* dict);

/// Whether `graph`'s owning module (its `_owning_module`, torch.fx 2.x) has a non-empty hook list
/// named `attr` (Note [GraphModule node hooks] in graph.py). Errors reading either count as "has
/// hooks": the Python helper then reads them again and raises what they raise. Two attribute reads.
bool owner_has_hooks(PyObject* graph, PyObject* attr);

int init_node_type(PyObject* m);
int init_graph_type(PyObject* m);
/// Module functions of the Interpreter node loop (interpreter_bindings.cpp).
int init_interpreter(PyObject* m);
/// Module functions of the subgraph matcher and rewriter (matcher_bindings.cpp).
int init_matcher(PyObject* m);
/// Module functions for tooling such as DOT export (tools_bindings.cpp).
int init_tools(PyObject* m);
int init_code(PyObject* m);
/// Module functions for symbolic tracing (trace_bindings.cpp).
int init_trace(PyObject* m);
/// Module functions of the torch.fx toolbox passes, split_module (toolbox_bindings.cpp).
int init_toolbox(PyObject* m);
/// The graph explorer's layout and diff (explorer_bindings.cpp).
int init_explorer(PyObject* m);
/// fxcpp._C.SignedMethod (signed_method.cpp, Note [Method signatures]).
int init_signed_method(PyObject* m);
/// The core graph of a fxcpp.Graph object (borrowed), or null with TypeError set.
Graph* core_graph_of(PyObject* graph);

}  // namespace fxcpp::py
