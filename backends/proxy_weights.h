// INTERNAL to backends/ (includes LibTorch). Named views into a unit's flat buffers and the small
// building blocks shared by the proxy's forward files (proxy_forward.cpp, proxy_moe.cpp).
// Legend: x [..., in] rows; W [out, in]; LoRA A [r, in], B [out, r].
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "backends/proxy_model.h"

namespace onboard::backends {

// name -> view into the flat buffers of one unit (base and adapters) or of one expert.
struct Weights {
  std::map<std::string, at::Tensor> w;
  double lora_scale = 0;
  const at::Tensor& operator[](const std::string& n) const {
    auto it = w.find(n);
    ONBOARD_ASSERT(it != w.end(), "proxy weight '" + n + "' missing");
    return it->second;
  }
  bool has(const std::string& n) const { return w.count(n) > 0; }
  // x W^T (+ scale * (x A^T) B^T when the weight has an adapter).
  at::Tensor Lin(const std::string& n, const at::Tensor& x) const {
    at::Tensor y = at::matmul(x, (*this)[n].t());
    auto a = w.find(n + ".A");
    if (a != w.end()) y = y + lora_scale * at::matmul(at::matmul(x, a->second.t()), (*this)[n + ".B"].t());
    return y;
  }
};

inline void AddViews(Weights& out, const FlatLayout& layout, const at::Tensor& flat) {
  for (const ParamSlot& p : layout.slots)
    out.w[p.name] = flat.narrow(0, p.offset, p.numel).view(p.shape);
}

// RMSNorm over the last dim, x [..., D], w [D] (rms_norm.cpp): the composite ops' values and
// gradients, keeping only x and w for backward.
at::Tensor Rms(const at::Tensor& x, const at::Tensor& w);

inline at::Tensor SwiGlu(const Weights& W, const std::string& p, const at::Tensor& x) {
  return W.Lin(p + "w2", at::silu(W.Lin(p + "w1", x)) * W.Lin(p + "w3", x));
}

// Routed MoE of one layer (proxy_moe.cpp): fp32 router, top-k, latent down/up, EP dispatch over
// routing.ep, local experts (flat buffers [n_local * u.expert.numel] and their adapters
// [n_local * u.expert_lora.numel], ascending global id), combine, shared experts.
// h [b, T, D] -> [b, T, D].
at::Tensor MoeForward(const ProxySpec& s, const UnitLayout& u, const Weights& W,
                      const at::Tensor& experts, const at::Tensor& expert_lora, double lora_scale,
                      const at::Tensor& h, MoeRouting& routing);

}  // namespace onboard::backends
