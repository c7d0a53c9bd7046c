// fxcpp core: the argument tree held in Node::args / Node::kwargs.
//
// Note [Argument representation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An Argument is a 16-byte tagged value. Scalars (None, bool, int64, double) and
// Node references live inline; strings, tuples, lists, dicts, slices and
// foreign objects live in immutable, reference-counted heap payloads that are
// shared on copy. Nothing is ever mutated in place after construction, so a
// copied argument tree costs one increment per top-level payload. Reference
// counts are not atomic: like torch.fx, a Graph is not thread-safe.
//
// A Tuple may carry a `type` object: the NamedTuple class it was built from.
// Python ints outside int64 and any other Python value travel as Foreign.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/core/object.h"

namespace fxcpp {

class Node;
class Argument;

enum class ArgKind : uint8_t { None, Bool, Int, Double, String, NodeRef, Tuple, List, Dict, Slice, Foreign };

namespace detail {
struct Payload {
  uint32_t refs = 1;
  virtual ~Payload() = default;
};
}  // namespace detail

/// Ordered key/value pairs (dict arguments; keys are Arguments, usually strings).
using ArgPairs = std::vector<std::pair<Argument, Argument>>;

class Argument {
 public:
  /// None.
  Argument() : kind_(ArgKind::None) { u_.i = 0; }
  static Argument none() { return Argument(); }
  static Argument boolean(bool b) { Argument a; a.kind_ = ArgKind::Bool; a.u_.b = b; return a; }
  static Argument integer(int64_t i) { Argument a; a.kind_ = ArgKind::Int; a.u_.i = i; return a; }
  static Argument real(double d) { Argument a; a.kind_ = ArgKind::Double; a.u_.d = d; return a; }
  static Argument string(std::string s);
  /// A reference to a node. Does not by itself register a use; Node does that.
  static Argument node(Node* n) { Argument a; a.kind_ = ArgKind::NodeRef; a.u_.n = n; return a; }
  /// A tuple; `type` (optional) is the NamedTuple class to rebuild in Python.
  static Argument tuple(std::vector<Argument> items, Object type = {});
  static Argument list(std::vector<Argument> items);
  static Argument dict(ArgPairs items);
  static Argument slice(Argument start, Argument stop, Argument step);
  static Argument foreign(Object o);

  Argument(const Argument& o) : kind_(o.kind_), u_(o.u_) { if (is_heap()) ++u_.p->refs; }
  Argument(Argument&& o) noexcept : kind_(o.kind_), u_(o.u_) { o.kind_ = ArgKind::None; o.u_.i = 0; }
  Argument& operator=(Argument o) noexcept { std::swap(kind_, o.kind_); std::swap(u_, o.u_); return *this; }
  ~Argument() { if (is_heap() && --u_.p->refs == 0) delete u_.p; }

  ArgKind kind() const { return kind_; }
  bool is_none() const { return kind_ == ArgKind::None; }
  bool is_node() const { return kind_ == ArgKind::NodeRef; }
  bool is_string() const { return kind_ == ArgKind::String; }
  bool is_sequence() const { return kind_ == ArgKind::Tuple || kind_ == ArgKind::List; }

  bool as_bool() const { return u_.b; }
  int64_t as_int() const { return u_.i; }
  double as_double() const { return u_.d; }
  Node* as_node() const { return u_.n; }
  const std::string& as_string() const;
  /// Items of a Tuple or List.
  const std::vector<Argument>& items() const;
  /// NamedTuple class of a Tuple (null object for plain tuples).
  const Object& tuple_type() const;
  const ArgPairs& pairs() const;
  const Argument& slice_start() const;
  const Argument& slice_stop() const;
  const Argument& slice_step() const;
  const Object& as_object() const;

  /// Python `a == b` (Note [Python equality] in src/core/argument.cpp): numbers
  /// across bool/int/float (an int with a float exactly), dicts by key set,
  /// Node references by identity, foreign objects via Object::equals. O(size).
  bool operator==(const Argument& o) const;
  bool operator!=(const Argument& o) const { return !(*this == o); }

  /// Calls fn(node) for every Node reference, depth first, in order.
  /// Recursion depth is the nesting depth of the literal, not the graph size.
  template <typename Fn>
  void for_each_node(Fn&& fn) const {
    // A template: hot callers (lint, codegen, use linking) pass lambdas
    // without the allocation a std::function of a large capture costs.
    switch (kind_) {
      case ArgKind::NodeRef: fn(u_.n); return;
      case ArgKind::Tuple:
      case ArgKind::List:
        if (!contains_nodes()) return;
        for (auto& i : items()) i.for_each_node(fn);
        return;
      case ArgKind::Dict:
        if (!contains_nodes()) return;
        for (auto& kv : pairs()) kv.second.for_each_node(fn);
        return;
      case ArgKind::Slice:
        if (!contains_nodes()) return;
        slice_start().for_each_node(fn);
        slice_stop().for_each_node(fn);
        slice_step().for_each_node(fn);
        return;
      default: return;
    }
  }
  /// True if any Node reference is reachable.
  bool contains_nodes() const;
  /// Whether replace_node_in_place(from, ...) may run: every container on a path to a
  /// reference to `from` is owned by this tree alone (no other Argument shares it), so
  /// editing it changes no other value. True when `from` does not occur. O(size).
  bool can_replace_node_in_place(const Node* from) const;
  /// Points every reference to `from` at `to`, editing this tree's containers in place
  /// (Note [In-place rewiring] in node.cpp). Precondition: can_replace_node_in_place(from).
  /// O(size); allocates nothing.
  void replace_node_in_place(const Node* from, Node* to);
  /// torch.fx map_arg: rebuilds the tree replacing each Node reference by fn(node).
  /// Subtrees without Node references are shared, not copied.
  Argument map_nodes(const std::function<Argument(Node*)>& fn) const;

 private:
  bool is_heap() const { return kind_ >= ArgKind::String && kind_ != ArgKind::NodeRef; }
  /// 0: `from` does not occur; 1: it does, under unshared containers only; -1: under a shared one.
  int occurrence(const Node* from) const;
  ArgKind kind_;
  union U {
    bool b;
    int64_t i;
    double d;
    Node* n;
    detail::Payload* p;
  } u_;
};

/// Keyword arguments: ordered, string keys.
using KwArgs = std::vector<std::pair<std::string, Argument>>;

/// Python-compatible text helpers (exactly Python 3's repr()).
/// py_repr_string: ASCII and U+0080..U+00A0 are escaped as Python does; other
/// non-ASCII text is copied raw unless a NonAsciiReprHook is installed (the
/// Python bindings install one that asks CPython, whose unicode database
/// decides which code points are printable).
std::string py_repr_string(const std::string& s);
/// repr() of a str given as UTF-8 that contains non-ASCII bytes.
using NonAsciiReprHook = std::string (*)(const std::string& utf8);
/// Installs (or, with nullptr, removes) the hook; not thread-safe, set once at start-up.
void set_non_ascii_repr_hook(NonAsciiReprHook hook);
std::string py_repr_double(double d);

}  // namespace fxcpp
