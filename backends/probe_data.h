// INTERNAL to backends/ (includes LibTorch). Training data of the probe, generated identically on
// every rank: sequence j of step s depends only on (seed, s, j), so any split of the global batch
// over ranks sees the same tokens as a single process.
//
// Tasks:
//   copy: [BOS, s_1..s_h, s_1..s_h] with h = seq/2 symbols drawn uniformly from `copy_symbols`
//         letters; the loss counts only the h copied tokens. Floor: 0 nats (perfect copy).
//         A model that ignores the copy structure can at best reach ln(copy_symbols) nats.
//   text: windows of seq+1 bytes from a file at seeded offsets, byte-level tokens; every position
//         counts. No known floor.
// Shapes: tokens, targets [b, seq] int64; mask [b, seq] float (1 = counted in the loss).
#pragma once

#include <torch/torch.h>

#include <string>

#include "backends/probe.h"

namespace onboard::backends {

struct Batch {
  at::Tensor tokens, targets, mask;
};

class ProbeData {
 public:
  ProbeData(const ProxySpec& spec, const ProbeConfig& config);
  const Status& status() const { return status_; }
  // Sequences [first, first + count) of the global batch of `step`.
  Batch Get(int64_t step, int64_t first, int64_t count) const;
  int64_t CountedTokensPerStep() const;   // over the global batch

 private:
  ProbeConfig cfg_;
  std::string text_;
  Status status_;
};

}  // namespace onboard::backends
