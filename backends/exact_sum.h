// Torch-free. The exact, order-independent sum of squares of fp32 values (the probe's global grad
// norm, probe_train_step.cpp): every rank bins its squares into integers, the ranks' bins are summed
// as integers (any order, any grouping: the same bits), and the one value is read off the sum.
//
// Legend. An fp32 g is M x 2^(e - 24) with frexp's exponent e in [kExactMinExp, kExactMaxExp] =
// [-148, 128] and M = |frexp mantissa| x 2^24 an integer in [0, 2^24) (exact for normal and subnormal
// fp32). So g^2 = M^2 x 2^(2e - 48) exactly, M^2 < 2^48, split in hi = M^2 >> 24 and lo = M^2 mod 2^24
// (each < 2^24):
//   bins[2 (e - kExactMinExp)]     += hi      weight 2^(2e - 24)
//   bins[2 (e - kExactMinExp) + 1] += lo      weight 2^(2e - 48)
//   bins[kExactNanBin] / bins[kExactInfBin]   count NaN / +-Inf values (the sum is then NaN / +Inf)
// A bin takes 2^39 adds (each < 2^24) before its int64 overflows: ~5e11 values over all ranks.
// Value(): the exact sum, correctly rounded to the nearest double (ties to even). The square of
// zero adds nothing. Units: the squares' own (a gradient's units squared).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace onboard::backends {

inline constexpr int64_t kExactMinExp = -148;  // frexp exponent of the smallest fp32 subnormal 2^-149
inline constexpr int64_t kExactMaxExp = 128;   // frexp exponent of the largest fp32
inline constexpr int64_t kExactExps = kExactMaxExp - kExactMinExp + 1;
inline constexpr int64_t kExactNanBin = 2 * kExactExps;
inline constexpr int64_t kExactInfBin = kExactNanBin + 1;
inline constexpr int64_t kExactBins = kExactInfBin + 1;  // int64 per accumulator: 556

class ExactSquareSum {
 public:
  void AddSquare(float g);            // one value (the scalar path; tests, reference)
  void AddBins(const int64_t* bins);  // kExactBins integers in the legend's layout
  const std::array<int64_t, kExactBins>& bins() const { return bins_; }
  double Value() const;  // the exact sum, rounded once

 private:
  std::array<int64_t, kExactBins> bins_{};
};

// The sum of `bins` (kExactBins integers, e.g. all-reduced over ranks), rounded once to a double.
double ExactSquareBinsValue(const int64_t* bins);

}  // namespace onboard::backends
