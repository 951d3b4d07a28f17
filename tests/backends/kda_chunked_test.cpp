// The chunked KDA form (LibTorch ops) against the token-by-token recurrence, on the shapes that
// break naive kernels: T = 1, T < C, T % C != 0, several chunks; and its gradient against the
// recurrence's gradient.
#include <gtest/gtest.h>

#include "backends/kda_chunked.h"

namespace onboard::backends {
namespace {

struct ChunkedInputs {
  at::Tensor q, k, v, g, beta;
};

ChunkedInputs Make(int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, double lb, uint64_t seed) {
  torch::manual_seed(seed);
  auto l2 = [](const at::Tensor& x) { return x / x.norm(2, -1, true); };
  ChunkedInputs in;
  in.q = l2(torch::randn({B, T, H, K}, torch::kDouble)) / std::sqrt(double(K));
  in.k = l2(torch::randn({B, T, H, K}, torch::kDouble));
  in.v = torch::randn({B, T, H, V}, torch::kDouble);
  in.g = lb * torch::sigmoid(torch::randn({B, T, H, K}, torch::kDouble));
  in.beta = torch::sigmoid(torch::randn({B, T, H}, torch::kDouble));
  return in;
}

double RelErr(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).norm() / b.norm().clamp_min(1e-30)).item<double>();
}

TEST(KdaChunked, MatchesRecurrenceOnOddShapes) {
  for (int64_t T : {1, 5, 16, 33, 64}) {
    for (int64_t C : {8, 16}) {
      ChunkedInputs in = Make(2, T, 2, 8, 6, -5.0, 17 + T * 3 + C);
      at::Tensor ref = KdaRecurrent(in.q, in.k, in.v, in.g, in.beta);
      at::Tensor got = KdaChunked(in.q, in.k, in.v, in.g, in.beta, C);
      ASSERT_EQ(got.sizes(), ref.sizes());
      EXPECT_LT(RelErr(got, ref), 1e-10) << "T=" << T << " C=" << C;
    }
  }
}

TEST(KdaChunked, StrongDecayStaysFinite) {
  // Cumulative decay of a 16-chunk at the -5 bound is -80: exp(+80) would overflow naive forms.
  ChunkedInputs in = Make(1, 40, 1, 4, 4, -5.0, 3);
  in.g = torch::full_like(in.g, -5.0);
  at::Tensor got = KdaChunked(in.q.to(torch::kFloat), in.k.to(torch::kFloat), in.v.to(torch::kFloat),
                              in.g.to(torch::kFloat), in.beta.to(torch::kFloat), 16);
  EXPECT_TRUE(torch::isfinite(got).all().item<bool>());
  at::Tensor ref = KdaRecurrent(in.q, in.k, in.v, in.g, in.beta);
  EXPECT_LT(RelErr(got.to(torch::kDouble), ref), 1e-5);
}

TEST(KdaChunked, GradientMatchesRecurrence) {
  ChunkedInputs in = Make(1, 21, 2, 4, 3, -2.0, 9);
  std::vector<at::Tensor> leaves = {in.q, in.k, in.v, in.g, in.beta};
  for (auto& t : leaves) t.requires_grad_(true);
  at::Tensor w = torch::randn({1, 21, 2, 3}, torch::kDouble);
  auto grads_of = [&](bool chunked) {
    at::Tensor o = chunked ? KdaChunked(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], 8)
                           : KdaRecurrent(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4]);
    return torch::autograd::grad({(o * w).sum()}, leaves);
  };
  auto a = grads_of(true), b = grads_of(false);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(RelErr(a[i], b[i]), 1e-9) << "input " << i;
}

}  // namespace
}  // namespace onboard::backends
