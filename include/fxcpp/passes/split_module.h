// fxcpp pass: split_module (torch.fx.passes.split_module.split_module's graph work).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// What split_module() built besides the graphs, for the caller that makes
/// the modules (the Python side: GraphModules, node.meta, attribute lookups).
/// Node pointers of the analysed graph are valid while it is not edited.
struct SplitModuleResult {
  /// torch.fx's `sorted_partitions`: the partitions in topological order
  /// (a stack of dependency-free partitions, popped from the end).
  std::vector<uint32_t> sorted;
  /// The order the top graph calls the partitions in: `sorted`, or the
  /// order of first appearance with keep_original_order.
  std::vector<uint32_t> construct_order;
  /// Per partition: the values it takes (original nodes, in first-use order)
  /// and those it returns (in first cross-partition-use order).
  std::vector<std::vector<const Node*>> inputs, outputs;
  /// Every created node copied from an original one, with that original
  /// (partition placeholders and ops; the top graph's placeholders and
  /// get_attrs), in creation order: the caller copies node.meta along it.
  std::vector<std::pair<Node*, const Node*>> copied;
  /// call_module nodes of the analysed graph in graph order, with their
  /// partition: their new target is the qualified name with '.' -> '_'.
  std::vector<std::pair<uint32_t, const Node*>> module_calls;
  /// The top graph's get_attr nodes, in graph order.
  std::vector<const Node*> get_attrs;
};

/// The qualified name `a.b.c` as split_module's submodule attribute, `a_b_c`.
std::string split_module_target(const std::string& qualified_name);

/// torch.fx split_module's graph construction, given the partition of every
/// op: `partition_of` holds one id per node that is not a placeholder,
/// get_attr or output, in graph order; ids are 0..partitions.size()-1 and
/// are numbered in order of first appearance (torch.fx's partition order).
/// `partitions[i]` is partition i's graph, empty on entry; `submod_names[i]`
/// its attribute name (`submod_<key>`). `top` (empty) receives the graph
/// that calls them: placeholders (target, type, default) and get_attrs of
/// the original in order, one call_module per partition in construct order,
/// unpacked with `getitem(call, i)` (call_function nodes of target `getitem`)
/// when it returns more than one value, and the output.
/// Same names, order, inputs and outputs as torch.fx 1.13. Throws
/// std::runtime_error("cycle exists between partitions!") on a cycle,
/// std::out_of_range for a partition with no outputs (torch.fx's IndexError),
/// std::invalid_argument for a bad assignment.
/// Cost: linear in nodes + uses + partitions (hash lookups for the inputs).
SplitModuleResult split_module(const Graph& g, const std::vector<uint32_t>& partition_of,
                               const std::vector<std::string>& submod_names, const std::vector<Graph*>& partitions,
                               Graph& top, const Object& getitem, bool keep_original_order = false);

}  // namespace fxcpp
