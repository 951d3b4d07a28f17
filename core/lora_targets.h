// Which weights a LoRA fine-tune adapts: the one home of that choice, read by the exports
// (search/export_bridge.cpp: Megatron-Bridge target_modules; search/export_torchtitan.cpp: its LoRA
// converter's target FQNs) and by the probe's proxy (backends/proxy_layout.cpp), so the LoRA probe
// trains the adapter set the user's engine will train. Also the adapters' alpha (kLoraAlphaPerRank).
//   attention       the mixer's input and output projections (q/k/v or MLA's q/kv down/up, o)
//   dense_mlp       the dense layers' FFN (fc1 = gate+up, fc2 = down)
//   shared_experts  the shared-expert FFN of MoE layers
//   routed_experts  the routed experts of an MoE layer that has no shared expert, one adapter per
//                   expert (AdaptsRoutedExperts): every FFN layer keeps a trainable path. Where a
//                   shared expert exists it is that path and the routed experts stay frozen. Why: an
//                   all-MoE model (Mixtral, Qwen3-MoE) otherwise trains attention only (QLoRA, Dettmers
//                   et al. 2023, arXiv 2305.14314: adapters on every linear layer are needed to match
//                   full fine-tuning), and the engines' own defaults adapt them: Megatron-Bridge's
//                   LoRA targets linear_fc1/fc2 match the experts' grouped linears (peft/lora.py
//                   is_expert_linear; share_expert_adapters=False gives one adapter per expert, as
//                   HF PEFT does on transformers' per-expert Linears). torchtitan's LoRAConverter wraps
//                   Linear configs only, so its export states that it leaves them frozen. Measured
//                   (issue 12): the qwen3-30b-a3b / mixtral proxies' attention-only adapters ended
//                   not_learned at 88.2% held-out copy accuracy.
//   output_head     the LM head: frozen (no export targets Megatron's output_layer or torchtitan's
//                   output; the real-weights probe's PEFT adapter holds attention, dense MLP, shared
//                   experts and the routed experts above; gpt-oss's fused experts as PEFT's
//                   target_parameters, one lora_A [r*E, in] / lora_B [out, r*E] per fused parameter).
#pragma once

#include <cstdint>

namespace onboard {

struct LoraTargetSet {
  bool attention = true;
  bool dense_mlp = true;
  bool shared_experts = true;
  bool routed_experts_without_shared = true;
  bool output_head = false;
};

inline constexpr LoraTargetSet kLoraTargets{};

// Whether an MoE layer with `shared_experts` shared experts adapts its routed experts (see above).
inline constexpr bool AdaptsRoutedExperts(int64_t shared_experts) {
  return kLoraTargets.routed_experts_without_shared && shared_experts == 0;
}

// LoRA alpha = kLoraAlphaPerRank x rank when the user gives none (adapter scale alpha / r = 2): the
// exports' lora_alpha (Megatron-Bridge LoRA(dim, alpha), torchtitan, MindSpeed --lora-alpha), the
// proxy probe's (ProbeConfig::lora_alpha <= 0) and the real-weights probe's (--lora-alpha). One home,
// so the probe trains the scale the user's engine will (issue 12: the proxy kept alpha 8 when its
// rank went from 4 to 16, a quarter of the exports' scale).
inline constexpr int64_t kLoraAlphaPerRank = 2;
inline double DefaultLoraAlpha(int64_t rank) { return static_cast<double>(kLoraAlphaPerRank * rank); }

}  // namespace onboard
