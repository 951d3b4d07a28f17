// Shared by the loading-by-plan tests (HfTpLoad.*, HfFsdpLoad.*): every weight tensor of a mapped
// layer in a fixed order, and the bytes of checkpoint storage a rank's tensors hold (what it must read
// from the mapping, no more). Units: bytes.
#pragma once

#include <set>
#include <vector>

#include "backends/hf_model.h"

namespace onboard::hftest {

// Every weight tensor of a layer (undefined where the family has none), in a fixed order.
inline std::vector<torch::Tensor> LayerTensors(const HfLayerWeights& l) {
  const HfAttentionWeights& a = l.attn;
  std::vector<torch::Tensor> t = {l.input_norm,
                                  l.post_norm,
                                  a.q.w,
                                  a.q.b,
                                  a.k.w,
                                  a.k.b,
                                  a.v.w,
                                  a.v.b,
                                  a.o.w,
                                  a.o.b,
                                  a.q_norm,
                                  a.k_norm,
                                  a.sinks,
                                  a.q_a.w,
                                  a.q_b.w,
                                  a.kv_a.w,
                                  a.kv_b.w,
                                  a.q_a_norm,
                                  a.kv_a_norm,
                                  l.experts.router.w,
                                  l.experts.router.b,
                                  l.experts.score_bias,
                                  l.experts.shared_gate.w,
                                  a.idx_wq_b.w,
                                  a.idx_wk.w,
                                  a.idx_weights.w,
                                  a.idx_k_norm_w,
                                  a.idx_k_norm_b,
                                  a.q_conv,
                                  a.k_conv,
                                  a.v_conv,
                                  a.a_log,
                                  a.dt_bias,
                                  a.o_norm,
                                  a.g.w,  // kimi_k3: the MLA output gate
                                  l.experts.latent_down.w,
                                  l.experts.latent_up.w,
                                  l.experts.latent_norm};
  for (const HfLinear* x : {&a.f_a, &a.f_b, &a.beta, &a.g_a, &a.g_b}) t.insert(t.end(), {x->w, x->b});
  auto mlp = [&](const HfMlpWeights& m) {
    for (const HfLinear* x : {&m.gate, &m.up, &m.down}) t.insert(t.end(), {x->w, x->b});
  };
  mlp(l.mlp);
  for (const HfMlpWeights& e : l.experts.experts) mlp(e);
  mlp(l.experts.shared);
  return t;
}

// Bytes of storage the weights hold (each distinct tensor once): what a rank must read, no more. BF16
// everywhere, except routed-expert weights stored MXFP4 (`mxfp4`): 16 bytes of blocks + 1 scale byte
// per 32 values.
inline uint64_t HeldBytes(const HfModelWeights& w, const std::vector<std::vector<torch::Tensor>>& layers,
                          const std::vector<HfLayerWeights>& mapped, bool mxfp4 = false) {
  std::set<const void*> seen, expert;
  if (mxfp4)
    for (const HfLayerWeights& l : mapped)
      for (const HfMlpWeights& e : l.experts.experts)
        for (const HfLinear* x : {&e.gate, &e.up, &e.down})
          if (x->w.defined()) expert.insert(x->w.data_ptr());
  uint64_t b = 0;
  auto add = [&](const torch::Tensor& t) {
    if (!t.defined() || !seen.insert(t.data_ptr()).second) return;
    b += expert.count(t.data_ptr()) ? uint64_t(t.numel()) * 17 / 32 : 2 * uint64_t(t.numel());
  };
  for (const torch::Tensor& t : {w.embed, w.final_norm, w.lm_head}) add(t);
  for (const auto& l : layers)
    for (const torch::Tensor& t : l) add(t);
  return b;
}

}  // namespace onboard::hftest
