// fxcpp pass: capability-based partitioning (torch.fx.passes.infra.partitioner's
// CapabilityBasedPartitioner.propose_partitions) and the cycle check of
// torch.fx.passes.utils.fuser_utils.validate_partition.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// How torch.fx's partitioner sees a call_function node, by the qualified
/// name of its target (torch.fx `_get_qualified_name`).
enum class PartitionOpKind : uint8_t {
  Compute = 0,  ///< any other target: a compute node
  View = 1,     ///< "torch.ops.aten.view": not a compute node
  Getitem = 2,  ///< "_operator.getitem": not a compute node; a tuple element
  Unnamed = 3,  ///< the target has no qualified name (torch.fx's lookup raises)
};

/// The kind of a target with this qualified name. "operator.getitem" (the
/// spelling of C++ stand-ins for Python's operator module) is a getitem too.
/// O(length).
PartitionOpKind partition_op_kind(std::string_view qualified_name);

/// Which torch.fx's propose_partitions to follow (their partitions, ids and
/// order differ: Note [propose_partitions on torch.fx 2.x] in partition.cpp).
enum class PartitionerAlgorithm : uint8_t {
  Torch113 = 0,  ///< torch.fx 1.13: user groups, no horizontal fusion
  Torch2 = 1,    ///< torch.fx 2.x (2.14): merges every partition pair it can
};

struct ProposePartitionsOptions {
  /// torch.fx's `allows_single_node_partition`: keep partitions with at most
  /// one compute node (otherwise they are dropped).
  bool allows_single_node_partition = false;
  PartitionerAlgorithm algorithm = PartitionerAlgorithm::Torch113;
  /// Torch2 only: torch.fx 2.x's `skip_horizontal_fusion` (a new partition
  /// only tries to merge with its users' partitions, and nothing else merges).
  bool skip_horizontal_fusion = false;
  /// Torch2 only, one entry per node in graph order or empty (all 0): 1 when
  /// the call_function node's target's qualified name is in torch.fx 2.x's
  /// `non_compute_ops` (the node is then no compute node when counting).
  std::vector<uint8_t> non_compute;
  /// Torch2 only, one entry per node in graph order or empty (all 0): 1 when
  /// the call_function node's target's qualified name is in torch.fx 2.x's
  /// `allowed_single_node_partition_ops` (the node then counts once more).
  std::vector<uint8_t> allowed_single;
};

/// One proposed partition: torch.fx's `Partition.id` and its nodes.
struct ProposedPartition {
  uint32_t id = 0;
  /// Torch113: in graph order. Torch2: in the order of torch.fx 2.x's
  /// `Partition.nodes` dict: graph order, then the getitems moved in.
  std::vector<Node*> nodes;
  /// Torch2 only, one per node: torch.fx 2.x's value in `Partition.nodes`,
  /// the node's index in reversed graph order, or -1 (None) for a moved getitem.
  std::vector<int64_t> node_orders;
};

struct ProposePartitionsResult {
  /// In torch.fx's order (its `partitions_by_id` dict).
  std::vector<ProposedPartition> partitions;
  /// Set (and `partitions` empty) when torch.fx would have asked for the
  /// qualified name of this node's target, whose kind is Unnamed: the caller
  /// raises torch.fx's error for it.
  const Node* unnamed = nullptr;
  /// Set (and `partitions` empty) when a node uses a node that comes later in
  /// the graph or belongs to another graph: torch.fx's answer then depends on
  /// the order it builds its ancestor sets in, which this pass does not model.
  bool not_topological = false;
  /// Torch2 only. Set (and `partitions` empty) when torch.fx 2.x's getitem
  /// re-assignment would never end (it loops forever): this getitem uses
  /// tuple-producing nodes of different partitions, which move it back and
  /// forth. The caller raises an error instead.
  const Node* endless_getitem = nullptr;
};

/// torch.fx's CapabilityBasedPartitioner.propose_partitions on `g`
/// (`options.algorithm`: 1.13's, described here, or 2.x's: Note
/// [propose_partitions on torch.fx 2.x] in partition.cpp, cost below)
/// (in topological order, as torch.fx assumes: see `not_topological`), given
/// `supported`: one flag per node in graph order (operator_support's
/// is_node_supported), and `kinds`: one PartitionOpKind per node in graph
/// order (only call_function nodes' entries are read; empty: computed with
/// partition_op_kind from the targets' qualified_name()).
///
/// The same partitions, ids and order as torch.fx (where torch.fx's own
/// answer does not depend on set iteration order: Note [Which user groups are
/// dropped] in partition.cpp): supported nodes
/// are visited in reverse graph order; each joins the partition of its users
/// that no other user (partition or unassigned node) depends on, merging
/// several such partitions into the first (new id when there is none); then
/// getitem users of a node whose users are all getitems move to its
/// partition, and, unless allowed, partitions with at most one compute node
/// are dropped. torch.fx decides "depends on" with per-node ancestor sets
/// (quadratic time and memory); here it is a reachability question between
/// groups of users, answered by a search from both ends at once bounded by
/// graph positions (Note [Lockstep search]).
/// Cost: O(nodes + uses) plus, per node whose users lie in two or more
/// groups, about two searches per user partition (pair by pair only where
/// groups depend on each other), each at most twice the smaller of the two
/// regions it explores (descendants of the sources before the target's last
/// position, ancestors of the target after the sources' first one).
/// Memory O(nodes).
/// Torch2: the same partitions, ids, node order and order as torch.fx 2.x
/// (no per-node downstream sets: torch.fx's are quadratic in memory). Cost:
/// O(nodes + uses) plus the merge attempts torch.fx makes, less those known to
/// fail (Note [Fresh reachability sets]); each is a walk below the pair's users
/// that stops at the first cycle and below partitions whose reachability set is
/// fresh, plus, on success, the union of the sets met. A new partition that
/// merges into its user's partition at once costs about its users (a chain cut
/// every 100 nodes: ~1-3 us a node from 1e4 to 1e5 nodes, Python included).
/// Quadratic where a partition with many users is walked again after each
/// merge below it (two big partitions around many unsupported nodes: 2.7 us a
/// node at 1e4, 18 at 1e5), or many live partitions need real attempts.
/// Memory O(nodes + the sets' sizes), O(partitions^2) at worst.
/// Throws std::invalid_argument when `supported`, a non-empty `kinds`,
/// `options.non_compute` or `options.allowed_single` has the wrong size.
ProposePartitionsResult propose_partitions(const Graph& g, const std::vector<uint8_t>& supported,
                                           const std::vector<PartitionOpKind>& kinds,
                                           const ProposePartitionsOptions& options = {});

/// torch.fx fuser_utils.validate_partition: false when a node outside
/// `partition` is reachable from one of its nodes and reaches one (fusing it
/// into one node would create a cycle). The nodes must be live nodes of one
/// graph (std::invalid_argument otherwise); repeats are allowed, the empty
/// partition is valid. Needs no topological order (fuse_by_partitions calls it
/// on a graph it has not re-sorted yet).
/// Cost: linear in the nodes reachable from the partition (stops at the first
/// cycle found), plus O(node_capacity) bytes of scratch.
bool validate_partition(const std::vector<const Node*>& partition);

}  // namespace fxcpp
