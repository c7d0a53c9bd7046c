// The strict zip reader of .fxpt and .pt2 files (zip_reader.h).
//
// Note [Strict zip container]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A .fxpt or .pt2 file is a zip archive as PyTorch's writer makes it (APPNOTE 6.3:
// local headers, stored data, optional data descriptors, a central directory,
// zip64 end records). Zip readers disagree on ambiguous archives (which of
// two end records, which of two entries of one name, a local header that
// disagrees with its central-directory entry), and a general reader inflates
// what it is told is compressed. This reader accepts exactly one reading of a
// file and refuses the rest, each with a FormatError that says what is wrong:
// * one end-of-central-directory record, at the end of the file (its comment
//   may not hold another); with zip64, the locator right before it and the
//   zip64 end record right before that, their counts and offsets agreeing
//   with the 32-bit record wherever it does not say "see zip64";
// * the central directory ends where the end records begin, and holds exactly
//   the number of entries they give (at most kMaxEntries, kMaxCentralDirectoryBytes);
// * every entry is stored (method 0), never compressed, compressed size ==
//   uncompressed size, not encrypted (flags: only "data descriptor" and
//   "UTF-8 name"), on disk 0, with well-formed extra fields;
// * names are 1..kMaxNameLength bytes without NUL, all under one top-level
//   folder ("model/..."), none repeated, none a directory;
// * each local header agrees with its central-directory entry: name, flags,
//   method; CRC and sizes too unless a data descriptor follows the data (the
//   local fields are then 0, or the same), and that descriptor agrees;
// * every byte of the file belongs to exactly one structure: local header +
//   data + descriptor of one entry, the central directory, the end records.
//   So records lie inside the file, never overlap, and nothing is hidden
//   between them (a second end record, a second archive);
// * a record's CRC-32 is checked whenever it is read.
// Sizes and offsets are checked with overflow-checked arithmetic before any
// read or allocation, so a record larger than the file is refused before
// memory is allocated for it.
#include "zip_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

namespace fxcpp::torch::zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kDescriptorSig = 0x08074b50;
constexpr size_t kEndSize = 22, kZip64EndSize = 56, kLocatorSize = 20, kCentralSize = 46, kLocalSize = 30;
constexpr uint16_t kFlagEncrypted = 0x0001, kFlagDescriptor = 0x0008, kFlagUtf8 = 0x0800;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t k32 = 0xFFFFFFFFu;
constexpr uint16_t k16 = 0xFFFFu;

[[noreturn]] void corrupt(const std::string& what) {
  throw FormatError("fxcpp::torch: corrupt model archive (.fxpt or .pt2): " + what);
}

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
uint64_t le64(const unsigned char* p) { return uint64_t(le32(p)) | (uint64_t(le32(p + 4)) << 32); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A printable form of a name from the file (control bytes escaped).
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return "'" + out + "'";
}

bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// A bounds-checked reader of a little-endian byte block.
struct Cursor {
  const unsigned char* p;
  size_t n;
  size_t at = 0;
  bool has(size_t k) const { return n - at >= k; }
  uint16_t u16() { return at += 2, le16(p + at - 2); }
  uint32_t u32() { return at += 4, le32(p + at - 4); }
  uint64_t u64() { return at += 8, le64(p + at - 8); }
};

std::vector<unsigned char> read_block(const Source& src, uint64_t pos, size_t n) {
  std::vector<unsigned char> buf(n);
  if (n) src.read(pos, buf.data(), n);
  return buf;
}

// The values of a zip64 extended-information field, in the fixed order, each
// present only when the 32/16-bit field says "see zip64".
struct Zip64Fields {
  bool present = false;
  const unsigned char* data = nullptr;
  size_t size = 0;
};

// Checks that an extra-field block is a well-formed sequence of (id, size,
// data) and returns its zip64 field, if any (at most one).
Zip64Fields parse_extra(const unsigned char* p, size_t n, const std::string& where) {
  Zip64Fields z;
  Cursor c{p, n};
  while (c.at < n) {
    if (!c.has(4)) corrupt(where + ": malformed extra field (" + std::to_string(n - c.at) + " stray bytes)");
    uint16_t id = c.u16(), len = c.u16();
    if (!c.has(len)) corrupt(where + ": extra field " + hex(id) + " runs past the extra data");
    if (id == kZip64ExtraId) {
      if (z.present) corrupt(where + ": two zip64 extra fields");
      z = {true, p + c.at, len};
    }
    c.at += len;
  }
  return z;
}

struct Interval {
  uint64_t begin, end;
  std::string what;
};

}  // namespace

// ---- CRC-32 ---------------------------------------------------------------------------

// zlib's (LibTorch links it already): about three times faster than a
// table-driven loop, and the CRC of every record read is on the load path.
uint32_t crc32(uint32_t crc, const void* data, size_t n) {
  const Bytef* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const uInt k = static_cast<uInt>(std::min<size_t>(n, size_t(1) << 30));
    c = ::crc32(c, p, k);
    p += k;
    n -= k;
  }
  return static_cast<uint32_t>(c);
}

// ---- sources --------------------------------------------------------------------------

FileSource::FileSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw FormatError("fxcpp::torch: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw FormatError("fxcpp::torch: '" + path + "' is not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileSource::~FileSource() { ::close(fd_); }

void FileSource::read(uint64_t pos, void* dst, size_t n) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(pos + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw FormatError("fxcpp::torch: cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(pos) +
                        " of '" + path_ + "'" + (r < 0 ? std::string(": ") + std::strerror(errno) : " (the file shrank)"));
    done += static_cast<size_t>(r);
  }
}

// Note [Memory-mapped weights]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// load() and read_file() of a path (LoadOptions::mmap, on by default) map the
// file instead of reading it, and the tensors of .fxpt and .pt2 files alike
// view their records in the mapping: loading costs the file's structures and
// graph, not its weights, which the kernel pages in when they are first used
// (and may drop again under memory pressure: they are clean file pages).
// * One mapping per load (Note [Weights no program can write for another]):
//   MappedFile::open maps the file anew each time, MAP_PRIVATE, so each
//   module views its own copy-on-write pages. The kernel still keeps one copy
//   of each clean page (the page cache backs every private mapping of a file
//   until a page is written), so loading a file twice costs its pages once;
//   the mapping goes when the last tensor viewing it goes (the tensors'
//   DataPtr holds a reference).
// * The mapping is PROT_READ | PROT_WRITE: writing into a mapped tensor
//   copies that page for this mapping only (copy-on-write) and never changes
//   the file; a read-only mapping would turn such a write (an optimizer step
//   on fxcpp.aten.load(..., runtime='python')'s parameters) into SIGSEGV.
//   Tensors the graph is known to write (buffer mutations, in-place ops on
//   get_attr values and their views) are also copied at load
//   (copy_written_tensors in storages.h), so a module's own weights stay as
//   the file has them from call to call.
// * Everything is checked as before mapping changes nothing: the structures
//   are read with pread and checked whole; a record's CRC-32 is verified
//   through pread too, in chunks (Reader::map), so checking does not fault
//   the weights into the process; tensor extents are checked against their
//   record, and a tensor's storage is exactly its record's bytes, so nothing
//   else of the file is reachable through it.
// * Records are copied instead of mapped when they are not aligned to
//   kMapAlignment in the file (PyTorch's writer, and so fxcpp's, aligns them
//   to 64 bytes; a crafted or foreign archive may not: kernels may assume
//   their dtype's alignment), or when the file cannot be mapped (mmap
//   failing, an empty file). Records are never compressed (Note [Strict zip
//   container]), so none is inflated. Bytes in memory (load_from_buffer,
//   read_buffer) are copied: the caller's buffer has no lifetime the tensors
//   could hold.
// * The file must stay as it was while tensors view it. Replacing it
//   (saving again: Note [Atomic saving] renames a new file over it) is safe,
//   the mapping keeps the old inode. Changing it in place shows the new bytes
//   in the weights (they were checked when loaded, not since); truncating it
//   makes reading a weight past the new end raise SIGBUS, which kills the
//   process. A file another process may change or truncate while it is used
//   (a shared or download folder) should be loaded with mmap off
//   (LoadOptions::mmap = false, mmap=False in Python): its records are then
//   read into memory, as bytes in memory are.

// Note [Weights no program can write for another]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Modules loaded from one file used to share one mapping, and a write into a
// weight was kept from the file only by copying, at load, the tensors the
// graph writes as schema annotations say. Annotations do not say everything:
// type_as(w, w), dropout(w, p, train=False) and einsum('i->i', [w]) return
// their input unannotated, and batch_norm with training=True writes its
// running statistics unannotated; any of them followed by an in-place write
// changed the weights of every other module loaded from the file. Each load
// now has a mapping of its own, private to it (the decision rests on no
// table, so no op the table misses can reach another module); the page cache
// keeps the sharing of memory that matters. Tested for each such op in both
// runtimes by tests/python/test_weight_isolation.py.


std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError("fxcpp::torch: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError("fxcpp::torch: '" + path + "' is not a regular file");
  }
  if (st.st_size <= 0 || static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
    ::close(fd);
    return nullptr;
  }
  // Private to this load: Note [Weights no program can write for another].
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->fd_ = fd;
  m->base_ = static_cast<char*>(p);
  m->size_ = static_cast<uint64_t>(st.st_size);
  m->path_ = path;
  return m;
}

MappedFile::~MappedFile() {
  ::munmap(base_, static_cast<size_t>(size_));
  ::close(fd_);
}

void MappedFile::read(uint64_t pos, void* dst, size_t n) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(pos + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw FormatError("fxcpp::torch: cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(pos) +
                        " of '" + path_ + "'" + (r < 0 ? std::string(": ") + std::strerror(errno) : " (the file shrank)"));
    done += static_cast<size_t>(r);
  }
}

void MemorySource::read(uint64_t pos, void* dst, size_t n) const {
  if (n) std::memcpy(dst, data_ + pos, n);
}

// ---- the reader -----------------------------------------------------------------------

Reader::Reader(std::shared_ptr<const Source> source) : source_(std::move(source)) {
  const Source& src = *source_;
  const uint64_t size = src.size();
  if (size < kEndSize)
    throw FormatError("fxcpp::torch: not a readable model archive (.fxpt or .pt2; " + std::to_string(size) +
                      " bytes, too short for a zip archive)");

  // -- the end record: the last one whose comment reaches the end of the file.
  const uint64_t tail_size = std::min<uint64_t>(size, kEndSize + 0xFFFF);
  const uint64_t tail_at = size - tail_size;
  std::vector<unsigned char> tail = read_block(src, tail_at, static_cast<size_t>(tail_size));
  uint64_t end_at = UINT64_MAX;
  for (size_t i = static_cast<size_t>(tail_size - kEndSize) + 1; i-- > 0;) {
    if (le32(&tail[i]) == kEndSig && i + kEndSize + le16(&tail[i + 20]) == tail_size) {
      end_at = tail_at + i;
      break;
    }
  }
  if (end_at == UINT64_MAX)
    throw FormatError(
        "fxcpp::torch: not a readable model archive (.fxpt or .pt2; no zip end-of-central-directory record: not a zip file, or "
        "truncated)");
  const unsigned char* e = &tail[static_cast<size_t>(end_at - tail_at)];
  const size_t comment_len = le16(e + 20);
  for (size_t k = 0; k + 4 <= comment_len; ++k) {
    uint32_t sig = le32(e + kEndSize + k);
    if (sig == kEndSig || sig == kZip64EndSig || sig == kZip64LocatorSig)
      corrupt("the archive comment holds another end-of-central-directory record (two archives in one file)");
  }
  uint64_t disk = le16(e + 4), cd_disk = le16(e + 6), n_disk = le16(e + 8), n_total = le16(e + 10);
  uint64_t cd_size = le32(e + 12), cd_offset = le32(e + 16);

  // -- zip64: the locator right before the end record, the zip64 end record right before it.
  std::vector<Interval> used;
  uint64_t cd_end = end_at;  // where the central directory must end
  if (end_at >= kLocatorSize) {
    std::vector<unsigned char> loc = read_block(src, end_at - kLocatorSize, kLocatorSize);
    if (le32(loc.data()) == kZip64LocatorSig) {
      const uint64_t loc_at = end_at - kLocatorSize;
      uint32_t z_disk = le32(&loc[4]), disks = le32(&loc[16]);
      uint64_t z_at = le64(&loc[8]);
      if (z_disk != 0 || disks > 1) corrupt("a multi-disk archive (zip64 locator: disk " + std::to_string(z_disk) + " of " + std::to_string(disks) + ")");
      if (z_at > loc_at || loc_at - z_at < kZip64EndSize)
        corrupt("the zip64 locator points to offset " + std::to_string(z_at) + ", where no zip64 end record fits");
      std::vector<unsigned char> z = read_block(src, z_at, kZip64EndSize);
      if (le32(z.data()) != kZip64EndSig) corrupt("no zip64 end record at offset " + std::to_string(z_at) + ", where the locator points");
      uint64_t rec = le64(&z[4]);
      if (rec < kZip64EndSize - 12 || rec != loc_at - z_at - 12)
        corrupt("the zip64 end record's size (" + std::to_string(rec) + ") does not reach the locator that follows it");
      uint32_t z_disk_no = le32(&z[16]), z_cd_disk = le32(&z[20]);
      uint64_t z_n_disk = le64(&z[24]), z_n_total = le64(&z[32]), z_cd_size = le64(&z[40]), z_cd_offset = le64(&z[48]);
      if (z_disk_no != 0 || z_cd_disk != 0) corrupt("a multi-disk archive (zip64 end record)");
      auto agree = [&](uint64_t v32, uint64_t sentinel, uint64_t v64, const char* what) {
        if (v32 != sentinel && v32 != v64)
          corrupt(std::string("the end record and the zip64 end record disagree on the ") + what + " (" +
                  std::to_string(v32) + " and " + std::to_string(v64) + ")");
      };
      agree(disk, k16, 0, "disk number");
      agree(cd_disk, k16, 0, "central directory's disk");
      agree(n_disk, k16, z_n_disk, "number of entries");
      agree(n_total, k16, z_n_total, "number of entries");
      agree(cd_size, k32, z_cd_size, "central directory's size");
      agree(cd_offset, k32, z_cd_offset, "central directory's offset");
      disk = cd_disk = 0;
      n_disk = z_n_disk, n_total = z_n_total, cd_size = z_cd_size, cd_offset = z_cd_offset;
      used.push_back({z_at, loc_at, "the zip64 end record"});
      used.push_back({loc_at, end_at, "the zip64 end locator"});
      cd_end = z_at;
    }
  }
  used.push_back({end_at, size, "the end-of-central-directory record"});
  if (disk != 0 || cd_disk != 0) corrupt("a multi-disk archive (disk " + std::to_string(disk) + ")");
  if (n_disk != n_total)
    corrupt("the end record gives " + std::to_string(n_disk) + " entries on this disk but " + std::to_string(n_total) +
            " in all");
  if (n_total == 0) corrupt("the archive has no entries");
  if (n_total > kMaxEntries)
    corrupt("the archive has " + std::to_string(n_total) + " entries, more than the " + std::to_string(kMaxEntries) +
            " a model archive may have");
  uint64_t cd_stop;
  if (!add_ok(cd_offset, cd_size, &cd_stop) || cd_stop > cd_end)
    corrupt("the central directory (" + std::to_string(cd_size) + " bytes at offset " + std::to_string(cd_offset) +
            ") runs past the end records at offset " + std::to_string(cd_end) + " (truncated or shifted)");
  if (cd_stop < cd_end) {
    std::vector<unsigned char> gap = read_block(src, cd_stop, static_cast<size_t>(std::min<uint64_t>(cd_end - cd_stop, 1 << 16)));
    for (size_t k = 0; k + 4 <= gap.size(); ++k)
      if (le32(&gap[k]) == kEndSig || le32(&gap[k]) == kZip64EndSig)
        corrupt("more than one end-of-central-directory record (one at offset " + std::to_string(cd_stop + k) + ")");
    corrupt(std::to_string(cd_end - cd_stop) + " bytes between the central directory and the end record (offset " +
            std::to_string(cd_stop) + ") belong to no record");
  }
  if (cd_size > kMaxCentralDirectoryBytes)
    corrupt("the central directory has " + std::to_string(cd_size) + " bytes, more than the " +
            std::to_string(kMaxCentralDirectoryBytes) + " a model archive may have");
  if (cd_size / kCentralSize < n_total)
    corrupt("the central directory (" + std::to_string(cd_size) + " bytes) is too small for " + std::to_string(n_total) +
            " entries (truncated)");
  used.push_back({cd_offset, cd_stop, "the central directory"});

  // -- the central directory.
  std::vector<unsigned char> cd = read_block(src, cd_offset, static_cast<size_t>(cd_size));
  Cursor c{cd.data(), cd.size()};
  entries_.reserve(static_cast<size_t>(n_total));
  std::vector<uint16_t> flags_of;
  for (uint64_t i = 0; i < n_total; ++i) {
    std::string where = "central directory entry " + std::to_string(i);
    if (!c.has(kCentralSize)) corrupt(where + " is cut off (the central directory is truncated)");
    if (c.u32() != kCentralSig) corrupt(where + " has no central-directory signature (the central directory is truncated or shifted)");
    c.u16();  // version made by
    c.u16();  // version needed
    uint16_t flags = c.u16(), method = c.u16();
    c.u32();  // time, date
    uint32_t crc = c.u32();
    uint64_t csize = c.u32(), usize = c.u32();
    size_t name_len = c.u16(), extra_len = c.u16(), comment_len = c.u16();
    uint64_t disk_start = c.u16();
    c.u16();  // internal attributes
    c.u32();  // external attributes
    uint64_t offset = c.u32();
    if (!c.has(name_len + extra_len + comment_len)) corrupt(where + " runs past the central directory");
    std::string name(reinterpret_cast<const char*>(cd.data() + c.at), name_len);
    where = "entry " + printable(name);
    const unsigned char* extra = cd.data() + c.at + name_len;
    c.at += name_len + extra_len + comment_len;

    if (name_len == 0) corrupt(where + ": an empty name");
    if (name_len > kMaxNameLength)
      corrupt(where + ": a name of " + std::to_string(name_len) + " bytes, more than " + std::to_string(kMaxNameLength));
    if (name.find('\0') != std::string::npos) corrupt(where + ": a NUL byte in the name");
    if (flags & kFlagEncrypted) corrupt(where + " is encrypted");
    if (flags & ~(kFlagDescriptor | kFlagUtf8)) corrupt(where + " has unsupported flags " + hex(flags));
    if (method != 0)
      corrupt(where + " is " + (method == 8 ? std::string("compressed (deflate)") : "compressed (method " + std::to_string(method) + ")") +
              "; model archives (.fxpt, .pt2) store records uncompressed, and compressed ones are refused, never "
              "inflated (save the model again with fxcpp.aten.save or torch.export.save, or store it with `zip -0 -D`)");

    Zip64Fields z = parse_extra(extra, extra_len, where);
    if (usize == k32 || csize == k32 || offset == k32 || disk_start == k16) {
      if (!z.present) corrupt(where + ": a size or offset says \"see zip64\" but the entry has no zip64 extra field");
      Cursor zc{z.data, z.size};
      auto next = [&](const char* what) {
        if (!zc.has(8)) corrupt(where + ": the zip64 extra field lacks the " + std::string(what));
        return zc.u64();
      };
      if (usize == k32) usize = next("uncompressed size");
      if (csize == k32) csize = next("compressed size");
      if (offset == k32) offset = next("local header offset");
      if (disk_start == k16) {
        if (!zc.has(4)) corrupt(where + ": the zip64 extra field lacks the disk number");
        disk_start = zc.u32();
      }
    }
    if (disk_start != 0) corrupt(where + " starts on disk " + std::to_string(disk_start) + " (multi-disk archive)");
    if (csize != usize)
      corrupt(where + ": compressed size " + std::to_string(csize) + " differs from uncompressed size " +
              std::to_string(usize) + " for a stored record");

    // Names: one top-level folder, no directories, no repeats.
    size_t slash = name.find('/');
    if (slash == std::string::npos || slash == 0)
      corrupt(where + " is not under a top-level folder (every record of a model archive is '<folder>/<record>')");
    if (prefix_.empty()) prefix_ = name.substr(0, slash + 1);
    if (name.compare(0, prefix_.size(), prefix_) != 0)
      corrupt(where + " is not under the archive's top-level folder " + printable(prefix_));
    if (name.back() == '/') corrupt(where + " is a directory entry");
    if (!by_name_.emplace(name.substr(prefix_.size()), entries_.size()).second)
      corrupt("two entries are named " + printable(name) + " (readers would disagree on which one is meant)");

    Entry en;
    en.zip64 = z.present;
    en.name = std::move(name);
    en.header = offset;
    en.size = usize;
    en.crc32 = crc;
    entries_.push_back(std::move(en));
    flags_of.push_back(flags);
  }
  if (c.at != cd.size())
    corrupt(std::to_string(cd.size() - c.at) + " bytes at the end of the central directory belong to no entry");

  // -- local headers, data and descriptors.
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& en = entries_[i];
    const std::string where = "record " + printable(en.name);
    const uint16_t flags = flags_of[i];
    uint64_t fixed_end;
    if (!add_ok(en.header, kLocalSize, &fixed_end) || fixed_end > size)
      corrupt(where + ": its local header (offset " + std::to_string(en.header) + ") lies outside the file");
    std::vector<unsigned char> lh = read_block(src, en.header, kLocalSize);
    Cursor l{lh.data(), lh.size()};
    if (l.u32() != kLocalSig) corrupt(where + ": no local header at offset " + std::to_string(en.header));
    l.u16();  // version needed
    uint16_t l_flags = l.u16(), l_method = l.u16();
    l.u32();  // time, date
    uint32_t l_crc = l.u32();
    uint64_t l_csize = l.u32(), l_usize = l.u32();
    size_t l_name_len = l.u16(), l_extra_len = l.u16();
    if (l_flags != flags)
      corrupt(where + ": the local header's flags (" + hex(l_flags) + ") differ from the central directory's (" + hex(flags) + ")");
    if (l_method != 0)
      corrupt(where + ": the local header says compression method " + std::to_string(l_method) +
              ", the central directory says stored");
    uint64_t data_at = fixed_end + l_name_len + l_extra_len;
    if (data_at > size) corrupt(where + ": its local header runs past the end of the file");
    std::vector<unsigned char> var = read_block(src, fixed_end, l_name_len + l_extra_len);
    if (l_name_len != en.name.size() || std::memcmp(var.data(), en.name.data(), l_name_len) != 0)
      corrupt(where + ": the local header names " +
              printable(std::string(reinterpret_cast<const char*>(var.data()), l_name_len)) +
              " (the central directory and the local header disagree)");
    Zip64Fields lz = parse_extra(var.data() + l_name_len, l_extra_len, where + " (local header)");
    auto size_lie = [&](const std::string& what) {
      corrupt(where + ": the local header's " + what + " disagrees with the central directory's");
    };
    if (flags & kFlagDescriptor) {
      // The local CRC and sizes are 0 (or already right, or "see zip64"); the descriptor holds them.
      if (l_crc != 0 && l_crc != en.crc32) size_lie("CRC-32");
      for (uint64_t v : {l_csize, l_usize})
        if (v != 0 && v != k32 && v != en.size) size_lie("size");
    } else {
      if (l_crc != en.crc32) size_lie("CRC-32 (" + hex(l_crc) + " vs " + hex(en.crc32) + ")");
      if (l_usize == k32 || l_csize == k32) {
        Cursor zc{lz.data, lz.size};
        if (!lz.present || !zc.has(16)) corrupt(where + ": the local header says \"see zip64\" but has no zip64 sizes");
        l_usize = zc.u64(), l_csize = zc.u64();
      }
      if (l_usize != en.size || l_csize != en.size)
        size_lie("size (" + std::to_string(l_usize) + " vs " + std::to_string(en.size) + ")");
    }
    en.data = data_at;
    if (!add_ok(data_at, en.size, &en.end) || en.end > size)
      corrupt(where + ": its " + std::to_string(en.size) + " bytes at offset " + std::to_string(data_at) +
              " run past the end of the file (" + std::to_string(size) + " bytes)");
    if (flags & kFlagDescriptor) {
      // The signature is optional; the sizes are 8 bytes each when the entry
      // has a zip64 extra field (APPNOTE 4.3.9.2), else 4.
      const size_t width = en.zip64 || lz.present ? 8 : 4;
      const uint64_t room = std::min<uint64_t>(size - en.end, 24);
      std::vector<unsigned char> d = read_block(src, en.end, static_cast<size_t>(room));
      size_t len = 0;
      for (bool sig : {true, false}) {
        size_t need = (sig ? 4 : 0) + 4 + 2 * width;
        if (len || need > d.size()) continue;
        const unsigned char* p = d.data();
        if (sig && le32(p) != kDescriptorSig) continue;
        if (sig) p += 4;
        uint64_t dc = width == 4 ? le32(p + 4) : le64(p + 4), du = width == 4 ? le32(p + 8) : le64(p + 12);
        if (le32(p) == en.crc32 && dc == en.size && du == en.size) len = need;
      }
      if (!len) corrupt(where + ": its data descriptor is missing or disagrees with the central directory");
      en.end += len;
    }
    used.push_back({en.header, en.end, where});
  }

  // -- every byte belongs to exactly one structure.
  std::sort(used.begin(), used.end(), [](const Interval& a, const Interval& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Interval* prev = nullptr;
  for (const Interval& iv : used) {
    if (iv.begin < pos)
      corrupt(iv.what + " (offset " + std::to_string(iv.begin) + ") overlaps " + (prev ? prev->what : std::string("another")) +
              " (bytes " + std::to_string(prev ? prev->begin : 0) + " to " + std::to_string(pos) + ")");
    if (iv.begin > pos)
      corrupt(std::to_string(iv.begin - pos) + " bytes at offset " + std::to_string(pos) +
              " belong to no record (hidden data, or an entry missing from the central directory)");
    pos = iv.end;
    prev = &iv;
  }
  if (pos != size) corrupt("the end record does not end the file");  // unreachable: the end record ends at size
}

const char* Reader::map(const Entry& entry) const {
  if (!dynamic_cast<const MappedFile*>(source_.get())) return nullptr;
  const size_t n = static_cast<size_t>(entry.size);
  constexpr size_t kChunk = size_t(1) << 20;
  std::vector<unsigned char> buf(std::min(n, kChunk));
  uint32_t crc = 0;
  for (size_t done = 0; done < n;) {
    const size_t k = std::min(n - done, kChunk);
    source_->read(entry.data + done, buf.data(), k);
    crc = crc32(crc, buf.data(), k);
    done += k;
  }
  if (crc != entry.crc32)
    corrupt("record " + printable(entry.name) + " has CRC-32 " + hex(crc) + ", the archive says " + hex(entry.crc32) +
            " (the file is damaged or was altered)");
  return source_->view(entry.data, n);
}

const Entry* Reader::find(const std::string& record) const {
  auto it = by_name_.find(record);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

void Reader::read(const Entry& entry, void* dst) const {
  const size_t n = static_cast<size_t>(entry.size);
  uint32_t crc;
  if (const char* p = source_->view(entry.data, n)) {
    crc = crc32(0, p, n);
    if (crc == entry.crc32 && n) std::memcpy(dst, p, n);
  } else {
    source_->read(entry.data, dst, n);
    crc = crc32(0, dst, n);
  }
  if (crc != entry.crc32)
    corrupt("record " + printable(entry.name) + " has CRC-32 " + hex(crc) + ", the archive says " + hex(entry.crc32) +
            " (the file is damaged or was altered)");
}

}  // namespace fxcpp::torch::zip
