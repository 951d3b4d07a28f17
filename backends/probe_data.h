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
// Held-out evaluation (GetHeldOut, the final weights' verdict: probe_worker.cpp Step 4c):
//   text: the split's held-out windows; copy: kCopyEvalSequences sequences drawn like a training
//   batch but from step kCopyEvalStep, which no training step draws. Other tasks: none.
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

// Copy task's held-out evaluation set (issue 12): the verdict judges the FINAL weights on these
// sequences, as the text task judges its held-out split. Why 1024: 1024 x 7 copied letters (seq 16)
// = 7,168 scored tokens, a binomial standard error of 0.35 points at 90% accuracy; the mean of the
// last 5 training batches (1,120 tokens, five weight states) has 0.9 points. Cost: one forward of
// 1024 sequences (~ the forwards of 32 training steps). kCopyEvalStep: the step index they are
// drawn at (sequence j depends on (seed, step, j)); training steps are >= 0.
inline constexpr int64_t kCopyEvalSequences = 1024;
inline constexpr int64_t kCopyEvalStep = -1;

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
  // Held-out rows [first, first + count) of HeldOutWindows() (text: probe_text_split.h windows;
  // copy: the evaluation sequences); rows at or past `end` are padding (mask 0: the same shapes on
  // every data rank, nothing counted).
  Batch GetHeldOut(int64_t first, int64_t count, int64_t end) const;
  int64_t HeldOutWindows() const;        // text: the split's windows; copy: kCopyEvalSequences; else 0
  int64_t HeldOutCountedTokens() const;  // counted targets over all HeldOutWindows() rows

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
