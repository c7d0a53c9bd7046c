// Argument::operator== is Python's == (Note [Python equality] in
// src/core/argument.cpp). Each expectation names the Python expression it
// follows; the Python-side differential is the subgraph rewriter's tests
// against torch.fx (tests/python/test_subgraph_rewriter.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "test_util.h"

using namespace fxcpp;
using namespace fxcpp::testing;

namespace {

Argument B(bool b) { return Argument::boolean(b); }

TEST(PythonEquality, NumbersCompareAcrossKinds) {
  EXPECT_EQ(I(1), D(1.0));         // 1 == 1.0
  EXPECT_EQ(B(true), I(1));        // True == 1
  EXPECT_EQ(B(false), D(0.0));     // False == 0.0
  EXPECT_EQ(D(-0.0), I(0));        // -0.0 == 0
  EXPECT_NE(B(true), I(2));        // True != 2
  EXPECT_NE(I(1), D(1.5));         // 1 != 1.5
}

TEST(PythonEquality, IntAndFloatCompareExactly) {
  const int64_t two53 = int64_t(1) << 53;
  EXPECT_EQ(I(two53), D(9007199254740992.0));       // 2**53 == 2.0**53
  EXPECT_NE(I(two53 + 1), D(9007199254740992.0));   // 2**53 + 1 != 2.0**53 (not through a rounded float)
  EXPECT_NE(D(9007199254740992.0), I(two53 + 1));   // either side
  const int64_t mx = std::numeric_limits<int64_t>::max(), mn = std::numeric_limits<int64_t>::min();
  EXPECT_NE(I(mx), D(9223372036854775808.0));       // 2**63 - 1 != 2.0**63
  EXPECT_EQ(I(mn), D(-9223372036854775808.0));      // -2**63 == -2.0**63
  EXPECT_NE(I(0), D(std::nan("")));                 // 0 != nan
  EXPECT_NE(D(std::nan("")), D(std::nan("")));      // nan != nan (distinct objects)
  EXPECT_NE(I(mx), D(std::numeric_limits<double>::infinity()));
}

TEST(PythonEquality, Containers) {
  EXPECT_NE(Argument::tuple({I(1)}), Argument::list({I(1)}));       // (1,) != [1]
  EXPECT_EQ(Argument::list({I(1), B(true)}), Argument::list({D(1.0), I(1)}));
  EXPECT_NE(Argument::list({I(1)}), Argument::list({I(1), I(1)}));
  EXPECT_NE(S("a"), Argument::none());
  EXPECT_EQ(Argument::none(), Argument::none());
  EXPECT_EQ(Argument::slice(I(1), Argument::none(), I(2)), Argument::slice(D(1.0), Argument::none(), I(2)));
}

TEST(PythonEquality, DictsCompareByKeySet) {
  // {'a': 1, 'b': 2} == {'b': 2, 'a': 1.0}: insertion order does not matter.
  EXPECT_EQ(Argument::dict({{S("a"), I(1)}, {S("b"), I(2)}}), Argument::dict({{S("b"), I(2)}, {S("a"), D(1.0)}}));
  // {1: 'x'} == {True: 'x'}: 1 and True are one key.
  EXPECT_EQ(Argument::dict({{I(1), S("x")}}), Argument::dict({{B(true), S("x")}}));
  EXPECT_NE(Argument::dict({{S("a"), I(1)}, {S("b"), I(2)}}), Argument::dict({{S("a"), I(1)}, {S("b"), I(3)}}));
  EXPECT_NE(Argument::dict({{S("a"), I(1)}, {S("b"), I(2)}}), Argument::dict({{S("a"), I(1)}, {S("c"), I(2)}}));
  EXPECT_NE(Argument::dict({{S("a"), I(1)}}), Argument::dict({{S("a"), I(1)}, {S("b"), I(2)}}));
}

}  // namespace
