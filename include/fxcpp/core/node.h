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
// inputs' users lists). Every change bumps `users_version()` of the affected
// nodes and `args_version()` of the node itself, which the Python bindings use
// to validate their cached tuples.
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
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fxcpp/core/argument.h"
#include "fxcpp/core/interned.h"
#include "fxcpp/core/object.h"

namespace fxcpp {

class Graph;
class Node;

/// The six torch.fx opcodes, plus the list sentinel.
enum class Op : uint8_t { Placeholder, GetAttr, CallFunction, CallMethod, CallModule, Output, Root };

/// "placeholder", "get_attr", ... ("root" for the sentinel).
const char* op_name(Op op);
/// Parses an opcode name; nullopt for unknown names (the sentinel's "root" too).
std::optional<Op> parse_op(std::string_view s);

/// One edge value -> user. Owned by the user node.
struct Use {
  Node* value = nullptr;  ///< the node being read
  Node* user = nullptr;   ///< the node reading it
  Use* prev = nullptr;    ///< neighbours in value->users list
  Use* next = nullptr;
};

/// A call target: a string for every op but call_function, whose target is an
/// opaque callable object. 24 bytes (Note [Interned targets]).
struct Target {
  InternedString str;
  Object fn;
  Target() = default;
  Target(const std::string& s) : str(s) {}  // NOLINT: implicit by design
  Target(const char* s) : str(s) {}         // NOLINT
  Target(InternedString s) : str(s) {}      // NOLINT
  Target(Object f) : fn(std::move(f)) {}    // NOLINT
  bool is_object() const { return static_cast<bool>(fn); }
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
    Node* operator*() const { return u_->user; }
    iterator& operator++() { u_ = u_->next; return *this; }
    bool operator!=(const iterator& o) const { return u_ != o.u_; }
    bool operator==(const iterator& o) const { return u_ == o.u_; }
   private:
    const Use* u_;
  };
  explicit UserRange(const Use* head) : head_(head) {}
  iterator begin() const { return iterator(head_); }
  iterator end() const { return iterator(nullptr); }
 private:
  const Use* head_;
};

/// A node of a Graph. Nodes are created and owned by their Graph (never by the
/// caller) and are address-stable for their lifetime.
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  // ---- identity -------------------------------------------------------------
  /// Unique (within the graph's namespace at creation) value name. O(1).
  /// The text is owned by the graph (stored once, in its namespace).
  const std::string& name() const { return *name_; }
  /// Renames without consulting the namespace (torch.fx `node.name = ...`).
  void set_name(const std::string& n);
  Op op() const { return op_; }
  /// Owning graph. Never null (a tombstone still points at its graph).
  Graph* graph() const { return graph_; }
  /// True once erased (only observable on tombstones held by a binding).
  bool erased() const { return erased_; }

  // ---- target -----------------------------------------------------------------
  const Target& target() const { return target_; }
  /// Replaces the target. The caller keeps the op/target kinds consistent
  /// (lint checks them).
  void set_target(Target t);

  // ---- arguments --------------------------------------------------------------
  const std::vector<Argument>& args() const { return args_; }
  const KwArgs& kwargs() const;
  /// Replaces args and kwargs and rewires uses (Note [Use lists]). O(size).
  void set_args_kwargs(std::vector<Argument> args, KwArgs kwargs);
  void set_args(std::vector<Argument> args) { set_args_kwargs(std::move(args), kwargs()); }
  void set_kwargs(KwArgs kwargs) { set_args_kwargs(args_, std::move(kwargs)); }
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
  size_t num_inputs() const { return inputs_.size(); }
  /// The i-th use record (0 <= i < num_inputs()). O(1).
  const Use& input_use(size_t i) const { return inputs_[i]; }

  // ---- users --------------------------------------------------------------------
  size_t num_users() const { return num_users_; }
  UserRange users() const { return UserRange(users_head_); }
  std::vector<Node*> users_vector() const;

  // ---- type annotation & metadata ---------------------------------------------------
  const Object& type() const;
  void set_type(Object t);
  /// C++-side metadata (the Python layer keeps its own `meta` dict).
  KwArgs& meta();
  bool has_meta() const { return extra_ && extra_->meta; }

  // ---- list position --------------------------------------------------------------
  /// Next / previous live node; the graph's root sentinel at either end. O(1)
  /// unless tombstones intervene.
  Node* next() const;
  Node* prev() const;
  /// Moves `x` (of the same graph) to just before / after this node.
  /// Throws std::invalid_argument for a node of another graph.
  void prepend(Node* x);
  void append(Node* x);
  /// Position key: a < b in list order iff order_key(a) < order_key(b). O(1).
  uint64_t order_key() const { return order_; }

  // ---- rewiring ---------------------------------------------------------------------
  /// Replaces every use of this node by `with` (may be any Argument), in users for
  /// which `filter(user)` is true (all when filter is empty). Returns the users
  /// that were changed, in users order. O(total size of changed users' args).
  std::vector<Node*> replace_all_uses_with(const Argument& with,
                                           const std::function<bool(Node*)>& filter = {});
  std::vector<Node*> replace_all_uses_with(Node* with, const std::function<bool(Node*)>& filter = {}) {
    return replace_all_uses_with(Argument::node(with), filter);
  }
  /// Replaces every occurrence of `old_input` in this node's args/kwargs.
  void replace_input_with(Node* old_input, const Argument& new_input);

  /// Placeholders, outputs and call_functions whose target reports
  /// is_impure_target(). (call_module purity needs the module: the Python layer.)
  bool is_impure() const;

  // ---- printing -----------------------------------------------------------------------
  /// torch.fx Node.format_node(): one line of str(graph). For placeholders,
  /// when `placeholder_names` is given, appends to it and returns nullopt.
  std::optional<std::string> format_node(std::vector<std::string>* placeholder_names = nullptr,
                                         std::string* maybe_return_typename = nullptr) const;
  void print(std::ostream& os) const;
  std::string to_string() const;

  // ---- binding support (Note [Erased nodes and tombstones]) ------------------------------
  void* binding() const { return binding_; }
  void set_binding(void* b) { binding_ = b; }
  uint32_t args_version() const { return args_version_; }
  uint32_t users_version() const { return users_version_; }
  /// Bumped on rename/retarget/retype (cheap cache validation for bindings).
  uint32_t attrs_version() const { return attrs_version_; }
  void touch_attrs() { ++attrs_version_; }
  /// Pass-local scratch word: meaningful only inside the pass that set it.
  uint64_t scratch() const { return scratch_; }
  void set_scratch(uint64_t v) const { scratch_ = v; }

 private:
  friend class Graph;
  Node(Graph* g, Op op, const std::string* name, Target target);
  void link_uses();
  void link_uses(const std::vector<Node*>& unique_inputs);
  void unlink_uses();

  // list links (raw: tombstones included)
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  Graph* graph_;
  uint64_t order_ = 0;
  // find_nodes bucket links
  Node* bucket_prev_ = nullptr;
  Node* bucket_next_ = nullptr;

  // Rarely set fields, allocated on first use.
  struct Extra {
    Object type;
    std::unique_ptr<KwArgs> meta;
  };

  const std::string* name_;          // owned by the graph
  Target target_;
  std::vector<Argument> args_;
  std::unique_ptr<KwArgs> kwargs_;   // null: no kwargs
  std::unique_ptr<Extra> extra_;

  std::vector<Use> inputs_;   // unique inputs (Note [Use lists])
  Use* users_head_ = nullptr;
  Use* users_tail_ = nullptr;
  uint32_t num_users_ = 0;

  uint32_t args_version_ = 0;
  uint32_t users_version_ = 0;
  uint32_t attrs_version_ = 0;
  void* binding_ = nullptr;
  mutable uint64_t scratch_ = 0;
  Op op_;
  bool erased_ = false;
};

std::ostream& operator<<(std::ostream& os, const Node& n);

}  // namespace fxcpp
