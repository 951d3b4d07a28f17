// MaxOverMean (core/load_balance.h): the one definition, with one answer on empty input.
#include <gtest/gtest.h>

#include "core/load_balance.h"
#include "core/status.h"

namespace onboard {
namespace {

TEST(MaxOverMean, EvenUnevenEmptyAndZero) {
  EXPECT_DOUBLE_EQ(MaxOverMean({2, 2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(MaxOverMean({1, 3}), 1.5);
  EXPECT_DOUBLE_EQ(MaxOverMean({4, 0, 0, 0}), 4.0);
  // No load is not an imbalance: the three old copies answered 1, 0 and 0 here.
  EXPECT_DOUBLE_EQ(MaxOverMean({}), 1.0);
  EXPECT_DOUBLE_EQ(MaxOverMean({0, 0}), 1.0);
  EXPECT_THROW(MaxOverMean({1, -1}), InvariantError);
}

}  // namespace
}  // namespace onboard
