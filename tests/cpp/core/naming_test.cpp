#include <gtest/gtest.h>

#include <random>
#include <set>

#include "fxcpp/core/namespace.h"
#include "test_util.h"

using namespace fxcpp;

TEST(Naming, CollisionsKeywordsBuiltins) {
  Namespace ns;
  EXPECT_EQ(ns.create_name("add", nullptr), "add");
  EXPECT_EQ(ns.create_name("add", nullptr), "add_1");
  EXPECT_EQ(ns.create_name("add_1", nullptr), "add_2");
  EXPECT_EQ(ns.create_name("add_07", nullptr), "add_7");
  EXPECT_EQ(ns.create_name("add", nullptr), "add_3");
  EXPECT_EQ(ns.create_name("for", nullptr), "for_1");
  EXPECT_EQ(ns.create_name("list", nullptr), "list_1");
  EXPECT_EQ(ns.create_name("torch", nullptr), "torch_1");
  EXPECT_EQ(ns.create_name("9lives", nullptr), "_9lives");
  EXPECT_EQ(ns.create_name("a.b--c", nullptr), "a_b_c");
  EXPECT_EQ(ns.create_name("x_0", nullptr), "x_0");
  EXPECT_EQ(ns.create_name("x_0", nullptr), "x_1");
  EXPECT_THROW(ns.create_name("", nullptr), std::out_of_range);
}

TEST(Naming, ObjectsKeepTheirName) {
  Namespace ns;
  int a = 0, b = 0;
  EXPECT_EQ(ns.create_name("f", &a), "f");
  EXPECT_EQ(ns.create_name("other", &a), "f");
  EXPECT_EQ(ns.create_name("f", &b), "f_1");
}

TEST(Naming, BuiltinMayKeepItsOwnName) {
  Namespace ns;
  Object len = fxcpp::testing::F(fxcpp::testing::kLen);
  EXPECT_EQ(ns.create_name("len", len.get(), &len), "len");
  EXPECT_EQ(ns.create_name("len", nullptr), "len_1");
}

TEST(Naming, SnakeCaseAndIdentifiers) {
  EXPECT_EQ(snake_case("myFunction"), "my_function");
  EXPECT_EQ(snake_case("ALL_CAPS"), "all_caps");
  EXPECT_EQ(snake_case("Conv2d"), "conv2d");
  EXPECT_TRUE(is_identifier("_a1"));
  EXPECT_FALSE(is_identifier("1a"));
  EXPECT_FALSE(is_identifier("a-b"));
}

TEST(Naming, ManyCollisionsAreLinear) {
  // 200k same-base names: quadratic search would take minutes.
  Namespace ns;
  std::string last;
  for (int i = 0; i < 200000; ++i) last = ns.create_name("add", nullptr);
  EXPECT_EQ(last, "add_199999");
}

TEST(Naming, SetGrowsWithoutLosingNames) {
  // Note [Name set slots]: growing re-places tags only; every name must
  // still be found afterwards, and absent names must not be.
  NameSet set;
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(set.insert("n_" + std::to_string(i)).second);
  EXPECT_EQ(set.size(), 100000u);
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(set.contains("n_" + std::to_string(i))) << i;
  for (int i = 100000; i < 101000; ++i) ASSERT_FALSE(set.contains("n_" + std::to_string(i))) << i;
  EXPECT_FALSE(set.insert("n_5").second);
}

TEST(Naming, KeepsMatchesCreateName) {
  // keeps(name) must say exactly whether create_name(name) returns it as is.
  const char* probes[] = {"add", "add_1", "add_01", "for", "len", "torch", "x", "_1", "1x", "a-b", "add_2", "é",
                          "n_000", "abc_123456789012345678901"};
  Namespace ns;
  ns.create_name("add", nullptr);
  ns.create_name("add", nullptr);  // add_1
  for (const char* p : probes) {
    Namespace copy;
    copy.copy_from(ns);
    bool keeps = ns.keeps(p);
    EXPECT_EQ(keeps, copy.create_name(p, nullptr) == std::string_view(p)) << p;
  }
}

TEST(Naming, CopiedNamespaceBehavesTheSame) {
  Namespace a;
  for (int i = 0; i < 5000; ++i) a.create_name(i % 3 ? "add" : "mul_7", nullptr);
  a.reserve_name("relu_2");
  NameRef r = a.create_name("zz_name", nullptr);
  Namespace b;
  b.copy_from(a);
  EXPECT_EQ(b.size(), a.size());
  for (const char* c : {"add", "mul", "mul_7", "relu", "relu", "relu", "add_17", "fresh"})
    EXPECT_EQ(a.create_name(c, nullptr).str(), b.create_name(c, nullptr).str()) << c;
  // Texts translate to the copy's own storage.
  NameRef t = b.translate(a, r);
  EXPECT_EQ(t.view(), "zz_name");
  EXPECT_NE(t.c_str(), r.c_str());
}

namespace {
// torch.fx 1.13 _Namespace.create_name(candidate, None) for clean candidates,
// written plainly: a set of used names and a search from the suffix + 1.
struct ReferenceNamespace {
  std::set<std::string> used;
  static bool illegal(const std::string& c) {
    return name_rules().keywords.count(c) || name_rules().builtins.count(c) ||
           name_rules().is_custom_builtin(c, nullptr);
  }
  std::string create(const std::string& candidate) {
    std::string base = candidate;
    long long num = 0;
    bool has_num = false;
    size_t p = candidate.size();
    while (p > 0 && std::isdigit(static_cast<unsigned char>(candidate[p - 1]))) --p;
    if (p < candidate.size() && p > 0 && candidate[p - 1] == '_') {
      base = candidate.substr(0, p - 1);
      num = std::stoll(candidate.substr(p));
      has_num = true;
    }
    std::string c = has_num ? base + "_" + std::to_string(num) : base;
    while (used.count(c) || illegal(c)) c = base + "_" + std::to_string(++num);
    used.insert(c);
    return c;
  }
};
}  // namespace

TEST(Naming, MatchesReferenceUnderRandomUse) {
  // Note [Generated name runs]: names the suffix search takes are recorded by
  // the hint only. Interleave auto-naming with explicit suffixed names,
  // reservations and membership queries, and compare with the plain model.
  const char* cands[] = {"add", "add", "add", "add_1", "add_3", "add_07", "add_12", "mul", "mul_2", "x", "x_1",
                         "add_1_2", "len", "for", "add_0", "y_10", "y"};
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Namespace ns;
    ReferenceNamespace ref;
    for (int step = 0; step < 400; ++step) {
      const std::string c = cands[rng() % (sizeof(cands) / sizeof(cands[0]))];
      switch (rng() % 4) {
        case 0:
        case 1: ASSERT_EQ(ns.create_name(c, nullptr).str(), ref.create(c)) << seed << " " << step << " " << c; break;
        case 2: {  // reserve a name the model would give out later
          std::string r = (rng() % 2 ? "add_" : "y_") + std::to_string(rng() % 40);
          if (!ReferenceNamespace::illegal(r)) {
            ns.reserve_name(r);
            ref.used.insert(r);
          }
          break;
        }
        default: {
          std::string q = (rng() % 2 ? "add_" : "mul_") + std::to_string(rng() % 50);
          ASSERT_EQ(ns.is_used(q), ref.used.count(q) == 1) << seed << " " << step << " " << q;
        }
      }
      ASSERT_EQ(ns.size(), ref.used.size()) << seed << " " << step;
    }
    for (const auto& u : ref.used) ASSERT_TRUE(ns.is_used(u)) << u;
    EXPECT_FALSE(ns.keeps("add_1"));
  }
}
