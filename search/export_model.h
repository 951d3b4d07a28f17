// ExportModel: the facts of one model that every engine export reads (search/export_*.cpp), taken
// from the ModelIR plus the few config.json fields the IR does not keep (rope base and scaling,
// norm epsilon). One home for "what the model is" so the engines' exports cannot disagree.
// Units: dimensions are element counts; rope_theta is the RoPE base (dimensionless).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"

namespace onboard {

struct RopeScaling {
  std::string type;                  // "" = none | "yarn" | "llama3" | other (kept verbatim)
  double factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32, beta_slow = 1;        // yarn
  double mscale = 1.0, mscale_all_dim = 0.0;   // yarn (DeepSeek)
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
};

struct ExportModel {
  std::string name, model_type;
  int64_t layers = 0, hidden = 0, vocab = 0, max_position = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, v_head_dim = 0;
  bool tied = false, qkv_bias = false, linear_bias = false, qk_norm = false, layer_norm = false;
  bool swiglu = true;                // gated SiLU MLP; false = plain GELU MLP
  std::string activation;            // ActivationName of the dense / expert MLP
  double norm_eps = 1e-5;
  double rope_theta = 10000;
  bool rope_from_config = false;     // false: config.json gave no rope_theta (default printed)
  RopeScaling rope;
  // Token mixers: counts by kind over all layers.
  int64_t n_softmax = 0, n_mla = 0, n_dsa = 0, n_kda = 0, n_gdn = 0, n_linear = 0, n_window = 0;
  bool mla = false;                  // every softmax layer is MLA (or DSA on MLA)
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0;
  int64_t index_heads = 0, index_head_dim = 0, index_topk = 0;
  bool attn_output_gate = false;
  bool mla_nope = false;             // config.json mla_use_nope: MLA keys carry no rotary part
  // Channel mixers.
  int64_t dense_ffn = 0;             // FFN width of dense layers (0 = none)
  std::vector<bool> moe_layer;       // per layer: MoE (true) or dense (false)
  int64_t experts = 0, top_k = 0, expert_ffn = 0, shared_experts = 0, shared_ffn = 0;
  int64_t latent_dim = 0;
  bool router_sigmoid = false, expert_score_bias = false, renormalize = true, shared_gate = false;
  int64_t groups = 1, topk_groups = 1;
  double routed_scaling = 1.0;
  int64_t mtp_layers = 0;
  // Engine-independent gaps: layer kinds the usual engines cannot build.
  bool has_unusual_mixer() const { return n_kda + n_gdn + n_linear + n_window > 0; }
  int64_t first_moe_layer() const;   // -1 = no MoE
  // LoRA adapts the routed experts: the model has MoE layers and they have no shared expert
  // (core/lora_targets.h AdaptsRoutedExperts, the one home of the rule).
  bool lora_adapts_routed_experts() const;
};

// Fills ExportModel from the IR; rope / eps come from the config.json at model.source when it is
// readable (a missing file or field keeps the defaults and records it in `notes`).
ExportModel DescribeModel(const ModelIR& model, std::vector<std::string>* notes);

// First layer of each pipeline (virtual) stage, in model order: the plan's own boundaries when it
// has them, else BalancedSplit (search/pipeline_split.cpp) of the layers' forward FLOPs.
// pp*interleave entries; {0} when pp == 1.
std::vector<int64_t> ExportStageStarts(const Plan& plan, const ModelIR& model);

// Layers in each stage from the starts: sizes[i] = starts[i+1] - starts[i] (last: layers - start).
std::vector<int64_t> StageSizes(const std::vector<int64_t>& starts, int64_t layers);

// Context-parallel degree of the plan. core/plan.h does not have a cp degree yet (another change
// adds one): read as 1 here, the one place every export gets it from.
int64_t PlanContextParallel(const Plan& plan);

// The strongest recompute policy over all block kinds (engines that take one setting).
Recompute StrongestRecompute(const Plan& plan);

// "recompute per block kind (KDA=full, MoE=none): one setting exported, the strongest" when the
// plan's block kinds differ; "" when they agree (engines take one recompute setting).
std::string MixedRecomputeNote(const Plan& plan);

// The plan's expert dispatcher as the engines' flex-dispatcher backend: "deepep" / "hybridep"
// (core/plan.h EpDispatcherName), or "" for the all-to-all and where no expert dispatch crosses
// ranks (ep * etp == 1: Megatron-Core's DeepEP manager asserts TP x EP > 1, token_dispatcher.py).
std::string PlanFlexDispatcher(const Plan& plan);

// Formats a number without trailing zeros ("1e-06", "0.0001", "2.5", "40").
std::string Num(double v);

}  // namespace onboard
