// The storages of an archive's records, mapped or copied, and the copies the
// runtime's writes need (private to the torch layer; Note [Memory-mapped
// weights] in zip_reader.cpp).
#pragma once

#include <c10/core/Storage.h>
#include <c10/util/ArrayRef.h>

#include <vector>

#include "fxcpp/torch/format.h"
#include "zip_reader.h"

namespace fxcpp::torch {

/// Records are mapped only when their first byte is aligned to this many
/// bytes in the file (PyTorch's writer aligns them to 64); others are copied.
constexpr uint64_t kMapAlignment = 64;

/// The storage of `entry`'s bytes, CRC-checked: viewing the mapping when
/// `map` is set, the reader's source is a zip::MappedFile and the record is
/// aligned to kMapAlignment (the storage then keeps the mapping alive), else
/// a copy in memory from the CPU allocator. Throws FormatError naming the
/// record on a CRC mismatch. O(record bytes) to check; mapping allocates nothing.
c10::Storage record_storage(const zip::Reader& reader, const zip::Entry& entry, bool map);

/// No tensor of a file may have more bytes than this (256 TiB), whatever its
/// strides: a stride of 0 lets 4 bytes back 2^62 elements, which every kernel
/// would loop over or allocate for (Note [Loading untrusted files] in load.cpp).
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 48;

/// What is wrong with a file's tensor of `sizes`, `strides` and element
/// `offset` over a storage of `storage_bytes` (Ok when nothing is): the
/// highest element addressed must lie inside the storage, the element count
/// within kMaxTensorBytes, and the offset inside the storage even when the
/// tensor has no element (data_ptr() adds it: an offset of 2^62 overflows the
/// pointer). The one check both readers (.fxpt and .pt2) apply. O(dims).
enum class Extent { Ok, NegativeSizeOrStride, Overflows, PastStorage, TooManyBytes, OffsetPastStorage };
Extent check_tensor_extent(c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset, uint64_t itemsize,
                           uint64_t storage_bytes);

/// Whether `storage` views a file mapping (made by record_storage).
bool is_mapped(const c10::Storage& storage);

/// Replaces every tensor of `tensors` that views a file mapping and that
/// `graph` may write (an argument an ATen schema marks as written, reached
/// from its get_attr node directly or through views, getitem and the like)
/// by a copy with the same sizes, strides and offset; tensors sharing a
/// storage keep sharing the copy. So the runtime (C++ or Python) never writes
/// into a mapping. O(nodes + bytes copied).
void copy_written_tensors(const Graph& graph, std::vector<NamedTensor>& tensors);

}  // namespace fxcpp::torch
