// INTERNAL to backends/ (includes LibTorch). Sums in one fixed, layout-independent order, so that
// a gradient reduced over ranks and micro-batches comes out bit-identical for every data-parallel
// layout of the same global batch (ProbeConfig::micro_batch, backends/README.md).
//
// The canonical order over items 0..n-1 is the binary-counter (pairwise) tree: items are pushed in
// index order; whenever the two newest partial sums cover equally many items they are replaced by
// (older + newer). For n a power of two this is the perfect binary tree, in which every aligned
// block of 2^k consecutive items is one subtree: a rank (or a group of consecutive ranks) that sums
// its aligned block first and hands the partial on gets exactly the bits of a single process that
// sums all n. Leftover partials (n not a power of two) are added oldest first.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace onboard::backends {

class TreeAccumulator {
 public:
  // Adds the next item (index order). The tensor is kept, not copied: do not modify it afterwards.
  void Push(at::Tensor item);
  // Sum of everything pushed (undefined tensor when nothing was); the accumulator is emptied.
  at::Tensor Take();
  bool empty() const { return stack_.empty(); }

 private:
  std::vector<std::pair<int64_t, at::Tensor>> stack_;  // (items covered, partial sum)
};

// Sum over dim 0 of rows [n, ...] in the canonical order above.
at::Tensor TreeSumRows(const at::Tensor& rows);

}  // namespace onboard::backends
