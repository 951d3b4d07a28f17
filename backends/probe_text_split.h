// Byte-level text task (`onboard probe --text FILE`): the train / held-out split of the file and
// the held-out baselines the learning verdict compares the model against.
//
//   split     the last kTextHeldOutFraction of the file (at least seq + 1 bytes) is held out:
//             training windows are drawn from the bytes before it only, so the held-out loss is
//             measured on text the model never trained on
//   windows   held-out window i covers bytes [held_begin + i*seq, held_begin + (i+1)*seq]: tokens
//             are its first seq bytes, targets the next seq (every target is counted once);
//             W = every whole window of the tail, at most kTextMaxHeldOutWindows.
//   Neither depends on the rank layout: every layout trains on the same split and evaluates the
//   same W windows as one process (HeldOutEval splits them over the data ranks, padding).
//   unigram   no-learning baseline: cross-entropy on the held-out targets of the train split's
//             byte frequencies (add-one smoothed over 256 bytes), or ln 256 when that is lower
//   bigram    cross-entropy on the held-out targets of p(b | a) = lambda x c(a,b)/c(a) +
//             (1 - lambda) x unigram(b), counts from the train split, with the lambda of
//             {0, 0.05, .., 0.95} that scores best on the held-out targets: the strongest bigram
//             model of this family, so "below the bigram" means the model uses more than the
//             previous byte (never above the unigram baseline: lambda = 0 is in the grid)
// Units: bytes (= tokens); entropies in nats per target byte.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace onboard::backends {

inline constexpr double kTextHeldOutFraction = 0.1;
inline constexpr int64_t kTextMaxHeldOutWindows = 64;

struct TextSplit {
  int64_t train_end = 0;     // training windows lie in [0, train_end)
  int64_t held_begin = 0;    // = train_end
  int64_t held_windows = 0;  // W, a multiple of ranks
  int64_t seq = 0;
  int64_t held_out_targets() const { return held_windows * seq; }
};

// Errors (naming the file, field and size): a split without seq + 2 training bytes before a
// held-out tail of at least one window.
Expected<TextSplit> SplitText(const std::string& file, int64_t size, int64_t seq);

struct TextBaselines {
  double unigram_nats = 0;   // no-learning: context-free byte frequencies
  double bigram_nats = 0;    // the previous byte as context
  double bigram_lambda = 0;  // the interpolation weight that scored best
};

TextBaselines ComputeTextBaselines(const std::string& text, const TextSplit& split);

}  // namespace onboard::backends
