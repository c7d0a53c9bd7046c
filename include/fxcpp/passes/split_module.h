// fxcpp pass: split_module (torch.fx.passes.split_module.split_module's graph work).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// Note [split_module on torch.fx 2.x]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/// torch.fx 2.x's split_module (found by running it side by side with 1.13's)
/// builds the same graphs as 1.13's except that, with `fx2`:
///  * a partition whose values nobody outside uses returns `()` and its call
///    is left unpacked (1.13: IndexError);
///  * a partition placeholder carries its value's type annotation, and every
///    copied op its original's;
///  * keep_original_order creates the top graph's get_attr nodes lazily, just
///    before the first call that takes them (in that call's input order);
///    one that no partition takes is dropped; a value read before the top
///    graph has it -- one that only the output reads, or a later partition's
///    value (the calls are in first-appearance order) -- is a KeyError(its
///    name) (SplitModuleResult::unmapped), and only the get_attrs the calls
///    take are looked up;
///  * the 2.x-only options: keep_original_node_name (copied ops ask the
///    partition's namespace for their original name instead of a name from
///    their target), keep_original_input_name = false (partition placeholders
///    are arg_0, arg_1, ... in input order) and tuple_return (every partition
///    returns a tuple, which the top graph always unpacks with getitem).
/// partition_affix only changes the submodule names, which the caller passes.
/// torch.fx 2.x also treats grad-mode / autocast nodes and symbolic sizes in
/// `example_value` specially; the core does not (the Python layer sends such
/// graphs to torch.fx: docs/design.md).

/// split_module()'s semantics and torch.fx 2.x's options (defaults: 1.13's).
struct SplitModuleOptions {
  /// Call the partitions in the order their first nodes appear (both torches).
  bool keep_original_order = false;
  /// torch.fx 2.x's semantics (Note [split_module on torch.fx 2.x]); the
  /// options below need it.
  bool fx2 = false;
  /// Copied ops keep their original names (deduplicated by the namespace).
  bool keep_original_node_name = false;
  /// Partition placeholders are named after their values (else arg_<i>).
  bool keep_original_input_name = true;
  /// Every partition returns a tuple, unpacked with getitem in the top graph.
  bool tuple_return = false;
};

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
  /// The original get_attr nodes the top graph copies, in graph order (with
  /// fx2 and keep_original_order: those the calls take, in call and input
  /// order), which the caller looks up.
  std::vector<const Node*> get_attrs;
  /// fx2 with keep_original_order: the first value a call or the output reads
  /// before the top graph has it (a later partition's, or a get_attr no
  /// partition takes), where the top graph stops; torch.fx 2.x raises
  /// KeyError(its name) after looking the attributes and modules up. Else null.
  const Node* unmapped = nullptr;
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
/// Same names, order, inputs and outputs as torch.fx 1.13, or with
/// options.fx2 as torch.fx 2.x (Note [split_module on torch.fx 2.x]). Throws
/// std::runtime_error("cycle exists between partitions!") on a cycle,
/// std::out_of_range for a partition with no outputs (1.13 only: torch.fx's
/// IndexError), std::invalid_argument for a bad assignment.
/// Cost: linear in nodes + uses + partitions (hash lookups for the inputs).
SplitModuleResult split_module(const Graph& g, const std::vector<uint32_t>& partition_of,
                               const std::vector<std::string>& submod_names, const std::vector<Graph*>& partitions,
                               Graph& top, const Object& getitem, const SplitModuleOptions& options = {});

}  // namespace fxcpp
