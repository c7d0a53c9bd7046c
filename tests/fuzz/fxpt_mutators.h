// Structure-aware mutators of .fxpt files, shared by the C++ fuzz test
// (Load.FuzzedFilesFailCleanly) and the libFuzzer target's custom mutator:
// edits of the zip container's fields rebuilt with zip_builder.h, and of
// graph.json, parsed and re-serialised with odd strings, numbers and values.
// Header-only (zlib, nlohmann_json).
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../cpp_torch/zip_builder.h"

namespace fxcpp::torch::fxpt_mutators {

using Json = nlohmann::ordered_json;
using ziptest::build_zip;
using ziptest::ZipEnd;
using ziptest::ZipLayout;
using ziptest::ZipRecord;

// Odd strings for graph.json. "\x01raw:" entries are written raw into the
// text, unescaped (invalid UTF-8, a NUL).
inline const std::vector<std::string> kOddStrings = {
    "", "x", "\x01raw:\xff\xfe", "\x01raw:\xc3\x28", "\x01raw:\xed\xa0\x80", "\x01raw:\xf4\x90\x80\x80", "\x01raw:a\\u0000b",
    "x=__import__('os').system('touch /tmp/fxcpp-pwned')", "a\"b", "a\nb", "a'b", "a.b", "a..b", ".a", "1a", "__import__",
    "self", "forward", "aten::from_file", "aten::as_strided", "aten::copy_", "aten::_sparse_coo_tensor_unsafe",
    "aten::empty.memory_format", "aten::add.Tensor", "aten::add.", "aten::add.NoSuch", "aten::", "::", "os.system",
    "operator.getitem", "operator.floordiv", "getattr", "builtins.eval", "data/0", "data/4", "../graph.json",
    "graph.json", "version", "float32", "int64", "bool", "complex128", "float128", "channels_last", "cpu", "cuda:0",
    "meta", "sparse_coo", "strided", "shape", "ndim", "dtype", "device", "inf", "-inf", "nan", "parameter",
    "buffer", "constant", "placeholder", "get_attr", "call_function", "call_module", "output", "node", "list",
    "tuple", "dict", "slice", "tensor_meta", std::string(5000, 'a'), std::string("\x01raw:") + std::string(70, '\\') + "\\"};

// Odd numbers, written as JSON text.
inline const std::vector<std::string> kOddNumbers = {
    "0", "-0", "1", "-1", "2", "3", "-7", "255", "256", "65536", "4294967295", "4294967296", "2147483648",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "4611686018427387904", "281474976710656", "1e999", "-1e999",
    "1e308", "1e-320", "0.5", "-0.0", "1.5", "3.0", "123456789012345678901234567890"};

// Odd values of another type.
inline const std::vector<std::string> kOddValues = {
    "null", "true", "false", "[]", "{}", "[[]]", "{\"node\":\"x\"}", "{\"node\":\"output\"}", "{\"list\":[1,2]}",
    "{\"tuple\":[]}", "{\"dict\":[[\"a\",1]]}", "{\"slice\":[null,null,null]}", "{\"float\":\"nan\"}",
    "{\"float\":1e308}", "{\"dtype\":\"float64\"}", "{\"device\":\"cpu\"}", "{\"layout\":\"sparse_coo\"}",
    "{\"memory_format\":\"preserve_format\"}", "{\"tensor_meta\":{}}", "{\"list\":[{\"node\":\"x\"}]}"};

template <typename T>
const T& pick(  // v is not empty
const std::vector<T>& v, std::mt19937_64& rng) {
  return v[rng() % v.size()];
}

// Every path in `j` (json pointers), split by what is there.
inline void paths(const Json& j, const Json::json_pointer& at, std::vector<Json::json_pointer>& strings,
           std::vector<Json::json_pointer>& numbers, std::vector<Json::json_pointer>& all,
           std::vector<Json::json_pointer>& containers) {
  all.push_back(at);
  if (j.is_string()) strings.push_back(at);
  if (j.is_number()) numbers.push_back(at);
  if (j.is_object()) {
    containers.push_back(at);
    for (auto it = j.begin(); it != j.end(); ++it) paths(it.value(), at / it.key(), strings, numbers, all, containers);
  } else if (j.is_array()) {
    containers.push_back(at);
    for (size_t i = 0; i < j.size(); ++i) paths(j[i], at / i, strings, numbers, all, containers);
  }
}

// graph.json with 1-3 values replaced, removed, duplicated or renamed.
inline std::string mutate_json(const std::string& text, std::mt19937_64& rng, std::string& what) {
  Json doc = Json::parse(text);
  std::vector<std::pair<std::string, std::string>> raw;  // marker -> text written in its place
  auto marker = [&](const std::string& replacement) {
    std::string m = "@@raw" + std::to_string(raw.size()) + "@@";
    raw.emplace_back("\"" + m + "\"", replacement);
    return m;
  };
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    std::vector<Json::json_pointer> strings, numbers, all, containers;
    paths(doc, Json::json_pointer(), strings, numbers, all, containers);
    switch (rng() % 6) {
      case 0:
        if (!strings.empty()) {
          auto& at = pick(strings, rng);
          std::string odd = pick(kOddStrings, rng);
          what += " string " + at.to_string();
          doc[at] = odd.rfind("\x01raw:", 0) == 0 ? marker("\"" + odd.substr(5) + "\"") : odd;
        }
        break;
      case 1:
        if (!numbers.empty()) {
          auto& at = pick(numbers, rng);
          what += " number " + at.to_string();
          doc[at] = marker(pick(kOddNumbers, rng));
        }
        break;
      case 2: {
        auto& at = pick(all, rng);
        what += " value " + at.to_string();
        doc[at] = marker(pick(kOddValues, rng));
        break;
      }
      case 3: {  // remove a member or an element
        auto& at = pick(all, rng);
        if (at.empty()) break;
        what += " remove " + at.to_string();
        Json& parent = doc[at.parent_pointer()];
        if (parent.is_object()) parent.erase(at.back());
        else parent.erase(static_cast<size_t>(std::stoul(at.back())));
        break;
      }
      case 4: {  // duplicate or swap array elements (nodes, tensors, storages, arguments)
        if (containers.empty()) break;
        auto& at = pick(containers, rng);
        Json& c = doc[at];
        if (!c.is_array() || c.empty()) break;
        size_t i = rng() % c.size(), k = rng() % c.size();
        what += " reorder " + at.to_string();
        if (rng() % 2) c.insert(c.begin() + static_cast<std::ptrdiff_t>(k), Json(c[i]));
        else std::swap(c[i], c[k]);
        break;
      }
      case 5: {  // rename a key
        if (containers.empty()) break;
        auto& at = pick(containers, rng);
        Json& c = doc[at];
        if (!c.is_object() || c.empty()) break;
        auto it = c.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng() % c.size()));
        std::string key = it.key();
        Json v = it.value();
        c.erase(key);
        std::string to = pick(kOddStrings, rng);
        if (to.rfind("\x01raw:", 0) == 0) to = "tensor_meta";
        what += " rename " + (at / key).to_string();
        c[to] = v;
        break;
      }
    }
  }
  std::string out = doc.dump();
  for (auto& [m, r] : raw)
    for (size_t p = out.find(m); p != std::string::npos; p = out.find(m, p + r.size())) out.replace(p, m.size(), r);
  return out;
}

// Interesting sizes and offsets for a field that holds `n`.
inline uint64_t odd_size(uint64_t n, uint64_t file, std::mt19937_64& rng) {
  const uint64_t v[] = {0, 1, n - 1, n + 1, n + 64, n / 2, 0xFFFFFFFFu, 0x100000000u, file, file - 1,
                        uint64_t(1) << 63, ~uint64_t(0), n * 2};
  return v[rng() % (sizeof v / sizeof v[0])];
}

// 1-3 edits of the container.
inline std::string mutate_zip(std::vector<ZipRecord> rs, std::mt19937_64& rng, std::string& what) {
  ZipEnd end;
  ZipLayout lay;
  std::string honest = build_zip(rs, end, &lay);
  std::vector<std::pair<uint64_t, uint8_t>> patches;
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const size_t i = rng() % rs.size();
    ZipRecord& r = rs[i];
    const uint64_t n = r.data.size();
    switch (rng() % 16) {
      case 0: what += " method"; (rng() % 2 ? r.method : r.local_method.emplace()) = pick(std::vector<uint16_t>{1, 8, 9, 12, 14, 93, 99}, rng); break;
      case 1: what += " crc"; (rng() % 3 == 0 ? r.crc : rng() % 2 ? r.local_crc : r.descriptor_crc) = static_cast<uint32_t>(rng()); break;
      case 2: what += " data byte"; if (n) r.data[rng() % n] ^= static_cast<char>(1 + rng() % 255); break;
      case 3: what += " flags"; (rng() % 2 ? r.flags : r.local_flags.emplace()) ^= static_cast<uint16_t>(1u << (rng() % 16)); break;
      case 4: what += " size"; (rng() % 2 ? r.size : r.csize) = odd_size(n, honest.size(), rng); break;
      case 5: what += " local/descriptor size"; (rng() % 2 ? r.local_size : r.descriptor_size) = odd_size(n, honest.size(), rng); break;
      case 6: {  // overlap: the directory points into another record
        what += " overlap";
        if (lay.header.empty()) break;
        size_t k = rng() % lay.header.size();
        r.offset = rng() % 2 ? lay.header[k] : lay.data[k] + rng() % 64;
        if (rng() % 2) r.in_file = false;
        break;
      }
      case 7: {  // duplicate an entry (same name), maybe with other data
        what += " duplicate";
        ZipRecord copy = r;
        if (rng() % 2 && !copy.data.empty()) copy.data[rng() % copy.data.size()] ^= 1;
        rs.insert(rs.begin() + static_cast<std::ptrdiff_t>(rng() % (rs.size() + 1)), std::move(copy));
        break;
      }
      case 8: {  // names
        what += " name";
        switch (rng() % 5) {
          case 0: r.name = "other/" + r.name.substr(r.name.find('/') + 1); break;
          case 1: r.local_name = r.name + "x"; break;
          case 2: r.name += "/"; break;
          case 3: r.name.push_back('\0'); break;
          case 4: r.name = rs[rng() % rs.size()].name; break;
        }
        break;
      }
      case 9: what += " zip64"; r.zip64 = !r.zip64; break;
      case 10: what += " descriptor form"; if (rng() % 2) r.descriptor_signature = false; else r.flags &= ~0x0008; break;
      case 11: what += " missing"; (rng() % 2 ? r.in_file : r.in_directory) = false; break;
      case 12: {  // end records
        what += " end";
        switch (rng() % 6) {
          case 0: end.zip64 = !end.zip64; break;
          case 1: end.sentinels = true; break;
          case 2: end.entries = odd_size(rs.size(), honest.size(), rng); break;
          case 3: end.cd_size = odd_size(lay.cd_size, honest.size(), rng); break;
          case 4: end.cd_offset = odd_size(lay.cd_offset, honest.size(), rng); break;
          case 5: end.comment = rng() % 2 ? std::string("PK\x05\x06", 4) + std::string(18, '\0') : "comment"; break;
        }
        break;
      }
      case 13: what += " between"; end.between = rng() % 2 ? std::string("PK\x05\x06", 4) : std::string(1 + rng() % 100, 'Z'); break;
      case 14: what += " align"; r.align = pick(std::vector<size_t>{0, 1, 3, 4096}, rng); break;
      case 15: {  // a raw byte in a header or the central directory
        what += " header byte";
        if (lay.header.empty() || lay.cd_size == 0) break;
        uint64_t base = rng() % 2 ? lay.header[rng() % lay.header.size()] : lay.cd_offset + rng() % lay.cd_size;
        patches.emplace_back(base + rng() % 46, static_cast<uint8_t>(rng()));
        break;
      }
    }
  }
  std::string out = build_zip(rs, end);
  for (auto& [at, byte] : patches)
    if (at < out.size()) out[at] = static_cast<char>(byte);
  return out;
}

}  // namespace fxcpp::torch::fxpt_mutators
