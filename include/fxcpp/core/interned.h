// fxcpp core: interned strings for node targets.
//
// Note [Interned targets]
// ~~~~~~~~~~~~~~~~~~~~~~~
// String targets (method names, module paths, attribute names) repeat across
// nodes and graphs, so they are interned in one process-wide, mutex-guarded
// pool and a target costs one pointer. The pool only grows: it holds each
// distinct target string once for the life of the process (like Python's own
// interned identifiers).
#pragma once

#include <string>
#include <string_view>

namespace fxcpp {

/// An immutable string stored once per process. 8 bytes; comparison is by
/// content (pointer equality implies it). Implicitly a `const std::string&`.
class InternedString {
 public:
  InternedString();  ///< the empty string
  InternedString(std::string_view s);  // NOLINT: implicit by design
  InternedString(const std::string& s) : InternedString(std::string_view(s)) {}  // NOLINT
  InternedString(const char* s) : InternedString(std::string_view(s)) {}         // NOLINT
  const std::string& get() const { return *p_; }
  operator const std::string&() const { return *p_; }  // NOLINT
  const char* c_str() const { return p_->c_str(); }
  const char* data() const { return p_->data(); }
  size_t size() const { return p_->size(); }
  bool empty() const { return p_->empty(); }
  char operator[](size_t i) const { return (*p_)[i]; }
  std::string::const_iterator begin() const { return p_->begin(); }
  std::string::const_iterator end() const { return p_->end(); }
  bool operator==(const InternedString& o) const { return p_ == o.p_; }
  bool operator!=(const InternedString& o) const { return p_ != o.p_; }
  friend bool operator==(const InternedString& a, const std::string& b) { return a.get() == b; }
  friend bool operator==(const std::string& a, const InternedString& b) { return a == b.get(); }
  friend bool operator==(const InternedString& a, const char* b) { return a.get() == b; }
  friend bool operator!=(const InternedString& a, const std::string& b) { return a.get() != b; }
  friend bool operator!=(const InternedString& a, const char* b) { return a.get() != b; }
  friend std::string operator+(const InternedString& a, const std::string& b) { return a.get() + b; }
  friend std::string operator+(const std::string& a, const InternedString& b) { return a + b.get(); }
  friend std::string operator+(const char* a, const InternedString& b) { return a + b.get(); }
  friend std::string operator+(const InternedString& a, const char* b) { return a.get() + b; }
  /// Stable identity of the content (for hashing).
  const void* id() const { return p_; }
  /// The string whose id() is `id` (which must come from id()). O(1).
  static InternedString from_id(const void* id) {
    InternedString s;
    s.p_ = static_cast<const std::string*>(id);
    return s;
  }

 private:
  const std::string* p_;
};

}  // namespace fxcpp
