// fxcpp core: Graph, the owner of Nodes.
//
// Note [Graph ownership and iteration]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A Graph owns its nodes in an intrusive doubly linked list closed by a root
// sentinel (op Root). `nodes()` iterates live nodes and steps from the current
// node *after* the loop body, like torch.fx: nodes inserted after the current
// one are visited, erased ones are skipped. While any iterator of the graph is
// alive, erase_node only unlinks-by-flag (the node stays in the list as an
// erased tombstone) and the memory is reclaimed when the last iterator ends,
// so erasing any node, the current one included, is safe mid-iteration.
// Reverse iteration has the same guarantee.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fxcpp/core/namespace.h"
#include "fxcpp/core/node.h"

namespace fxcpp {

/// Notifications the Python bindings use to keep their wrappers coherent.
class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  /// `n` (with binding() set) just became a tombstone.
  virtual void on_tombstone(Node& n) = 0;
  /// The graph is being destroyed and `n` (binding() set) with it.
  virtual void on_destroy(Node& n) = 0;
};

class Graph;

/// RAII insertion point (torch.fx `with graph.inserting_before(n):`). Restores
/// the previous insertion point on destruction.
class InsertGuard {
 public:
  InsertGuard(InsertGuard&& o) noexcept;
  InsertGuard(const InsertGuard&) = delete;
  InsertGuard& operator=(const InsertGuard&) = delete;
  ~InsertGuard();
 private:
  friend class Graph;
  InsertGuard(Graph* g, Node* anchor, bool after);
  Graph* g_;
  Node* old_anchor_;
  bool old_after_;
};

/// Live-node range; see Note [Graph ownership and iteration].
class NodeRange {
  friend class Graph;
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node**;
    using reference = Node*;
    iterator(Node* cur, Node* root, bool reverse);
    iterator(const iterator& o);
    iterator& operator=(const iterator& o);
    ~iterator();
    Node* operator*() const { return cur_; }
    iterator& operator++() {
      // cur_ is valid memory even if the body erased it (Note [Graph ownership
      // and iteration]); its links lead to the live successor.
      cur_ = reverse_ ? cur_->prev() : cur_->next();
      // Note [Iteration prefetch]
      // ~~~~~~~~~~~~~~~~~~~~~~~~~
      // Walking the list is a chain of dependent loads, so out of cache each
      // step waits for the previous one. Nodes built front to back sit in
      // list order in their slabs (Note [Node slabs]), so the node
      // kPrefetchNodes ahead in the walk is usually kPrefetchNodes nodes
      // ahead in memory: prefetching it overlaps the misses. When the guess
      // is wrong the prefetch is wasted, never harmful (prefetches do not
      // fault). Measured at 1e6 nodes: iteration 20.6 -> 16.2 ns per node,
      // lint 19.8 -> 17.5; at 1e4 (in cache) +0.3 ns per step.
      const char* ahead = reinterpret_cast<const char*>(cur_) +
                          (reverse_ ? -1 : 1) * static_cast<std::ptrdiff_t>(kPrefetchNodes * sizeof(Node));
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);
      __builtin_prefetch(ahead + 128);
      return *this;
    }
    bool operator!=(const iterator& o) const { return cur_ != o.cur_; }
    bool operator==(const iterator& o) const { return cur_ == o.cur_; }
   private:
    static constexpr size_t kPrefetchNodes = 10;
    Node* cur_;
    Node* root_;
    bool reverse_;
  };
  NodeRange(Node* root, bool reverse) : root_(root), reverse_(reverse) {}
  iterator begin() const;
  iterator end() const { return iterator(root_, root_, reverse_); }
  NodeRange reversed() const { return NodeRange(root_, !reverse_); }
 private:
  Node* root_;
  bool reverse_;
};

// Note [Busy graphs]
// ~~~~~~~~~~~~~~~~~~
// Printing, code generation and node_copy's argument mapping walk a node's
// argument storage while calling out to foreign code (a Python __repr__,
// __str__ or arg_transform), which may try to edit the graph: erasing the
// node being printed frees the arguments under the walk, a node created
// during codegen has no row in its side tables. While such a walk is open
// (a BusyScope), edits of the graph -- creating, erasing or moving nodes,
// setting args/kwargs/target/type/name -- throw GraphBusyError instead.
// torch.fx lets them through and fails later or not at all; the fuzzers
// record this as a deliberate difference.
class Graph {
 public:
  /// Marks `g` busy for its lifetime (nests). O(1).
  class BusyScope {
   public:
    explicit BusyScope(const Graph& g) : g_(g) { ++g_.busy_; }
    ~BusyScope() { --g_.busy_; }
    BusyScope(const BusyScope&) = delete;
    BusyScope& operator=(const BusyScope&) = delete;

   private:
    const Graph& g_;
  };
  /// Throws GraphBusyError while a BusyScope of this graph is open. O(1).
  void check_not_busy() const {
    if (busy_) throw_busy();
  }

  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- creation (torch.fx names) -----------------------------------------------------
  /// Creates a node at the insertion point. `name` (if given) is the naming
  /// candidate, else one derived from the target. Throws std::invalid_argument
  /// for Root or a target of the wrong kind. Amortized O(|args|).
  Node* create_node(Op op, Target target, std::vector<Argument> args = {}, KwArgs kwargs = {},
                    const std::optional<std::string>& name = std::nullopt, Object type = {});
  /// `default_value` set: the placeholder has args == (default,).
  Node* placeholder(const std::string& name, Object type = {},
                    std::optional<Argument> default_value = std::nullopt);
  Node* get_attr(const std::string& qualified_name, Object type = {});
  Node* call_function(Object fn, std::vector<Argument> args = {}, KwArgs kwargs = {}, Object type = {});
  Node* call_method(const std::string& method, std::vector<Argument> args = {}, KwArgs kwargs = {},
                    Object type = {});
  Node* call_module(const std::string& module, std::vector<Argument> args = {}, KwArgs kwargs = {},
                    Object type = {});
  Node* output(Argument result, Object type = {});

  /// torch.fx Graph._target_to_str: the naming candidate create_node uses when
  /// no name is given. A callable target gives snake_case(its name) (the
  /// ObjectInterface's name(), which may throw); a string target has one
  /// enclosing pair of dunders stripped ("__add__" -> "add"; "__" and "___"
  /// -> "", on which create_name raises like torch.fx) and is snake_cased.
  /// The one place this rule lives: the bindings call it too. O(|target|).
  static std::string target_to_str(const Target& target);

  /// Copies `node` (of any graph) to the insertion point, mapping its Node
  /// arguments through `arg_transform`; name is re-derived from node's name.
  Node* node_copy(const Node& node, const std::function<Argument(Node*)>& arg_transform = {});
  /// torch.fx graph_copy: copies every node of `other` not already in
  /// `val_map` (source node -> value), stopping at its output node. Returns the
  /// mapped output value (nullopt if `other` has no output). If
  /// `output_node` is given, it receives other's output node.
  std::optional<Argument> graph_copy(const Graph& other, std::unordered_map<const Node*, Argument>& val_map,
                                     const Node** output_node = nullptr);
  /// A full copy (torch.fx __deepcopy__ of the node structure).
  std::unique_ptr<Graph> clone() const;

  // ---- removal -------------------------------------------------------------------------
  /// Destroys `n` (Note [Erased nodes and tombstones]). Throws std::runtime_error
  /// with torch.fx's message if `n` still has users. O(|args|).
  void erase_node(Node* n);
  /// Destroys a tombstone once its binding lets go.
  void release_tombstone(Node* n);

  // ---- insertion point -----------------------------------------------------------------
  /// Insert before `n` (nullptr: at the beginning of the graph).
  InsertGuard inserting_before(Node* n = nullptr);
  /// Insert after `n` (nullptr: at the end of the graph).
  InsertGuard inserting_after(Node* n = nullptr);
  /// Sets the insertion point permanently (anchor, after?). The default is
  /// (root, false): append at the end.
  void set_insert_point(Node* anchor, bool after);
  Node* insert_anchor() const { return insert_anchor_; }
  bool insert_after() const { return insert_after_; }

  // ---- queries -------------------------------------------------------------------------
  NodeRange nodes() const { return NodeRange(root_, false); }
  /// Number of live nodes. O(1).
  size_t size() const { return size_; }
  /// The list sentinel (op Root); node.next of the last node.
  Node* root() const { return root_; }
  /// Nodes with this op (and target, if given): in graph order, or with `sort`
  /// false in torch.fx's lookup order (Note [find_nodes order] in graph.cpp).
  /// O(#results log #results) for call_function or no target; a target of
  /// another opcode filters that opcode's nodes, O(#nodes of the opcode).
  std::vector<Node*> find_nodes(Op op, const Target* target = nullptr, bool sort = true) const;
  /// Moves `n` to the end of find_nodes' lookup order, as torch.fx does when one
  /// of a node's attributes is assigned (Note [find_nodes order]). O(1).
  void touch_lookup(Node* n);
  /// The graph's namespace: every name handed out for its nodes (erased
  /// nodes' names included: names are never released) plus reserved names.
  Namespace& names() { return names_; }
  const Namespace& names() const { return names_; }
  /// Storage for a node name that did not come from the namespace (renames).
  NameRef intern_name(std::string_view n);
  /// True when every node name came from the namespace (no set_name since
  /// construction), which makes names unique by construction.
  bool names_from_namespace() const { return renames_ == 0; }
  /// Upper bound (exclusive) of Node::index() over this graph's nodes: size
  /// side tables indexed by node index with it. O(1).
  size_t node_capacity() const { return slabs_.size() * detail::kNodesPerSlab; }
  /// The node in slot `index`, which must hold a live node or tombstone. O(1).
  Node* node_at(uint32_t index) const {
    unsigned char* slab = slabs_[index / detail::kNodesPerSlab].get();
    return reinterpret_cast<Node*>(slab + detail::kSlabHeaderBytes + (index % detail::kNodesPerSlab) * sizeof(Node));
  }

  // ---- printing -------------------------------------------------------------------------
  /// torch.fx str(graph).
  void print(std::ostream& os) const;
  std::string to_string() const;
  void dump() const;

  // ---- bindings ---------------------------------------------------------------------------
  void set_observer(GraphObserver* o) { observer_ = o; }
  GraphObserver* observer() const { return observer_; }

 private:
  friend class Node;
  friend class InsertGuard;
  friend class NodeRange;
  // (op, identity of the target): the fn object, or the interned string.
  struct BucketKey {
    Op op;
    const void* key;
    bool operator==(const BucketKey& o) const { return op == o.op && key == o.key; }
  };
  struct BucketKeyHash { size_t operator()(const BucketKey& k) const; };
  struct Bucket { uint32_t head = 0; uint32_t tail = 0; size_t count = 0; };  // index+1, 0 = none
  static BucketKey key_of(Op op, const Target& t);

  /// create_node with the name already taken from names_.
  Node* make_node(Op op, NameRef uniq, Target target, std::vector<Argument> args, KwArgs kwargs, Object type);
  void link_before(Node* pos, Node* n);  // raw list insert
  void unlink(Node* n);                  // raw list removal
  void assign_order(Node* n);
  void renumber();
  void bucket_add(Node* n);
  void bucket_remove(Node* n);
  void destroy(Node* n);
  void* allocate_node();
  void free_node(Node* n);
  void iterator_opened() { ++iterators_; }
  void iterator_closed();

  Node* root_;
  size_t size_ = 0;
  Node* insert_anchor_;
  bool insert_after_ = false;
  Namespace names_;
  size_t renames_ = 0;  // intern_name calls
  std::unordered_map<BucketKey, Bucket, BucketKeyHash> buckets_;
  GraphObserver* observer_ = nullptr;
  size_t iterators_ = 0;             // live NodeRange iterators
  mutable uint32_t busy_ = 0;        // open BusyScopes (Note [Busy graphs])
  [[noreturn]] void throw_busy() const;
  // Note [Node slabs]
  struct SlabDeleter { void operator()(unsigned char* p) const; };
  std::vector<std::unique_ptr<unsigned char, SlabDeleter>> slabs_;
  size_t slab_used_ = detail::kNodesPerSlab;
  void* free_list_ = nullptr;
  std::vector<Node*> graveyard_;     // nodes erased while iterators_ > 0
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

/// Frees the process-wide cache of node slabs left by destroyed graphs (Note
/// [Slab cache]; at most 256 MiB is kept). Returns the bytes released.
/// Thread-safe.
size_t release_slab_cache();
/// Bytes of node slabs currently owned by live graphs (cached and never
/// used slabs excluded), for memory accounting (Note [Slab mapping]). O(1).
size_t slab_bytes_in_use();

}  // namespace fxcpp
