// Checked reads of the JSON documents files hold: the .fxpt reader's graph.json (load.cpp)
// and the .pt2 reader's archive records (pt2.cpp), one set of accessors for both.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fxcpp/torch/ops.h"

namespace fxcpp::torch {

/// The checked accessors of a parsed document from a file. Each returns the value asked for
/// or throws FormatError "<Doc::kPrefix><where> <what is wrong>", where `where` names the
/// place in the document ("nodes[3].args"). `Doc` is a tag type with `static constexpr const
/// char* kPrefix` (the document's name in errors). Stateless; each O(1), ints_field O(length).
template <class Doc>
struct JsonFields {
  using Json = nlohmann::ordered_json;

  [[noreturn]] static void bad(const std::string& what) { throw FormatError(std::string(Doc::kPrefix) + what); }

  /// obj[key]; obj must be an object that has it.
  static const Json& field(const Json& obj, const char* key, const std::string& where) {
    if (!obj.is_object()) bad(where + " is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) bad(where + " has no '" + key + "'");
    return *it;
  }
  /// obj[key], or null where it is missing or null; obj must be an object.
  static const Json* opt_field(const Json& obj, const char* key, const std::string& where) {
    if (!obj.is_object()) bad(where + " is not an object");
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  static std::string as_str(const Json& v, const std::string& where) {
    if (!v.is_string()) bad(where + " is not a string");
    return v.get<std::string>();
  }
  static std::string str_field(const Json& obj, const char* key, const std::string& where) {
    return as_str(field(obj, key, where), where + "." + key);
  }
  /// An integer that fits in int64 (a larger unsigned one is refused, not wrapped).
  static int64_t as_int(const Json& v, const std::string& where) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      bad(where + " is not an integer");
    return v.get<int64_t>();
  }
  static int64_t int_field(const Json& obj, const char* key, const std::string& where) {
    return as_int(field(obj, key, where), where + "." + key);
  }
  /// An array of at most 64 int64 integers (sizes, strides).
  static std::vector<int64_t> ints_field(const Json& obj, const char* key, const std::string& where) {
    const Json& v = field(obj, key, where);
    if (!v.is_array()) bad(where + "." + key + " is not an array");
    if (v.size() > 64) bad(where + "." + key + " has more than 64 dimensions");
    std::vector<int64_t> out;
    for (auto& x : v) {
      if (!x.is_number_integer() || (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX)))
        bad(where + "." + key + " holds a non-integer");
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  static bool as_bool(const Json& v, const std::string& where) {
    if (!v.is_boolean()) bad(where + " is not a bool");
    return v.get<bool>();
  }
  /// A number, or torch.export's spellings of the non-finite ones ("Infinity", "-Infinity", "NaN").
  static double as_float(const Json& v, const std::string& where) {
    if (v.is_number()) return v.get<double>();
    if (v == "Infinity") return std::numeric_limits<double>::infinity();
    if (v == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (v == "NaN") return std::numeric_limits<double>::quiet_NaN();
    bad(where + " is not a float");
  }
  static const Json& as_array(const Json& v, const std::string& where) {
    if (!v.is_array()) bad(where + " is not an array");
    return v;
  }
  /// A serialized union: an object with exactly one key, the tag; (tag, value).
  static std::pair<std::string, const Json*> as_union(const Json& v, const std::string& where) {
    if (!v.is_object() || v.size() != 1) bad(where + " is not a tagged union (an object with one key)");
    return {v.begin().key(), &v.begin().value()};
  }
};

}  // namespace fxcpp::torch
