// Image task of the probe (`onboard probe --task image`, issue 12 item 6): an answer that only the
// image holds, so the vision tower (proxy_vision.h) must learn for the loss to fall.
//
//   image     S x S pixels, 3 channels (S = ProxyVision::image); its M = (S / (patch * merge))^2
//             regions (one per merged vision token, row-major) are each filled with one of
//             kImageColours colours (colour c: channel k = +1 if bit k of c is set, else -1) plus
//             Gaussian noise of std kImageNoise per pixel; colours drawn uniformly per region
//   sequence  [P x M, BOS, c_0, ..., c_{M-1}, filler...]: the first M positions are image
//             placeholders (byte kImagePlaceholder) whose embeddings the tower's output replaces;
//             c_r = 'a' + colour of region r; the loss and the exact-match accuracy count only the
//             M colour answers (predicted at BOS, c_0, ..., c_{M-2})
//   baselines no-image = the answers' unigram entropy ln(kImageColours) nats (colours uniform and
//             independent: without the image nothing predicts them); floor 0 (each answer is a
//             function of its region's mean pixel). The no_image control (probe_controls.h) feeds
//             blank images and must stay at the no-image baseline.
// Units: pixels in [-1 - noise, 1 + noise] (no clipping); entropies in nats per counted answer.
#pragma once

#include <cstdint>
#include <random>

#include "backends/probe.h"

namespace onboard::backends {

inline constexpr int64_t kImageColours = 8;
inline constexpr double kImageNoise = 0.5;
inline constexpr int64_t kImagePlaceholder = 1;

// Merged image tokens at the start of every image-task sequence.
inline int64_t ImageTokens(const ProxyVision& v) {
  const int64_t side = v.image / (v.patch * v.merge);
  return side * side;
}

// The no-image baseline: ln(kImageColours) nats.
double ImageNoImageNats();

// One sequence of seq + 1 tokens (seq[0..T]) with its mask [T] and its image (S*S*3 floats,
// row-major [row, column, channel]); blank = the no_image control (all pixels 0, same answers).
void FillImageSequence(std::mt19937_64& rng, const ProxyVision& v, int64_t T, int64_t* seq, float* mask,
                       float* pixels, bool blank);

}  // namespace onboard::backends
