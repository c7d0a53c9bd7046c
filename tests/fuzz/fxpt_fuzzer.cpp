// The coverage-guided fuzzer of the .fxpt loader (libFuzzer, with ASan and
// UBSan; CMake option FXCPP_BUILD_FUZZER, `make fuzz`). Each input is a whole
// file: loaded with load_from_buffer under the default (untrusted) options,
// then run on inputs made from its placeholders' tensor_meta and checked
// against the unplanned runtime (tests/fuzz/fxpt_harness.h). A FormatError,
// an Error from forward, or a correct run is fine; anything else (another
// exception, an error without a message, results that disagree, a crash, a
// sanitizer report) aborts: a finding.
//
// Records are CRC-checked, so most byte mutations of a record stop at the
// container. The custom mutator therefore also mutates inside a valid
// archive: it reads the records with the strict reader, mutates graph.json
// (or a .pt2 archive's models/model.json: the corpus has ok_pt2_*/bad_pt2_*)
// (libFuzzer's byte mutations, or the JSON-aware ones of fxpt_mutators.h)
// or the container's fields, and writes a consistent archive again.
//
// Seed corpus: tests/fuzz/corpus (replayed by the C++ tests: FuzzCorpus.*).
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../../src/torch/zip_reader.h"
#include "fxpt_harness.h"
#include "fxpt_mutators.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);  // one intra-op thread: deterministic, and the fuzzer runs one case at a time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    fxcpp::torch::fuzz::run_case(data, size);
  } catch (const fxcpp::torch::fuzz::Finding& f) {
    std::fprintf(stderr, "fxpt_fuzzer: FINDING: %s\n", f.what());
    std::abort();
  }
  return 0;
}

namespace {

using fxcpp::torch::ziptest::ZipRecord;
namespace zip = fxcpp::torch::zip;
namespace mut = fxcpp::torch::fxpt_mutators;

// The records of a valid archive (empty if it is not one).
std::vector<ZipRecord> records(const uint8_t* data, size_t size) {
  std::vector<ZipRecord> out;
  try {
    zip::Reader r(std::make_shared<zip::MemorySource>(data, size));
    for (const zip::Entry& e : r.entries()) {
      ZipRecord rec;
      rec.name = e.name;
      rec.data.resize(e.size);
      r.read(e, &rec.data[0]);
      out.push_back(std::move(rec));
    }
  } catch (const fxcpp::torch::Error&) {
    out.clear();
  }
  return out;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  const unsigned how = rng() % 8;
  std::vector<ZipRecord> rs = how < 3 ? std::vector<ZipRecord>() : records(data, size);
  if (rs.empty()) return LLVMFuzzerMutate(data, size, max_size);  // bytes of the file
  size_t g = 0;
  for (size_t i = 0; i < rs.size(); ++i)
    if ((rs[i].name.size() >= 10 && rs[i].name.compare(rs[i].name.size() - 10, 10, "graph.json") == 0) ||
        rs[i].name.find("/models/model.json") != std::string::npos)  // a .pt2 archive's program
      g = i;
  std::string out, what;
  try {
    if (how < 6) {  // bytes of graph.json (or another record), in a consistent archive
      std::string& text = rs[how == 5 ? rng() % rs.size() : g].data;
      const size_t room = text.size() + 4096;
      text.resize(room);
      text.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(&text[0]), room - 4096, room));
      out = mut::build_zip(rs);
    } else if (how == 6) {  // graph.json's strings, numbers and values
      rs[g].data = mut::mutate_json(rs[g].data, rng, what);
      out = mut::build_zip(rs);
    } else {  // the container's fields
      out = mut::mutate_zip(rs, rng, what);
    }
  } catch (const std::exception&) {  // graph.json that is not JSON, and the like
    return LLVMFuzzerMutate(data, size, max_size);
  }
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
