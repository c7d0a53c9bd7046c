// fxcpp core: unique Python identifiers (torch.fx `_Namespace`).
//
// Note [Linear-time naming]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx 1.13 resolves a collision on `base` by trying base_1, base_2, ...
// from 1 every time, which is quadratic for graphs with many `add` nodes. We
// give identical results in amortized O(1): for each base we remember a hint h
// such that base_1 .. base_{h-1} are all taken (names are never released, so
// the hint stays valid) and start a from-1 search at h.
//
// Note [Per-base counters]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// torch.fx 2.x (Dialect::fx_2, Note [Dialect]) names differently: a
// candidate "base_N" (regex (.+)_(\d+)$: a non-empty base) is kept as
// written, leading zeros included, when it is free and legal, and then sets
// the base's counter to N; a free unsuffixed candidate leaves the counter
// alone; a taken or illegal one becomes base_{c+1}, base_{c+2}, ... from the
// counter c (0 when unset), and the name found sets the counter. The search
// usually ends at its first probe, since the counter follows the names
// handed out. Counters are decimal digit strings, so suffixes of any length
// count as Python's int() does. An empty candidate is named "_unnamed".
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <memory>
#include <optional>
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
  /// snake_case of a text with non-ASCII characters (Unicode upper/lower case
  /// as Python's str methods decide it); without it, non-ASCII bytes are kept
  /// as they are. The Python bindings install CPython's.
  std::string (*non_ascii_snake_case)(std::string_view utf8) = nullptr;
  /// str.isidentifier() of a text with non-ASCII characters (Unicode XID
  /// rules); without it, every non-ASCII character counts as an identifier
  /// character. The Python bindings install CPython's.
  bool (*non_ascii_is_identifier)(std::string_view utf8) = nullptr;
  void refresh();
};
/// The rules in force (defaults: Python 3.11 keywords and builtins).
NameRules& name_rules();

/// Python's str.isidentifier() for UTF-8 text (non-ASCII text: NameRules::non_ascii_is_identifier).
bool is_identifier(std::string_view s);
/// torch.fx _snake_case (non-ASCII text: NameRules::non_ascii_snake_case).
std::string snake_case(std::string_view s);

/// Name text owned by a Graph's name arena: NUL-terminated, address-stable,
/// with its length stored in the 4 bytes before the text. 8 bytes.
class NameRef {
 public:
  NameRef() : p_(empty_text()) {}
  explicit NameRef(const char* p) : p_(p) {}
  const char* c_str() const { return p_; }
  size_t size() const {
    uint32_t n;
    std::memcpy(&n, p_ - sizeof(uint32_t), sizeof(uint32_t));
    return n;
  }
  std::string_view view() const { return std::string_view(p_, size()); }
  operator std::string_view() const { return view(); }  // NOLINT: implicit by design
  std::string str() const { return std::string(view()); }
  friend bool operator==(const NameRef& a, std::string_view b) { return a.view() == b; }
  friend bool operator!=(const NameRef& a, std::string_view b) { return a.view() != b; }
  friend std::ostream& operator<<(std::ostream& os, const NameRef& r) { return os << r.view(); }
 private:
  static const char* empty_text();
  const char* p_;
};

/// Append-only storage for NameRef texts: length-prefixed, NUL-terminated
/// entries packed into 64 KiB chunks (longer names get a chunk of their own).
/// Each entry is addressed by a 32-bit handle (chunk << 16 | offset).
class NameArena {
 public:
  NameArena() = default;
  NameArena(const NameArena&) = delete;
  NameArena& operator=(const NameArena&) = delete;
  /// Copies `s` in. Amortized O(|s|).
  uint32_t store(std::string_view s);
  NameRef get(uint32_t handle) const {
    return NameRef(chunks_[handle >> kOffsetBits].get() + (handle & kOffsetMask));
  }
  /// Bytes held (chunks), for accounting.
  size_t bytes() const { return bytes_; }
  /// Makes this arena a copy of `o`: same chunks, same handles. O(bytes).
  void copy_from(const NameArena& o);
  /// The handle of `text`, which must be a text stored in this arena.
  /// O(log chunks); O(1) when consecutive calls hit the same chunk.
  uint32_t handle_of(const char* text) const;

 private:
  static constexpr uint32_t kOffsetBits = 16;
  static constexpr uint32_t kOffsetMask = (1u << kOffsetBits) - 1;
  static constexpr size_t kChunk = size_t(1) << kOffsetBits;
  std::vector<std::unique_ptr<char[]>> chunks_;
  std::vector<size_t> sizes_;  // bytes of each chunk
  // handle_of: chunks sorted by address (built on demand), and the last hit.
  mutable std::vector<std::pair<const char*, uint32_t>> by_address_;
  mutable size_t last_hit_ = 0;
  size_t used_ = kChunk;  // in the last regular chunk
  size_t last_regular_ = 0;
  size_t bytes_ = 0;
};

/// A set of names: open addressing over 8-byte slots (32-bit hash tag, 32-bit
/// arena handle), texts in a NameArena. One probe per lookup in the common
/// case, no per-entry allocation, about 22 bytes per short name.
class NameSet {
 public:
  /// Inserts `s` if absent. Returns (stored text, inserted?).
  std::pair<NameRef, bool> insert(std::string_view s);
  /// The stored copy of `s`, or nullopt.
  std::optional<NameRef> find(std::string_view s) const;
  bool contains(std::string_view s) const { return find(s).has_value(); }
  /// Pre-sizes for `n` more entries.
  void reserve(size_t n);
  size_t size() const { return size_; }
  /// Stores a text that is not a member of the set (renamed nodes).
  NameRef store_unindexed(std::string_view s) { return arena_.get(arena_.store(s)); }
  /// Makes this set a copy of `o` (slots and texts copied as blocks). O(size).
  void copy_from(const NameSet& o);
  /// This set's copy of `r`, a text of `src` when this set was copied from it
  /// (and only appended to since). O(1) amortized.
  NameRef translate(const NameSet& src, NameRef r) const { return arena_.get(src.arena_.handle_of(r.c_str())); }

 private:
  // Note [Name set slots]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // A slot is a 32-bit tag and a 32-bit arena handle. The tag is 32 bits of
  // the name's hash with bit 0 forced on (0 marks an empty slot), and the home
  // slot is computed from the tag alone. Growing the table therefore
  // re-places tags without reading any text back from the arena, which at
  // 1e6 names would be a cache miss per name. A tag match is confirmed by
  // comparing texts, so equal tags only cost a comparison.
  struct Slot {
    uint32_t tag = 0;     // 0: empty; else hash bits | 1
    uint32_t handle = 0;  // into arena_
  };
  static constexpr size_t kMaxSlots = size_t(1) << 31;
  static uint64_t hash(std::string_view s);
  static uint32_t tag_of(std::string_view s) { return static_cast<uint32_t>(hash(s) >> 32) | 1u; }
  static size_t home(uint32_t tag, size_t mask) {
    // Multiplicative hashing of the tag's 31 hash bits.
    return static_cast<size_t>((static_cast<uint64_t>(tag >> 1) * 0x9e3779b97f4a7c15ull) >> 33) & mask;
  }
  void grow(size_t min_slots);
  size_t slots_for(size_t n) const;
  NameArena arena_;
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

class Namespace {
 public:
  /// torch.fx create_name(candidate, obj). `key` identifies the object the name
  /// is associated with (nullptr: none); `obj` is used for builtin shadowing
  /// checks (may be null). Returns the name, stored in (and owned by) this
  /// namespace: it stays valid for the namespace's lifetime.
  /// Amortized O(|candidate|).
  ///
  /// `veto` (optional) is asked about the name at the moment it would be
  /// taken; when it answers true nothing is taken and an empty NameRef is
  /// returned (the namespace is left as it was, up to a base's search hint
  /// being initialized). Codegen uses it to learn that a global's name might
  /// clash with a node name it has not recorded (Note [Codegen naming fast path]).
  /// In Dialect::fx_2, with a veto, a candidate that would need a suffix
  /// search returns an empty NameRef without asking (Note [Per-base counters]).
  NameRef create_name(std::string_view candidate, const void* key, const Object* obj = nullptr,
                      const std::function<bool(std::string_view)>* veto = nullptr);
  /// True when create_name(name, nullptr, obj) would return `name` itself:
  /// it is a clean identifier in normal form, legal, and unused. Does not
  /// modify the namespace. O(|name|).
  bool keeps(std::string_view name, const Object* obj = nullptr) const;
  /// The stored copy of `name` if it was inserted by name; names generated by
  /// a suffix search are in use without being indexed (Note [Generated name
  /// runs]), so test membership with is_used().
  std::optional<NameRef> find(std::string_view name) const { return used_.find(name); }
  /// Associates an already-created name with `key`.
  void associate(std::string_view name, const void* key) {
    if (auto stored = used_.find(name)) obj_to_name_[key] = *stored;
    else obj_to_name_[key] = is_used(name) ? used_.store_unindexed(name) : insert_indexed(name);
  }
  /// True when `name` is taken. O(|name|), no table probe for most generated names.
  bool is_used(std::string_view name) const;
  /// Pre-sizes the tables for `n` more names (avoids rehashing). O(n).
  void reserve(size_t n) { used_.reserve(n); }
  /// Marks a name as taken without an object.
  void reserve_name(std::string_view name) {
    if (!is_used(name)) insert_indexed(name);
  }
  std::optional<NameRef> name_of(const void* key) const {
    auto it = obj_to_name_.find(key);
    if (it == obj_to_name_.end()) return std::nullopt;
    return it->second;
  }
  /// Stores a text outside the set (a rename that bypasses the namespace).
  NameRef store_unindexed(std::string_view s) { return used_.store_unindexed(s); }
  /// Number of names taken.
  size_t size() const { return used_.size() + generated_; }
  /// True when no name is associated with an object key.
  bool no_associations() const { return obj_to_name_.empty(); }
  /// Makes this namespace a copy of `o`: the same names, search hints and
  /// associations. Copies blocks of memory instead of re-inserting names one
  /// by one (random probes into a large table). O(size).
  void copy_from(const Namespace& o) {
    used_.copy_from(o.used_);
    obj_to_name_.clear();
    for (auto& kv : o.obj_to_name_) obj_to_name_.emplace(kv.first, used_.translate(o.used_, kv.second));
    bases_ = o.bases_;
    generated_ = o.generated_;
  }
  /// This namespace's copy of `r`, a name of `src` when this namespace was
  /// copied from it. O(1) amortized.
  NameRef translate(const Namespace& src, NameRef r) const { return used_.translate(src.used_, r); }

 private:
  bool is_illegal(const std::string& name, const Object* obj) const;
  NameSet used_;
  std::unordered_map<const void*, NameRef> obj_to_name_;
  // Note [Generated name runs]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Per base b (the text before a "_<digits>" suffix): `hint` h says that
  // b_1 .. b_{h-1} are all taken (Note [Linear-time naming]), and
  // `max_indexed` is the largest N of a name b_N (canonical digits) in
  // used_. A name that the suffix search takes from the hint is stored in
  // the arena but not inserted into used_: the hint already records it.
  // Membership of a canonical b_N is then N < h (taken), else N > max_indexed
  // (free), else a probe of used_. Auto-naming a million "add" nodes thus
  // never probes the table, whose random accesses would each miss the
  // cache. used_ and the generated names are disjoint (every insertion into
  // used_ checks is_used first); generated_ counts the latter. When some
  // reserved word ends in a digit (never, with Python's keywords and
  // builtins) the search skips it, so a name below the hint may be free but
  // illegal; membership then reports it taken, which only matters for a
  // global named after that very builtin. Nothing is generated in that
  // configuration, so no name can be handed out twice either way.
  struct BaseInfo {
    uint64_t hint = 1;
    uint64_t max_indexed = 0;
    /// Dialect::fx_2's per-base counter (Note [Per-base counters]): the
    /// decimal digits of the suffix last taken for this base ("" = 0).
    std::string counter;
  };
  /// create_name's Dialect::fx_2 rules for a sanitized, non-empty candidate.
  NameRef create_name_fx2(std::string cand, const void* key, const Object* obj,
                          const std::function<bool(std::string_view)>* veto);
 public:
  /// Records that `name`, already in this namespace, was created in
  /// Dialect::fx_2 (sets its base's counter, Note [Per-base counters]);
  /// codegen's fast path replays its recorded names with it. O(|name|).
  void note_created_fx2(std::string_view name);

 private:
  /// Inserts a free name into used_, keeping max_indexed current.
  NameRef insert_indexed(std::string_view name);
  const BaseInfo* base_info(std::string_view base) const;
  std::unordered_map<std::string, BaseInfo> bases_;
  size_t generated_ = 0;
};

}  // namespace fxcpp
