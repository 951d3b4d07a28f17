// ToMindSpeedScript: MindSpeed-LLM (Ascend NPUs; the seed's Atlas hardware) argument list: the
// Megatron-LM list of export_megatron.cpp with MindSpeed-LLM's own flags where they differ.
// Flag names from Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21):
//   --num-layer-list a,b,..     features_manager/pipeline_parallel/num_layer_list.py (len == pp,
//                               needs pp > 1, not with virtual pipeline)
//   --noop-layers i,j,..        Ascend/MindSpeed features_manager/pipeline_parallel/noop_layers.py: layers
//                               that are identities; MindSpeed-LLM's DeepSeek-V3 recipe
//                               (examples/mcore/deepseek3/pretrain_deepseek3_671b_4k_ptd.sh) runs 61 layers
//                               as --num-layers 64 --noop-layers 61,62,63
//   --first-k-dense-replace K   features_manager/transformer/transformer_block.py (K < num_layers // pp:
//                               export_mindspeed_rules.cpp, the one home of MindSpeed's rules)
//   --norm-topk-prob            features_manager/moe/moe_router.py
//   --rope-scaling-type yarn|llama3, --rope-scaling-factor, --beta-fast, --beta-slow,
//   --rope-scaling-mscale, --rope-scaling-mscale-all-dim,
//   --rope-scaling-original-max-position-embeddings, --low-freq-factor, --high-freq-factor,
//   --original-max-position-embeddings   features_manager/common/rotary.py
//   --tokenizer-type PretrainedFromHF --tokenizer-name-or-path  features_manager/tokenizer/build_tokenizer.py
//   --enable-hf2mg-convert --model-type-hf X   features_manager/convert_checkpoint/convert_checkpoint.py
//   --lora-r --lora-alpha --lora-target-modules  features_manager/finetune/lora.py
// The layout/FSDP/rope flags of the Megatron list that MindSpeed replaces are removed.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/lora_targets.h"
#include "search/export_mindspeed_rules.h"
#include "search/export_model.h"
#include "search/plan_export.h"

namespace onboard {

const char* const kMindSpeedTarget = "Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21)";

namespace {

std::string S(int64_t v) { return std::to_string(v); }

// --model-type-hf value for a Hugging Face model_type ("" = MindSpeed-LLM lists none).
std::string MindSpeedHfType(const std::string& model_type) {
  if (model_type == "deepseek_v3") return "deepseek3";
  if (model_type == "qwen3_moe") return "qwen3-moe";
  if (model_type == "qwen3") return "qwen3";
  if (model_type == "mixtral") return "mixtral";
  return "";
}

// --first-k-dense-replace K: the model's leading dense layers when every later layer is MoE; 0 otherwise.
int64_t FirstKDense(const ExportModel& m) {
  const int64_t first_moe = m.first_moe_layer();
  bool dense_prefix = first_moe > 0;
  for (int64_t l = std::max<int64_t>(first_moe, 0); l < m.layers && dense_prefix; ++l)
    dense_prefix = m.moe_layer[l];
  return dense_prefix ? first_moe : 0;
}

// The plan's stage split as MindSpeed-LLM takes it. Step 1: --num-layer-list, unless MindSpeed's
// dense-layers rule, which reads --num-layers and not the list, refuses it. Step 2: then the
// noop-layer form of MindSpeed's DeepSeek-V3 recipe: --num-layers k*pp with the last k*pp - L
// layers noop, i.e. stages of k = the largest stage, only the last one shorter. Step 3: a split
// of another shape, or one the rule refuses in that form too, is NOT SUPPORTED with the rule.
void ReplacePipeline(const Plan& p, const ModelIR& ir, const ExportModel& m, MegatronExport* e) {
  e->args.Remove("--pipeline-model-parallel-layout");
  if (p.deg.pp <= 1) return;
  if (p.deg.interleave > 1)
    e->caveats.approximations.push_back("virtual pipeline (interleave " + S(p.deg.interleave) +
                                        "): --num-layer-list cannot express it; one stage per rank exported");
  Plan flat = p;
  flat.deg.interleave = 1;
  if (p.deg.interleave > 1) flat.stage_layer_starts.clear();
  const std::vector<int64_t> sizes = StageSizes(ExportStageStarts(flat, ir), m.layers);
  const int64_t first_k = FirstKDense(m), pp = p.deg.pp;
  if (MindSpeedDenseLayersFit(first_k, m.layers, pp)) {
    std::string list;
    for (int64_t s : sizes) list += (list.empty() ? "" : ",") + S(s);
    e->args.Add("--num-layer-list", list);
    return;
  }
  const int64_t k = *std::max_element(sizes.begin(), sizes.end());
  bool tail_form = sizes.back() >= 1;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) tail_form = tail_form && sizes[i] == k;
  if (tail_form && MindSpeedDenseLayersFit(first_k, k * pp, pp)) {
    std::string noop;
    for (int64_t l = m.layers; l < k * pp; ++l) noop += (noop.empty() ? "" : ",") + S(l);
    for (auto& [flag, value] : e->args.flags)
      if (flag == "--num-layers") value = S(k * pp);
    if (!noop.empty()) e->args.Add("--noop-layers", noop);
    e->caveats.approximations.push_back(
        "stage split as --num-layers " + S(k * pp) + " with noop layers " + (noop.empty() ? "none" : noop) +
        " (MindSpeed-LLM's DeepSeek-V3 recipe form): its --first-k-dense-replace rule reads --num-layers, "
        "so " +
        "--num-layer-list with " + S(m.layers) + " layers over pp " + S(pp) + " is refused");
    return;
  }
  e->caveats.unsupported.push_back(
      "stage split of " + S(m.layers) + " layers over pp " + S(pp) +
      ": MindSpeed-LLM requires --first-k-dense-replace " + S(first_k) +
      " < --num-layers // pp (transformer_block.py validate_args), and the split is "
      "not of the noop-layer form (equal stages, a shorter last one)");
}

void ReplaceModelFlags(const Plan& p, const ExportModel& m, MegatronExport* e) {
  MegatronArgs& a = e->args;
  if (const int64_t first_k = FirstKDense(m); first_k > 0) {
    a.Remove("--moe-layer-freq");
    a.Add("--first-k-dense-replace", S(first_k));
    a.Add("--moe-layer-freq", "1");
  }
  if (m.experts > 0 && m.renormalize) a.Add("--norm-topk-prob");
  for (const char* f : {"--rope-type", "--rotary-scaling-factor", "--mscale", "--mscale-all-dim", "--use-rope-scaling",
                        "--rope-scaling-factor"})
    a.Remove(f);
  if (m.rope.type == "yarn") {
    a.Add("--rope-scaling-type", "yarn");
    a.Add("--rope-scaling-factor", Num(m.rope.factor));
    a.Add("--beta-fast", Num(m.rope.beta_fast));
    a.Add("--beta-slow", Num(m.rope.beta_slow));
    a.Add("--rope-scaling-mscale", Num(m.rope.mscale));
    a.Add("--rope-scaling-mscale-all-dim", Num(m.rope.mscale_all_dim));
    a.Add("--rope-scaling-original-max-position-embeddings", S(m.rope.original_max_position));
  } else if (m.rope.type == "llama3") {
    a.Add("--rope-scaling-type", "llama3");
    a.Add("--rope-scaling-factor", Num(m.rope.factor));
    a.Add("--low-freq-factor", Num(m.rope.low_freq_factor));
    a.Add("--high-freq-factor", Num(m.rope.high_freq_factor));
    a.Add("--original-max-position-embeddings", S(m.rope.original_max_position));
  }
  // DSA indexer: Megatron-LM main's --experimental-attention-variant dsa / --dsa-indexer-* are
  // MindSpeed-LLM's --enable-dsa-indexer / --index-* (features_manager/transformer/multi_latent_attention/
  // dsa_indexer_feature.py). Its Megatron base (core_r0.12) has no latent MoE (--moe-latent-size).
  if (a.Value("--experimental-attention-variant") == "dsa") {
    a.Remove("--experimental-attention-variant");
    a.Add("--enable-dsa-indexer");
    for (const auto& [from, to] :
         std::vector<std::pair<std::string, std::string>>{{"--dsa-indexer-n-heads", "--index-n-heads"},
                                                          {"--dsa-indexer-head-dim", "--index-head-dim"},
                                                          {"--dsa-indexer-topk", "--index-topk"}}) {
      const std::string v = a.Value(from);
      a.Remove(from);
      if (!v.empty()) a.Add(to, v);
    }
  }
  if (a.Has("--moe-latent-size")) {
    e->caveats.unsupported.push_back(
        "MoE latent projection (moe_latent_size " + a.Value("--moe-latent-size") +
        "): MindSpeed-LLM's Megatron base (core_r0.12) has no --moe-latent-size");
    a.Remove("--moe-latent-size");
  }
  if (m.model_type == "deepseek_v3") a.Add("--spec", "mindspeed_llm.tasks.models.spec.deepseek_spec layer_spec");
  a.Add("--use-mcore-models");
  a.Add("--use-flash-attn");
  (void)p;
}

void ReplaceSystemFlags(const Plan& p, const ExportModel& m, MegatronExport* e) {
  MegatronArgs& a = e->args;
  if (a.Has("--use-megatron-fsdp")) {
    for (const char* f : {"--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                          "--num-distributed-optimizer-instances", "--outer-dp-sharding-strategy"})
      a.Remove(f);
    e->caveats.approximations.push_back("Megatron-FSDP is not used on MindSpeed-LLM here: the distributed optimizer "
                                        "(ZeRO-1) shards only optimizer state, so weights and gradients take more memory "
                                        "per device than the plan's FSDP");
  }
  // DeepEP / HybridEP are CUDA kernels, and MindSpeed-LLM's Megatron base (core_r0.12) has no
  // --moe-flex-dispatcher-backend: the all-to-all is exported.
  if (a.Has("--moe-flex-dispatcher-backend")) {
    e->caveats.approximations.push_back(
        "dispatcher " + a.Value("--moe-flex-dispatcher-backend") +
        ": a CUDA kernel, not on Ascend; alltoall exported (the plan priced one "
        "slow-tier copy per remote node, the all-to-all sends one per top-k expert)");
    a.Remove("--moe-flex-dispatcher-backend");
    a.Remove("--moe-token-dispatcher-type");
    a.Add("--moe-token-dispatcher-type", "alltoall");
  }
  // NVFP4 GEMMs are Blackwell tensor-core instructions (TE NVFP4BlockScaling), and MindSpeed-LLM's
  // Megatron base (core_r0.12) has no --fp4-format: the plan cannot run there as planned.
  if (a.Has("--fp4-format")) {
    e->caveats.unsupported.push_back(
        "nvfp4 GEMMs: an NVIDIA Blackwell recipe (TE NVFP4BlockScaling); MindSpeed-LLM's Megatron base "
        "(core_r0.12) has no --fp4-format");
    a.Remove("--fp4-format");
    a.Remove("--fp4-recipe");
  }
  a.Remove("--ckpt-format");
  a.Add("--ckpt-format", "torch");
  a.Remove("--tokenizer-type");
  a.Remove("--tokenizer-model");
  a.Add("--tokenizer-type", "PretrainedFromHF");
  a.Add("--tokenizer-name-or-path", "${HF_MODEL_PATH:?required}");
  const std::string hf = MindSpeedHfType(m.model_type);
  if (!hf.empty()) {
    // convert_checkpoint.py validate_args: with --enable-hf2mg-convert, --load is the HF folder
    // (it must hold *.safetensors); the conversion runs in initialize_megatron.
    a.Add("--enable-hf2mg-convert");
    a.Add("--model-type-hf", hf);
    a.Remove("--load");
    a.Add("--load", "${HF_MODEL_PATH:?required}");
    auto& us = e->caveats.user_supplies;
    us.erase(std::remove_if(us.begin(), us.end(),
                            [](const std::string& s) { return s.rfind("MEGATRON_CHECKPOINT_DIR", 0) == 0; }),
             us.end());
  } else {
    e->caveats.user_supplies.push_back("a MindSpeed checkpoint of the HF weights (MindSpeed-LLM lists no --model-type-hf for " +
                                       m.model_type + "; convert with its checkpoint tools)");
  }
  if (p.mode == FinetuneMode::kLoRA) {
    a.Add("--lora-r", S(p.lora_rank));
    a.Add("--lora-alpha", S(kLoraAlphaPerRank * p.lora_rank));
    a.Add("--lora-target-modules", "linear_qkv linear_proj linear_fc1 linear_fc2");
    e->caveats.approximations.push_back("LoRA alpha = " + std::to_string(kLoraAlphaPerRank) +
                                        " * rank; targets MindSpeed's usual four projections");
    // MindSpeed-LLM @c77308a1 with LoRA on: MoELayer.__init__ is lora_moe_layer_init
    // (features_manager/finetune/lora.py), which builds the routed experts as LoraParallelGroupedMLP
    // (tasks/posttrain/lora/moe/experts.py: per-expert weight1/2_lora_a/b) whenever moe_grouped_gemm is
    // on (this export sets --moe-grouped-gemm), whatever --lora-target-modules names; the list reaches
    // the other modules through PEFT's LoraConfig (suffix match). So the routed experts are always
    // adapted, one adapter per expert: the plan's rule (core/lora_targets.h) where the MoE layers have
    // no shared expert, a difference where they have one.
    if (m.first_moe_layer() >= 0 && !m.lora_adapts_routed_experts())
      e->caveats.approximations.push_back(
          "LoRA adapts the routed experts too (MindSpeed-LLM's LoRA builds them as LoraParallelGroupedMLP "
          "with grouped GEMM; no target list excludes them): the plan adapts only the shared experts of "
          "these MoE layers (core/lora_targets.h), so adapter memory and FLOPs exceed the plan's");
    if (m.experts > 0) {  // features_manager/finetune/lora.py validate_args: LoRA on MoE needs alltoall_seq
      a.Remove("--moe-token-dispatcher-type");
      a.Add("--moe-token-dispatcher-type", "alltoall_seq");
      e->caveats.approximations.push_back(
          "token dispatcher alltoall_seq: MindSpeed-LLM's LoRA on MoE layers takes only that one");
    }
  }
  a.env.erase("CUDA_DEVICE_MAX_CONNECTIONS");
  a.env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  a.env["PYTORCH_NPU_ALLOC_CONF"] = "expandable_segments:True";
  a.env["HCCL_CONNECT_TIMEOUT"] = "3600";
}

}  // namespace

std::string ToMindSpeedScript(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  MegatronExport e = BuildMegatronExport(p, ir, shape);
  // Step 1: caveats: MindSpeed-LLM has LoRA; its other gaps are Megatron core's, not re-verified.
  std::vector<std::string> unsupported;
  for (const std::string& u : e.caveats.unsupported)
    if (u.rfind("LoRA", 0) != 0) unsupported.push_back(u + " (Megatron core's gap; MindSpeed-LLM builds on it)");
  e.caveats.unsupported = unsupported;
  std::vector<std::string> notes;
  const ExportModel m = DescribeModel(ir, &notes);
  // Step 2: the flags that differ.
  ReplacePipeline(p, ir, m, &e);
  ReplaceModelFlags(p, m, &e);
  ReplaceSystemFlags(p, m, &e);
  for (auto& s : e.caveats.user_supplies)
    if (s.rfind("MEGATRON_LM_DIR", 0) == 0) s = "MINDSPEED_LLM_DIR - a MindSpeed-LLM checkout (with MindSpeed and Megatron-LM as it pins)";
  const std::string entry = p.mode == FinetuneMode::kLoRA ? "posttrain_gpt.py" : "pretrain_gpt.py";
  return RenderMegatronScript(e, "MindSpeed-LLM (Ascend NPU)", kMindSpeedTarget,
                              "${MINDSPEED_LLM_DIR:?set MINDSPEED_LLM_DIR}/" + entry);
}

}  // namespace onboard
