// Image task sequences and images (see probe_image.h).
#include "backends/probe_image.h"

#include <cmath>
#include <vector>

namespace onboard::backends {
namespace {

constexpr int64_t kImageBos = 10;  // BOS, the byte the other tasks use (probe_data.cpp)

}  // namespace

double ImageNoImageNats() { return std::log(static_cast<double>(kImageColours)); }

void FillImageSequence(std::mt19937_64& rng, const ProxyVision& v, int64_t T, int64_t* seq, float* mask,
                       float* pixels, bool blank) {
  const int64_t M = ImageTokens(v), S = v.image, side = v.patch * v.merge, per_row = S / side;
  std::uniform_int_distribution<int64_t> colour(0, kImageColours - 1);
  std::normal_distribution<float> noise(0.0f, static_cast<float>(kImageNoise));
  // Step 1: the regions' colours, then every pixel (drawn even when blank, so the answers and the
  // rest of the sequence are the same with and without the control).
  std::vector<int64_t> c(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) c[static_cast<size_t>(r)] = colour(rng);
  for (int64_t y = 0; y < S; ++y)
    for (int64_t x = 0; x < S; ++x) {
      const int64_t r = (y / side) * per_row + x / side;
      for (int64_t k = 0; k < 3; ++k) {
        const float base = ((c[static_cast<size_t>(r)] >> k) & 1) ? 1.0f : -1.0f;
        const float px = base + noise(rng);
        pixels[(y * S + x) * 3 + k] = blank ? 0.0f : px;
      }
    }
  // Step 2: placeholders, BOS, the answers (counted), filler letters.
  for (int64_t t = 0; t < M; ++t) seq[t] = kImagePlaceholder;
  seq[M] = kImageBos;
  for (int64_t r = 0; r < M; ++r) {
    seq[M + 1 + r] = 'a' + c[static_cast<size_t>(r)];
    mask[M + r] = 1.0f;  // position M + r predicts c_r
  }
  for (int64_t t = 2 * M + 1; t <= T; ++t) seq[t] = 'a' + colour(rng);
}

}  // namespace onboard::backends
