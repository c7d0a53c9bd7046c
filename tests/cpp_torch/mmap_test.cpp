// Memory-mapped weights (Note [Memory-mapped weights] in src/torch/zip_reader.cpp):
// each module loaded from a file maps it privately, tensors the graph writes are
// copied at load, writes never reach the file, misaligned records are copied,
// and a file truncated under a mapped module is the documented SIGBUS (a death
// test), while one loaded with mmap off does not care. .fxpt and .pt2 alike.
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "../fuzz/fxpt_harness.h"
#include "../../src/torch/storages.h"
#include "fxcpp/torch/module.h"
#include "zip_builder.h"

namespace fxcpp::torch {
namespace {

const std::string kFixtures = FXCPP_TORCH_FIXTURE_DIR;
const std::string kFxpt = kFixtures + "/small_v1.fxpt";
const std::string kConvnet = kFixtures + "/pt2/convnet.pt2";
const std::string kFunctional = kFixtures + "/pt2/functional.pt2";

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

std::string temp_path(const std::string& stem, const std::string& ext) {
  return ::testing::TempDir() + "fxcpp_mmap_" + stem + "_" + std::to_string(::getpid()) + ext;
}

LoadOptions mapped(bool on) {
  LoadOptions o;
  o.mmap = on;
  return o;
}

std::map<std::string, const void*> data_ptrs(const Module& m) {
  std::map<std::string, const void*> out;
  for (const NamedTensor& t : m.named_tensors()) out[t.name] = t.tensor.storage().data();
  return out;
}

at::Tensor small_input(int64_t n) { return at::ones({n, 3, 8, 8}, at::kFloat) / 4; }

// Note [Weights no program can write for another]: each load maps the file
// privately, so two loads view different addresses (the page cache shares
// the pages), and a write through one is never seen by the other.
TEST(LoadMmap, EachLoadHasAMappingOfItsOwn) {
  for (const std::string& path : {kFxpt, kConvnet}) {
    Module a = load(path), b = load(path), c = load(path, mapped(false));
    auto pa = data_ptrs(a), pb = data_ptrs(b), pc = data_ptrs(c);
    ASSERT_FALSE(pa.empty()) << path;
    size_t mapped_count = 0;
    for (const NamedTensor& t : a.named_tensors()) mapped_count += is_mapped(t.tensor.storage());
    EXPECT_GT(mapped_count, 0u) << path << ": no weight views the mapping";
    for (const NamedTensor& t : c.named_tensors())
      EXPECT_FALSE(is_mapped(t.tensor.storage())) << path << ": " << t.name << " of a load with mmap off is mapped";
    for (const auto& [name, p] : pa) {
      EXPECT_NE(p, pb.at(name)) << path << ": " << name << " is shared by two mapped loads";
      EXPECT_NE(p, pc.at(name)) << path << ": " << name << " of a load with mmap off views the mapping";
    }
    // Writing into one load's weights leaves the other's as the file has them.
    for (const NamedTensor& t : a.named_tensors()) {
      if (!t.tensor.is_floating_point()) continue;
      at::Tensor w = t.tensor;
      w.add_(1.0);
      EXPECT_TRUE(at::equal(*b.find_tensor(t.name), *c.find_tensor(t.name))) << path << ": " << t.name;
    }
    Module d = load(path);
    for (const NamedTensor& t : d.named_tensors())
      EXPECT_TRUE(at::equal(t.tensor, *c.find_tensor(t.name))) << path << ": " << t.name << " of a later load";
  }
}

TEST(LoadMmap, OutputsDoNotChange) {
  Module a = load(kFxpt), c = load(kFxpt, mapped(false));
  at::Tensor x = small_input(2);
  EXPECT_TRUE(at::equal(a.forward({x}).toGenericDict().at("logits").toTensor(),
                        c.forward({x}).toGenericDict().at("logits").toTensor()));
  Module p = load(kConvnet), q = load(kConvnet, mapped(false));
  at::Tensor y = at::ones({2, 3, 8, 8}, at::kFloat) / 3;
  auto dp = p.forward({y}).toGenericDict(), dq = q.forward({y}).toGenericDict();
  EXPECT_TRUE(at::equal(dp.at("logits").toTensor(), dq.at("logits").toTensor()));
}

// functional.pt2 counts its calls in the buffer `calls` (a buffer mutation):
// each module counts its own, and the file keeps its zeros.
TEST(LoadMmap, AMutatedBufferIsCopiedAtLoad) {
  const std::string path = temp_path("functional", ".pt2");
  const std::string bytes = read_bytes(kFunctional);
  write_bytes(path, bytes);
  {
    Module a = load(path), b = load(path);
    const at::Tensor *ca = a.find_tensor("calls"), *cb = b.find_tensor("calls");
    ASSERT_NE(ca, nullptr);
    EXPECT_NE(ca->storage().data(), cb->storage().data()) << "a written buffer is shared by two loads";
    at::Tensor x = at::ones({3, 4}, at::kFloat), y = at::ones({3, 2}, at::kFloat);
    for (int i = 0; i < 3; ++i) a.forward({x, y});
    b.forward({x, y});
    EXPECT_TRUE(at::equal(*ca, at::full({4}, 3.0f)));
    EXPECT_TRUE(at::equal(*cb, at::full({4}, 1.0f)));
    // A third load starts from the file's zeros.
    Module c = load(path);
    EXPECT_TRUE(at::equal(*c.find_tensor("calls"), at::full({4}, 0.0f)));
  }
  EXPECT_EQ(read_bytes(path), bytes) << "running a mapped module changed its file";
  std::remove(path.c_str());
}

// A weight written in place by the user: a private copy-on-write page, never the file.
TEST(LoadMmap, WritingIntoAMappedWeightLeavesTheFile) {
  const std::string path = temp_path("write", ".fxpt");
  const std::string bytes = read_bytes(kFxpt);
  write_bytes(path, bytes);
  {
    Module a = load(path);
    for (const NamedTensor& t : a.named_tensors())
      if (t.tensor.is_floating_point()) t.tensor.add_(1);
    Module fresh = load(path, mapped(false)), orig = load(kFxpt, mapped(false));
    for (const NamedTensor& t : fresh.named_tensors())
      EXPECT_TRUE(at::equal(t.tensor, *orig.find_tensor(t.name))) << t.name;
  }
  EXPECT_EQ(read_bytes(path), bytes);
  std::remove(path.c_str());
}

// Truncated and flipped files read through the mapping behave exactly as the
// same bytes read from a buffer: the same refusal, or the same results.
TEST(LoadMmap, MutatedFilesBehaveAsTheSameBytesInABuffer) {
  std::mt19937_64 rng(2503);
  const std::string path = temp_path("mutant", ".bin");
  int refused = 0, ran = 0;
  for (const std::string& src : {kFxpt, kConvnet}) {
    const std::string good = read_bytes(src);
    for (int i = 0; i < 60; ++i) {
      std::string bad = good;
      if (i == 0) {
        // the file itself
      } else if (i % 3 == 0) {
        bad.resize(rng() % bad.size());
      } else {
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
          bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      const std::string what = src + " mutant #" + std::to_string(i);
      write_bytes(path, bad);
      std::unique_ptr<Module> mf, mb;
      std::string ef, eb;
      try {
        mf = std::make_unique<Module>(load(path));
      } catch (const FormatError& e) {
        ef = e.what();
      }
      try {
        mb = std::make_unique<Module>(load_from_buffer(bad.data(), bad.size()));
      } catch (const FormatError& e) {
        eb = e.what();
      }
      EXPECT_EQ(ef, eb) << what;
      if (!mf || !mb) {
        ++refused;
        continue;
      }
      ++ran;
      if (fuzz::nondeterministic(*mb)) continue;
      std::vector<c10::IValue> in = fuzz::inputs_for(*mb);
      c10::IValue a, b;
      bool fa = false, fb = false;
      try {
        a = mf->forward(in);
      } catch (const Error&) {
        fa = true;
      }
      try {
        b = mb->forward(in);
      } catch (const Error&) {
        fb = true;
      }
      EXPECT_EQ(fa, fb) << what;
      if (!fa && !fb) {
        EXPECT_TRUE(fuzz::same(a, b)) << what;
      }
    }
  }
  EXPECT_GT(refused, 20);
  EXPECT_GE(ran, 2);  // at least the two files themselves
  std::remove(path.c_str());
}

// Records the writer did not align are copied, not mapped; they load the same.
TEST(LoadMmap, MisalignedRecordsAreCopied) {
  caffe2::serialize::PyTorchStreamReader reader(kFxpt);
  std::vector<ziptest::ZipRecord> records;
  for (const std::string& name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    ziptest::ZipRecord r;
    r.name = "small_v1/" + name;
    r.data.assign(static_cast<const char*>(data.get()), size);
    r.align = 0;
    records.push_back(std::move(r));
  }
  ziptest::ZipLayout layout;
  std::string bytes = ziptest::build_zip(records, {}, &layout);
  size_t misaligned = 0;
  for (uint64_t d : layout.data) misaligned += d % 64 != 0;
  ASSERT_GT(misaligned, 0u);
  const std::string path = temp_path("misaligned", ".fxpt");
  write_bytes(path, bytes);
  {
    Module a = load(path), ref = load(kFxpt, mapped(false));
    auto pa = data_ptrs(a);
    size_t viewing = 0;
    for (const auto& [name, p] : pa) {
      const bool in_mapping = is_mapped(a.find_tensor(name)->storage());
      viewing += in_mapping;
      if (in_mapping) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << name << " is mapped misaligned";
      }
      EXPECT_TRUE(at::equal(*a.find_tensor(name), *ref.find_tensor(name))) << name;
    }
    EXPECT_LT(viewing, pa.size()) << "every record was mapped, aligned or not";
    at::Tensor x = small_input(1);
    EXPECT_TRUE(at::equal(a.forward({x}).toGenericDict().at("logits").toTensor(),
                          ref.forward({x}).toGenericDict().at("logits").toTensor()));
  }
  std::remove(path.c_str());
}

TEST(LoadMmap, ATruncatedFileDoesNotMatterWithMmapOff) {
  const std::string path = temp_path("trunc_off", ".fxpt");
  write_bytes(path, read_bytes(kFxpt));
  Module m = load(path, mapped(false)), ref = load(kFxpt, mapped(false));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  at::Tensor x = small_input(1);
  EXPECT_TRUE(at::equal(m.forward({x}).toGenericDict().at("logits").toTensor(),
                        ref.forward({x}).toGenericDict().at("logits").toTensor()));
  std::remove(path.c_str());
}

// The documented behaviour: a mapped file truncated under a live module
// makes reading a weight past the new end raise SIGBUS (the process dies;
// under ASan, its SIGBUS report ends it).
TEST(LoadMmapDeathTest, ATruncatedMappedFileRaisesSigbus) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  const std::string path = temp_path("trunc_on", ".pt2");
  write_bytes(path, read_bytes(kConvnet));
  EXPECT_DEATH(
      {
        Module m = load(path);
        if (::truncate(path.c_str(), 0) != 0) std::exit(0);
        float sum = 0;
        for (const NamedTensor& t : m.named_tensors())
          if (t.tensor.scalar_type() == at::kFloat && t.tensor.numel() > 0) sum += t.tensor.sum().item<float>();
        std::fprintf(stderr, "%f\n", sum);
        std::exit(0);
      },
      "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fxcpp::torch
