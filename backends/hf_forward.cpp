// The decoder forward over mapped HF weights, one sequence at a time (transformers semantics:
// pre-norm residual blocks, RMSNorm computed as x * rsqrt(mean(x^2) + eps) * w, final norm, head).
// Shapes: ids [S]; hidden [S, h]; logits [S, vocab].
#include "backends/hf_model.h"

namespace onboard {

torch::Tensor HfRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  const torch::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
  return w * (x * torch::rsqrt(var + eps));
}

torch::Tensor HfApplyLinear(const torch::Tensor& x, const HfLinear& l) {
  torch::Tensor y = torch::matmul(x, l.w.t());
  return l.b.defined() ? y + l.b : y;
}

torch::Tensor HfMlp(const HfForwardConfig& c, const torch::Tensor& x, const HfMlpWeights& w) {
  if (c.situ_beta <= 0)
    return HfApplyLinear(torch::silu(HfApplyLinear(x, w.gate)) * HfApplyLinear(x, w.up), w.down);
  // SiTU-GLU (hf_forward_config.h): b tanh(g / b) sigmoid(g) * (bl tanh(u / bl), or u).
  const torch::Tensor g = HfApplyLinear(x, w.gate), u = HfApplyLinear(x, w.up);
  const double b = c.situ_beta, bl = c.situ_linear_beta;
  const torch::Tensor up = bl > 0 ? bl * torch::tanh(u / bl) : u;
  return HfApplyLinear(b * torch::tanh(g / b) * torch::sigmoid(g) * up, w.down);
}

torch::Tensor HfForward(const HfForwardConfig& c, const HfModelWeights& w, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  // Step 1: token embedding.
  const torch::Tensor idx = torch::tensor(ids, torch::kLong);
  return HfForwardEmbeds(c, w, w.embed.index_select(0, idx), nullptr);
}

torch::Tensor HfForwardEmbeds(const HfForwardConfig& c, const HfModelWeights& w, torch::Tensor h,
                              const HfMrope* mrope) {
  torch::NoGradGuard no_grad;
  // Step 2: residual blocks: h += attn(norm(h)); h += channel(norm(h)).
  for (const HfLayerWeights& lw : w.layers) {
    const LayerSpec& l = c.ir.layers[size_t(lw.index)];
    h = h + HfAttention(c, l, lw.attn, HfRmsNorm(h, lw.input_norm, c.rms_eps), mrope);
    const torch::Tensor n = HfRmsNorm(h, lw.post_norm, c.rms_eps);
    h = h + (lw.moe ? HfMoe(c, l.moe, lw.experts, n) : HfMlp(c, n, lw.mlp));
  }
  // Step 3: final norm and head.
  return torch::matmul(HfRmsNorm(h, w.final_norm, c.rms_eps), w.lm_head.t());
}

}  // namespace onboard
