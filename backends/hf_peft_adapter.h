// LoRA adapters in the PEFT on-disk format, so `PeftModel.from_pretrained(base, DIR)` loads them onto
// the original checkpoint:
//   DIR/adapter_config.json      {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r", "lora_alpha",
//                                 "target_modules", "base_model_name_or_path", "lora_dropout", "bias":
//                                 "none", "fan_in_fan_out": false, "inference_mode": true}
//   DIR/adapter_model.safetensors "base_model.model.<module>.lora_A.weight" [r, in],
//                                 "base_model.model.<module>.lora_B.weight" [out, r]
// with <module> the HF module path ("model.layers.3.self_attn.q_proj"). Effective weight (PEFT, no
// rslora): W + (lora_alpha / r) * B A. Units: r in ranks; shapes [out, in].
// Fused expert parameters (PEFT's `target_parameters`, lora.ParamWrapper): the config lists them in
// "target_parameters" ("mlp.experts.gate_up_proj"); each wrapper's A is [r*E, in] and B [out, r*E]
// (E experts), saved under its wrapper's path: the first-registered parameter of a module is the
// innermost wrapper ("model.layers.0.mlp.experts.base_layer" for gpt-oss's gate_up_proj, the outer
// "model.layers.0.mlp.experts" for its down_proj; probe_weights_fused_adapters.cpp derives them).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/status.h"

namespace onboard {

struct LoraModule {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  torch::Tensor a;     // lora_A [r, in] (a fused parameter's: [r*E, in])
  torch::Tensor b;     // lora_B [out, r] (a fused parameter's: [out, r*E])
};

struct PeftLoraAdapter {
  int64_t r = 0;
  double alpha = 0;
  std::string base_model;            // base_model_name_or_path
  std::vector<LoraModule> modules;   // sorted by module path
  // PEFT's target_parameters ("mlp.experts.gate_up_proj"), empty when no fused parameter is adapted;
  // their modules are the ones whose A has more than r rows. May repeat: written sorted, each once.
  std::vector<std::string> target_parameters;
  // Distinct module paths past "layers.N." ("self_attn.q_proj", "mlp.gate_proj",
  // "mlp.shared_experts.down_proj", a routed expert's "block_sparse_moe.experts.3.w1") of the modules
  // with r rows in A (not the fused parameters'); a module outside the layers: its last path part.
  std::vector<std::string> TargetModules() const;
};

// Writes adapter_config.json + adapter_model.safetensors (F32) into `dir` (created if missing).
[[nodiscard]] Status WritePeftAdapter(const std::string& dir, const PeftLoraAdapter& a);

// Reads them back (untrusted: A's rows a multiple k of r and B's columns the same k*r, every lora_A
// has its lora_B).
[[nodiscard]] Expected<PeftLoraAdapter> ReadPeftAdapter(const std::string& dir);

// W + (alpha / r) B A for one module's base weight [out, in].
torch::Tensor MergeLora(const torch::Tensor& w, const LoraModule& m, int64_t r, double alpha);

}  // namespace onboard
