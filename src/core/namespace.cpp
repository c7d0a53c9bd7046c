#include "fxcpp/core/namespace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "fxcpp/core/dialect.h"

namespace fxcpp {

namespace {
const char* kKeywords =
    "False None True and as assert async await break class continue def del elif else except finally for from "
    "global if import in is lambda nonlocal not or pass raise return try while with yield";
// builtins.__dict__ keys of CPython 3.11 (the bindings replace this with the
// running interpreter's set at import).
const char* kBuiltins =
    "ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError "
    "BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError "
    "ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis EncodingWarning "
    "EnvironmentError Exception ExceptionGroup False FileExistsError FileNotFoundError FloatingPointError "
    "FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError IndexError "
    "InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError "
    "ModuleNotFoundError NameError None NotADirectoryError NotImplemented NotImplementedError OSError "
    "OverflowError PendingDeprecationWarning PermissionError ProcessLookupError RecursionError "
    "ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration "
    "SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError True TypeError "
    "UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError "
    "UnicodeWarning UserWarning ValueError Warning ZeroDivisionError __build_class__ __debug__ __doc__ "
    "__import__ __loader__ __name__ __package__ __spec__ abs aiter all anext any ascii bin bool "
    "breakpoint bytearray bytes callable chr classmethod compile complex copyright credits delattr dict "
    "dir divmod enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help "
    "hex id input int isinstance issubclass iter len license list locals map max memoryview min next "
    "object oct open ord pow print property quit range repr reversed round set setattr slice sorted "
    "staticmethod str sum super tuple type vars zip";
const char* kCustomBuiltins = "inf nan NoneType torch device fx_pytree pytree";

std::unordered_set<std::string> split_words(const char* s) {
  std::unordered_set<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.insert(w);
  return out;
}

bool is_ascii_alnum_(unsigned char c) { return std::isalnum(c) || c == '_'; }
}  // namespace

NameRules& name_rules() {
  static NameRules* rules = [] {
    auto* r = new NameRules();
    r->keywords = split_words(kKeywords);
    r->builtins = split_words(kBuiltins);
    std::istringstream in(kCustomBuiltins);
    std::string w;
    while (in >> w) r->custom_builtins.emplace_back(w, Object());
    r->refresh();
    return r;
  }();
  return *rules;
}

void NameRules::refresh() {
  auto ends_digit = [](const std::string& w) { return !w.empty() && std::isdigit(static_cast<unsigned char>(w.back())); };
  digit_suffixed_reserved = false;
  for (auto& w : keywords) digit_suffixed_reserved |= ends_digit(w);
  for (auto& w : builtins) digit_suffixed_reserved |= ends_digit(w);
  for (auto& kv : custom_builtins) digit_suffixed_reserved |= ends_digit(kv.first);
}

bool NameRules::is_custom_builtin(const std::string& name, const Object** obj) const {
  for (auto& kv : custom_builtins) {
    if (kv.first == name) {
      if (obj) *obj = &kv.second;
      return true;
    }
  }
  return false;
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  unsigned char c0 = static_cast<unsigned char>(s[0]);
  if (c0 < 0x80 && !(std::isalpha(c0) || c0 == '_')) return false;
  bool ascii = true;
  for (unsigned char c : s) {
    if (c < 0x80 && !is_ascii_alnum_(c)) return false;
    ascii = ascii && c < 0x80;
  }
  if (!ascii) {
    if (auto hook = name_rules().non_ascii_is_identifier) return hook(s);
  }
  return true;
}

std::string snake_case(std::string_view s) {
  if (auto hook = name_rules().non_ascii_snake_case) {
    for (unsigned char c : s)
      if (c >= 0x80) return hook(s);
  }
  std::string out;
  out.reserve(s.size() + 4);
  bool prev_lower = false;
  for (unsigned char c : s) {
    bool upper = std::isupper(c);
    if (prev_lower && upper) out.push_back('_');
    out.push_back(static_cast<char>(std::tolower(c)));
    prev_lower = std::islower(c);
  }
  return out;
}

// ----------------------------------------------------------------- NameRef

const char* NameRef::empty_text() {
  // length prefix 0, then the NUL terminator
  alignas(uint32_t) static const char kEmpty[sizeof(uint32_t) + 1] = {0, 0, 0, 0, 0};
  return kEmpty + sizeof(uint32_t);
}

// --------------------------------------------------------------- NameArena

uint32_t NameArena::store(std::string_view s) {
  if (s.size() > UINT32_MAX - 8) throw std::length_error("name too long");
  size_t need = sizeof(uint32_t) + s.size() + 1;
  char* base;
  size_t chunk;
  size_t off;
  auto add_chunk = [this](size_t bytes) {
    chunks_.emplace_back(new char[bytes]);
    sizes_.push_back(bytes);
    by_address_.clear();
    bytes_ += bytes;
    return chunks_.size() - 1;
  };
  if (need > kChunk / 4) {
    // A chunk of its own, addressed at offset 0.
    chunk = add_chunk(need);
    off = 0;
    base = chunks_.back().get();
  } else {
    if (used_ + need > kChunk) {
      last_regular_ = add_chunk(kChunk);
      used_ = 0;
    }
    chunk = last_regular_;
    off = used_;
    base = chunks_[chunk].get() + off;
    used_ += need;
  }
  if (chunks_.size() > (size_t(1) << (32 - kOffsetBits))) throw std::length_error("too many names");
  uint32_t n = static_cast<uint32_t>(s.size());
  std::memcpy(base, &n, sizeof(n));
  if (!s.empty()) std::memcpy(base + sizeof(n), s.data(), s.size());
  base[sizeof(n) + s.size()] = '\0';
  return static_cast<uint32_t>(chunk << kOffsetBits) | static_cast<uint32_t>(off + sizeof(n));
}

void NameArena::copy_from(const NameArena& o) {
  chunks_.clear();
  sizes_ = o.sizes_;
  by_address_.clear();
  last_hit_ = 0;
  for (size_t i = 0; i < o.chunks_.size(); ++i) {
    chunks_.emplace_back(new char[o.sizes_[i]]);
    // Regular chunks are copied up to their used part only.
    size_t n = (i == o.last_regular_ && o.sizes_[i] == kChunk) ? o.used_ : o.sizes_[i];
    std::memcpy(chunks_.back().get(), o.chunks_[i].get(), n);
  }
  used_ = o.used_;
  last_regular_ = o.last_regular_;
  bytes_ = o.bytes_;
}

uint32_t NameArena::handle_of(const char* text) const {
  auto in = [&](size_t i) {
    const char* b = chunks_[i].get();
    return text >= b && text < b + sizes_[i];
  };
  size_t i = last_hit_;
  if (i >= chunks_.size() || !in(i)) {
    if (by_address_.size() != chunks_.size()) {
      by_address_.clear();
      for (size_t k = 0; k < chunks_.size(); ++k) by_address_.emplace_back(chunks_[k].get(), static_cast<uint32_t>(k));
      std::sort(by_address_.begin(), by_address_.end());
    }
    auto it = std::upper_bound(by_address_.begin(), by_address_.end(), std::make_pair(text, UINT32_MAX));
    if (it == by_address_.begin()) throw std::logic_error("NameArena::handle_of: text not in this arena");
    i = std::prev(it)->second;
    if (!in(i)) throw std::logic_error("NameArena::handle_of: text not in this arena");
    last_hit_ = i;
  }
  return static_cast<uint32_t>(i << kOffsetBits) | static_cast<uint32_t>(text - chunks_[i].get());
}

// ------------------------------------------------------------------ NameSet

void NameSet::copy_from(const NameSet& o) {
  arena_.copy_from(o.arena_);
  slots_ = o.slots_;
  size_ = o.size_;
}

uint64_t NameSet::hash(std::string_view s) {
  // Eight bytes at a time (names are short), then an avalanche: names share
  // long prefixes and differ in their last digits.
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xc2b2ae3d27d4eb4full);
  auto mix = [&h](uint64_t w) {
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    mix(w);
  }
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// Load factor at most 13/16: slots stay 8 bytes per 0.8 names, and linear
// probing with a 32-bit tag rarely touches more than one cache line.
size_t NameSet::slots_for(size_t n) const { return (n * 16 + 12) / 13 + 1; }

void NameSet::grow(size_t min_slots) {
  size_t cap = 16;
  while (cap < min_slots) cap *= 2;
  if (cap <= slots_.size()) return;
  if (cap > kMaxSlots) throw std::length_error("too many names");
  std::vector<Slot> fresh(cap);
  size_t mask = cap - 1;
  // The home slot is a function of the tag alone, so growing never reads the
  // texts back (Note [Name set slots]).
  for (const Slot& sl : slots_) {
    if (!sl.tag) continue;
    size_t i = home(sl.tag, mask);
    while (fresh[i].tag) i = (i + 1) & mask;
    fresh[i] = sl;
  }
  slots_.swap(fresh);
}

void NameSet::reserve(size_t n) { grow(slots_for(size_ + n)); }

std::optional<NameRef> NameSet::find(std::string_view s) const {
  if (slots_.empty()) return std::nullopt;
  uint32_t tag = tag_of(s);
  size_t mask = slots_.size() - 1;
  for (size_t i = home(tag, mask);; i = (i + 1) & mask) {
    const Slot& sl = slots_[i];
    if (!sl.tag) return std::nullopt;
    if (sl.tag == tag) {
      NameRef r = arena_.get(sl.handle);
      if (r.view() == s) return r;
    }
  }
}

std::pair<NameRef, bool> NameSet::insert(std::string_view s) {
  if (slots_for(size_ + 1) > slots_.size()) grow(slots_for(size_ + 1));
  uint32_t tag = tag_of(s);
  size_t mask = slots_.size() - 1;
  size_t i = home(tag, mask);
  for (;; i = (i + 1) & mask) {
    Slot& sl = slots_[i];
    if (!sl.tag) break;
    if (sl.tag == tag) {
      NameRef r = arena_.get(sl.handle);
      if (r.view() == s) return {r, false};
    }
  }
  uint32_t handle = arena_.store(s);
  slots_[i].tag = tag;
  slots_[i].handle = handle;
  ++size_;
  return {arena_.get(handle), true};
}

// ---------------------------------------------------------------- Namespace

bool Namespace::is_illegal(const std::string& name, const Object* obj) const {
  const NameRules& r = name_rules();
  if (r.keywords.count(name)) return true;
  if (r.builtins.count(name)) return !(obj && *obj && obj->iface()->is_builtin(obj->get(), name));
  const Object* cb = nullptr;
  if (r.is_custom_builtin(name, &cb)) return !(obj && *obj && *cb && obj->is(*cb));
  return false;
}

namespace {
// Where the "_<digits>" suffix of a clean candidate starts, torch.fx style
// (regex (.*)_(\d+)$, greedy; int() drops leading zeros; suffixes of more
// than 18 significant digits are not split). Sets `p` to the first digit and
// `nz` to the first significant digit; false when there is no split.
bool split_suffix(std::string_view cand, size_t* p_out, size_t* nz_out) {
  size_t end = cand.size();
  size_t p = end;
  while (p > 0 && std::isdigit(static_cast<unsigned char>(cand[p - 1]))) --p;
  if (!(p < end && p > 0 && cand[p - 1] == '_')) return false;
  size_t nz = p;
  while (nz < end - 1 && cand[nz] == '0') ++nz;
  if (end - nz > 18) return false;
  *p_out = p;
  *nz_out = nz;
  return true;
}
// A canonical "base_N" name (N without leading zeros): its base and N.
bool canonical_suffix(std::string_view name, std::string_view* base, uint64_t* num) {
  size_t p = 0, nz = 0;
  if (!split_suffix(name, &p, &nz) || nz != p) return false;
  *num = 0;
  std::from_chars(name.data() + nz, name.data() + name.size(), *num);
  *base = name.substr(0, p - 1);
  return true;
}
}  // namespace

const Namespace::BaseInfo* Namespace::base_info(std::string_view base) const {
  if (bases_.empty()) return nullptr;
  auto it = bases_.find(std::string(base));
  return it == bases_.end() ? nullptr : &it->second;
}

bool Namespace::is_used(std::string_view name) const {
  std::string_view base;
  uint64_t num;
  if (canonical_suffix(name, &base, &num)) {  // Note [Generated name runs]
    const BaseInfo* info = base_info(base);
    if (!info) return false;  // no b_N of this base is indexed or generated
    if (num >= 1 && num < info->hint) return true;
    if (num > info->max_indexed) return false;
  }
  return used_.contains(name);
}

NameRef Namespace::insert_indexed(std::string_view name) {
  std::string_view base;
  uint64_t num;
  if (canonical_suffix(name, &base, &num)) {
    BaseInfo& info = bases_[std::string(base)];
    info.max_indexed = std::max(info.max_indexed, num);
  }
  return used_.insert(name).first;
}

bool Namespace::keeps(std::string_view name, const Object* obj) const {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char c : name)
    if (!(c < 0x80 && is_ascii_alnum_(c))) return false;
  // Note [Per-base counters]: fx_2 keeps every clean, free, legal name as written.
  // A name ending in a digit is never reserved unless NameRules says some reserved name is.
  if (dialect() == Dialect::fx_2)
    return (!(std::isdigit(static_cast<unsigned char>(name.back())) && !name_rules().digit_suffixed_reserved) &&
                is_illegal(std::string(name), obj)
                ? false
                : !is_used(name));
  size_t p = 0, nz = 0;
  bool suffixed = split_suffix(name, &p, &nz);
  if (suffixed && nz != p) return false;  // would be normalized
  if ((!suffixed || name_rules().digit_suffixed_reserved) && is_illegal(std::string(name), obj)) return false;
  return !is_used(name);
}

NameRef Namespace::create_name(std::string_view candidate_in, const void* key, const Object* obj,
                               const std::function<bool(std::string_view)>* veto) {
  if (key) {
    auto it = obj_to_name_.find(key);
    if (it != obj_to_name_.end()) return it->second;
  }
  // Replace each run of characters illegal in an identifier by one '_'
  // (copy-free when the candidate is already clean).
  bool clean = !candidate_in.empty();
  for (unsigned char c : candidate_in) clean = clean && c < 0x80 && is_ascii_alnum_(c);
  std::string cand;
  if (clean) {
    cand.assign(candidate_in.data(), candidate_in.size());
  } else {
    cand.reserve(candidate_in.size() + 1);
    bool in_run = false;
    for (unsigned char c : candidate_in) {
      if (c < 0x80 && is_ascii_alnum_(c)) {
        cand.push_back(static_cast<char>(c));
        in_run = false;
      } else if (!in_run) {
        cand.push_back('_');
        in_run = true;
      }
    }
  }
  const bool fx2 = dialect() == Dialect::fx_2;
  if (cand.empty()) {
    if (!fx2) throw std::out_of_range("string index out of range");
    cand = "_unnamed";  // Note [Per-base counters]
  }
  if (std::isdigit(static_cast<unsigned char>(cand[0]))) cand.insert(cand.begin(), '_');
  if (fx2) return create_name_fx2(std::move(cand), key, obj, veto);

  size_t base_len = cand.size();
  uint64_t num = 0;
  size_t p = 0, nz = 0;
  if (split_suffix(cand, &p, &nz)) {
    base_len = p - 1;
    std::from_chars(cand.data() + nz, cand.data() + cand.size(), num);
    if (nz != p) cand.erase(p, nz - p);  // normalized "base_N"
  }

  const NameRules& rules = name_rules();
  auto illegal = [&](const std::string& name, bool suffixed) {
    return (!suffixed || rules.digit_suffixed_reserved) && is_illegal(name, obj);
  };
  bool suffixed = base_len != cand.size();
  // Common case: the candidate is free and legal -- one hash probe.
  if (!illegal(cand, suffixed) && !is_used(cand)) {
    if (veto && (*veto)(cand)) return NameRef();
    NameRef stored = insert_indexed(cand);
    if (key) obj_to_name_.emplace(key, stored);
    return stored;
  }
  {
    // Search base_{num+1}, base_{num+2}, ... (Note [Linear-time naming]).
    cand.resize(base_len);
    uint64_t start = num + 1;
    uint64_t& hint = bases_[cand].hint;  // (a reference: bases_ is not modified below)
    bool from_hint = start <= hint;
    uint64_t k = from_hint ? hint : start;
    cand.push_back('_');
    size_t stem = cand.size();
    char digits[24];
    NameRef stored;
    for (;; ++k) {
      auto res = std::to_chars(digits, digits + sizeof(digits), k);
      cand.resize(stem);
      cand.append(digits, static_cast<size_t>(res.ptr - digits));
      if (illegal(cand, true) || is_used(cand)) continue;
      if (veto && (*veto)(cand)) return NameRef();
      if (from_hint && !rules.digit_suffixed_reserved) {
        // Recorded by the hint alone (Note [Generated name runs]).
        stored = used_.store_unindexed(cand);
        ++generated_;
      } else {
        stored = insert_indexed(cand);
      }
      break;
    }
    if (from_hint) hint = k + 1;
    if (key) obj_to_name_.emplace(key, stored);
    return stored;
  }
}

namespace {
// torch.fx 2.x's suffix split (regex (.+)_(\d+)$): the base's length and the
// suffix digits without leading zeros ("" for 0); false when there is none.
bool split_suffix_fx2(std::string_view cand, size_t* base_len, std::string_view* digits) {
  size_t p = cand.size();
  while (p > 0 && std::isdigit(static_cast<unsigned char>(cand[p - 1]))) --p;
  if (!(p < cand.size() && p >= 2 && cand[p - 1] == '_')) return false;
  *base_len = p - 1;
  size_t nz = p;
  while (nz < cand.size() && cand[nz] == '0') ++nz;
  *digits = cand.substr(nz);
  return true;
}
// Adds one to a decimal digit string ("" is 0).
void increment_digits(std::string& d) {
  size_t i = d.size();
  while (i > 0 && d[i - 1] == '9') d[--i] = '0';
  if (i == 0) d.insert(d.begin(), '1');
  else ++d[i - 1];
}
}  // namespace

void Namespace::note_created_fx2(std::string_view name) {
  size_t base_len = 0;
  std::string_view digits;
  if (split_suffix_fx2(name, &base_len, &digits)) bases_[std::string(name.substr(0, base_len))].counter = std::string(digits);
}

NameRef Namespace::create_name_fx2(std::string cand, const void* key, const Object* obj,
                                   const std::function<bool(std::string_view)>* veto) {
  size_t base_len = cand.size();
  std::string_view digits;
  const bool suffixed = split_suffix_fx2(cand, &base_len, &digits);
  NameRef stored;
  if (!is_illegal(cand, obj) && !is_used(cand)) {
    if (veto && (*veto)(cand)) return NameRef();
    if (suffixed) bases_[cand.substr(0, base_len)].counter = std::string(digits);
    stored = insert_indexed(cand);
  } else {
    // A vetoing caller (codegen's fast path) does not know every name that
    // set the counters: it must re-ask with its namespace complete.
    if (veto) return NameRef();
    cand.resize(base_len);
    std::string counter = bases_[cand].counter;
    cand.push_back('_');
    const size_t stem = cand.size();
    for (;;) {
      increment_digits(counter);
      cand.resize(stem);
      cand += counter;
      if (is_illegal(cand, obj) || is_used(cand)) continue;
      break;
    }
    BaseInfo& info = bases_[cand.substr(0, stem - 1)];
    info.counter = counter;
    // Note [Generated name runs]: a name that extends the base's run of taken
    // base_1 .. base_{hint-1} is recorded by the hint alone, so auto-naming
    // a million `add` nodes touches no table here either.
    uint64_t k = 0;
    if (counter.size() <= 18 && !name_rules().digit_suffixed_reserved &&
        std::from_chars(counter.data(), counter.data() + counter.size(), k).ec == std::errc() && k == info.hint) {
      stored = used_.store_unindexed(cand);
      ++generated_;
      info.hint = k + 1;
    } else {
      stored = insert_indexed(cand);
    }
  }
  if (key) obj_to_name_.emplace(key, stored);
  return stored;
}

}  // namespace fxcpp
