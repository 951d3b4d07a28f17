// INTERNAL to backends/ (includes LibTorch). KDA (gated delta rule with per-channel decay) in
// LibTorch ops: the chunked form of shared/reference/kernels.md, differentiable by autograd, and
// the token-by-token recurrence it is checked against (tests/backends/kda_chunked_test.cpp).
//
// Shapes: q, k [B, T, H, K] (q already scaled, q and k L2-normalised); v [B, T, H, V];
// g [B, T, H, K] log decay <= 0; beta [B, T, H] in (0, 1). Output o [B, T, H, V].
#pragma once

#include <torch/torch.h>

namespace onboard::backends {

// Chunked form, chunk length C. All exponents are differences G[c]-G[i] with c >= i (<= 0), so
// nothing overflows whatever the chunk's cumulative decay.
at::Tensor KdaChunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& g, const at::Tensor& beta, int64_t chunk);

// Reference recurrence (slow, for tests): S <- diag(exp g) S; S += beta k (v - S^T k)^T; o = S^T q.
at::Tensor KdaRecurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& beta);

}  // namespace onboard::backends
