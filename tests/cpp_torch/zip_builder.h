// A raw zip writer for tests: builds archives the way PyTorch's writer does
// (stored records, 64-byte aligned data behind an "FB" padding field, data
// descriptors, zip64 end records), and, field by field, archives no honest
// writer makes (a local header that disagrees with the central directory, a
// method that lies, entries that overlap or repeat, end records that
// disagree). CRCs come from zlib, as the reader's do; the fixtures, written by
// PyTorch's writer (miniz's CRC), check that the two agree.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fxcpp::torch::ziptest {

/// One entry: what is written in the file and what its headers say.
struct ZipRecord {
  std::string name;
  std::string data;                   ///< the bytes written after the local header
  std::optional<uint64_t> size;       ///< the declared (uncompressed) size; default data.size()
  std::optional<uint64_t> csize;      ///< the declared compressed size; default data.size()
  std::optional<uint32_t> crc;        ///< the declared CRC-32; default the CRC of `data`
  uint16_t method = 0;                ///< compression method in both headers
  uint16_t flags = 0x0808;            ///< bit 3: a data descriptor follows the data; bit 11: UTF-8 name
  bool descriptor_signature = true;   ///< the descriptor starts with PK\7\8
  bool zip64 = false;                 ///< sizes and offset in zip64 extra fields (32-bit fields 0xFFFFFFFF)
  size_t align = 64;                  ///< data alignment through an "FB" padding field (0: none)
  // The local header's own view, where it differs from the central directory's.
  std::optional<std::string> local_name;
  std::optional<uint16_t> local_method, local_flags;
  std::optional<uint32_t> local_crc;
  std::optional<uint64_t> local_size;  ///< both local sizes (written even with a descriptor)
  std::optional<uint32_t> descriptor_crc;
  std::optional<uint64_t> descriptor_size;
  bool in_file = true;                 ///< write the local header and data
  bool in_directory = true;            ///< list it in the central directory
  std::optional<uint64_t> offset;      ///< the central directory's local-header offset; default where written
};

/// The end records.
struct ZipEnd {
  bool zip64 = true;                   ///< zip64 end record + locator before the end record (as PyTorch writes)
  bool sentinels = false;              ///< with zip64: 0xFFFF/0xFFFFFFFF in the 32-bit record
  std::optional<uint64_t> entries;     ///< the entry count the end records give
  std::optional<uint64_t> cd_size, cd_offset;
  std::string comment;
  std::string between;                 ///< bytes written between the central directory and the end records
  uint64_t base = 0;                   ///< where the archive will start in the file (offsets are absolute)
};

/// Where the builder put things (offsets in the file, from ZipEnd::base).
struct ZipLayout {
  std::vector<uint64_t> header, data, end;  ///< per record written: local header, data, one past descriptor
  uint64_t cd_offset = 0, cd_size = 0, end_record = 0;
};

namespace zip_detail {
inline void put16(std::string& s, uint64_t v) {
  for (int i = 0; i < 2; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put32(std::string& s, uint64_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint32_t clamp32(uint64_t v, bool zip64) { return zip64 || v >= 0xFFFFFFFFu ? 0xFFFFFFFFu : uint32_t(v); }
}  // namespace zip_detail

/// zlib's CRC-32 of `s`.
inline uint32_t zip_crc(const std::string& s) {
  uLong c = ::crc32(0L, Z_NULL, 0);
  size_t pos = 0;
  while (pos < s.size()) {
    uInt n = static_cast<uInt>(std::min<size_t>(s.size() - pos, 1u << 30));
    c = ::crc32(c, reinterpret_cast<const Bytef*>(s.data() + pos), n);
    pos += n;
  }
  return static_cast<uint32_t>(c);
}

/// The archive's bytes.
inline std::string build_zip(const std::vector<ZipRecord>& records, const ZipEnd& end = {},
                             ZipLayout* layout = nullptr) {
  using namespace zip_detail;
  std::string out;
  ZipLayout lay;
  std::vector<uint64_t> offsets;
  for (const ZipRecord& r : records) {
    uint64_t size = r.size.value_or(r.data.size()), csize = r.csize.value_or(r.data.size());
    uint32_t crc = r.crc.value_or(zip_crc(r.data));
    offsets.push_back(end.base + out.size());
    if (!r.in_file) continue;
    const bool desc = r.flags & 0x0008;
    const std::string& lname = r.local_name.value_or(r.name);
    std::string extra;
    if (r.zip64) {
      put16(extra, 0x0001);
      put16(extra, 16);
      put64(extra, r.local_size.value_or(desc ? 0 : size));
      put64(extra, r.local_size.value_or(desc ? 0 : csize));
    }
    if (r.align) {
      size_t start = end.base + out.size() + 30 + lname.size() + extra.size() + 4;
      size_t pad = (r.align - start % r.align) % r.align;
      put16(extra, 0x4246);  // "FB"
      put16(extra, pad);
      extra.append(pad, 'Z');
    }
    lay.header.push_back(end.base + out.size());
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, r.local_flags.value_or(r.flags));
    put16(out, r.local_method.value_or(r.method));
    put32(out, 0);  // time, date
    put32(out, r.local_crc.value_or(desc ? 0 : crc));
    uint64_t ls = r.local_size.value_or(desc ? 0 : csize), lu = r.local_size.value_or(desc ? 0 : size);
    put32(out, r.zip64 ? 0xFFFFFFFFu : uint32_t(ls));
    put32(out, r.zip64 ? 0xFFFFFFFFu : uint32_t(lu));
    put16(out, lname.size());
    put16(out, extra.size());
    out += lname;
    out += extra;
    lay.data.push_back(end.base + out.size());
    out += r.data;
    if (desc) {
      if (r.descriptor_signature) put32(out, 0x08074b50);
      put32(out, r.descriptor_crc.value_or(crc));
      uint64_t ds = r.descriptor_size.value_or(csize), du = r.descriptor_size.value_or(size);
      if (r.zip64) {
        put64(out, ds);
        put64(out, du);
      } else {
        put32(out, ds);
        put32(out, du);
      }
    }
    lay.end.push_back(end.base + out.size());
  }
  out += end.between;
  lay.cd_offset = end.base + out.size();
  uint64_t n = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const ZipRecord& r = records[i];
    if (!r.in_directory) continue;
    ++n;
    uint64_t size = r.size.value_or(r.data.size()), csize = r.csize.value_or(r.data.size());
    uint64_t offset = r.offset.value_or(offsets[i]);
    std::string extra;
    if (r.zip64) {
      put16(extra, 0x0001);
      put16(extra, 24);
      put64(extra, size);
      put64(extra, csize);
      put64(extra, offset);
    }
    put32(out, 0x02014b50);
    put16(out, 20);
    put16(out, 20);
    put16(out, r.flags);
    put16(out, r.method);
    put32(out, 0);
    put32(out, r.crc.value_or(zip_crc(r.data)));
    put32(out, clamp32(csize, r.zip64));
    put32(out, clamp32(size, r.zip64));
    put16(out, r.name.size());
    put16(out, extra.size());
    put16(out, 0);  // comment
    put16(out, 0);  // disk
    put16(out, 0);
    put32(out, 0);
    put32(out, clamp32(offset, r.zip64));
    out += r.name;
    out += extra;
  }
  lay.cd_size = end.base + out.size() - lay.cd_offset;
  uint64_t entries = end.entries.value_or(n), cd_size = end.cd_size.value_or(lay.cd_size),
           cd_offset = end.cd_offset.value_or(lay.cd_offset);
  if (end.zip64) {
    uint64_t z_at = end.base + out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, entries);
    put64(out, entries);
    put64(out, cd_size);
    put64(out, cd_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, z_at);
    put32(out, 1);
  }
  lay.end_record = end.base + out.size();
  const bool s = end.zip64 && end.sentinels;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, s || entries > 0xFFFF ? 0xFFFF : entries);
  put16(out, s || entries > 0xFFFF ? 0xFFFF : entries);
  put32(out, s ? 0xFFFFFFFFu : clamp32(cd_size, false));
  put32(out, s ? 0xFFFFFFFFu : clamp32(cd_offset, false));
  put16(out, end.comment.size());
  out += end.comment;
  if (layout) *layout = lay;
  return out;
}

/// Raw deflate (zlib, no header) of `s`.
inline std::string deflate_raw(const std::string& s) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, s.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace fxcpp::torch::ziptest
