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
