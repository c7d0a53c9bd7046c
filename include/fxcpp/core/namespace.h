// fxcpp core: unique Python identifiers (torch.fx `_Namespace`).
//
// Note [Linear-time naming]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx 1.13 resolves a collision on `base` by trying base_1, base_2, ...
// from 1 every time, which is quadratic for graphs with many `add` nodes. We
// give identical results in amortized O(1): for each base we remember a hint h
// such that base_1 .. base_{h-1} are all taken (names are never released, so
// the hint stays valid) and start a from-1 search at h.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fxcpp/core/object.h"

namespace fxcpp {

/// The names a generated identifier must not shadow. Process-wide; the Python
/// bindings refresh `builtins` from the running interpreter and attach the
/// real custom-builtin objects.
struct NameRules {
  std::unordered_set<std::string> keywords;
  std::unordered_set<std::string> builtins;
  /// torch.fx `_custom_builtins`, in registration order: name -> object.
  std::vector<std::pair<std::string, Object>> custom_builtins;
  bool is_custom_builtin(const std::string& name, const Object** obj) const;
  /// True when some reserved name ends in a digit (then "base_N" names must
  /// be checked against the reserved sets too). Refreshed by refresh().
  bool digit_suffixed_reserved = false;
  void refresh();
};
/// The rules in force (defaults: Python 3.11 keywords and builtins).
NameRules& name_rules();

/// Python's str.isidentifier() for ASCII/UTF-8 text (non-ASCII letters accepted).
bool is_identifier(std::string_view s);
/// torch.fx _snake_case.
std::string snake_case(std::string_view s);

/// A set of strings with stable addresses: open addressing over 8-byte slots
/// (32-bit hash tag, 32-bit index into a deque of strings). One probe per
/// lookup in the common case and no per-entry node allocation.
class NameSet {
 public:
  /// Inserts `s` if absent. Returns (stored string, inserted?).
  std::pair<const std::string*, bool> insert(std::string_view s);
  /// The stored copy of `s`, or null.
  const std::string* find(std::string_view s) const;
  bool contains(std::string_view s) const { return find(s) != nullptr; }
  /// Pre-sizes for `n` more entries.
  void reserve(size_t n);
  size_t size() const { return strings_.size(); }

 private:
  struct Slot {
    uint32_t tag = 0;    // 0: empty; else (hash >> 32) | 1
    uint32_t index = 0;  // into strings_
  };
  static uint64_t hash(std::string_view s);
  void grow(size_t min_slots);
  std::deque<std::string> strings_;
  std::vector<Slot> slots_;
};

class Namespace {
 public:
  /// torch.fx create_name(candidate, obj). `key` identifies the object the name
  /// is associated with (nullptr: none); `obj` is used for builtin shadowing
  /// checks (may be null). Returns the name, stored in (and owned by) this
  /// namespace: the reference stays valid for the namespace's lifetime.
  /// Amortized O(|candidate|).
  const std::string& create_name(std::string_view candidate, const void* key, const Object* obj = nullptr);
  /// The stored copy of `name` if it is in use, else null.
  const std::string* find(const std::string& name) const { return used_.find(name); }
  /// Associates an already-created name with `key`.
  void associate(const std::string& name, const void* key) { obj_to_name_[key] = name; }
  bool is_used(const std::string& name) const { return used_.contains(name); }
  /// Pre-sizes the tables for `n` more names (avoids rehashing). O(n).
  void reserve(size_t n) {
    used_.reserve(used_.size() + n);
  }
  /// Marks a name as taken without an object.
  void reserve_name(const std::string& name) { used_.insert(name); }
  const std::string* name_of(const void* key) const {
    auto it = obj_to_name_.find(key);
    return it == obj_to_name_.end() ? nullptr : &it->second;
  }

 private:
  bool is_illegal(const std::string& name, const Object* obj) const;
  NameSet used_;
  std::unordered_map<const void*, std::string> obj_to_name_;
  std::unordered_map<std::string, uint64_t> hint_;
};

}  // namespace fxcpp
