// Layout files for `onboard plan --evaluate`:
//  (a) one layout: {"tp":8,"pp":1,"dp":1,"ep":1,"micro_batch":1,"global_batch":4,...} costed on the
//      model and topology given on the command line;
//  (b) a published_runs.json-style {"runs":[{id, model{hidden,ffn,heads,layers,seq,vocab,...},
//      hardware, gpus, tp, pp, dp, ..., measured_step_s}], "memory_gib_per_gpu":{...}}: each run
//      carries its own model dims and hardware, and is evaluated on them;
//  (c) a measured_training_runs.json-style {"runs":[{id, model:"org/name", hardware, gpus, tp, pp, vp,
//      cp, ep, dp, fsdp, global_batch, micro_batch, seq, precision, recompute, optimizer, recipe{...},
//      measured{tokens_per_s_per_gpu, ...}}], "configs":{"org/name":{file}}}: the model is the HF
//      config named in `configs` (layout_file_measured.cpp and layout_file_recipe.cpp say how each field is
//      read).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"
#include "core/topology.h"
#include "search/planner.h"

namespace onboard {

struct MeasuredMemoryGiB {                     // Figure-1 style, per device, GiB
  double params_grads_optimizer = 0;
  double activations_no_recompute = 0;
  double activations_seq_selective = 0;
};

struct LayoutRun {
  std::string id;
  bool has_model = false;                     // model/topology given inside the file
  ModelIR model;
  Topology topology;
  Plan plan;
  std::string optimizer_sharding = "none";    // none | zero1 | fsdp (dp ranks share optimizer state)
  std::optional<double> measured_step_s;
  std::optional<MeasuredMemoryGiB> measured_memory;  // matched by model name ("megatron-22B")
  double dropout = 0;                         // model.dropout (dims form: default 0.1, Megatron-LM's)
  std::string attention_kernel = "flash";     // model.attention (dims form: default "unfused")
  int64_t layout_layers = -1;                 // decoder layers placed by a pp_layout (-1 = none given)
  bool mode_stated = false;                   // the layout names its "mode" (else the command line's)
  // Form (c): what the source measured, per GPU, and how its free text was read.
  std::optional<double> measured_tokens_per_s_per_gpu;
  std::optional<double> measured_tflops_per_gpu;
  std::string skipped;                        // non-empty: cannot be costed as published (why)
  std::string uncertain;                      // the source's own caveat, if any
  std::vector<std::string> assumptions;       // "recompute 'unknown (not stated)' read as none", ...
  bool overlap_ep_comm = false;               // the recipe overlaps EP all-to-all (moe_a2a_overlap)
  bool overlap_pp_p2p = false;                // interleaved PP sends overlapped (PlanRequest::overlap_pp_p2p)
  bool recompute_norms = false;               // RMSNorm outputs recomputed (PlanRequest::recompute_norms)
  bool fp8_act_input_store = false;           // SwiGLU input kept in fp8 (PlanRequest::fp8_act_input_store)
  bool fp8_expert_padding = false;            // experts pad fp8 rows (PlanRequest::fp8_expert_padding)
  int64_t cpu_offload_layers = 0;             // PlanRequest::cpu_offload_layers (0 = off)
  std::string cross_entropy;                  // PlanRequest::cross_entropy ("" = the request's)
  double expert_nodes_per_token = 0;          // PlanRequest::expert_nodes_per_token (0 = not given)
  int64_t max_route_nodes = 0;                // PlanRequest::max_route_nodes (0 = off)
  bool recompute_unstated = false;            // the source does not say: ResolveUnstatedRecompute picks it
};

// The request that evaluates `run` on its own model and topology (full fine-tuning unless the run
// says "mode": "lora").
PlanRequest RequestForRun(const LayoutRun& run);
// The run's framework options that live on the request, not the plan (EP overlap, RMSNorm
// recompute, fp8 SwiGLU-input store): RequestForRun's, and `--evaluate` of a single layout's.
void ApplyRunOptions(const LayoutRun& run, PlanRequest* req);

// Megatron-Core's recompute_granularity=selective with its default recompute_modules [core_attn]: every
// mixer's attention core recomputed, the channels (MLP, MoE) not: {"*": selective, "MLP": none,
// "MoE": none}. (MoE selective is moe_act, the SwiGLU output recomputed: memory_model.cpp.)
std::map<std::string, Recompute> CoreAttnRecompute();

// Parses either form. Bad input names file, field (json path) and value.
Expected<std::vector<LayoutRun>> LoadLayoutFile(const std::string& path);
Expected<std::vector<LayoutRun>> ParseLayoutJson(const std::string& text, const std::string& origin);

// Dense / MoE decoder from published dims: hidden, ffn, heads, layers, vocab, kv_heads, experts,
// top_k, moe_ffn, gated. `origin` names it in errors.
Expected<ModelIR> ModelFromDims(const std::string& json_text, const std::string& origin);

// Topology for a known device type name (A100-80GB, H100-80GB, H800-80GB, H200-141GB,
// B200-180GB/B200, B300-288GB/B300, GB200-NVL72/GB200, GB300-NVL72/GB300, Ascend-950DT): the
// scale-up domain (8 per node, 72 per NVL72 rack, split into equal shares of the job) then one NIC
// per device (nic_gbit Gb/s; 0 = the device's datasheet NIC) across.
// `field_prefix` is put before field names in errors ("runs[2]." -> "runs[2].gpus").
Expected<Topology> TopologyForHardware(const std::string& hardware, int64_t devices,
                                       double nic_gbit, const std::string& origin,
                                       const std::string& field_prefix = "");

}  // namespace onboard
