// Rms (backends/rms_norm.cpp): the composite RMSNorm's values and gradients, keeping only x and w
// for backward. Negative control: the composite itself keeps its [..., D] normalised copy.
#include <gtest/gtest.h>

#include "backends/proxy_weights.h"
#include "backends/tensor_memory_compat.h"

namespace onboard::backends {
namespace {

at::Tensor RmsOps(const at::Tensor& x, const at::Tensor& w) {
  return x * at::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true) / x.size(-1) + 1e-6) * w;
}

// Forward under grad, then the gradients of sum(y * g) for a fixed g: {y, dx, dw}.
std::vector<at::Tensor> RunNorm(bool composite, const at::Tensor& x0, const at::Tensor& w0,
                                const at::Tensor& g) {
  at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  at::Tensor y = composite ? RmsOps(x, w) : Rms(x, w);
  (y * g).sum().backward();
  return {y.detach(), x.grad(), w.grad()};
}

TEST(RmsNorm, ValuesEqualTheCompositeAndGradientsAgree) {
  at::manual_seed(7);
  for (auto dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor x = at::randn({3, 5, 24}, dtype), w = at::randn({24}, dtype) + 1;
    const at::Tensor g = at::randn({3, 5, 24}, dtype);
    const std::vector<at::Tensor> a = RunNorm(false, x, w, g), b = RunNorm(true, x, w, g);
    EXPECT_TRUE(at::equal(a[0], b[0]));  // same ops on the same inputs
    const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
    EXPECT_TRUE(at::allclose(a[1], b[1], tol, tol)) << (a[1] - b[1]).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(a[2], b[2], tol, tol)) << (a[2] - b[2]).abs().max().item<double>();
  }
}

// What the forward leaves alive, beyond x, w and y: nothing for Rms; the composite keeps the
// normalised x * rstd ([N, D]) and rstd ([N, 1]).
TEST(RmsNorm, KeepsNoNormalisedCopyForBackward) {
  ASSERT_TRUE(InstallLiveTensorCounter());
  const int64_t N = 256, D = 64;
  at::Tensor x = at::randn({N, D}).requires_grad_(true), w = at::ones({D}).requires_grad_(true);
  auto kept = [&](bool composite) {
    const int64_t before = LiveTensorBytes();
    at::Tensor y = composite ? RmsOps(x, w) : Rms(x, w);
    const int64_t held = LiveTensorBytes() - before - y.nbytes();
    y.sum().backward();  // the graph still works and frees what it kept
    return held;
  };
  EXPECT_EQ(kept(false), 0);
  EXPECT_EQ(kept(true), N * D * 4 + N * 4);
}

}  // namespace
}  // namespace onboard::backends
