// A strict reader of the zip container that .fxpt and .pt2 files use (private to the
// torch layer; Note [Strict zip container] in zip_reader.cpp).
//
//   zip::Reader r(std::make_shared<zip::MemorySource>(data, size));  // checks the whole structure
//   const zip::Entry* e = r.find("graph.json");                      // name under the top folder
//   std::vector<char> bytes(e->size);
//   r.read(*e, bytes.data());                                        // copies and verifies CRC-32
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fxcpp/torch/ops.h"

namespace fxcpp::torch::zip {

/// At most this many entries in one archive.
constexpr uint64_t kMaxEntries = uint64_t(1) << 20;
/// At most this many bytes in one entry's name.
constexpr size_t kMaxNameLength = 1024;
/// At most this many bytes of central directory.
constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t(256) << 20;

/// Random-access bytes of an archive: a file, a buffer (later a memory mapping).
class Source {
 public:
  virtual ~Source() = default;
  /// The number of bytes.
  virtual uint64_t size() const = 0;
  /// Copies bytes [pos, pos + n) to `dst`; the caller checked pos + n <= size().
  /// Throws FormatError when the bytes cannot be read.
  virtual void read(uint64_t pos, void* dst, size_t n) const = 0;
  /// The bytes [pos, pos + n) in place when the source holds them in memory,
  /// else null (the hook a memory-mapped backend implements to avoid copies).
  virtual const char* view(uint64_t pos, size_t n) const { return nullptr; }
};

/// A regular file, read with pread. Throws FormatError when it cannot be
/// opened or is not a regular file.
class FileSource final : public Source {
 public:
  /// Opens `path` read-only.
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  /// The file's size when it was opened.
  uint64_t size() const override { return size_; }
  /// pread until `n` bytes are read; a short read is a FormatError.
  void read(uint64_t pos, void* dst, size_t n) const override;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

/// A regular file mapped into memory (Note [Memory-mapped weights] in
/// zip_reader.cpp): one private, copy-on-write mapping of the whole file per
/// open(), so modules loaded from one file never see each other's writes
/// (Note [Weights no program can write for another]). Structures are read with pread (read()); view() points
/// into the mapping, so records can back tensors without a copy.
class MappedFile final : public Source {
 public:
  /// A new private mapping of `path` (the page cache shares its clean pages
  /// with every other mapping of the file). Throws
  /// FormatError when the file cannot be opened or is not a regular file;
  /// returns null when it cannot be mapped (an empty file, mmap failing: the
  /// caller reads it with FileSource instead).
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile() override;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  /// The file's size when it was mapped.
  uint64_t size() const override { return size_; }
  /// pread until `n` bytes are read (does not fault the mapping's pages in).
  void read(uint64_t pos, void* dst, size_t n) const override;
  /// A pointer into the mapping (private, copy-on-write: writing through it
  /// never changes the file, but is seen by every user of this mapping).
  const char* view(uint64_t pos, size_t n) const override { return base_ + pos; }
  /// The first byte of the mapping (for tests and for telling mapped tensors apart).
  const char* base() const { return base_; }

 private:
  MappedFile() = default;
  int fd_ = -1;
  char* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

/// Bytes the caller keeps alive while the Source is used.
class MemorySource final : public Source {
 public:
  /// Views `size` bytes at `data` (not copied).
  MemorySource(const void* data, size_t size) : data_(static_cast<const char*>(data)), size_(size) {}
  /// The buffer's size.
  uint64_t size() const override { return size_; }
  /// memcpy from the buffer.
  void read(uint64_t pos, void* dst, size_t n) const override;
  /// A pointer into the buffer.
  const char* view(uint64_t pos, size_t n) const override { return data_ + pos; }

 private:
  const char* data_;
  size_t size_;
};

/// One record of the archive, as checked by Reader.
struct Entry {
  std::string name;        ///< the full name in the archive ("model/data/0")
  uint64_t header = 0;     ///< offset of its local header
  uint64_t data = 0;       ///< offset of its first data byte
  uint64_t size = 0;       ///< its byte count (stored: compressed == uncompressed)
  uint64_t end = 0;        ///< one past its last byte (after the data descriptor, if any)
  uint32_t crc32 = 0;      ///< the CRC-32 the central directory gives
  bool zip64 = false;      ///< its central-directory entry has a zip64 extra field
};

/// The structure of one archive, checked in full by the constructor (every
/// rule of Note [Strict zip container]); records are read on demand.
class Reader {
 public:
  /// Reads and checks the end record(s), the central directory and every
  /// local header. Throws FormatError saying what is wrong. O(entries +
  /// central directory bytes); reads no record data.
  explicit Reader(std::shared_ptr<const Source> source);

  /// The record called `record` under the archive's top-level folder, or null.
  const Entry* find(const std::string& record) const;
  /// Every entry, in central-directory order.
  const std::vector<Entry>& entries() const { return entries_; }
  /// The top-level folder every name starts with, with its slash ("model/").
  const std::string& prefix() const { return prefix_; }
  /// The archive's size in bytes.
  uint64_t file_size() const { return source_->size(); }
  /// Copies the entry's `size` bytes to `dst` and verifies their CRC-32;
  /// throws FormatError naming the record when it does not match.
  void read(const Entry& entry, void* dst) const;
  /// The entry's bytes in place, in a MappedFile source, after their CRC-32
  /// is verified through Source::read (in chunks, so the mapping's pages are
  /// not faulted in); null when the source is not a MappedFile. Throws
  /// FormatError naming the record when the CRC-32 does not match.
  const char* map(const Entry& entry) const;
  /// The source (callers keep it alive, e.g. a MappedFile behind tensors).
  const std::shared_ptr<const Source>& source() const { return source_; }

 private:
  std::shared_ptr<const Source> source_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
  std::string prefix_;
};

/// The CRC-32 (ISO-HDLC, as zip uses) of `n` bytes, continuing from `crc`
/// (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

}  // namespace fxcpp::torch::zip
