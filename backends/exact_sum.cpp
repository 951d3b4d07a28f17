// ExactSquareSum (legend in exact_sum.h): fp32 squares binned as integers, summed exactly, read
// off as one correctly rounded double.
#include "backends/exact_sum.h"

#include <cmath>
#include <limits>

namespace onboard::backends {
namespace {

// The exact sum as a non-negative integer B, value = B x 2^kBase, in 32-bit limbs (least first).
// Bit offsets: hi of exponent index i at 2i + 24, lo at 2i (kBase = 2 kExactMinExp - 48); the top
// bin is < 2^63 at offset 2 (kExactExps - 1) + 24 = 576: bits < 640, plus the carries' headroom.
constexpr int kBase = 2 * static_cast<int>(kExactMinExp) - 48;
constexpr int kLimbs = 24;
using Limbs = std::array<uint64_t, kLimbs>;

void AddAt(Limbs& l, uint64_t v, int offset) {
  const unsigned __int128 x = static_cast<unsigned __int128>(v) << (offset % 32);
  const int q = offset / 32;
  l[q] += static_cast<uint64_t>(x & 0xffffffffu);
  l[q + 1] += static_cast<uint64_t>((x >> 32) & 0xffffffffu);
  l[q + 2] += static_cast<uint64_t>(x >> 64);  // < 2^31: v < 2^63, shift < 32
}

int Bit(const Limbs& l, int j) { return static_cast<int>((l[j / 32] >> (j % 32)) & 1u); }

}  // namespace

void ExactSquareSum::AddSquare(float g) {
  if (std::isnan(g)) {
    ++bins_[kExactNanBin];
    return;
  }
  if (std::isinf(g)) {
    ++bins_[kExactInfBin];
    return;
  }
  if (g == 0) return;
  int e = 0;
  const float f = std::frexp(g, &e);                                 // g = f 2^e, |f| in [0.5, 1)
  const auto m = static_cast<uint64_t>(std::fabs(f) * 16777216.0f);  // M = |f| 2^24, an integer
  const uint64_t sq = m * m;                                         // < 2^48
  const auto i = static_cast<size_t>(2 * (e - kExactMinExp));
  bins_[i] += static_cast<int64_t>(sq >> 24);
  bins_[i + 1] += static_cast<int64_t>(sq & 0xffffffu);
}

void ExactSquareSum::AddBins(const int64_t* bins) {
  for (int64_t i = 0; i < kExactBins; ++i) bins_[static_cast<size_t>(i)] += bins[i];
}

double ExactSquareSum::Value() const { return ExactSquareBinsValue(bins_.data()); }

double ExactSquareBinsValue(const int64_t* bins) {
  if (bins[kExactNanBin] > 0) return std::numeric_limits<double>::quiet_NaN();
  if (bins[kExactInfBin] > 0) return std::numeric_limits<double>::infinity();
  // Step 1: the integer B, carries propagated (every limb < 2^32 after).
  Limbs l{};
  for (int i = 0; i < static_cast<int>(kExactExps); ++i) {
    AddAt(l, static_cast<uint64_t>(bins[2 * i]), 2 * i + 24);
    AddAt(l, static_cast<uint64_t>(bins[2 * i + 1]), 2 * i);
  }
  for (int i = 0; i + 1 < kLimbs; ++i) {
    l[i + 1] += l[i] >> 32;
    l[i] &= 0xffffffffu;
  }
  // Step 2: the top (up to) 64 bits of B and a sticky bit for the rest.
  int h = -1;
  for (int j = 32 * kLimbs - 1; j >= 0 && h < 0; --j)
    if (Bit(l, j)) h = j;
  if (h < 0) return 0.0;
  const int lowest = h >= 63 ? h - 63 : 0;
  uint64_t top = 0;
  for (int j = h; j >= lowest; --j) top = (top << 1) | static_cast<uint64_t>(Bit(l, j));
  bool sticky = false;
  for (int j = lowest - 1; j >= 0 && !sticky; --j) sticky = Bit(l, j) != 0;
  // Step 3: round to 53 bits, nearest, ties to even.
  const int n = h - lowest + 1;
  const int shift = n > 53 ? n - 53 : 0;
  uint64_t mant = top >> shift;
  if (shift > 0) {
    const uint64_t rem = top & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (sticky || (mant & 1u)))) ++mant;
  }
  return std::ldexp(static_cast<double>(mant), lowest + shift + kBase);
}

}  // namespace onboard::backends
