// The strict container (Note [Strict zip container] in src/torch/zip_reader.cpp)
// and the bounds on tensor extents, through the public loader: archives
// crafted field by field with zip_builder.h, each refused with a FormatError
// that says what is wrong; and the writers' archives (PyTorch's, zip64,
// descriptor variants) still load.
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/remainder.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "fxcpp/torch/module.h"
#include "zip_builder.h"

namespace fxcpp::torch {
namespace {

using ziptest::build_zip;
using ziptest::ZipEnd;
using ziptest::ZipLayout;
using ziptest::ZipRecord;

const std::string kFixture = std::string(FXCPP_TORCH_FIXTURE_DIR) + "/small_v1.fxpt";

// The fixture's records, as PyTorch's reader gives them, named under "small_v1/".
std::vector<ZipRecord> fixture_records() {
  caffe2::serialize::PyTorchStreamReader reader(kFixture);
  std::vector<ZipRecord> out;
  for (const std::string& name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    ZipRecord r;
    r.name = "small_v1/" + name;
    r.data.assign(static_cast<const char*>(data.get()), size);
    out.push_back(std::move(r));
  }
  return out;
}

ZipRecord& record(std::vector<ZipRecord>& rs, const std::string& name) {
  for (auto& r : rs)
    if (r.name == "small_v1/" + name) return r;
  ADD_FAILURE() << "no record " << name;
  return rs.front();
}

// Loads `bytes` and runs one forward; returns the FormatError text, "" if it loaded.
std::string load_error(const std::string& bytes) {
  try {
    Module m = load_from_buffer(bytes.data(), bytes.size());
    at::Tensor x = (at::remainder(at::arange(3 * 8 * 8, at::kFloat).reshape({1, 3, 8, 8}), 7) - 3) / 4;
    m.forward({x});
    return "";
  } catch (const FormatError& e) {
    EXPECT_GT(std::strlen(e.what()), 0u);
    return e.what();
  }
}

::testing::AssertionResult refused(const std::string& bytes, const std::string& text) {
  std::string err = load_error(bytes);
  if (err.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected an error with '" << text << "', got '" << err << "'";
}
#define EXPECT_REFUSED(bytes, text) EXPECT_TRUE(refused(bytes, text))

at::Tensor logits(const Module& m) {
  at::Tensor x = (at::remainder(at::arange(2 * 3 * 8 * 8, at::kFloat).reshape({2, 3, 8, 8}), 7) - 3) / 4;
  return m.forward({x}).toGenericDict().at("logits").toTensor();
}

TEST(Zip, TheWritersArchivesLoad) {
  // The committed file (torch 1.13's PyTorchStreamWriter), and the builder's
  // variants of it: what other writers (torch 2.x, Python's zipfile) may emit.
  Module want = load(kFixture);
  std::vector<std::pair<std::string, std::function<void(std::vector<ZipRecord>&, ZipEnd&)>>> variants = {
      {"as PyTorch writes", [](auto&, auto&) {}},
      {"zip64 extra fields", [](auto& rs, auto&) { for (auto& r : rs) r.zip64 = true; }},
      {"zip64 end with sentinels", [](auto&, auto& e) { e.sentinels = true; }},
      {"no zip64 end", [](auto&, auto& e) { e.zip64 = false; }},
      {"no descriptor", [](auto& rs, auto&) { for (auto& r : rs) r.flags = 0; }},
      {"no descriptor, zip64", [](auto& rs, auto&) { for (auto& r : rs) r.flags = 0, r.zip64 = true; }},
      {"unsigned descriptor", [](auto& rs, auto&) { for (auto& r : rs) r.descriptor_signature = false; }},
      {"unaligned", [](auto& rs, auto&) { for (auto& r : rs) r.align = 0; }},
      {"a comment", [](auto&, auto& e) { e.comment = "written by a test"; }},
      {"no version record", [](auto& rs, auto&) { rs.pop_back(); }},
      // An empty record: its descriptor's sizes are 4 or 8 bytes by the zip64 field, not by trial.
      {"an empty record", [](auto& rs, auto&) { rs.emplace_back().name = "small_v1/empty"; }},
      {"an empty zip64 record", [](auto& rs, auto&) {
         rs.emplace_back().name = "small_v1/empty";
         rs.back().zip64 = true;
       }},
  };
  for (auto& [what, edit] : variants) {
    std::vector<ZipRecord> rs = fixture_records();
    ZipEnd end;
    edit(rs, end);
    std::string bytes = build_zip(rs, end);
    try {
      Module m = load_from_buffer(bytes.data(), bytes.size());
      EXPECT_TRUE(at::allclose(logits(m), logits(want))) << what;
    } catch (const FormatError& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
  }
}

TEST(Zip, StoredButDeclaredDeflatedIsRefused) {
  // Raw weights behind a "deflated" method: PyTorch's reader inflates garbage
  // into a buffer it never fully writes, and the weights are heap memory.
  for (const char* name : {"data/0", "graph.json"}) {
    std::vector<ZipRecord> rs = fixture_records();
    record(rs, name).method = 8;
    EXPECT_REFUSED(build_zip(rs), "is compressed (deflate)");
  }
  // Only the local header says deflated.
  std::vector<ZipRecord> rs = fixture_records();
  record(rs, "data/0").local_method = 8;
  EXPECT_REFUSED(build_zip(rs), "local header says compression method 8");
}

// Appends the raw deflate of `in` to `out`, ending on a full flush (so what
// follows may be repeated: nothing after refers back to it), or finishing.
void deflate_part(z_stream& z, const std::string& in, int flush, std::string& out) {
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string buf(deflateBound(&z, in.size()) + 64, '\0');
  z.next_out = reinterpret_cast<Bytef*>(&buf[0]);
  z.avail_out = static_cast<uInt>(buf.size());
  int rc = deflate(&z, flush);
  ASSERT_TRUE(rc == Z_OK || rc == Z_STREAM_END);
  ASSERT_EQ(z.avail_in, 0u);
  out.append(buf.data(), buf.size() - z.avail_out);
}

TEST(Zip, DeflatedGraphIsRefusedWithoutInflating) {
  // The fixture's graph.json followed by 1 GiB of spaces, deflated to about
  // 1 MB: PyTorch's reader inflates all of it (seconds, gigabytes) and the
  // file loads. Refused from the central directory alone, nothing inflated.
  std::vector<ZipRecord> rs = fixture_records();
  ZipRecord& g = record(rs, "graph.json");
  const std::string spaces(1 << 20, ' ');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string head, block, tail;
  deflate_part(z, g.data, Z_FULL_FLUSH, head);
  deflate_part(z, spaces, Z_FULL_FLUSH, block);
  deflate_part(z, "", Z_FINISH, tail);
  deflateEnd(&z);
  uLong crc = ::crc32(0L, reinterpret_cast<const Bytef*>(g.data.data()), static_cast<uInt>(g.data.size()));
  const uLong one = ::crc32(0L, reinterpret_cast<const Bytef*>(spaces.data()), static_cast<uInt>(spaces.size()));
  std::string bomb = head;
  for (int i = 0; i < 1024; ++i) {
    bomb += block;
    crc = crc32_combine(crc, one, static_cast<z_off_t>(spaces.size()));
  }
  bomb += tail;
  ASSERT_LT(bomb.size(), size_t(2) << 20);
  g.size = g.data.size() + (uint64_t(1) << 30);
  g.data = bomb;
  g.method = 8;
  g.crc = static_cast<uint32_t>(crc);
  EXPECT_REFUSED(build_zip(rs), "is compressed (deflate)");
}

TEST(Zip, BadCrcIsRefused) {
  std::vector<ZipRecord> rs = fixture_records();
  record(rs, "data/0").data[5] ^= 0x40;
  record(rs, "data/0").crc = ziptest::zip_crc(fixture_records()[1].data);
  EXPECT_REFUSED(build_zip(rs), "record 'small_v1/data/0' has CRC-32");
  rs = fixture_records();
  record(rs, "graph.json").crc = 0x12345678;
  EXPECT_REFUSED(build_zip(rs), "has CRC-32");
  // The descriptor or the local header disagrees with the central directory.
  rs = fixture_records();
  record(rs, "data/1").descriptor_crc = 0x12345678;
  EXPECT_REFUSED(build_zip(rs), "data descriptor is missing or disagrees");
  rs = fixture_records();
  for (auto& r : rs) r.flags = 0;
  record(rs, "data/1").local_crc = 0x12345678;
  EXPECT_REFUSED(build_zip(rs), "local header's CRC-32");
}

TEST(Zip, EntryPointingIntoAnotherRecordIsRefused) {
  // data/1's local header, data and descriptor written over the start of
  // data/0's data (so data/0 keeps its size and CRC), and the central
  // directory pointing data/1 there: one byte range, two records.
  std::vector<ZipRecord> rs = fixture_records();
  ZipRecord inner = record(rs, "data/1");
  inner.align = 0;
  std::string inner_bytes = build_zip({inner});
  inner_bytes.resize(inner_bytes.find(std::string("PK\x01\x02", 4)));  // the local header, data and descriptor
  ZipRecord& outer = record(rs, "data/0");
  ASSERT_LT(inner_bytes.size(), outer.data.size());
  outer.data.replace(0, inner_bytes.size(), inner_bytes);
  ZipLayout lay;
  build_zip(rs, {}, &lay);
  record(rs, "data/1").in_file = false;
  record(rs, "data/1").offset = lay.data[1];
  EXPECT_REFUSED(build_zip(rs), "overlaps record 'small_v1/data/0'");

  // Two central-directory entries for one local header.
  rs = fixture_records();
  build_zip(rs, {}, &lay);
  record(rs, "data/4").in_file = false;
  record(rs, "data/4").offset = lay.header[4];  // data/3's header; the names differ
  EXPECT_REFUSED(build_zip(rs), "the local header names 'small_v1/data/3'");
}

TEST(Zip, DuplicateEntriesAreRefused) {
  // Two graph.json: PyTorch's reader loads the last, `unzip -p` prints the first.
  std::vector<ZipRecord> rs = fixture_records();
  ZipRecord other = record(rs, "graph.json");
  other.data.replace(other.data.find("aten::relu"), 10, "aten::tanh");
  rs.push_back(other);
  EXPECT_REFUSED(build_zip(rs), "two entries are named 'small_v1/graph.json'");
}

TEST(Zip, SizeFieldLiesAreRefused) {
  std::vector<ZipRecord> rs = fixture_records();
  record(rs, "data/0").csize = 400;
  EXPECT_REFUSED(build_zip(rs), "compressed size 400 differs from uncompressed size 432");
  // The central directory claims more than was written (the next header would be read as data).
  rs = fixture_records();
  record(rs, "data/0").size = record(rs, "data/0").csize = 500;
  EXPECT_REFUSED(build_zip(rs), "data descriptor is missing or disagrees");
  rs = fixture_records();
  for (auto& r : rs) r.flags = 0;
  record(rs, "data/2").local_size = 1000;
  EXPECT_REFUSED(build_zip(rs), "local header's size (1000 vs 1280)");
  // Larger than the whole file, and its offset past the end.
  rs = fixture_records();
  record(rs, "version").size = record(rs, "version").csize = uint64_t(1) << 40;
  record(rs, "version").zip64 = true;
  EXPECT_REFUSED(build_zip(rs), "run past the end of the file");
  rs = fixture_records();
  record(rs, "version").in_file = false;
  record(rs, "version").offset = 0xFFFFFFF0;
  EXPECT_REFUSED(build_zip(rs), "lies outside the file");
}

TEST(Zip, EndRecordsAndDirectoryMustAgree) {
  std::string good = build_zip(fixture_records());
  ZipLayout lay;
  build_zip(fixture_records(), {}, &lay);
  std::string end_record = good.substr(lay.end_record);
  // A second end record appended: readers that search from the end and from
  // the start disagree.
  EXPECT_REFUSED(good + end_record, "more than one end-of-central-directory record");
  // A second, different model appended, its offsets counted from the file's
  // start: PyTorch's reader loads the second, a reader scanning from the
  // start sees the first.
  std::vector<ZipRecord> rs = fixture_records();
  std::string& j = record(rs, "graph.json").data;
  j.replace(j.find("aten::relu"), 10, "aten::tanh");
  ZipEnd e;
  e.base = good.size();
  EXPECT_REFUSED(good + build_zip(rs, e), std::to_string(good.size()) + " bytes at offset 0 belong to no record");
  // The end record's comment holds another end record.
  e = {};
  e.comment = end_record;  // the one in the comment ends the file: the real one is extra
  EXPECT_REFUSED(build_zip(fixture_records(), e), "more than one end-of-central-directory record");
  e.comment = end_record + "!";
  EXPECT_REFUSED(build_zip(fixture_records(), e), "comment holds another end-of-central-directory record");
  // A truncated central directory: fewer bytes or fewer entries than written.
  e = {};
  e.cd_size = lay.cd_size - 46;
  EXPECT_REFUSED(build_zip(fixture_records(), e), "between the central directory and the end record");
  e = {};
  e.entries = 6;
  EXPECT_REFUSED(build_zip(fixture_records(), e), "at the end of the central directory belong to no entry");
  e = {};
  e.entries = 8;
  EXPECT_REFUSED(build_zip(fixture_records(), e), "central directory entry 7 is cut off");
  // The 32-bit and zip64 end records disagree.
  std::string bad = good;
  bad[lay.end_record + 10] = 6;  // total entries in the 32-bit record
  EXPECT_REFUSED(bad, "disagree on the number of entries");
  // Hidden bytes between the records and the central directory.
  e = {};
  e.between = "hello";
  EXPECT_REFUSED(build_zip(fixture_records(), e), "5 bytes at offset");
  // Truncated anywhere in the end records.
  for (size_t cut : {size_t(1), size_t(10), size_t(22), size_t(40), size_t(98)})
    EXPECT_NE(load_error(good.substr(0, good.size() - cut)), "") << cut;
}

TEST(Zip, HeadersMustAgreeAndNamesBeUnambiguous) {
  std::vector<ZipRecord> rs = fixture_records();
  record(rs, "data/0").local_name = "small_v1/data/9";
  EXPECT_REFUSED(build_zip(rs), "the local header names 'small_v1/data/9'");
  rs = fixture_records();
  record(rs, "data/0").flags |= 1;
  EXPECT_REFUSED(build_zip(rs), "is encrypted");
  rs = fixture_records();
  record(rs, "data/0").local_flags = 0x0800;
  EXPECT_REFUSED(build_zip(rs), "local header's flags");
  rs = fixture_records();
  record(rs, "data/3").name = "other/data/3";
  EXPECT_REFUSED(build_zip(rs), "is not under the archive's top-level folder 'small_v1/'");
  rs = fixture_records();
  record(rs, "data/3").name = "small_v1/data/3" + std::string(2000, 'x');
  EXPECT_REFUSED(build_zip(rs), "more than 1024");
}

TEST(Zip, GraphJsonSizeIsCapped) {
  // 257 MiB of whitespace-padded JSON: refused before it is read or parsed.
  std::vector<ZipRecord> rs = fixture_records();
  ZipRecord& g = record(rs, "graph.json");
  g.data.append((size_t(257) << 20) - g.data.size(), ' ');
  std::string bytes = build_zip(rs);
  g.data.clear();
  EXPECT_REFUSED(bytes, "graph.json has 269484032 bytes, more than the 268435456 bytes (256 MiB)");
}

TEST(Load, StrideZeroTensorCannotClaimAHugeExtent) {
  // A 16-byte record backing 2^62 float elements through stride 0: refused
  // whatever the strides, by element count and byte size.
  for (const char* edit : {"\"sizes\":[4611686018427387904],\"strides\":[0]",
                           "\"sizes\":[1099511627776,1024],\"strides\":[0,0]",
                           "\"sizes\":[70368744177665],\"strides\":[0]"}) {
    std::vector<ZipRecord> rs = fixture_records();
    std::string& j = record(rs, "graph.json").data;
    size_t at = j.find("\"sizes\":[4],\"strides\":[1]");
    ASSERT_NE(at, std::string::npos);
    j.replace(at, std::strlen("\"sizes\":[4],\"strides\":[1]"), edit);
    EXPECT_REFUSED(build_zip(rs), "more than the 281474976710656 bytes a tensor may have") << edit;
  }
  // An empty tensor has no extent, whatever its other sizes.
  std::vector<ZipRecord> rs = fixture_records();
  std::string& j = record(rs, "graph.json").data;
  j.replace(j.find("\"sizes\":[5],\"strides\":[1]"), std::strlen("\"sizes\":[5],\"strides\":[1]"),
            "\"sizes\":[5,0,4611686018427387904],\"strides\":[1,0,0]");
  std::string bytes = build_zip(rs);
  try {
    load_from_buffer(bytes.data(), bytes.size());
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()).find("a tensor may have"), std::string::npos) << e.what();
  }
  // ... but its storage offset must lie inside its storage (data_ptr() adds it).
  for (const char* offset : {"4611686018427387904", "6"}) {
    std::vector<ZipRecord> rs2 = fixture_records();
    std::string& j2 = record(rs2, "graph.json").data;
    size_t at = j2.find("\"sizes\":[5],\"strides\":[1]");
    ASSERT_NE(at, std::string::npos);
    j2.replace(at, std::strlen("\"sizes\":[5],\"strides\":[1]"), "\"sizes\":[0],\"strides\":[1]");
    size_t off = j2.rfind("\"offset\":", at);
    ASSERT_NE(off, std::string::npos);
    size_t end = j2.find_first_of(",}", off);
    j2.replace(off, end - off, std::string("\"offset\":") + offset);
    EXPECT_REFUSED(build_zip(rs2), "lies past its storage") << offset;
  }
}

}  // namespace
}  // namespace fxcpp::torch
