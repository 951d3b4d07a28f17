// INTERNAL to backends/ (includes LibTorch). A tensor's squares binned as exact_sum.h's legend
// says, on the tensor's own device (CPU or CUDA): frexp, integer squares, index_add into int64 bins.
// Integer adds: the bins (and Value()) do not depend on the elements' order or on how they are split
// over ranks, micro-batches or shards.
#pragma once

#include <torch/torch.h>

#include "backends/exact_sum.h"

namespace onboard::backends {

// int64 [kExactBins] on `values`' device: the bins of the elements of `values` (fp32, or a narrower
// float converted exactly) whose `counted` entry is non-zero (`counted` like `values`; undefined =
// every element).
inline at::Tensor ExactSquareBins(const at::Tensor& values, const at::Tensor& counted = at::Tensor()) {
  at::Tensor x = values.detach().to(at::kFloat).flatten();
  if (counted.defined()) x = x.masked_select(counted.to(x.device()).flatten() != 0);
  at::Tensor bins = at::zeros({kExactBins}, x.options().dtype(at::kLong));
  if (x.numel() == 0) return bins;
  // Step 1: non-finite values are counted, not binned.
  const at::Tensor finite = at::isfinite(x);
  bins[kExactNanBin] = at::isnan(x).sum();
  bins[kExactInfBin] = at::isinf(x).sum();
  x = at::where(finite, x, at::zeros_like(x));
  // Step 2: g = f 2^e, M = |f| 2^24 (an integer < 2^24), M^2 < 2^48 split in 24-bit halves.
  auto [f, e] = at::frexp(x);
  const at::Tensor m = (f.abs() * 16777216.0f).to(at::kLong);
  const at::Tensor sq = m * m;
  const at::Tensor slot = (e.to(at::kLong) - kExactMinExp) * 2;  // zeros: M = 0 adds nothing
  bins.index_add_(0, slot, at::bitwise_right_shift(sq, 24));
  bins.index_add_(0, slot + 1, at::bitwise_and(sq, 0xffffff));
  return bins;
}

}  // namespace onboard::backends
