// fxcpp core: last uses (torch.fx Interpreter's user_to_last_uses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fxcpp/core/graph.h"

namespace fxcpp {

/// The result of last_uses(): for each node of one graph, the values that
/// die after it runs, in a side table indexed by Node::index() (Note [Node
/// slabs]). It refers to the graph's nodes without owning them and describes
/// the graph as it was when computed: any later edit invalidates it.
class LastUses {
 public:
  /// A read-only view of consecutive node pointers owned by a LastUses.
  class Range {
   public:
    Range(Node* const* first, size_t size) : first_(first), size_(size) {}
    Node* const* begin() const { return first_; }
    Node* const* end() const { return first_ + size_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    Node* operator[](size_t i) const { return first_[i]; }

   private:
    Node* const* first_;
    size_t size_;
  };

  /// The values whose last use is `user` (torch.fx user_to_last_uses[user]),
  /// in first-appearance order over args then kwargs; empty when it frees
  /// nothing. `user` must belong to the analysed graph. O(1).
  Range freed_after(const Node& user) const {
    const Slot& s = slots_[user.index()];
    return Range(freed_.data() + s.first_freed, s.num_freed);
  }
  /// The node whose run is `value`'s last use (torch.fx node_to_last_use),
  /// or null when nothing uses it. `value` must belong to the analysed
  /// graph. O(1).
  Node* last_user(const Node& value) const { return slots_[value.index()].last_user; }

 private:
  friend LastUses last_uses(const Graph& g, bool include_foreign);
  struct Slot {
    Node* last_user = nullptr;
    uint32_t first_freed = 0;  ///< offset of this node's run in freed_
    uint32_t num_freed = 0;
  };
  std::vector<Slot> slots_;   ///< by Node::index(); node_capacity() entries
  std::vector<Node*> freed_;  ///< every used value once, grouped by user, users in reverse graph order
};

/// torch.fx Interpreter's last-use analysis: walking the nodes in reverse,
/// the first user met of each value is its last use, and that user frees it.
/// A node's inputs are taken in first-appearance order over its args then its
/// kwargs, through nested tuples, lists, dicts and slices; a value used twice
/// by one node is listed once; unused values are freed by no one; the output
/// node frees its inputs like any other user. Inputs owned by another graph
/// (which lint() rejects) are not listed unless `include_foreign`: then each
/// is listed once, after its last use, as torch.fx's code generation frees it
/// (codegen.cpp uses this; last_user() knows nothing of them).
/// Cost: one reverse walk over the nodes and their input uses (linear), one
/// allocation for the side table (16 bytes per node slot) and one for the
/// freed list (8 bytes per node); foreign inputs add a linear scan each.
LastUses last_uses(const Graph& g, bool include_foreign = false);

}  // namespace fxcpp
