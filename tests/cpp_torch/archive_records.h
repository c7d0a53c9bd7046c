// Test helper: the records of a .fxpt archive, read with PyTorch's reader and
// written back with PyTorch's writer, to build crafted files from a valid one.
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <string>
#include <utility>
#include <vector>

namespace fxcpp::torch::test_archive {

/// An archive's records in order, by name (without the top-level folder).
struct Records {
  std::vector<std::pair<std::string, std::string>> items;
  /// The record called `name`, added empty at the end when missing.
  std::string& operator[](const std::string& name) {
    for (auto& kv : items)
      if (kv.first == name) return kv.second;
    items.emplace_back(name, "");
    return items.back().second;
  }
};

/// Every record of the archive at `path` but "version" (the writer adds its own).
inline Records read_records(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  Records r;
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "version") continue;
    auto [data, size] = reader.getRecord(name);
    r.items.emplace_back(name, std::string(static_cast<const char*>(data.get()), size));
  }
  return r;
}

/// The bytes of an archive holding `r`, as PyTorch's writer lays it out.
inline std::string write_archive(const Records& r) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
    return n;
  });
  for (auto& kv : r.items) writer.writeRecord(kv.first, kv.second.data(), kv.second.size());
  writer.writeEndOfFile();
  return out;
}

}  // namespace fxcpp::torch::test_archive
