// The exact sum of squares (backends/exact_sum.h, exact_sum_torch.h). Negative control: plain double
// summation of a crafted array depends on the order; the exact bins and their value do not, however
// the array is ordered or split (as ranks, shards and micro-batches split a gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backends/exact_sum.h"
#include "backends/exact_sum_torch.h"

namespace onboard::backends {
namespace {

// 2^30 (square 2^60, ulp 256) and 1000 ones: big-first loses every 1, small-first keeps ~1000.
std::vector<float> CraftedSquares() {
  std::vector<float> v(1000, 1.0f);
  v.insert(v.begin(), std::ldexp(1.0f, 30));
  return v;
}

double PlainSquareSum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return s;
}

double ExactValue(const std::vector<float>& v) {
  ExactSquareSum s;
  for (float x : v) s.AddSquare(x);
  return s.Value();
}

TEST(ExactSum, PlainDoubleSumDependsOnOrderTheExactOneDoesNot) {
  std::vector<float> big_first = CraftedSquares();
  std::vector<float> small_first(big_first.rbegin(), big_first.rend());
  // Negative control: the plain fp64 sum differs with the order.
  EXPECT_EQ(PlainSquareSum(big_first), std::ldexp(1.0, 60));
  EXPECT_NE(PlainSquareSum(big_first), PlainSquareSum(small_first));
  // Exact: 2^60 + 1000, rounded once to the nearest double (a multiple of 256): 2^60 + 1024.
  const double exact = std::ldexp(1.0, 60) + 1024;
  EXPECT_EQ(ExactValue(big_first), exact);
  EXPECT_EQ(ExactValue(small_first), exact);
  std::mt19937 rng(7);
  for (int t = 0; t < 5; ++t) {
    std::shuffle(big_first.begin(), big_first.end(), rng);
    EXPECT_EQ(ExactValue(big_first), exact) << "shuffle " << t;
  }
}

TEST(ExactSum, SplitsAddUpToTheSameBinsAndValuesAreCorrectlyRounded) {
  // Integers: sum of k^2, k = 1..1000 = 333833500, exact in a double.
  std::vector<float> v(1000);
  std::iota(v.begin(), v.end(), 1.0f);
  EXPECT_EQ(ExactValue(v), 333833500.0);
  // Split into 7 uneven "ranks", each binned on its own, then the bins summed: same bits.
  ExactSquareSum whole, merged;
  for (float x : v) whole.AddSquare(x);
  for (size_t begin = 0, r = 0; begin < v.size(); ++r) {
    const size_t end = std::min(v.size(), begin + 50 + 40 * r);
    ExactSquareSum part;
    for (size_t i = begin; i < end; ++i) part.AddSquare(v[i]);
    merged.AddBins(part.bins().data());
    begin = end;
  }
  EXPECT_EQ(merged.bins(), whole.bins());
  // Extremes: the smallest subnormal's square 2^-298, the largest fp32's, negatives, zero.
  EXPECT_EQ(ExactValue({std::ldexp(1.0f, -149)}), std::ldexp(1.0, -298));
  const float fmax = std::numeric_limits<float>::max();
  EXPECT_EQ(ExactValue({fmax, -fmax}), 2.0 * static_cast<double>(fmax) * static_cast<double>(fmax));
  EXPECT_EQ(ExactValue({0.0f, -3.0f}), 9.0);
  EXPECT_EQ(ExactValue({}), 0.0);
  // Rounding at 2^53 (ulp 2): (2^26)^2 x 2 = 2^53. + 1 is a tie -> even (2^53); + 3 a tie -> even
  // (2^53 + 4); + 1 + 2^-298 is above the tie (sticky bit) -> up (2^53 + 2).
  const float b26 = std::ldexp(1.0f, 26), tiny = std::ldexp(1.0f, -149);
  EXPECT_EQ(ExactValue({b26, b26, 1.0f}), std::ldexp(1.0, 53));
  EXPECT_EQ(ExactValue({b26, b26, 1.0f, 1.0f, 1.0f}), std::ldexp(1.0, 53) + 4);
  EXPECT_EQ(ExactValue({b26, b26, 1.0f, tiny}), std::ldexp(1.0, 53) + 2);
  // Non-finite values make the sum non-finite (the divergence rule reads it).
  EXPECT_TRUE(std::isnan(ExactValue({1.0f, std::numeric_limits<float>::quiet_NaN()})));
  EXPECT_EQ(ExactValue({1.0f, -std::numeric_limits<float>::infinity()}),
            std::numeric_limits<double>::infinity());
}

TEST(ExactSum, TensorBinsEqualTheScalarPathInAnyOrderAndMask) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v;
  for (int i = 0; i < 4000; ++i) v.push_back(normal(rng) * std::ldexp(1.0f, static_cast<int>(i % 90) - 60));
  v.push_back(std::ldexp(1.0f, -149));  // subnormal
  v.push_back(0.0f);
  const at::Tensor t = at::tensor(v, at::kFloat);
  ExactSquareSum ref;
  for (float x : v) ref.AddSquare(x);
  const at::Tensor bins = ExactSquareBins(t);
  ASSERT_EQ(bins.numel(), kExactBins);
  const std::vector<int64_t> got(bins.data_ptr<int64_t>(), bins.data_ptr<int64_t>() + kExactBins);
  EXPECT_EQ(got, std::vector<int64_t>(ref.bins().begin(), ref.bins().end()));
  // A permutation: the same bins.
  const at::Tensor perm = at::randperm(t.numel(), at::TensorOptions().dtype(at::kLong));
  EXPECT_TRUE(at::equal(ExactSquareBins(t.index_select(0, perm)), bins));
  // The mask counts a subset: the even elements.
  const at::Tensor mask = (at::arange(t.numel()) % 2 == 0);
  ExactSquareSum even;
  for (size_t i = 0; i < v.size(); i += 2) even.AddSquare(v[i]);
  const at::Tensor mb = ExactSquareBins(t, mask);
  EXPECT_EQ(ExactSquareBinsValue(mb.data_ptr<int64_t>()), even.Value());
  EXPECT_NE(ExactSquareBinsValue(mb.data_ptr<int64_t>()), ref.Value());
}

}  // namespace
}  // namespace onboard::backends
