// The KDA core with the generated CPU kernel as forward gives the torch-ops output (< 1e-5
// relative) and the same gradients (its backward recomputes the torch-ops form).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "backends/kda_generated.h"

namespace onboard::backends {
namespace {

struct GeneratedInputs {
  at::Tensor q, k, v, g, beta;
};

// B=2, T=37 (not a multiple of the chunk), H=2, K=V=16; bounded log decay in [-5, 0].
GeneratedInputs MakeInputs() {
  at::manual_seed(7);
  const int64_t B = 2, T = 37, H = 2, K = 16;
  GeneratedInputs in;
  in.q = at::randn({B, T, H, K});
  in.k = at::randn({B, T, H, K});
  in.v = at::randn({B, T, H, K});
  in.g = -5.0 * at::sigmoid(at::randn({B, T, H, K}));
  in.beta = at::sigmoid(at::randn({B, T, H}));
  return in;
}

TEST(KdaGenerated, ForwardAndGradientsMatchTorchOps) {
  const GeneratedInputs base = MakeInputs();
  std::vector<at::Tensor> outs, grads[2];
  for (int impl = 0; impl < 2; ++impl) {
    std::vector<at::Tensor> leaves = {base.q.clone().requires_grad_(), base.k.clone().requires_grad_(),
                                      base.v.clone().requires_grad_(), base.g.clone().requires_grad_(),
                                      base.beta.clone().requires_grad_()};
    std::string why;
    at::Tensor o = KdaCore(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], 8,
                           impl == 0 ? KdaImpl::kGenerated : KdaImpl::kTorch, &why);
    if (impl == 0) {
      ASSERT_TRUE(why.empty()) << "generated kernel not used: " << why;
    }
    outs.push_back(o.detach());
    (o * at::cos(o.detach() * 3)).sum().backward();  // a non-trivial upstream gradient
    for (const at::Tensor& l : leaves) grads[impl].push_back(l.grad());
  }
  const double rel = ((outs[0] - outs[1]).abs().max() / outs[1].abs().max()).item<double>();
  EXPECT_LT(rel, 1e-5);
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_TRUE(grads[0][i].defined()) << "input " << i;
    const double gr = ((grads[0][i] - grads[1][i]).abs().max() / (grads[1][i].abs().max() + 1e-30)).item<double>();
    EXPECT_LT(gr, 1e-5) << "gradient of input " << i;
  }
}

TEST(KdaGenerated, Fp64FallsBackToTorchOpsWithAReason) {
  const GeneratedInputs b = MakeInputs();
  std::string why;
  at::Tensor o = KdaCore(b.q.to(at::kDouble), b.k.to(at::kDouble), b.v.to(at::kDouble), b.g.to(at::kDouble),
                         b.beta.to(at::kDouble), 8, KdaImpl::kGenerated, &why);
  EXPECT_NE(why.find("fp32"), std::string::npos) << why;
  EXPECT_TRUE(at::allclose(o, KdaCoreTorch(b.q.to(at::kDouble), b.k.to(at::kDouble), b.v.to(at::kDouble),
                                           b.g.to(at::kDouble), b.beta.to(at::kDouble), 8)));
}

}  // namespace
}  // namespace onboard::backends
