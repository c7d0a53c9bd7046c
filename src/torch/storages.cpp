// Storages of archive records, mapped or copied (storages.h; Note
// [Memory-mapped weights] in zip_reader.cpp).
#include "storages.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <set>
#include <string>
#include <unordered_map>

#include "fxcpp/torch/ops.h"
#include "fxcpp/torch/policy.h"

namespace fxcpp::torch {

namespace {

// The DataPtr context of a mapped record: a reference to its mapping.
void release_mapping(void* ctx) { delete static_cast<std::shared_ptr<const zip::Source>*>(ctx); }

}  // namespace

c10::Storage record_storage(const zip::Reader& reader, const zip::Entry& entry, bool map) {
  const size_t n = static_cast<size_t>(entry.size);
  if (map && entry.data % kMapAlignment == 0) {
    if (const char* p = reader.map(entry)) {  // CRC-checked
      at::DataPtr data(const_cast<char*>(p), new std::shared_ptr<const zip::Source>(reader.source()), &release_mapping,
                       c10::Device(c10::DeviceType::CPU));
      return c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(data), nullptr, false);
    }
  }
  at::DataPtr data = c10::GetCPUAllocator()->allocate(n);
  reader.read(entry, data.get());
  return c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(data), nullptr, false);
}

bool is_mapped(const c10::Storage& storage) { return storage.data_ptr().get_deleter() == &release_mapping; }

Extent check_tensor_extent(c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset, uint64_t itemsize,
                           uint64_t storage_bytes) {
  if (offset < 0 || sizes.size() != strides.size()) return Extent::NegativeSizeOrStride;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) return Extent::NegativeSizeOrStride;
    empty = empty || sizes[d] == 0;
  }
  uint64_t at = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(offset), itemsize, &at) || at > storage_bytes)
    return Extent::OffsetPastStorage;
  if (empty) return Extent::Ok;  // no element is read
  uint64_t last = static_cast<uint64_t>(offset), step = 0, end = 0;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (__builtin_mul_overflow(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &step) ||
        __builtin_add_overflow(last, step, &last))
      return Extent::Overflows;
  if (__builtin_add_overflow(last, uint64_t(1), &end) || __builtin_mul_overflow(end, itemsize, &end) ||
      end > storage_bytes)
    return Extent::PastStorage;
  uint64_t numel = 1, bytes = 0;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel)) return Extent::TooManyBytes;
  if (__builtin_mul_overflow(numel, itemsize, &bytes) || bytes > kMaxTensorBytes) return Extent::TooManyBytes;
  return Extent::Ok;
}

void copy_written_tensors(const Graph& graph, std::vector<NamedTensor>& tensors) {
  bool any_mapped = false;
  for (const NamedTensor& t : tensors) any_mapped = any_mapped || (t.tensor.defined() && is_mapped(t.tensor.storage()));
  if (!any_mapped) return;

  // For each value, the get_attr tensors it may alias: a get_attr its own;
  // an operator whose schema says a result aliases an input, or a primitive
  // (getitem, getattr), those of its arguments; any other operator none (its
  // results are new tensors).
  std::unordered_map<const Node*, std::set<std::string>> roots;
  std::set<std::string> written;
  auto roots_of = [&](const Argument& a, std::set<std::string>& out) {
    a.for_each_node([&](Node* m) {
      auto it = roots.find(m);
      if (it != roots.end()) out.insert(it->second.begin(), it->second.end());
    });
  };
  for (const Node* n : graph.nodes()) {
    if (n->op() == Op::GetAttr) {
      roots[n].insert(n->target().str().get());
      continue;
    }
    if (n->op() != Op::CallFunction) continue;
    std::set<std::string> all;
    for (const Argument& a : n->args()) roots_of(a, all);
    for (const auto& kv : n->kwargs()) roots_of(kv.second, all);
    if (all.empty()) continue;
    const AtenOp* op = as_aten_op(n->target().fn());
    if (!op) {
      roots[n] = std::move(all);  // a primitive: getitem and getattr pass their argument through
      continue;
    }
    const c10::FunctionSchema& schema = op->handle.schema();
    const auto& params = schema.arguments();
    auto args = n->args();
    for (size_t i = 0; i < params.size(); ++i) {
      if (!writes_tensor(params[i].alias_info())) continue;
      if (i < args.size()) roots_of(args[i], written);
      for (const auto& kv : n->kwargs())
        if (kv.first == params[i].name()) roots_of(kv.second, written);
    }
    bool aliases = false;
    for (const c10::Argument& r : schema.returns()) aliases = aliases || r.alias_info() != nullptr;
    if (aliases) roots[n] = std::move(all);
  }
  if (written.empty()) return;

  std::unordered_map<const c10::StorageImpl*, c10::Storage> copies;
  for (NamedTensor& t : tensors) {
    if (!written.count(t.name) || !t.tensor.defined() || !is_mapped(t.tensor.storage())) continue;
    const c10::Storage& old = t.tensor.storage();
    auto it = copies.find(old.unsafeGetStorageImpl());
    if (it == copies.end()) {
      const size_t n = old.nbytes();
      at::DataPtr data = c10::GetCPUAllocator()->allocate(n);
      if (n) std::memcpy(data.get(), old.data(), n);
      it = copies.emplace(old.unsafeGetStorageImpl(),
                          c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(data), nullptr, false)).first;
    }
    // Every tensor of that storage moves to the copy, written or not: views of one storage stay views.
  }
  for (NamedTensor& t : tensors) {
    if (!t.tensor.defined()) continue;
    auto it = copies.find(t.tensor.storage().unsafeGetStorageImpl());
    if (it == copies.end()) continue;
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(it->second), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     t.tensor.dtype());
    impl->set_sizes_and_strides(t.tensor.sizes(), t.tensor.strides(), t.tensor.storage_offset());
    t.tensor = at::Tensor(std::move(impl));
  }
}

}  // namespace fxcpp::torch
