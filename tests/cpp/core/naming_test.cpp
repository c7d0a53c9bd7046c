#include <gtest/gtest.h>

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
  Namespace b;
  b.copy_from(a);
  EXPECT_EQ(b.size(), a.size());
  for (const char* c : {"add", "mul", "mul_7", "relu", "relu", "relu", "add_17", "fresh"})
    EXPECT_EQ(a.create_name(c, nullptr).str(), b.create_name(c, nullptr).str()) << c;
  // Texts translate to the copy's own storage.
  NameRef r = *a.find("add_100");
  NameRef t = b.translate(a, r);
  EXPECT_EQ(t.view(), "add_100");
  EXPECT_NE(t.c_str(), r.c_str());
}
