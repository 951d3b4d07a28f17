// Train / held-out split of the text task and its held-out baselines (see probe_text_split.h).
#include "backends/probe_text_split.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace onboard::backends {

Expected<TextSplit> SplitText(const std::string& file, int64_t size, int64_t seq) {
  // Step 1: the held-out tail: a tenth of the file, at least one window (whatever the ranks).
  const int64_t min_held = seq + 1;
  const int64_t held =
      std::max<int64_t>(min_held, static_cast<int64_t>(std::ceil(kTextHeldOutFraction * size)));
  TextSplit s;
  s.seq = seq;
  s.train_end = size - held;
  s.held_begin = s.train_end;
  if (s.train_end < seq + 2)
    return BadInput(file, "text_file",
                    "needs seq+2=" + std::to_string(seq + 2) + " training bytes before the held-out " +
                        std::to_string(held) + " (at least " + std::to_string(min_held) + " bytes: seq + 1)",
                    std::to_string(size) + " bytes");
  // Step 2: whole windows of seq targets (the data ranks split them: HeldOutEval).
  s.held_windows = std::min<int64_t>(kTextMaxHeldOutWindows, (held - 1) / seq);
  return s;
}

TextBaselines ComputeTextBaselines(const std::string& text, const TextSplit& s) {
  // Step 1: counts of the train split (bytes and byte pairs inside [0, train_end)).
  std::array<double, 256> uni{};
  std::vector<double> pair(256 * 256, 0.0);
  auto at = [&](int64_t i) { return static_cast<unsigned char>(text[static_cast<size_t>(i)]); };
  for (int64_t i = 0; i < s.train_end; ++i) {
    uni[at(i)] += 1;
    if (i + 1 < s.train_end) pair[at(i) * 256 + at(i + 1)] += 1;
  }
  const double n = static_cast<double>(s.train_end);
  auto p_uni = [&](int b) { return (uni[b] + 1.0) / (n + 256.0); };
  // Step 2: cross-entropies on the held-out targets (byte t predicted from byte t-1).
  const int64_t first = s.held_begin + 1, last = s.held_begin + s.held_out_targets();
  const double count = static_cast<double>(last - first + 1);
  double h_uni = 0;
  for (int64_t t = first; t <= last; ++t) h_uni -= std::log(p_uni(at(t)));
  h_uni /= count;
  TextBaselines b;
  b.unigram_nats = std::min(h_uni, std::log(256.0));
  b.bigram_nats = b.unigram_nats;
  for (int k = 1; k < 20; ++k) {
    const double lambda = 0.05 * k;
    double h = 0;
    for (int64_t t = first; t <= last; ++t) {
      const int a = at(t - 1), c = at(t);
      const double ctx =
          uni[a] - (s.train_end > 0 && at(s.train_end - 1) == a ? 1.0 : 0.0);  // pairs starting at a
      const double ml = ctx > 0 ? pair[a * 256 + c] / ctx : 0.0;
      h -= std::log(lambda * ml + (1 - lambda) * p_uni(c));
    }
    h /= count;
    if (h < b.bigram_nats) {
      b.bigram_nats = h;
      b.bigram_lambda = lambda;
    }
  }
  return b;
}

}  // namespace onboard::backends
