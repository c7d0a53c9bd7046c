// The .fxpt loader: the committed fixture of every format version, crafted
// files for each refusal, and a fuzz of truncated and corrupted files (Note
// [Loading untrusted files]); runs under ASan+UBSan in `make test`.
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/remainder.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../fuzz/fxpt_harness.h"
#include "../fuzz/fxpt_mutators.h"
#include "archive_records.h"
#include "fxcpp/torch/module.h"
#include "zip_builder.h"

namespace fxcpp::torch {
namespace {

const std::string kFixtures = FXCPP_TORCH_FIXTURE_DIR;
const std::string kCorpus = FXCPP_FUZZ_CORPUS_DIR;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The fixture's deterministic input (tests/cpp_torch/fixtures/make_fixtures.py).
at::Tensor small_input(int64_t n) {
  return (at::remainder(at::arange(n * 3 * 8 * 8, at::kFloat).reshape({n, 3, 8, 8}), 7) - 3) / 4;
}

using test_archive::Records;
using test_archive::read_records;
using test_archive::write_archive;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  size_t pos = s.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  for (; pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
}

// Loads `bytes`; returns the FormatError text ("" if it loaded).
std::string load_error(const std::string& bytes) {
  try {
    Module m = load_from_buffer(bytes.data(), bytes.size());
    return "";
  } catch (const FormatError& e) {
    return e.what();
  }
}

std::string fixture(int version) { return kFixtures + "/small_v" + std::to_string(version) + ".fxpt"; }

TEST(Load, EveryFormatVersionMatchesItsRecordedOutputs) {
  for (int version = 1; version <= kFormatVersion; ++version) {
    Module m = load(fixture(version));
    std::string expected = read_bytes(kFixtures + "/small_v" + std::to_string(version) + ".expected.bin");
    size_t pos = 0;
    for (int64_t n : {1, 3}) {
      int64_t count;
      ASSERT_LE(pos + 8, expected.size());
      std::memcpy(&count, expected.data() + pos, 8);
      pos += 8;
      ASSERT_LE(pos + 4 * count, expected.size());
      at::Tensor want = at::from_blob(expected.data() + pos, {count}, at::kFloat).clone();
      pos += 4 * count;
      for (int rep = 0; rep < 2; ++rep) {  // the second forward runs the planned path
        c10::IValue out = m.forward({small_input(n)});
        ASSERT_TRUE(out.isGenericDict());
        at::Tensor got = out.toGenericDict().at("out").toTensor();
        EXPECT_EQ(got.size(0), n);
        EXPECT_TRUE(at::allclose(got.reshape({-1}), want, 1e-5, 1e-6)) << "version " << version << " batch " << n;
      }
    }
    EXPECT_EQ(m.input_names(), std::vector<std::string>{"x"});
    EXPECT_EQ(m.named_tensors().size(), 5u);
    // The graph reads like the Python one.
    std::string text = m.graph().to_string();
    EXPECT_NE(text.find("call_function[target=torch.ops.aten.conv2d.default]"), std::string::npos) << text;
    EXPECT_NE(text.find("call_function[target=operator.getitem]"), std::string::npos) << text;
  }
}

TEST(Load, FromFileAndFromBufferAgree) {
  std::string bytes = read_bytes(fixture(1));
  Module a = load(fixture(1)), b = load_from_buffer(bytes.data(), bytes.size());
  at::Tensor x = small_input(2);
  EXPECT_TRUE(at::allclose(a.forward({x}).toGenericDict().at("logits").toTensor(),
                           b.forward({x}).toGenericDict().at("logits").toTensor()));
}

TEST(Load, InputsCheckedAgainstRecordedMeta) {
  Module m = load(fixture(1));
  try {
    m.forward({c10::IValue(int64_t(3))});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 ('x'): expected a Tensor, got an int"), std::string::npos)
        << e.what();
  }
  try {
    m.forward({at::arange(8, at::kFloat)});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a 4-dimensional tensor, got one with 1 dimensions"),
              std::string::npos)
        << e.what();
  }
}

struct Crafted {
  const char* what;
  std::function<void(Records&)> edit;
  const char* error;  ///< a part of the FormatError text
};

TEST(Load, CraftedFilesAreRefusedWithAReason) {
  const std::string g = "graph.json";
  std::vector<Crafted> cases = {
      {"newer version", [&](Records& r) { replace_all(r[g], "\"version\":1", "\"version\":2"); },
       "format version 2, newer than the newest this build reads (1)"},
      {"version zero", [&](Records& r) { replace_all(r[g], "\"version\":1", "\"version\":0"); }, "does not exist"},
      {"other format", [&](Records& r) { replace_all(r[g], "fxcpp-aten", "pickle"); }, "format is not"},
      {"unknown operator", [&](Records& r) { replace_all(r[g], "aten::relu", "aten::no_such_op"); },
       "unknown operator 'aten::no_such_op'"},
      {"python callable", [&](Records& r) { replace_all(r[g], "\"operator.mul\"", "\"os.system\""); },
       "'os.system' is not a runtime primitive"},
      {"call_module", [&](Records& r) { replace_all(r[g], "\"op\":\"call_function\",\"name\":\"relu_default\"", "\"op\":\"call_module\",\"name\":\"relu_default\""); },
       "lower the model with fxcpp.aten.lower first"},
      {"wrong argument type", [&](Records& r) { replace_all(r[g], "{\"list\":[2,2]}", "\"two\""); },
       "passes a str as 'kernel_size'"},
      {"forward reference", [&](Records& r) { replace_all(r[g], "{\"node\":\"x\"}", "{\"node\":\"softmax_int\"}"); },
       "not defined before it"},
      {"huge tensor", [&](Records& r) { replace_all(r[g], "\"sizes\":[4,3,3,3]", "\"sizes\":[4000000000000000000,3,3,3]"); },
       "tensor extent overflows"},
      {"past its storage", [&](Records& r) { replace_all(r[g], "\"sizes\":[4,3,3,3]", "\"sizes\":[5,3,3,3]"); },
       "extends past its storage"},
      {"negative stride", [&](Records& r) { replace_all(r[g], "\"strides\":[27,9,3,1]", "\"strides\":[27,9,3,-1]"); },
       "negative size or stride"},
      {"record size lie", [&](Records& r) { replace_all(r[g], "\"nbytes\":432", "\"nbytes\":500"); },
       "has 432 bytes, graph.json says 500"},
      {"record larger than file", [&](Records& r) { replace_all(r[g], "\"nbytes\":432", "\"nbytes\":9000000000"); },
       "more than the whole file"},
      {"missing record", [&](Records& r) { replace_all(r[g], "\"record\":\"data/0\"", "\"record\":\"data/99\""); },
       "no record 'data/99'"},
      {"missing graph", [&](Records& r) { r.items.erase(r.items.begin()); }, "no record 'graph.json'"},
      {"not json", [&](Records& r) { r[g] = "{\"format\": "; }, "malformed graph.json"},
      {"deep nesting", [&](Records& r) { r[g] = std::string(100000, '[') + std::string(100000, ']'); },
       "nested too deeply"},
      {"unknown dtype", [&](Records& r) { replace_all(r[g], "\"dtype\":\"float32\",\"storage\":0", "\"dtype\":\"float128\",\"storage\":0"); },
       "unknown dtype 'float128'"},
      {"unknown tag", [&](Records& r) { replace_all(r[g], "{\"list\":[2,2]}", "{\"pickle\":\"cos\\nsystem\"}"); },
       "unknown value tag 'pickle'"},
      {"int overflow", [&](Records& r) { replace_all(r[g], "{\"list\":[2,2]}", "{\"list\":[2,18446744073709551615]}"); },
       "out of int64 range"},
      {"no output", [&](Records& r) { replace_all(r[g], "\"op\":\"output\"", "\"op\":\"outputs\""); }, "unknown opcode"},
  };
  for (auto& c : cases) {
    Records r = read_records(fixture(1));
    c.edit(r);
    std::string err = load_error(write_archive(r));
    EXPECT_NE(err.find(c.error), std::string::npos) << c.what << ": got '" << err << "'";
  }
}

TEST(Load, NotArchivesAreRefused) {
  EXPECT_NE(load_error("").find("not a readable model archive"), std::string::npos);
  EXPECT_NE(load_error("PK\x03\x04 nonsense").find("not a readable model archive"), std::string::npos);
  // A pickle (what torch.save and GraphModule pickles are) is not read at all.
  EXPECT_NE(load_error("\x80\x04\x95" "cos\nsystem\n(S'touch /tmp/pwned'\ntR.").find("not a readable"), std::string::npos);
  EXPECT_THROW(load("/nonexistent/file.fxpt"), FormatError);
  EXPECT_THROW(load(kFixtures), FormatError);  // a directory
}

// Note [Loader fuzzing]
// ~~~~~~~~~~~~~~~~~~~~~
// Three fuzzers drive the loader and one forward of what it loaded, each case
// judged by tests/fuzz/fxpt_harness.h: a FormatError with a message (a
// malformed file, a refused operator), an Error from forward, or a correct
// run (the planned runtime's results, on the first and the planned second
// call, equal the unplanned runtime's). Anything else, a crash or a
// sanitizer report, fails.
// * Load.FuzzedFilesFailCleanly (here, `make test`, ASan+UBSan, seconds):
//   truncations and byte flips of the fixture; structure-aware mutants of
//   the zip container (methods, flags, CRCs, sizes, offsets, overlapping and
//   repeated entries, names, end records) rebuilt with zip_builder.h; and of
//   graph.json, parsed and re-serialised with strings, numbers and values
//   replaced by odd ones (invalid UTF-8, huge and negative numbers,
//   identifiers with quotes, newlines and __import__, operator names).
// * FuzzCorpus.EveryFileHasItsOutcome (fuzz_corpus_test.cpp): the committed
//   seed corpus, each file's outcome class given by its name.
// * tests/fuzz/fxpt_fuzzer.cpp: libFuzzer, coverage-guided from that corpus
//   (`make fuzz`, FXCPP_FUZZ_SECONDS).
namespace fuzzing {

using namespace fxpt_mutators;
using ziptest::ZipRecord;

// The records of an honest archive, with their full names.
std::vector<ZipRecord> records_of(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  std::string prefix = path.substr(path.rfind('/') + 1);
  prefix = prefix.substr(0, prefix.rfind('.')) + "/";
  std::vector<ZipRecord> out;
  for (const std::string& name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    ZipRecord r;
    r.name = prefix + name;
    r.data.assign(static_cast<const char*>(data.get()), size);
    out.push_back(std::move(r));
  }
  return out;
}

struct Tally {
  std::map<fuzz::Outcome, int> count;
  int findings = 0;
  void run(const std::string& bytes, const std::string& what) {
    try {
      count[fuzz::run_case(bytes.data(), bytes.size()).outcome]++;
    } catch (const fuzz::Finding& f) {
      ADD_FAILURE() << what << ": " << f.what();
      if (const char* dir = std::getenv("FXCPP_FUZZ_DUMP_DIR")) {  // to replay: fxpt_fuzzer FILE
        std::ofstream(std::string(dir) + "/finding-" + std::to_string(findings++) + ".fxpt", std::ios::binary) << bytes;
      }
    }
  }
};

}  // namespace fuzzing

TEST(Load, FuzzedFilesFailCleanly) {
  using namespace fuzzing;
  const std::string good = read_bytes(fixture(1));
  Tally t;
  // Truncations near the ends, random byte flips.
  for (size_t cut = 0; cut < good.size(); cut += (cut < 64 || cut + 600 > good.size()) ? 1 : 97)
    t.run(good.substr(0, cut), "truncated at " + std::to_string(cut));
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::string bad = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    t.run(bad, "flips #" + std::to_string(i));
  }
  EXPECT_GT(t.count[fuzz::Outcome::Refused], 400);

  // The container's fields, then graph.json's text (through an honest container).
  std::vector<std::vector<ZipRecord>> bases = {records_of(fixture(1))};
  for (const char* seed : {"ok_primitives.fxpt", "ok_mlp.fxpt"}) bases.push_back(records_of(kCorpus + "/" + seed));
  Tally zip, json;
  for (int i = 0; i < 300; ++i) {
    std::string what = "zip mutant #" + std::to_string(i) + ":";
    zip.run(mutate_zip(pick(bases, rng), rng, what), what);
  }
  for (int i = 0; i < 450; ++i) {
    std::vector<ZipRecord> rs = pick(bases, rng);
    std::string what = "graph.json mutant #" + std::to_string(i) + ":";
    rs.front().data = mutate_json(rs.front().data, rng, what);
    json.run(build_zip(rs), what);
  }
  for (auto& [what, tally] : std::initializer_list<std::pair<const char*, Tally*>>{{"zip", &zip}, {"graph.json", &json}})
    std::printf("%s mutants: %d refused, %d failed in forward, %d ran\n", what, tally->count[fuzz::Outcome::Refused],
                tally->count[fuzz::Outcome::Failed], tally->count[fuzz::Outcome::Ran]);
  // Each fuzzer reaches past the loader: some mutants load and run, some fail in forward.
  EXPECT_GT(zip.count[fuzz::Outcome::Refused], 100);
  EXPECT_GT(zip.count[fuzz::Outcome::Ran], 10);
  EXPECT_GT(json.count[fuzz::Outcome::Refused], 100);
  EXPECT_GT(json.count[fuzz::Outcome::Ran], 10);
  EXPECT_GT(json.count[fuzz::Outcome::Failed], 5);
}

}  // namespace
}  // namespace fxcpp::torch
