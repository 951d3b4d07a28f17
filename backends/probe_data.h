// INTERNAL to backends/ (includes LibTorch). Training data of the probe, generated identically on
// every rank: sequence j of step s depends only on (seed, s, j), so any split of the global batch
// over ranks sees the same tokens as a single process.
//
// Tasks:
//   copy: [BOS, s_1..s_h, BOS, s_1..s_h (, filler)] with h = CopyHalf(seq) = (seq-1)/2 distinct
//         symbols drawn uniformly (without replacement) from `copy_symbols` letters; the loss and
//         the exact-match accuracy count only the h copied tokens. Floor: 0 nats (perfect copy).
//         No-learning baseline: the targets' unigram entropy ln(copy_symbols) nats (uniform marginal).
//         symbol_offset shifts the alphabet (LoRA's base phase trains on the next copy_symbols
//         letters: a related source task whose symbols the target task does not use).
//   lookup: triples (a, b, Y[a][b]) of a fixed random table (probe_lookup.h); only the values count.
//   image: M image placeholders, BOS, the M regions' colours (probe_image.h); only the colours count.
//   text: windows of seq+1 bytes at seeded offsets in the file's train split, byte-level tokens;
//         every position counts. The held-out tail (probe_text_split.h) is never trained on:
//         GetHeldOut reads its fixed windows. No known floor.
// Shapes: tokens, targets [b, seq] int64; mask [b, seq] float (1 = counted in the loss).
#pragma once

#include <torch/torch.h>

#include <random>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "backends/probe_text_split.h"

namespace onboard::backends {

struct Batch {
  at::Tensor tokens, targets, mask;
  at::Tensor images;  // image task: [b, S, S, 3] pixels (probe_image.h); undefined otherwise
};

// Copied symbols per copy-task sequence of `seq` tokens (seq+1 with the shifted target).
inline int64_t CopyHalf(int64_t seq) { return (seq - 1) / 2; }

class ProbeData {
 public:
  // symbol_offset: each copy symbol comes from the alphabet shifted by symbol_offset, except with
  // probability unshifted_share from the unshifted one (copy task only); offset != 0 also reseeds.
  ProbeData(const ProxySpec& spec, const ProbeConfig& config, int64_t symbol_offset = 0,
            double unshifted_share = 0.0);
  const Status& status() const { return status_; }
  // Sequences [first, first + count) of the global batch of `step`.
  Batch Get(int64_t step, int64_t first, int64_t count) const;
  int64_t CountedTokensPerStep() const;   // over the global batch
  // Text task: held-out windows [first, first + count) of HeldOutWindows() (probe_text_split.h);
  // rows at or past window `end` are padding (mask 0: the same shapes on every data rank, nothing
  // counted).
  Batch GetHeldOut(int64_t first, int64_t count, int64_t end) const;
  int64_t HeldOutWindows() const { return split_.held_windows; }

 private:
  ProbeConfig cfg_;
  ProxyVision vision_;  // image task: the tower's image and merge sizes (probe_image.h)
  int64_t symbol_offset_ = 0;
  double unshifted_share_ = 0.0;
  std::string text_;
  TextSplit split_;
  std::vector<int64_t> lookup_;  // lookup task: the table (probe_lookup.h)
  Status status_;
  void FillLookup(std::mt19937_64& rng, int64_t T, at::TensorAccessor<int64_t, 1> seq,
                  at::TensorAccessor<float, 1> mask) const;
};

// LoRA base phase length: LoraBaseSteps (backends/probe_schedule.h).
// Source task of the base phase: copy over the next copy_symbols letters after the target's
// (less when they would pass byte 255), with the target's own letters as a rare minority
// (kLoraSourceTargetShare of the symbols): a base pretrained on a related distribution in which
// the target domain is rare, as for domain-adaptation LoRA.
constexpr double kLoraSourceTargetShare = 0.05;
int64_t LoraSourceSymbolOffset(const ProbeConfig& config);

}  // namespace onboard::backends
