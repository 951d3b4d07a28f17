// BuildMegatronExport: the Megatron-LM `pretrain_gpt.py` argument list of one plan and model.
// Flag names and value sets are Megatron-LM's (megatron/training/arguments.py and the config
// dataclasses it turns into flags: TransformerConfig, ModelParallelConfig, TrainingConfig...).
// Choices made here, each for a Megatron rule (export_megatron_rules.cpp names the rule):
//   - zero_stage 3 -> Megatron-FSDP (--use-megatron-fsdp, optim_grads_params, fsdp_dtensor
//     checkpoints); zero_stage 1 -> --use-distributed-optimizer; never --use-torch-fsdp2 (it
//     rejects pipeline and expert parallelism and the distributed optimizer);
//   - pp > 1 -> --pipeline-model-parallel-layout from the plan's stage boundaries (uneven splits,
//     virtual stages, MTP in the last stage);
//   - CUDA_DEVICE_MAX_CONNECTIONS: 1 with TP/CP and no FSDP (Hopper rule), else 32 (FSDP forbids 1).
#include "search/export_megatron.h"

#include <algorithm>
#include <sstream>

#include "search/export_model.h"

namespace onboard {

const char* const kMegatronTarget = "NVIDIA/Megatron-LM main @ d98e8a64 (2026-08-22)";

LaunchShape ShapeFor(const Plan& p, int64_t devices_per_node) {
  LaunchShape s;
  const int64_t world = p.deg.world();
  s.gpus_per_node = std::max<int64_t>(1, std::min(devices_per_node, world));
  s.nnodes = (world + s.gpus_per_node - 1) / s.gpus_per_node;
  return s;
}

void MegatronArgs::Add(const std::string& flag, const std::string& value) { flags.emplace_back(flag, value); }
void MegatronArgs::Remove(const std::string& flag) {
  flags.erase(std::remove_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == flag; }), flags.end());
}
bool MegatronArgs::Has(const std::string& flag) const {
  return std::any_of(flags.begin(), flags.end(), [&](const auto& f) { return f.first == flag; });
}
std::string MegatronArgs::Value(const std::string& flag) const {
  for (const auto& f : flags)
    if (f.first == flag) return f.second;
  return "";
}
namespace {
// Parses the whole value of `flag` with `parse` (std::stoll / std::stod); fallback when absent or not a number.
template <typename T, typename F>
T ParseWhole(const std::string& v, T fallback, F parse) {
  try {
    size_t used = 0;
    const T x = parse(v, &used);
    return used == v.size() ? x : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}
}  // namespace

int64_t MegatronArgs::Int(const std::string& flag, int64_t fallback) const {
  return ParseWhole<int64_t>(Value(flag), fallback, [](const std::string& s, size_t* u) { return std::stoll(s, u); });
}
double MegatronArgs::Real(const std::string& flag, double fallback) const {
  return ParseWhole<double>(Value(flag), fallback, [](const std::string& s, size_t* u) { return std::stod(s, u); });
}

namespace {

std::string S(int64_t v) { return std::to_string(v); }

// Step 1: dense transformer shape, norm, activation, position embedding.
void AddModel(const ExportModel& m, MegatronArgs* a, ExportCaveats* c) {
  a->Add("--num-layers", S(m.layers));
  a->Add("--hidden-size", S(m.hidden));
  a->Add("--ffn-hidden-size", S(m.dense_ffn > 0 ? m.dense_ffn : m.expert_ffn));
  a->Add("--num-attention-heads", S(m.heads));
  if (!m.mla && m.kv_heads != m.heads) {
    a->Add("--group-query-attention");
    a->Add("--num-query-groups", S(m.kv_heads));
  }
  // MLA ignores kv-channels, but validate_args derives it from hidden/heads when absent and asserts
  // they divide (flagship: 7168/96); Megatron's own MLA recipes pass v_head_dim.
  a->Add("--kv-channels", S(m.mla ? m.v_head_dim : m.head_dim));
  if (m.qk_norm || m.mla) a->Add("--qk-layernorm");   // MLA: the q/kv latent norms (DeepSeek q_a/kv_a_layernorm)
  a->Add("--normalization", m.layer_norm ? "LayerNorm" : "RMSNorm");
  a->Add("--norm-epsilon", Num(m.norm_eps));
  if (m.swiglu) a->Add("--swiglu");
  else if (m.activation != "gelu")
    c->unsupported.push_back("MLP activation " + m.activation + ": Megatron-LM's flags give swiglu, gelu, squared-relu, quick-geglu");
  a->Add("--position-embedding-type", "rope");
  a->Add("--rotary-base", S(static_cast<int64_t>(m.rope_theta)));
  if (!m.rope_from_config) c->approximations.push_back("rope_theta not in config.json: Megatron's default base 10000 exported");
  if (m.rope.type == "llama3") {
    a->Add("--use-rope-scaling");
    a->Add("--rope-scaling-factor", Num(m.rope.factor));
    if (m.rope.low_freq_factor != 1.0 || m.rope.high_freq_factor != 4.0 || m.rope.original_max_position != 8192)
      c->approximations.push_back("llama3 rope scaling: Megatron fixes low/high freq factors 1/4 and original length 8192 (config: " +
                                  Num(m.rope.low_freq_factor) + "/" + Num(m.rope.high_freq_factor) + ", " +
                                  S(m.rope.original_max_position) + ")");
  }
  a->Add("--max-position-embeddings", S(m.max_position));
  if (!m.tied) a->Add("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a->Add("--disable-bias-linear");
  if (m.qkv_bias) a->Add("--add-qkv-bias");
  if (m.attn_output_gate && m.mla)  // TransformerConfig.__post_init__ raises NotImplementedError
    c->unsupported.push_back("attention output gate with MLA: Megatron-LM has no output gate for MLA yet");
  else if (m.attn_output_gate)
    a->Add("--attention-output-gate");
}

// Step 2: MLA (+ yarn rope), DSA indexer, and the mixers Megatron cannot build.
void AddAttentionVariants(const ExportModel& m, MegatronArgs* a, ExportCaveats* c) {
  if (m.mla) {
    a->Add("--multi-latent-attention");
    if (m.q_lora_rank > 0) a->Add("--q-lora-rank", S(m.q_lora_rank));
    a->Add("--kv-lora-rank", S(m.kv_lora_rank));
    a->Add("--qk-head-dim", S(m.qk_nope_dim));
    a->Add("--qk-pos-emb-head-dim", S(m.qk_rope_dim));
    a->Add("--v-head-dim", S(m.v_head_dim));
    if (m.rope.type == "yarn") {
      a->Add("--rope-type", "yarn");
      a->Add("--rotary-scaling-factor", Num(m.rope.factor));
      a->Add("--mscale", Num(m.rope.mscale));
      a->Add("--mscale-all-dim", Num(m.rope.mscale_all_dim));
    } else {
      a->Add("--rope-type", "rope");
    }
  }
  if (m.n_dsa > 0) {
    a->Add("--experimental-attention-variant", "dsa");
    a->Add("--dsa-indexer-n-heads", S(m.index_heads));
    a->Add("--dsa-indexer-head-dim", S(m.index_head_dim));
    a->Add("--dsa-indexer-topk", S(m.index_topk));
    a->Add("--no-rope-fusion");  // DSAttention has no fused RoPE (TransformerConfig.__post_init__)
  }
  if (m.n_kda > 0)
    c->unsupported.push_back(S(m.n_kda) + " KDA (Kimi Delta Attention) layers: Megatron-LM has no KDA layer "
                             "(its linear-attention variant is gated DeltaNet, scalar decay per head)");
  if (m.n_gdn > 0)
    c->unsupported.push_back(S(m.n_gdn) + " gated DeltaNet layers: not exported (Megatron's --experimental-attention-variant "
                             "gated_delta_net + --linear-attention-freq would have to be mapped by hand)");
  if (m.n_linear > 0) c->unsupported.push_back(S(m.n_linear) + " lightning/linear attention layers: no Megatron-LM layer");
  if (m.n_window > 0) c->unsupported.push_back(S(m.n_window) + " sliding-window layers: not exported (--window-size by hand)");
  if (m.mla_nope)
    c->unsupported.push_back("MLA without RoPE (mla_use_nope): Megatron's MLA rotates the qk-pos-emb dims");
  if (m.mla && m.n_softmax > 0) c->unsupported.push_back("MLA mixed with GQA layers: Megatron-LM builds one attention kind");
}

// Step 3: MoE.
void AddMoE(const ExportModel& m, const Plan& p, MegatronArgs* a, ExportCaveats* c) {
  if (m.experts == 0) return;
  a->Add("--num-experts", S(m.experts));
  a->Add("--moe-router-topk", S(m.top_k));
  a->Add("--moe-ffn-hidden-size", S(m.expert_ffn));
  if (m.shared_experts > 0) a->Add("--moe-shared-expert-intermediate-size", S(m.shared_experts * m.shared_ffn));
  if (m.shared_gate) a->Add("--moe-shared-expert-gate");
  std::string freq;
  for (size_t i = 0; i < m.moe_layer.size();) {   // run-length: ([0]*3+[1]*58)
    size_t j = i;
    while (j < m.moe_layer.size() && m.moe_layer[j] == m.moe_layer[i]) ++j;
    freq += (freq.empty() ? "" : "+") + std::string(m.moe_layer[i] ? "[1]*" : "[0]*") + S(static_cast<int64_t>(j - i));
    i = j;
  }
  a->Add("--moe-layer-freq", "(" + freq + ")");
  a->Add("--moe-router-score-function", m.router_sigmoid ? "sigmoid" : "softmax");
  if (!m.router_sigmoid && !m.renormalize) a->Add("--moe-router-pre-softmax");
  if (m.top_k == 1 && !m.router_sigmoid && !a->Has("--moe-router-pre-softmax")) a->Add("--moe-router-pre-softmax");
  if (m.routed_scaling != 1.0) a->Add("--moe-router-topk-scaling-factor", Num(m.routed_scaling));
  if (m.groups > 1) {
    a->Add("--moe-router-num-groups", S(m.groups));
    a->Add("--moe-router-group-topk", S(m.topk_groups));
  }
  if (m.expert_score_bias) {
    a->Add("--moe-router-enable-expert-bias");
    a->Add("--moe-router-load-balancing-type", "none");
  } else {
    a->Add("--moe-router-load-balancing-type", "aux_loss");
    a->Add("--moe-aux-loss-coeff", "0.001");
    c->approximations.push_back("aux-loss coefficient 1e-3 is a training choice, not from the config");
  }
  if (m.latent_dim > 0) a->Add("--moe-latent-size", S(m.latent_dim));
  a->Add("--moe-router-dtype", "fp32");
  a->Add("--moe-grouped-gemm");
  // The plan's dispatcher: DeepEP / HybridEP are the flex dispatcher's backends (TransformerConfig
  // moe_token_dispatcher_type / moe_flex_dispatcher_backend).
  const std::string flex = PlanFlexDispatcher(p);
  a->Add("--moe-token-dispatcher-type", flex.empty() ? "alltoall" : "flex");
  if (!flex.empty()) a->Add("--moe-flex-dispatcher-backend", flex);
  if (flex.empty() && p.ep_dispatcher != EpDispatcher::kAllToAll)
    c->approximations.push_back(std::string("dispatcher ") + EpDispatcherName(p.ep_dispatcher) +
                                ": alltoall exported (no expert parallelism: DeepEP needs TP x EP > 1)");
  if (p.deg.expert_fsdp > 1 && p.zero_stage < 3)
    c->approximations.push_back("expert weights: the plan shards them over expert_fsdp=" + S(p.deg.expert_fsdp) +
                                "; without Megatron-FSDP they are replicated over the expert data-parallel group");
}

// Step 4: MTP and the pipeline layout from the plan's stage boundaries.
void AddPipeline(const ExportModel& m, const Plan& p, const ModelIR& ir, MegatronArgs* a) {
  a->Add("--tensor-model-parallel-size", S(p.deg.tp));
  a->Add("--pipeline-model-parallel-size", S(p.deg.pp));
  a->Add("--context-parallel-size", S(PlanContextParallel(p)));
  // DSAttention's context parallelism gathers the keys (allgather only; TransformerConfig.__post_init__)
  if (m.n_dsa > 0 && PlanContextParallel(p) > 1) a->Add("--cp-comm-type", "allgather");
  a->Add("--expert-model-parallel-size", S(p.deg.ep));
  a->Add("--expert-tensor-parallel-size", S(p.deg.etp));
  if (p.tp_comm_overlap && p.deg.tp > 1) a->Add("--tp-comm-overlap");
  if (p.deg.tp > 1 && p.deg.sequence_parallel) a->Add("--sequence-parallel");
  if (m.mtp_layers > 0) a->Add("--mtp-num-layers", S(m.mtp_layers));
  // No layers: a fragment without a model. More chunks than layers only with the plan's own
  // boundaries (embedding- / loss-only chunks).
  if (p.deg.pp <= 1 || m.layers == 0 ||
      (m.layers < p.deg.pp * p.deg.interleave && p.stage_layer_starts.empty()))
    return;
  // 'E' embedding, 't' decoder layer, 'm' MTP layer, 'L' loss; stages split by '|', in the order
  // vpp0-pp0, vpp0-pp1, ..., which is model order for the interleaved assignment.
  const std::vector<int64_t> sizes = StageSizes(ExportStageStarts(p, ir), m.layers);
  std::string layout;
  for (size_t s = 0; s < sizes.size(); ++s) {
    if (s > 0) layout += "|";
    if (s == 0) layout += "E";
    if (sizes[s] > 0) layout += sizes[s] == 1 ? "t" : "t*" + S(sizes[s]);
    if (s + 1 == sizes.size()) layout += std::string(static_cast<size_t>(m.mtp_layers), 'm') + "L";
  }
  a->Add("--pipeline-model-parallel-layout", layout);
  // interleaved: p2p overlap is Megatron's default (only --no-overlap-p2p-communication turns it off)
}

// Step 5a: HSDP on Megatron-FSDP. The plan's dp_replicate becomes the outer (replicated) DP group:
// Megatron-FSDP enables hybrid sharding when --num-distributed-optimizer-instances > 1
// (core/distributed/fsdp/mcore_fsdp_adapter.py), sharding over the dp_shard ranks inside each
// instance; the outer group replicates (--outer-dp-sharding-strategy no_shard). parallel_state needs
// dp*cp and the expert data-parallel size world/(ep*etp*pp) both divisible by the instances.
void AddHybridSharding(const Plan& p, MegatronArgs* a, ExportCaveats* c) {
  const int64_t r = p.deg.dp_replicate;
  if (r <= 1) return;
  const int64_t world = p.deg.world(), cp = PlanContextParallel(p);
  const int64_t dp_cp = world / (p.deg.tp * p.deg.pp * cp) * cp, expert_dp = world / (p.deg.ep * p.deg.pp);
  if (dp_cp % r != 0 || expert_dp % r != 0) {
    c->approximations.push_back(
        "HSDP: dp_replicate=" + S(r) + " does not divide the data-parallel size " + S(dp_cp) +
        " and the expert data-parallel size " + S(expert_dp) +
        "; Megatron-FSDP here shards over all data-parallel ranks (less memory, more traffic)");
    return;
  }
  a->Add("--num-distributed-optimizer-instances", S(r));
  a->Add("--outer-dp-sharding-strategy", "no_shard");
}

}  // namespace

std::string MegatronFsdpPerMicroBatchNote() {
  return "fsdp_pipelining per_step (the stage kept gathered, grads reduce-scattered once per step): "
         "Megatron-FSDP's optim_grads_params gathers the weights and reduce-scatters the grads every "
         "micro-batch with or without PP (less memory, more traffic than planned)";
}

namespace {

// Step 5: data-parallel sharding / optimizer, recompute, precision, batch.
void AddTraining(const ExportModel& m, const Plan& p, MegatronArgs* a, ExportCaveats* c) {
  if (p.zero_stage >= 3) {
    a->Add("--use-megatron-fsdp");
    a->Add("--data-parallel-sharding-strategy", "optim_grads_params");
    a->Add("--use-distributed-optimizer");   // Megatron-FSDP v1 (the default version) requires it
    a->Add("--ckpt-format", "fsdp_dtensor");
    AddHybridSharding(p, a, c);
    if (FsdpGathersOncePerStep(p)) c->approximations.push_back(MegatronFsdpPerMicroBatchNote());
  } else if (p.zero_stage >= 1) {
    a->Add("--use-distributed-optimizer");
    a->Add("--ckpt-format", "torch_dist");
  } else {
    a->Add("--ckpt-format", "torch_dist");
  }
  if (p.zero_stage >= 1) {
    a->Add("--overlap-grad-reduce");
    a->Add("--overlap-param-gather");
  }
  const Recompute r = StrongestRecompute(p);
  if (r == Recompute::kFull) {
    a->Add("--recompute-granularity", "full");
    a->Add("--recompute-method", "uniform");
    a->Add("--recompute-num-layers", "1");
  } else if (r == Recompute::kSelective) {
    std::string mods = "core_attn";
    if (m.experts > 0) mods += " moe_act";
    if (m.mla) mods += " mla_up_proj";
    a->Add("--recompute-granularity", "selective");
    a->Add("--recompute-modules", mods);
  }
  const std::string mixed = MixedRecomputeNote(p);
  if (!mixed.empty()) c->approximations.push_back(mixed);
  if (p.compute_dtype == Precision::kFP16)
    a->Add("--fp16");
  else a->Add("--bf16");
  if (p.compute_dtype == Precision::kFP8) {  // per-tensor current scaling, as costed and as Bridge's
    a->Add("--fp8-format", "hybrid");        // bf16_with_fp8_current_scaling_mixed: hybrid + tensorwise
    a->Add("--fp8-recipe", "tensorwise");    // (Megatron's default recipe is "delayed")
  }
  if (p.compute_dtype == Precision::kMXFP8) {  // TE MXFP8BlockScaling: e4m3 elements, one e8m0 scale per 32
    a->Add("--fp8-format", "e4m3");
    a->Add("--fp8-recipe", "mxfp8");
  }
  // nvfp4: TE NVFP4BlockScaling, e2m1 elements with one e4m3 scale per 16 (TE >= 2.7).
  if (p.compute_dtype == Precision::kNVFP4) {
    a->Add("--fp4-format", "e2m1");
    a->Add("--fp4-recipe", "nvfp4");
  }
  // bf16 first / last layers: both counts written, since Megatron-Core defaults each to 1 once the switch
  // is on (transformer_config.py num_layers_at_start_in_bf16 / num_layers_at_end_in_bf16).
  if (p.bf16_layers_first > 0 || p.bf16_layers_last > 0) {
    a->Add("--first-last-layers-bf16");
    a->Add("--num-layers-at-start-in-bf16", S(p.bf16_layers_first));
    a->Add("--num-layers-at-end-in-bf16", S(p.bf16_layers_last));
  }
  a->Add("--micro-batch-size", S(p.micro_batch));
  a->Add("--global-batch-size", S(p.global_batch));
  a->Add("--seq-length", S(p.seq));
}

// Step 6: placeholders (checkpoint, tokenizer, data) and the schedule.
void AddPlaceholders(MegatronArgs* a, ExportCaveats* c) {
  a->Add("--tokenizer-type", "HuggingFaceTokenizer");
  a->Add("--tokenizer-model", "${HF_MODEL_PATH:?required}");
  a->Add("--load", "${MEGATRON_CHECKPOINT_DIR:?required}");
  a->Add("--finetune");
  a->Add("--save", "${SAVE_DIR:?required}");
  a->Add("--save-interval", "${SAVE_INTERVAL:-500}");
  a->Add("--data-path", "${DATA_PREFIX:?required}");
  a->Add("--split", "99,1,0");
  a->Add("--train-iters", "${TRAIN_ITERS:-1000}");
  a->Add("--lr", "1e-5");
  a->Add("--min-lr", "1e-6");
  a->Add("--lr-decay-style", "cosine");
  a->Add("--lr-warmup-iters", "50");
  c->user_supplies.push_back("HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)");
  c->user_supplies.push_back("MEGATRON_CHECKPOINT_DIR - the HF weights converted to a Megatron checkpoint at this TP/PP/EP "
                             "(e.g. Megatron-Bridge AutoBridge.import_ckpt)");
  c->user_supplies.push_back("SAVE_DIR - where checkpoints are written");
  c->user_supplies.push_back("DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)");
  c->user_supplies.push_back("MEGATRON_LM_DIR - a Megatron-LM checkout at the targeted commit");
  c->user_supplies.push_back("learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder");
}

}  // namespace

MegatronExport BuildMegatronExport(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  MegatronExport e;
  e.args.shape = shape;
  const ExportModel m = DescribeModel(ir, &e.caveats.approximations);
  AddModel(m, &e.args, &e.caveats);
  AddAttentionVariants(m, &e.args, &e.caveats);
  AddMoE(m, p, &e.args, &e.caveats);
  AddPipeline(m, p, ir, &e.args);
  AddTraining(m, p, &e.args, &e.caveats);
  AddPlaceholders(&e.args, &e.caveats);
  if (p.mode == FinetuneMode::kLoRA)
    e.caveats.unsupported.push_back(
        "LoRA (rank " + S(p.lora_rank) +
        "): Megatron-LM has no LoRA; this list would train "
        "every weight. Launch plan_megatron_bridge.py (Megatron-Bridge PEFT) instead");
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe)  // the search may choose it (issue 13)
    e.caveats.unsupported.push_back("DualPipe schedule (pp " + S(p.deg.pp) +
                                    "): Megatron-LM schedules 1F1B and "
                                    "interleaved 1F1B only; this list would run 1F1B");
  const bool fsdp = e.args.Has("--use-megatron-fsdp");
  e.args.env["CUDA_DEVICE_MAX_CONNECTIONS"] = fsdp ? "32" : "1";
  return e;
}

}  // namespace onboard
