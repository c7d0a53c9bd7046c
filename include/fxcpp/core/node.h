// fxcpp core: Node, the unit of the IR.
//
// Note [Use lists]
// ~~~~~~~~~~~~~~~~
// A node's unique input nodes, in first-appearance order over args then kwargs,
// are its `Use` records (torch.fx `_input_nodes`). Each Use is threaded into
// the users list of the node it reads. Use lists change in exactly one place,
// Node::set_args_kwargs, which -- like torch.fx's __update_args_kwargs --
// first unlinks every old use and then appends the new ones, so `users` order
// matches torch.fx exactly (a re-wired user moves to the end of each of its
// inputs' users lists). Every change sets kUsers on the affected nodes' and
// kArgs/kKwargs on the node's own NodeBinding, by which the Python bindings
// validate their cached tuples (Note [Binding dirty bits]).
//
// Note [Erased nodes and tombstones]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Graph::erase_node drops the node's uses (its Node arguments become None, as
// in torch.fx) and destroys it. If a binding still holds the node (binding()
// is set), it becomes a *tombstone* instead: marked erased, kept in the list
// so that an iterator parked on it can still step forward, skipped by every
// traversal, and destroyed when the binding calls Graph::release_tombstone.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fxcpp/core/argument.h"
#include "fxcpp/core/interned.h"
#include "fxcpp/core/namespace.h"
#include "fxcpp/core/object.h"

namespace fxcpp {

class Graph;
class Node;

/// Raised where torch.fx fails a bare `assert` (e.g. `n.replace_all_uses_with(n)`
/// while `n` has users). The Python bindings raise AssertionError with what()
/// as its message (none when what() is empty).
struct AssertionFailure : std::logic_error {
  using std::logic_error::logic_error;
};

/// Raised by an edit of a graph that is being printed, code-generated or
/// copied from (Note [Busy graphs] in graph.h).
struct GraphBusyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Raised where torch.fx raises KeyError(node): `node` has no mapped value
/// (graph_copy of a graph that uses a node before defining it). Derives from
/// std::out_of_range so C++ callers may catch either; `node` is borrowed from
/// the graph being copied.
struct UnmappedNode : std::out_of_range {
  UnmappedNode(const Node* n, const std::string& what) : std::out_of_range(what), node(n) {}
  const Node* node;
};

/// The six torch.fx opcodes, plus the list sentinel.
enum class Op : uint8_t { Placeholder, GetAttr, CallFunction, CallMethod, CallModule, Output, Root };

/// "placeholder", "get_attr", ... ("root" for the sentinel).
const char* op_name(Op op);
/// Parses an opcode name; nullopt for unknown names (the sentinel's "root" too).
std::optional<Op> parse_op(std::string_view s);

/// One edge value -> user, owned by the user node (Note [Compact nodes]).
/// 24 bytes: the user is not stored but derived from where the record lives.
struct Use {
  /// The node being read.
  Node* value() const { return reinterpret_cast<Node*>(bits_ & ~uintptr_t(7)); }
  /// The node reading it. O(1).
  Node* user() const;
  /// Neighbours in value()->users list: prev is circular (the head's prev is
  /// the tail), next is null at the tail.
  Use* prev = nullptr;
  Use* next = nullptr;

 private:
  friend class Node;
  // value | tag: bit 0 = record lives in a heap block (HeapUse), bit 1 =
  // index (0/1) of an inline record.
  uintptr_t bits_ = 0;
};

/// Change bits a binding keeps so it can validate its caches (Note [Binding
/// dirty bits]). The core only ever sets bits; the binding clears them.
struct NodeBinding {
  /// kAttrs: name, target or type changed.
  enum : uint32_t { kArgs = 1, kKwargs = 2, kUsers = 4, kAttrs = 8, kAll = 15 };
  uint32_t dirty = kAll;
};

/// A call target: a string for every op but call_function, whose target is an
/// opaque callable object. 16 bytes: a string target is stored as an Object of
/// the internal interned-string interface (Note [Interned targets]).
class Target {
 public:
  Target() : Target(InternedString()) {}
  Target(const std::string& s) : Target(InternedString(s)) {}  // NOLINT: implicit by design
  Target(const char* s) : Target(InternedString(s)) {}         // NOLINT
  Target(InternedString s);                                    // NOLINT
  Target(Object f);                                            // NOLINT
  bool is_object() const { return obj_.iface() != string_interface(); }
  /// The string target ("" for object targets).
  InternedString str() const {
    return is_object() ? InternedString() : InternedString::from_id(obj_.get());
  }
  /// The callable target (the null Object for string targets).
  const Object& fn() const { return is_object() ? obj_ : null_object(); }
  /// Identity of the target: the object, or the interned string's storage.
  const void* identity() const { return obj_.get(); }
  bool same(const Target& o) const { return obj_.get() == o.obj_.get(); }

 private:
  static const ObjectInterface* string_interface();
  static const Object& null_object();
  Object obj_;
};

/// Range over a node's users, in torch.fx order.
class UserRange {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node**;
    using reference = Node*;
    explicit iterator(const Use* u) : u_(u) {}
    Node* operator*() const { return u_->user(); }
    iterator& operator++() { u_ = u_->next; return *this; }
    bool operator!=(const iterator& o) const { return u_ != o.u_; }
    bool operator==(const iterator& o) const { return u_ == o.u_; }
   private:
    const Use* u_;
  };
  explicit UserRange(const Use* head) : head_(head) {}
  iterator begin() const { return iterator(head_); }
  iterator end() const { return iterator(nullptr); }
  bool empty() const { return head_ == nullptr; }
 private:
  const Use* head_;
};

/// Read-only view of a node's positional arguments (valid until the node's
/// arguments are next replaced).
class ArgSpan {
 public:
  ArgSpan(const Argument* data, size_t size) : data_(data), size_(size) {}
  ArgSpan(const std::vector<Argument>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit by design
  const Argument* begin() const { return data_; }
  const Argument* end() const { return data_ + size_; }
  const Argument* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Argument& operator[](size_t i) const { return data_[i]; }
  const Argument& front() const { return data_[0]; }
  const Argument& back() const { return data_[size_ - 1]; }
  std::vector<Argument> to_vector() const { return std::vector<Argument>(begin(), end()); }
 private:
  const Argument* data_;
  size_t size_;
};

/// A node of a Graph. Nodes are created and owned by their Graph (never by the
/// caller), live in the graph's node slabs and are address-stable.
///
/// Note [Compact nodes]
/// ~~~~~~~~~~~~~~~~~~~~
/// A node is 160 bytes and a plain binary op needs no other allocation:
/// * up to two positional arguments and two unique input uses are stored
///   inline; longer lists spill to one exact-size heap block each;
/// * the owning graph and the dense slot index are derived from the node's
///   address (slabs are aligned, Note [Node slabs]);
/// * a Use does not store its user: inline records find it from their inline
///   index, heap records (HeapUse) carry it;
/// * the users list is circular through prev, so one head pointer suffices;
/// * kwargs, type and C++ meta live in one lazily allocated cold block;
/// * the binding pointer lives in a per-slab side array and cache validation
///   in the binding itself (Note [Binding dirty bits]);
///   passes keep per-node scratch data in side tables indexed by index().
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  // ---- identity -------------------------------------------------------------
  /// Unique (within the graph's namespace at creation) value name. O(1).
  /// The text is owned by the graph.
  std::string_view name() const { return name_.view(); }
  /// The name as a NUL-terminated C string (same storage as name()).
  const char* name_c_str() const { return name_.c_str(); }
  NameRef name_ref() const { return name_; }
  /// Renames without consulting the namespace (torch.fx `node.name = ...`).
  void set_name(std::string_view n);
  Op op() const { return static_cast<Op>(op_); }
  /// Owning graph, read from the node's slab header. Never null (a tombstone
  /// still points at its graph). O(1).
  Graph* graph() const;
  /// Dense slot index within the owning graph: 0 <= index() < the graph's
  /// node_capacity(). Stable for the node's lifetime (slots are reused after
  /// the node is destroyed). O(1).
  uint32_t index() const;
  /// True once erased (only observable on tombstones held by a binding).
  bool erased() const { return erased_; }

  // ---- target -----------------------------------------------------------------
  const Target& target() const { return target_; }
  /// Replaces the target. The caller keeps the op/target kinds consistent
  /// (lint checks them).
  void set_target(Target t);

  // ---- arguments --------------------------------------------------------------
  ArgSpan args() const { return ArgSpan(args_data(), n_args_); }
  const KwArgs& kwargs() const;
  /// Replaces args and kwargs and rewires uses (Note [Use lists]). O(size).
  void set_args_kwargs(std::vector<Argument> args, KwArgs kwargs);
  void set_args(std::vector<Argument> args) { set_args_kwargs(std::move(args), kwargs()); }
  void set_kwargs(KwArgs kwargs) { set_args_kwargs(args().to_vector(), std::move(kwargs)); }
  /// torch.fx update_arg: args[idx] = arg. Throws std::out_of_range.
  void update_arg(size_t idx, Argument arg);
  /// torch.fx update_kwarg: kwargs[key] = arg (appends a new key).
  void update_kwarg(const std::string& key, Argument arg);
  /// torch.fx map_arg over args and kwargs: copies of both with every Node
  /// reference replaced by fn(node). Subtrees without nodes are shared. O(size).
  std::pair<std::vector<Argument>, KwArgs> mapped_args_kwargs(const std::function<Argument(Node*)>& fn) const;
  /// set_args_kwargs(mapped_args_kwargs(fn)): rewires uses. O(size).
  void map_args_kwargs(const std::function<Argument(Node*)>& fn);
  /// Unique input nodes in first-appearance order (torch.fx all_input_nodes).
  std::vector<Node*> all_input_nodes() const;
  size_t num_inputs() const { return n_inputs_; }
  /// The i-th use record (0 <= i < num_inputs()). O(1).
  const Use& input_use(size_t i) const { return use_at(i); }

  // ---- users --------------------------------------------------------------------
  /// Number of users. O(#users) (the list is not counted eagerly).
  size_t num_users() const;
  bool has_users() const { return users_head_ != nullptr; }
  UserRange users() const { return UserRange(users_head_); }
  /// The first record of the users list (null: no users). Records chain
  /// through Use::next; the head's prev is the tail.
  const Use* first_use() const { return users_head_; }
  std::vector<Node*> users_vector() const;

  // ---- type annotation & metadata ---------------------------------------------------
  const Object& type() const;
  void set_type(Object t);
  /// C++-side metadata (the Python layer keeps its own `meta` dict).
  KwArgs& meta();
  bool has_meta() const { return cold_ && cold_->meta; }

  // ---- list position --------------------------------------------------------------
  /// Next / previous live node; the graph's root sentinel at either end. O(1)
  /// unless tombstones intervene.
  Node* next() const {
    Node* n = next_;
    while (n->erased_) n = n->next_;
    return n;
  }
  Node* prev() const {
    Node* n = prev_;
    while (n->erased_) n = n->prev_;
    return n;
  }
  /// Moves `x` (of the same graph) to just before / after this node.
  /// Throws std::invalid_argument for a node of another graph.
  void prepend(Node* x);
  void append(Node* x);
  /// Position key: a < b in list order iff order_key(a) < order_key(b). O(1).
  uint64_t order_key() const { return order_; }

  // ---- rewiring ---------------------------------------------------------------------
  /// Replaces every use of this node by `with` (may be any Argument), in users for
  /// which `filter(user)` is true (all when filter is empty). Returns the users
  /// that were changed, in users order. O(total size of changed users' args); a node `with`
  /// is put in place without rebuilding a user's arguments where it can (Note [In-place
  /// rewiring] in node.cpp), with the same result.
  /// Like torch.fx, throws AssertionFailure after the edit if users other than
  /// the filtered-out ones remain (`with` is, or contains, this node).
  /// `filter` may edit the graph; if it may erase users, the caller must keep
  /// those users' memory alive (the Python binding holds their wrappers), and
  /// erased users are returned without being rewired.
  std::vector<Node*> replace_all_uses_with(const Argument& with,
                                           const std::function<bool(Node*)>& filter = {});
  std::vector<Node*> replace_all_uses_with(Node* with, const std::function<bool(Node*)>& filter = {}) {
    return replace_all_uses_with(Argument::node(with), filter);
  }
  /// Replaces every occurrence of `old_input` in this node's args/kwargs.
  void replace_input_with(Node* old_input, const Argument& new_input);

  /// Decides whether a call_module node is impure: the module is outside the
  /// core (in Python, the owning GraphModule's submodule). May throw.
  using ModuleImpurityFn = std::function<bool(const Node&)>;
  /// The one impurity decision (torch.fx Node.is_impure): placeholders and
  /// outputs are impure; a call_function node is impure when its target's
  /// ObjectInterface reports is_impure_target(); a call_module node asks
  /// `module_is_impure` (pure when it is empty); everything else is pure.
  /// O(1) plus the hook.
  bool is_impure(const ModuleImpurityFn& module_is_impure = {}) const;

  // ---- printing -----------------------------------------------------------------------
  /// torch.fx Node.format_node(): one line of str(graph). For placeholders,
  /// when `placeholder_names` is given, appends to it and returns nullopt.
  std::optional<std::string> format_node(std::vector<std::string>* placeholder_names = nullptr,
                                         std::string* maybe_return_typename = nullptr) const;
  void print(std::ostream& os) const;
  std::string to_string() const;

  // ---- binding support (Note [Erased nodes and tombstones]) ------------------------------
  /// The binding attached to this node (null: none). Not owned. Kept in a
  /// per-slab side array, so graphs without bindings pay nothing. O(1).
  NodeBinding* binding() const;
  void set_binding(NodeBinding* b);
  /// Sets bits of the binding's dirty word (no-op without a binding).
  void mark_dirty(uint32_t bits) const {
    if (NodeBinding* b = binding()) b->dirty |= bits;
  }

 private:
  friend class Graph;
  friend struct Use;
  /// A spilled use record: carries its user.
  struct HeapUse {
    Use use;
    Node* user;
  };
  struct Cold {
    KwArgs kwargs;
    Object type;
    std::unique_ptr<KwArgs> meta;
  };
  static constexpr uint32_t kInlineArgs = 2;
  static constexpr uint32_t kInlineUses = 2;
  static constexpr uint32_t kMaxArgs = (1u << 24) - 1;

  Node(Op op, NameRef name, Target target);
  const Argument* args_data() const {
    return n_args_ <= kInlineArgs ? reinterpret_cast<const Argument*>(args_store_) : args_heap();
  }
  Argument* args_heap() const {
    Argument* p;
    std::memcpy(&p, args_store_, sizeof(p));
    return p;
  }
  HeapUse* uses_heap() const {
    HeapUse* p;
    std::memcpy(&p, uses_store_, sizeof(p));
    return p;
  }
  Use* uses_inline() { return reinterpret_cast<Use*>(uses_store_); }
  const Use& use_at(size_t i) const {
    return n_inputs_ <= kInlineUses ? reinterpret_cast<const Use*>(uses_store_)[i] : uses_heap()[i].use;
  }
  void assign_args(std::vector<Argument>&& args);
  void clear_args();
  Cold& cold();
  void link_uses();
  void link_uses(const std::vector<Node*>& unique_inputs);
  void unlink_uses();
  void drop_uses();  // frees use storage without unlinking (graph teardown)
  /// Takes `u` out of its value's users list / appends it at the tail. O(1).
  static void unlink_use(Use& u);
  static void append_use(Use& u, Node* value);
  /// Note [In-place rewiring] (node.cpp): re-points `user`'s reads of this node at `with`
  /// without rebuilding its arguments; false (nothing changed) where it does not apply.
  bool rewire_in_place(Node* user, Node* with);
  static size_t uses_offset();

  // -- hot: list walk, identity, target, counts (first cache line) --
  Node* prev_ = nullptr;             // list links (raw: tombstones included)
  Node* next_ = nullptr;
  NameRef name_;                     // text owned by the graph
  Target target_;
  uint64_t order_ = 0;
  uint32_t n_args_ : 24;
  uint32_t op_ : 8;
  uint32_t n_inputs_ : 31;           // unique inputs (Note [Use lists])
  uint32_t erased_ : 1;
  uint32_t bucket_prev_ = 0;         // find_nodes bucket links: index()+1, 0 = none
  uint32_t bucket_next_ = 0;
  // -- arguments and edges: inline storage, or a heap pointer in the first word --
  alignas(8) unsigned char args_store_[kInlineArgs * sizeof(Argument)];
  alignas(8) unsigned char uses_store_[kInlineUses * sizeof(Use)];
  Use* users_head_ = nullptr;
  Cold* cold_ = nullptr;             // kwargs, type, meta (rare); owned
};

std::ostream& operator<<(std::ostream& os, const Node& n);

}  // namespace fxcpp

namespace fxcpp {

// Note [Node slabs]
// ~~~~~~~~~~~~~~~~~
// A Graph allocates its nodes (root included) from slabs of kSlabBytes,
// aligned to kSlabBytes, each starting with a SlabHeader. A node's graph and
// dense index are therefore read from the header of the slab it lives in.
namespace detail {
constexpr size_t kSlabBytes = size_t(1) << 16;
struct SlabHeader {
  Graph* graph;
  NodeBinding** bindings;  // kNodesPerSlab entries, allocated on first set_binding
  uint32_t first_index;
  uint32_t reserved;
};
constexpr size_t kSlabHeaderBytes = sizeof(SlabHeader);
constexpr size_t kNodesPerSlab = (kSlabBytes - kSlabHeaderBytes) / sizeof(Node);
inline const SlabHeader* slab_of(const void* p) {
  return reinterpret_cast<const SlabHeader*>(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t(kSlabBytes) - 1));
}
}  // namespace detail

inline Graph* Node::graph() const { return detail::slab_of(this)->graph; }
namespace detail {
inline size_t slot_in_slab(const Node* n, const SlabHeader* h) {
  return (reinterpret_cast<uintptr_t>(n) - reinterpret_cast<uintptr_t>(h) - kSlabHeaderBytes) / sizeof(Node);
}
}  // namespace detail
inline uint32_t Node::index() const {
  const detail::SlabHeader* h = detail::slab_of(this);
  return h->first_index + static_cast<uint32_t>(detail::slot_in_slab(this, h));
}
inline NodeBinding* Node::binding() const {
  const detail::SlabHeader* h = detail::slab_of(this);
  return h->bindings ? h->bindings[detail::slot_in_slab(this, h)] : nullptr;
}

}  // namespace fxcpp
