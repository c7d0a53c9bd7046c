// The fuzzers' seed corpus (tests/fuzz/corpus, written by make_corpus.py,
// plus any file the coverage-guided fuzzer found and we kept) replayed
// through load_from_buffer and one forward under ASan+UBSan (Note [Loader
// fuzzing] in load_test.cpp). A file's name gives its outcome class: `ok_*`
// runs correctly, `bad_*` is refused with a FormatError, `fail_*` loads and
// fails in forward with an Error; any other name only has to end cleanly.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "../fuzz/fxpt_harness.h"

namespace fxcpp::torch {
namespace {

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  if (DIR* d = opendir(FXCPP_FUZZ_CORPUS_DIR)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzCorpus, EveryFileHasItsOutcome) {
  std::vector<std::string> files = corpus_files();
  ASSERT_GE(files.size(), 10u) << "the seed corpus is missing: " << FXCPP_FUZZ_CORPUS_DIR;
  int ok = 0, bad = 0;
  for (const std::string& name : files) {
    std::ifstream f(std::string(FXCPP_FUZZ_CORPUS_DIR) + "/" + name, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    const std::string bytes = s.str();
    fuzz::Result r;
    try {
      r = fuzz::run_case(bytes.data(), bytes.size());
    } catch (const fuzz::Finding& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    if (name.rfind("ok_", 0) == 0) {
      EXPECT_EQ(r.outcome, fuzz::Outcome::Ran) << name << ": " << r.message;
      ++ok;
    } else if (name.rfind("bad_", 0) == 0) {
      EXPECT_EQ(r.outcome, fuzz::Outcome::Refused) << name << " " << fuzz::outcome_name(r.outcome);
      ++bad;
    } else if (name.rfind("fail_", 0) == 0) {
      EXPECT_EQ(r.outcome, fuzz::Outcome::Failed) << name << ": " << r.message;
    }
  }
  EXPECT_GE(ok, 4);
  EXPECT_GE(bad, 4);
}

}  // namespace
}  // namespace fxcpp::torch
