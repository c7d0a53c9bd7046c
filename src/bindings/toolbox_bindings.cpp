// Bindings for the torch.fx toolbox passes (issue 13): split_module's graph work,
// the capability-based partitioner's proposal and fuser_utils' cycle check.
#include "bindings.h"

#include "fxcpp/passes/partition.h"
#include "fxcpp/passes/split_module.h"

namespace fxcpp::py {
namespace {

/// A new reference to a list of `seq` (list or tuple) items; throws on anything else.
Ref fast_seq(PyObject* o, const char* what) { return owned(PySequence_Fast(o, what)); }

// _split_module(graph, partition_ids, submod_names, partition_graphs, top_graph, getitem,
//               keep_original_order[, fx2, keep_original_node_name, keep_original_input_name,
//               tuple_return]) -> (construct_order, module_calls, get_attrs[, unmapped])
// (the flags: fxcpp::SplitModuleOptions)
// partition_ids: one int per op (not placeholder/get_attr/output) in graph order,
// numbered by first appearance. Builds the partition graphs and the top graph
// (fxcpp::split_module) and copies node.meta (shallow, as torch.fx) onto every
// node copied from an original. module_calls: [(partition, original call_module
// node)] in graph order; get_attrs: the original get_attr nodes in graph order.
PyObject* split_module_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 7 && nargs != 11) {
    PyErr_SetString(PyExc_TypeError, "_split_module expects 7 or 11 arguments");
    return nullptr;
  }
  Graph* g = core_graph_of(args[0]);
  if (!g) return nullptr;
  Ref ids = fast_seq(args[1], "_split_module: partition_ids must be a sequence");
  Ref names = fast_seq(args[2], "_split_module: submod_names must be a sequence");
  Ref graphs = fast_seq(args[3], "_split_module: partition_graphs must be a sequence");
  Graph* top = core_graph_of(args[4]);
  if (!top) return nullptr;
  SplitModuleOptions options;
  options.keep_original_order = check(PyObject_IsTrue(args[6])) != 0;
  if (nargs == 11) {
    options.fx2 = check(PyObject_IsTrue(args[7])) != 0;
    options.keep_original_node_name = check(PyObject_IsTrue(args[8])) != 0;
    options.keep_original_input_name = check(PyObject_IsTrue(args[9])) != 0;
    options.tuple_return = check(PyObject_IsTrue(args[10])) != 0;
  }

  std::vector<uint32_t> partition_of(static_cast<size_t>(PySequence_Fast_GET_SIZE(ids.get())));
  PyObject** id_items = PySequence_Fast_ITEMS(ids.get());
  for (size_t i = 0; i < partition_of.size(); ++i) {
    unsigned long v = PyLong_AsUnsignedLong(id_items[i]);
    if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) throw PythonError();
    partition_of[i] = static_cast<uint32_t>(v);
  }
  std::vector<std::string> submod_names;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(names.get()); ++i)
    submod_names.push_back(utf8_string(PySequence_Fast_GET_ITEM(names.get(), i), "_split_module submod name"));
  std::vector<Graph*> parts;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(graphs.get()); ++i) {
    Graph* pg = core_graph_of(PySequence_Fast_GET_ITEM(graphs.get(), i));
    if (!pg) return nullptr;
    parts.push_back(pg);
  }

  SplitModuleResult r = split_module(*g, partition_of, submod_names, parts, *top, borrow_obj(args[5]), options);

  // node.meta: new.meta = orig.meta.copy() where the original has a non-empty one.
  for (const auto& [created, orig] : r.copied) {
    PyObject* ow = wrapper_of(*orig);
    if (!ow) continue;
    PyObject* meta = reinterpret_cast<PyNode*>(ow)->meta;
    if (!meta || PyDict_GET_SIZE(meta) == 0) continue;
    Ref copy = owned(PyDict_Copy(meta));
    Ref cw = Ref::steal(check(wrap_node(created)));
    Py_XSETREF(reinterpret_cast<PyNode*>(cw.get())->meta, copy.release());
  }

  Ref order = owned(PyList_New(static_cast<Py_ssize_t>(r.construct_order.size())));
  for (size_t i = 0; i < r.construct_order.size(); ++i)
    PyList_SET_ITEM(order.get(), static_cast<Py_ssize_t>(i), owned(PyLong_FromUnsignedLong(r.construct_order[i])).release());
  Ref calls = owned(PyList_New(static_cast<Py_ssize_t>(r.module_calls.size())));
  for (size_t i = 0; i < r.module_calls.size(); ++i) {
    Ref p = owned(PyLong_FromUnsignedLong(r.module_calls[i].first));
    Ref n = Ref::steal(check(wrap_node(const_cast<Node*>(r.module_calls[i].second))));
    PyList_SET_ITEM(calls.get(), static_cast<Py_ssize_t>(i), owned(PyTuple_Pack(2, p.get(), n.get())).release());
  }
  Ref attrs = owned(PyList_New(static_cast<Py_ssize_t>(r.get_attrs.size())));
  for (size_t i = 0; i < r.get_attrs.size(); ++i)
    PyList_SET_ITEM(attrs.get(), static_cast<Py_ssize_t>(i),
                    check(wrap_node(const_cast<Node*>(r.get_attrs[i]))));
  if (nargs == 7) return PyTuple_Pack(3, order.get(), calls.get(), attrs.get());
  Ref unmapped = r.unmapped ? Ref::steal(check(wrap_node(const_cast<Node*>(r.unmapped))))
                                   : Ref::steal(Py_NewRef(Py_None));
  return PyTuple_Pack(4, order.get(), calls.get(), attrs.get(), unmapped.get());
}

/// The bytes of a bytes or bytearray object, valid while `o` lives and is not resized.
std::string_view byte_view(PyObject* o, const char* what) {
  if (PyBytes_Check(o)) return {PyBytes_AS_STRING(o), static_cast<size_t>(PyBytes_GET_SIZE(o))};
  if (PyByteArray_Check(o)) return {PyByteArray_AS_STRING(o), static_cast<size_t>(PyByteArray_GET_SIZE(o))};
  PyErr_Format(PyExc_TypeError, "%s must be bytes or bytearray, not %.200s", what, Py_TYPE(o)->tp_name);
  throw PythonError();
}

// _propose_partitions(graph, supported, kinds, allows_single_node_partition[, torch2,
//                     skip_horizontal_fusion, non_compute, allowed_single]) -> (partitions, unnamed)
// supported, kinds: bytes (or bytearray), one per node in graph order: is_node_supported
// (0/1) and, for call_function nodes, the PartitionOpKind of the target (0 compute,
// 1 torch.ops.aten.view, 2 _operator.getitem, 3 no qualified name). partitions:
// [(id, [nodes in graph order])] in torch.fx's order (fxcpp::propose_partitions);
// unnamed: None, or the node whose target's qualified name torch.fx would have looked
// up (kind 3) and failed on, with partitions empty. partitions is None when the graph is
// not in topological order (ProposePartitionsResult::not_topological).
// torch2 true: torch.fx 2.x's algorithm (PartitionerAlgorithm::Torch2) with its options
// (non_compute, allowed_single: bytes, one 0/1 per node, or empty); each partition is then
// (id, [nodes in torch.fx 2.x's dict order], [node order or None per node]). RuntimeError
// where torch.fx 2.x's getitem re-assignment would loop forever.
PyObject* propose_partitions_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 && nargs != 8) {
    PyErr_SetString(PyExc_TypeError, "_propose_partitions expects 4 or 8 arguments");
    return nullptr;
  }
  Graph* g = core_graph_of(args[0]);
  if (!g) return nullptr;
  const std::string_view sup = byte_view(args[1], "_propose_partitions: supported");
  const std::string_view kin = byte_view(args[2], "_propose_partitions: kinds");
  ProposePartitionsOptions options;
  options.allows_single_node_partition = check(PyObject_IsTrue(args[3])) != 0;
  const bool torch2 = nargs == 8 && check(PyObject_IsTrue(args[4])) != 0;
  if (torch2) {
    options.algorithm = PartitionerAlgorithm::Torch2;
    options.skip_horizontal_fusion = check(PyObject_IsTrue(args[5])) != 0;
    const std::string_view nc = byte_view(args[6], "_propose_partitions: non_compute");
    const std::string_view as = byte_view(args[7], "_propose_partitions: allowed_single");
    options.non_compute.assign(nc.begin(), nc.end());
    options.allowed_single.assign(as.begin(), as.end());
  }
  std::vector<uint8_t> supported(sup.begin(), sup.end());
  std::vector<PartitionOpKind> kinds(kin.size());
  for (size_t i = 0; i < kin.size(); ++i) {
    const auto k = static_cast<uint8_t>(kin[i]);
    if (k > static_cast<uint8_t>(PartitionOpKind::Unnamed)) {
      PyErr_SetString(PyExc_ValueError, "_propose_partitions: a kind must be 0..3");
      return nullptr;
    }
    kinds[i] = static_cast<PartitionOpKind>(k);
  }

  ProposePartitionsResult r = propose_partitions(*g, supported, kinds, options);
  if (r.not_topological) return PyTuple_Pack(2, Py_None, Py_None);
  if (r.endless_getitem) {
    PyErr_Format(PyExc_RuntimeError,
                 "propose_partitions: torch.fx's getitem re-assignment never ends on this graph (it moves "
                 "'%s' back and forth between the partitions of the tuple-producing nodes it uses); "
                 "put those nodes in one partition, or make '%s' use only one of them",
                 std::string(r.endless_getitem->name()).c_str(), std::string(r.endless_getitem->name()).c_str());
    return nullptr;
  }

  Ref parts = owned(PyList_New(static_cast<Py_ssize_t>(r.partitions.size())));
  for (size_t i = 0; i < r.partitions.size(); ++i) {
    const ProposedPartition& p = r.partitions[i];
    Ref nodes = owned(PyList_New(static_cast<Py_ssize_t>(p.nodes.size())));
    for (size_t j = 0; j < p.nodes.size(); ++j)
      PyList_SET_ITEM(nodes.get(), static_cast<Py_ssize_t>(j), check(wrap_node(p.nodes[j])));
    Ref id = owned(PyLong_FromUnsignedLong(p.id));
    if (!torch2) {
      PyList_SET_ITEM(parts.get(), static_cast<Py_ssize_t>(i), owned(PyTuple_Pack(2, id.get(), nodes.get())).release());
      continue;
    }
    Ref orders = owned(PyList_New(static_cast<Py_ssize_t>(p.node_orders.size())));
    for (size_t j = 0; j < p.node_orders.size(); ++j) {
      PyObject* o = p.node_orders[j] < 0 ? Py_NewRef(Py_None) : check(PyLong_FromLongLong(p.node_orders[j]));
      PyList_SET_ITEM(orders.get(), static_cast<Py_ssize_t>(j), o);
    }
    PyList_SET_ITEM(parts.get(), static_cast<Py_ssize_t>(i),
                    owned(PyTuple_Pack(3, id.get(), nodes.get(), orders.get())).release());
  }
  Ref unnamed = r.unnamed ? Ref::steal(check(wrap_node(const_cast<Node*>(r.unnamed)))) : Ref::borrow(Py_None);
  return PyTuple_Pack(2, parts.get(), unnamed.get());
}

// _validate_partition(nodes) -> bool, or None when `nodes` (a list or tuple) are not all
// live nodes of one fxcpp graph (the caller then runs the Python version).
// fxcpp::validate_partition: False when fusing them would create a cycle.
PyObject* validate_partition_py(PyObject*, PyObject* arg) {
  Ref seq = fast_seq(arg, "_validate_partition: nodes must be a sequence");
  const Py_ssize_t k = PySequence_Fast_GET_SIZE(seq.get());
  PyObject** items = PySequence_Fast_ITEMS(seq.get());
  std::vector<const Node*> nodes;
  nodes.reserve(static_cast<size_t>(k));
  for (Py_ssize_t i = 0; i < k; ++i) {
    if (!is_node(items[i])) Py_RETURN_NONE;
    const Node* n = reinterpret_cast<PyNode*>(items[i])->node;
    if (!n || n->erased() || (!nodes.empty() && n->graph() != nodes.front()->graph())) Py_RETURN_NONE;
    nodes.push_back(n);
  }
  return PyBool_FromLong(validate_partition(nodes));
}

// _meta_values(graph, key) -> [node.meta[key] for the nodes whose meta has key], in graph
// order, without wrapping the nodes that have no wrapper (and so no meta). For
// split_module's check of node.meta['example_value'] on torch 2.x.
PyObject* meta_values_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_meta_values expects 2 arguments");
    return nullptr;
  }
  Graph* g = core_graph_of(args[0]);
  if (!g) return nullptr;
  PyObject* key = args[1];
  Ref out = owned(PyList_New(0));
  for (Node* n : g->nodes()) {
    PyObject* w = wrapper_of(*n);
    if (!w) continue;
    PyObject* meta = reinterpret_cast<PyNode*>(w)->meta;
    if (!meta) continue;
    Ref v;
    if (PyDict_Check(meta)) {
      PyObject* item = PyDict_GetItemWithError(meta, key);  // borrowed
      if (!item) {
        if (PyErr_Occurred()) throw PythonError();
        continue;
      }
      v = Ref::steal(Py_NewRef(item));
    } else {
      PyObject* item = PyObject_GetItem(meta, key);
      if (!item) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) throw PythonError();
        PyErr_Clear();
        continue;
      }
      v = Ref::steal(item);
    }
    check(PyList_Append(out.get(), v.get()));
  }
  return out.release();
}

PyMethodDef toolbox_methods[] = {
    def<meta_values_py>("_meta_values", METH_FASTCALL,
                        "_meta_values(graph, key) -> [node.meta[key] for the nodes whose meta has key], "
                        "in graph order."),
    def<split_module_py>("_split_module", METH_FASTCALL,
                         "_split_module(graph, partition_ids, submod_names, partition_graphs, top_graph, getitem, "
                         "keep_original_order[, fx2, keep_original_node_name, keep_original_input_name, tuple_return]) -> "
                         "(construct_order, module_calls, get_attrs[, unmapped])\n"
                         "torch.fx split_module's graph construction in the C++ core "
                         "(fxcpp.passes.split_module)."),
    def<propose_partitions_py>("_propose_partitions", METH_FASTCALL,
                               "_propose_partitions(graph, supported, kinds, allows_single_node_partition[, torch2, "
                               "skip_horizontal_fusion, non_compute, allowed_single]) -> "
                               "(partitions, unnamed)\n"
                               "torch.fx CapabilityBasedPartitioner.propose_partitions in the C++ core "
                               "(fxcpp.passes.infra.partitioner)."),
    def<validate_partition_py>("_validate_partition", METH_O,
                               "_validate_partition(nodes) -> bool or None\n"
                               "torch.fx fuser_utils.validate_partition in the C++ core "
                               "(fxcpp.passes.utils.fuser_utils); None: not live nodes of one fxcpp graph."),
    kEndOfMethods};

}  // namespace

int init_toolbox(PyObject* m) { return add_functions(m, toolbox_methods); }

}  // namespace fxcpp::py
