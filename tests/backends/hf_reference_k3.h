// Reference pieces of kimi_k3 (the flagship), in loops over double, on its text model's view
// (hf_test_kimi_k3.h K3TextView). Written from the K3 definitions a released loader and its report state
// (sglang's KimiK3MoE / KimiK3MLAAttention; Megatron's K3MoELayer: "RMSNorm(latent) applied to the combined
// expert output BEFORE the up-projection"), independent of backends/hf_moe.cpp and hf_attention.cpp:
//   latent MoE: u = sum_e w_e expert_e(routed_expert_down_proj x) over the chosen experts [L];
//     routed = routed_expert_up_proj RMSNorm(u; routed_expert_norm, rms_norm_eps) [hidden]
//   gated MLA: o[h*dv + j] *= sigmoid((g_proj x)[h*dv + j]) on the per-head attention output, before o_proj.
//   SiTU-GLU (hidden_act situ; Megatron's situ / ttnn's situ_glu): b tanh(g / b) sigmoid(g) * bl tanh(u /
//   bl),
//     b = activation_situ_beta, bl = activation_situ_linear_beta (absent: u itself).
// Shapes: x [hidden]; u [L]; o [H*dv].
#pragma once

#include "tests/backends/hf_reference_forward.h"

namespace onboard::hftest {

inline Vec Reference::K3LatentRouted(const std::string& moe, const Vec& x, const std::vector<int64_t>& chosen,
                                     const Vec& w, int64_t inter) const {
  const int64_t L = cfg_["routed_expert_hidden_size"];
  const bool norm = cfg_.value("latent_moe_use_norm", false) && !o_.k3_skip_latent_norm;
  const std::string nw = moe + ".routed_expert_norm.weight";
  // Step 1: down to the latent (the negative control norms it here, before the experts).
  Vec xl = MatVec(moe + ".routed_expert_down_proj.weight", x, L);
  if (norm && o_.k3_norm_after_down) xl = NormVec(xl, c_.W(nw), Eps());
  // Step 2: the chosen experts at the latent width, weighted and summed.
  Vec u(static_cast<size_t>(L), 0.0);
  for (int64_t e : chosen) {
    const Vec o = Swiglu(moe + ".experts." + std::to_string(e), xl, inter, "w1", "w3", "w2");
    for (int64_t i = 0; i < L; ++i) u[size_t(i)] += w[size_t(e)] * o[size_t(i)];
  }
  // Step 3: the norm on the sum, then up to hidden.
  if (norm && !o_.k3_norm_after_down) u = NormVec(u, c_.W(nw), Eps());
  return MatVec(moe + ".routed_expert_up_proj.weight", u, int64_t(x.size()));
}

inline Vec Reference::K3MlaGate(const std::string& p, const Vec& x, Vec o) const {
  const std::string g = p + "self_attn.g_proj.weight";
  if (!c_.Has(g) || o_.k3_no_mla_gate) return o;
  const Vec z = MatVec(g, x, int64_t(o.size()));
  for (size_t i = 0; i < o.size(); ++i) o[i] /= 1 + std::exp(-z[i]);
  return o;
}

inline double Reference::K3Situ(double g, double u) const {
  const double b = cfg_["activation_situ_beta"], bl = cfg_.value("activation_situ_linear_beta", 0.0);
  return b * std::tanh(g / b) / (1 + std::exp(-g)) * (bl > 0 ? bl * std::tanh(u / bl) : u);
}

}  // namespace onboard::hftest
