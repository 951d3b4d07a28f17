// CheckMegatronArgs: the Megatron-LM argument rules the Megatron export relies on, one function
// per rule, each citing where Megatron-LM (main @ d98e8a64, 2026-08-22) enforces it. These are
// the rules as read from that source, re-stated here (scripts/check-exports-with-engines.sh runs
// Megatron's own validate_args on the goldens, where a checkout is given). Paths are relative to the
// Megatron-LM repository root. Units: sizes and degrees are counts; world = NNODES * GPUS_PER_NODE devices.
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "search/export_megatron.h"

namespace onboard {
namespace {

constexpr const char* kArgs = "megatron/training/arguments.py: validate_args";
constexpr const char* kTC = "megatron/core/transformer/transformer_config.py: TransformerConfig.__post_init__";

using Fail = std::function<void(const std::string&)>;

int64_t Tp(const MegatronArgs& a) { return a.Int("--tensor-model-parallel-size", 1); }
int64_t Pp(const MegatronArgs& a) { return a.Int("--pipeline-model-parallel-size", 1); }
int64_t Cp(const MegatronArgs& a) { return a.Int("--context-parallel-size", 1); }
int64_t Ep(const MegatronArgs& a) { return a.Int("--expert-model-parallel-size", 1); }
int64_t Etp(const MegatronArgs& a) { return a.Int("--expert-tensor-parallel-size", Tp(a)); }
int64_t World(const MegatronArgs& a) { return a.shape.world(); }
std::string Env(const MegatronArgs& a, const char* k) {
  auto it = a.env.find(k);
  return it == a.env.end() ? "" : it->second;
}
std::string S(int64_t v) { return std::to_string(v); }

void KnownFlagsRule(const MegatronArgs& a, const Fail& fail) {
  for (const auto& [flag, value] : a.flags) {
    auto it = MegatronKnownFlags().find(flag);
    if (it == MegatronKnownFlags().end()) { fail("unrecognized argument " + flag); continue; }
    std::istringstream vs(value);
    std::vector<std::string> toks;
    for (std::string t; vs >> t;) toks.push_back(t);
    const MegatronFlagSpec& spec = it->second;
    if (spec.kind == MegatronFlagSpec::kSwitch && !toks.empty()) fail(flag + " takes no value, got '" + value + "'");
    if (spec.kind == MegatronFlagSpec::kOne && toks.size() != 1) fail(flag + " takes one value, got '" + value + "'");
    if (spec.kind == MegatronFlagSpec::kMany && toks.empty()) fail(flag + " needs at least one value");
    for (const std::string& t : toks)
      if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), t) == spec.choices.end())
        fail(flag + " " + t + ": invalid choice");
  }
}

void WorldDivisible(const MegatronArgs& a, const Fail& fail) {
  const int64_t model = Tp(a) * Pp(a) * Cp(a);
  if (World(a) % model != 0) fail("world " + S(World(a)) + " not divisible by tp*pp*cp=" + S(model));
}

void GlobalBatch(const MegatronArgs& a, const Fail& fail) {
  const int64_t model = Tp(a) * Pp(a) * Cp(a);
  if (model <= 0 || World(a) % model != 0) return;
  const int64_t dp = World(a) / model, mbs = a.Int("--micro-batch-size", 0), gbs = a.Int("--global-batch-size", 0);
  if (mbs <= 0 || gbs <= 0) { fail("--micro-batch-size and --global-batch-size must be > 0"); return; }
  if (gbs % (mbs * dp) != 0)
    fail("--global-batch-size " + S(gbs) + " not divisible by micro-batch " + S(mbs) + " * data-parallel " + S(dp));
}

void TorchFsdp2(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--use-torch-fsdp2")) return;
  if (Pp(a) != 1) fail("--use-torch-fsdp2 with pipeline parallelism (pp=" + S(Pp(a)) + ")");
  if (Ep(a) != 1) fail("--use-torch-fsdp2 with expert parallelism (ep=" + S(Ep(a)) + ")");
  if (a.Has("--use-distributed-optimizer")) fail("--use-torch-fsdp2 with --use-distributed-optimizer");
  if (!a.Has("--no-gradient-accumulation-fusion")) fail("--use-torch-fsdp2 needs --no-gradient-accumulation-fusion");
  const std::string ck = a.Has("--ckpt-format") ? a.Value("--ckpt-format") : "torch_dist";
  if (ck != "torch_dist" && ck != "torch_dcp") fail("--use-torch-fsdp2 needs --ckpt-format torch_dist|torch_dcp, got " + ck);
  if (!a.Has("--untie-embeddings-and-output-weights")) fail("--use-torch-fsdp2 needs --untie-embeddings-and-output-weights");
  if (a.Has("--fp16")) fail("--use-torch-fsdp2 with --fp16");
  if (Env(a, "CUDA_DEVICE_MAX_CONNECTIONS") == "1") fail("--use-torch-fsdp2 with CUDA_DEVICE_MAX_CONNECTIONS=1");
}

void MegatronFsdp(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--use-megatron-fsdp")) return;
  if (a.Has("--use-torch-fsdp2")) fail("--use-megatron-fsdp and --use-torch-fsdp2 are exclusive");
  if (a.Value("--ckpt-format") != "fsdp_dtensor")
    fail("--use-megatron-fsdp needs --ckpt-format fsdp_dtensor, got '" + a.Value("--ckpt-format") + "'");
  if (Env(a, "CUDA_DEVICE_MAX_CONNECTIONS") == "1") fail("--use-megatron-fsdp with CUDA_DEVICE_MAX_CONNECTIONS=1");
  if (a.Value("--megatron-fsdp-version") == "2" && a.Has("--use-distributed-optimizer"))
    fail("--megatron-fsdp-version 2 with --use-distributed-optimizer");
}

void FsdpDtensorFormat(const MegatronArgs& a, const Fail& fail) {
  if (a.Value("--ckpt-format") == "fsdp_dtensor" && !a.Has("--use-megatron-fsdp"))
    fail("--ckpt-format fsdp_dtensor without --use-megatron-fsdp");
  if (a.Value("--ckpt-format") == "torch_dcp" && !a.Has("--use-torch-fsdp2"))
    fail("--ckpt-format torch_dcp without --use-torch-fsdp2");
}

void MaxConnections(const MegatronArgs& a, const Fail& fail) {
  const bool fsdp = a.Has("--use-torch-fsdp2") || a.Has("--use-megatron-fsdp");
  if ((Tp(a) > 1 || Cp(a) > 1) && !fsdp && Env(a, "CUDA_DEVICE_MAX_CONNECTIONS") != "1")
    fail("tp=" + S(Tp(a)) + " cp=" + S(Cp(a)) + " without FSDP needs CUDA_DEVICE_MAX_CONNECTIONS=1, got '" +
         Env(a, "CUDA_DEVICE_MAX_CONNECTIONS") + "'");
}

void OneVirtualOption(const MegatronArgs& a, const Fail& fail) {
  const int n = a.Has("--num-layers-per-virtual-pipeline-stage") + a.Has("--num-virtual-stages-per-pipeline-rank") +
                a.Has("--pipeline-model-parallel-layout");
  if (n > 1) fail("more than one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
                  "--pipeline-model-parallel-layout");
}

void LayoutValid(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--pipeline-model-parallel-layout")) return;
  const std::vector<std::string> st = LayoutStages(a.Value("--pipeline-model-parallel-layout"));
  if (st.empty()) { fail("layout does not parse: " + a.Value("--pipeline-model-parallel-layout")); return; }
  const int64_t pp = Pp(a), stages = static_cast<int64_t>(st.size());
  if (stages % pp != 0) { fail("layout has " + S(stages) + " stages, not a multiple of pp=" + S(pp)); return; }
  std::string flat;
  for (const std::string& s : st) flat += s;
  auto count = [&](char c) { return static_cast<int64_t>(std::count(flat.begin(), flat.end(), c)); };
  if (flat.empty() || flat.front() != 'E' || count('E') != 1) fail("layout must start with E, once");
  if (flat.empty() || flat.back() != 'L' || count('L') != 1) fail("layout must end with L, once");
  if (count('t') != a.Int("--num-layers", -1))
    fail("layout has " + S(count('t')) + " decoder layers, --num-layers " + a.Value("--num-layers"));
  if (count('m') != a.Int("--mtp-num-layers", 0))
    fail("layout has " + S(count('m')) + " MTP layers, --mtp-num-layers " + a.Value("--mtp-num-layers"));
  const size_t first_m = flat.find('m');
  if (first_m != std::string::npos && flat.find('t', first_m) != std::string::npos) fail("decoder layers after MTP in layout");
  const int64_t vpp = stages / pp;
  for (int64_t i = 0; i < stages; ++i) {   // stage i = vpp rank i / pp, pp rank i % pp
    const bool has_m = st[i].find('m') != std::string::npos;
    if (has_m && i / pp != vpp - 1) fail("MTP layers must be in the last virtual stage of their rank");
    if (has_m && i % pp == 0 && vpp > 1) fail("MTP layers in the first pipeline rank");
  }
}

void EvenLayers(const MegatronArgs& a, const Fail& fail) {
  if (Pp(a) <= 1 || a.Has("--pipeline-model-parallel-layout")) return;
  if (a.Int("--num-layers", 0) % Pp(a) != 0)
    fail("--num-layers " + a.Value("--num-layers") + " not divisible by pp=" + S(Pp(a)) + " (no layout given)");
}

void InterleavedPipeline(const MegatronArgs& a, const Fail& fail) {
  int64_t vpp = a.Int("--num-virtual-stages-per-pipeline-rank", 1);
  if (a.Has("--pipeline-model-parallel-layout") && Pp(a) > 0) {
    const size_t n = LayoutStages(a.Value("--pipeline-model-parallel-layout")).size();
    vpp = static_cast<int64_t>(n) / Pp(a);
  }
  if (vpp <= 1) return;
  // p2p overlap is on unless --no-overlap-p2p-communication (argparse store_false, dest overlap_p2p_comm)
  if (a.Has("--no-overlap-p2p-communication") ? Pp(a) <= 2 : Pp(a) <= 1)
    fail("interleaved schedule (vpp=" + S(vpp) +
         ") needs pp > 1, or pp > 2 with --no-overlap-p2p-communication; pp=" + S(Pp(a)));
}

void KvChannels(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--kv-channels")) return;
  const int64_t hidden = a.Int("--hidden-size", 0), heads = a.Int("--num-attention-heads", 0);
  if (heads <= 0 || hidden % heads != 0)
    fail("no --kv-channels and --hidden-size " + S(hidden) + " not a multiple of --num-attention-heads " +
         S(heads));
}

void DsaAttention(const MegatronArgs& a, const Fail& fail) {
  if (a.Value("--experimental-attention-variant") != "dsa") return;
  if (!a.Has("--no-rope-fusion")) fail("DSA attention needs --no-rope-fusion (RoPE fusion is on by default)");
  if (Cp(a) > 1 && a.Value("--cp-comm-type") != "allgather")
    fail("DSA attention with cp=" + S(Cp(a)) + " needs --cp-comm-type allgather, got '" +
         a.Value("--cp-comm-type") + "'");
}

void MlaOutputGate(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--multi-latent-attention") && a.Has("--attention-output-gate"))
    fail("--attention-output-gate with --multi-latent-attention");
}

void OptimizerInstances(const MegatronArgs& a, const Fail& fail) {
  const int64_t r = a.Int("--num-distributed-optimizer-instances", 1);
  const int64_t model = Tp(a) * Pp(a) * Cp(a);
  if (r <= 1 || model <= 0) return;
  const int64_t dp_cp = World(a) / model * Cp(a), expert_dp = World(a) / (Etp(a) * Ep(a) * Pp(a));
  if (dp_cp % r != 0)
    fail("data-parallel size " + S(dp_cp) + " not divisible by --num-distributed-optimizer-instances " +
         S(r));
  if (expert_dp % r != 0)
    fail("expert data-parallel size " + S(expert_dp) +
         " not divisible by --num-distributed-optimizer-instances " + S(r));
  if (a.Value("--outer-dp-sharding-strategy") == "optim" &&
      a.Value("--data-parallel-sharding-strategy") != "optim_grads_params")
    fail("--outer-dp-sharding-strategy optim needs --data-parallel-sharding-strategy optim_grads_params");
}

void HeadsDivideTp(const MegatronArgs& a, const Fail& fail) {
  const int64_t tp = Tp(a), heads = a.Int("--num-attention-heads", 0);
  const int64_t groups = a.Int("--num-query-groups", heads);
  if (heads % tp != 0) fail("--num-attention-heads " + S(heads) + " not a multiple of tp=" + S(tp));
  if (groups % tp != 0 && tp % groups != 0)
    fail("--num-query-groups " + S(groups) + " neither a multiple nor a divisor of tp=" + S(tp));
}

void ExpertsDivideEp(const MegatronArgs& a, const Fail& fail) {
  if (Ep(a) <= 1) return;
  if (!a.Has("--num-experts")) { fail("ep=" + S(Ep(a)) + " without --num-experts"); return; }
  if (a.Int("--num-experts", 0) % Ep(a) != 0) fail("--num-experts " + a.Value("--num-experts") + " not a multiple of ep=" + S(Ep(a)));
}

void ExpertGrid(const MegatronArgs& a, const Fail& fail) {
  const int64_t grid = Etp(a) * Ep(a) * Pp(a);
  if (World(a) % grid != 0) fail("world " + S(World(a)) + " not divisible by etp*ep*pp=" + S(grid));
}

void ExpertBiasScore(const MegatronArgs& a, const Fail& fail) {
  const std::string f = a.Has("--moe-router-score-function") ? a.Value("--moe-router-score-function") : "softmax";
  if (a.Has("--moe-router-enable-expert-bias") && f != "sigmoid" && f != "sqrtsoftplus")
    fail("--moe-router-enable-expert-bias needs score function sigmoid|sqrtsoftplus, got " + f);
}

void TopOneSoftmax(const MegatronArgs& a, const Fail& fail) {
  const std::string f = a.Has("--moe-router-score-function") ? a.Value("--moe-router-score-function") : "softmax";
  if (a.Has("--num-experts") && a.Int("--moe-router-topk", 2) == 1 && f == "softmax" && !a.Has("--moe-router-pre-softmax") &&
      a.Value("--moe-router-load-balancing-type") != "sinkhorn")
    fail("--moe-router-topk 1 with softmax needs --moe-router-pre-softmax");
}

void GroupRouting(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--moe-router-group-topk")) return;
  const int64_t groups = a.Int("--moe-router-num-groups", 0), topk = a.Int("--moe-router-group-topk", 0);
  if (groups <= 0) { fail("--moe-router-group-topk without --moe-router-num-groups"); return; }
  if (a.Int("--num-experts", 0) % groups != 0) fail("--num-experts not divisible by --moe-router-num-groups " + S(groups));
  if (topk > groups) fail("--moe-router-group-topk " + S(topk) + " > --moe-router-num-groups " + S(groups));
}

void Recompute(const MegatronArgs& a, const Fail& fail) {
  if (a.Value("--recompute-granularity") != "selective") return;
  if (a.Has("--recompute-method")) fail("--recompute-method with selective recompute");
  static const std::set<std::string> allowed = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                                                "shared_experts", "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"};
  std::istringstream vs(a.Value("--recompute-modules"));
  for (std::string m; vs >> m;) {
    if (!allowed.count(m)) fail("--recompute-modules " + m + " is not a recompute module");
    if (m == "moe_act" && !a.Has("--moe-grouped-gemm")) fail("recompute moe_act needs --moe-grouped-gemm");
    if (m == "mla_up_proj" && !a.Has("--multi-latent-attention")) fail("recompute mla_up_proj needs --multi-latent-attention");
  }
}

void MlaNotGqa(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--multi-latent-attention") && a.Has("--group-query-attention"))
    fail("--multi-latent-attention with --group-query-attention");
}

void SeqLength(const MegatronArgs& a, const Fail& fail) {
  const int64_t seq = a.Int("--seq-length", 0), maxpos = a.Int("--max-position-embeddings", 0);
  if (maxpos < seq) fail("--max-position-embeddings " + S(maxpos) + " < --seq-length " + S(seq));
  if (Cp(a) > 1 && seq % (2 * Cp(a)) != 0) fail("--seq-length " + S(seq) + " not a multiple of 2*cp=" + S(2 * Cp(a)));
}

void MoeBiasEtp(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--num-experts") && !a.Has("--disable-bias-linear") && Etp(a) != 1)
    fail("MoE with linear biases needs --expert-tensor-parallel-size 1, got " + S(Etp(a)));
}

void OnePrecision(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--fp16") && a.Has("--bf16")) fail("--fp16 and --bf16 together");
}

// transformer_config.py __post_init__ under fp8: first / last bf16 layers are refused with delayed
// scaling (--fp8-recipe's default) and each count must lie in [0, num_layers / pp] (the counts default
// to 1 once the switch is on).
void Bf16EndLayers(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--first-last-layers-bf16") || !a.Has("--fp8-format")) return;
  const std::string recipe = a.Has("--fp8-recipe") ? a.Value("--fp8-recipe") : "delayed";
  if (recipe == "delayed")
    fail("--first-last-layers-bf16 with delayed scaling (--fp8-recipe " + recipe + ")");
  const int64_t per_stage = a.Int("--num-layers", 0) / Pp(a);
  for (const char* f : {"--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16"}) {
    const int64_t n = a.Int(f, 1);
    if (n < 0 || n > per_stage)
      fail(std::string(f) + " " + S(n) + " not in [0, num_layers / pp = " + S(per_stage) + "]");
  }
}

void MtpPosition(const MegatronArgs& a, const Fail& fail) {
  const std::string pe = a.Has("--position-embedding-type") ? a.Value("--position-embedding-type") : "learned_absolute";
  if (a.Int("--mtp-num-layers", 0) > 0 && pe != "rope" && pe != "none")
    fail("--mtp-num-layers with --position-embedding-type " + pe + " (needs rope or none)");
}

void SaveInterval(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--save") && a.Int("--save-interval", 0) <= 0) fail("--save needs --save-interval > 0");
}

void OverlapParamGather(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--overlap-param-gather")) return;
  if (!a.Has("--use-distributed-optimizer") && !a.Has("--use-megatron-fsdp"))
    fail("--overlap-param-gather needs --use-distributed-optimizer or --use-megatron-fsdp");
  if (!a.Has("--overlap-grad-reduce")) fail("--overlap-param-gather needs --overlap-grad-reduce");
}

void LearningRate(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--lr") && a.Real("--min-lr", 0) > a.Real("--lr", 0)) fail("--min-lr " + a.Value("--min-lr") + " > --lr " + a.Value("--lr"));
}

void OneDataSource(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--mock-data") && a.Has("--data-path")) fail("--mock-data with --data-path");
}

void MoeFieldsNeedExperts(const MegatronArgs& a, const Fail& fail) {
  if (a.Has("--num-experts")) return;
  if (a.Has("--moe-latent-size")) fail("--moe-latent-size without --num-experts");
  if (a.Has("--moe-ffn-hidden-size") && a.Value("--moe-layer-freq").find("[0]") == std::string::npos)
    fail("--moe-ffn-hidden-size without --num-experts");
}

// The flex dispatcher (DeepEP / HybridEP / NCCL-EP backends): ncclep only with the flex type
// (TransformerConfig.__post_init__); DeepEP needs expert TP x EP > 1 (MoEFlexTokenDispatcher.__init__
// asserts it when the model is built).
void FlexDispatcher(const MegatronArgs& a, const Fail& fail) {
  const std::string type = a.Value("--moe-token-dispatcher-type"),
                    backend = a.Value("--moe-flex-dispatcher-backend");
  if (backend == "ncclep" && type != "flex")
    fail("--moe-flex-dispatcher-backend ncclep needs --moe-token-dispatcher-type flex, got '" + type + "'");
  if (type == "flex" && (backend.empty() || backend == "deepep") && Etp(a) * Ep(a) <= 1)
    fail("flex dispatcher with DeepEP needs expert TP x EP > 1, got etp=" + S(Etp(a)) + " ep=" + S(Ep(a)));
}

const std::vector<MegatronRuleFn>& RuleTable() {
  static const std::vector<MegatronRuleFn> t = {
      {{"known_flags",
        "megatron/training/arguments.py: parse_args (argparse; flags from _add_*_args and "
        "ArgumentGroupFactory "
        "over the config dataclasses, megatron/training/argument_utils.py)"},
       KnownFlagsRule},
      {{"world_divisible", kArgs}, WorldDivisible},
      {{"global_batch",
        "megatron/core/num_microbatches_calculator.py: ConstantNumMicroBatchesCalculator.__init__"},
       GlobalBatch},
      {{"torch_fsdp2_conflicts", kArgs}, TorchFsdp2},
      {{"megatron_fsdp", kArgs}, MegatronFsdp},
      {{"ckpt_format_owner", kArgs}, FsdpDtensorFormat},
      {{"cuda_max_connections", kArgs}, MaxConnections},
      {{"one_virtual_pipeline_option", kArgs}, OneVirtualOption},
      {{"pipeline_layout",
        "megatron/core/transformer/pipeline_parallel_layer_layout.py: "
        "PipelineParallelLayerLayout.validate_layer_layout (+ arguments.py validate_args)"},
       LayoutValid},
      {{"even_layers_without_layout", kArgs}, EvenLayers},
      {{"interleaved_pipeline", kArgs}, InterleavedPipeline},
      {{"kv_channels_derivable", kArgs}, KvChannels},
      {{"dsa_attention", kTC}, DsaAttention},
      {{"optimizer_instances",
        "megatron/core/parallel_state.py: initialize_model_parallel (partial DistOpt shard factor; "
        "the outer-dp choice per arguments.py --outer-dp-sharding-strategy)"},
       OptimizerInstances},
      {{"mla_output_gate", kTC}, MlaOutputGate},
      {{"heads_divide_tp", kTC}, HeadsDivideTp},
      {{"experts_divide_ep", kArgs}, ExpertsDivideEp},
      {{"expert_grid", "megatron/core/parallel_state.py: initialize_model_parallel"}, ExpertGrid},
      {{"expert_bias_score_function", kTC}, ExpertBiasScore},
      {{"top1_softmax_pre_softmax", kTC}, TopOneSoftmax},
      {{"group_limited_routing", kTC}, GroupRouting},
      {{"selective_recompute", kTC}, Recompute},
      {{"mla_not_gqa", kArgs}, MlaNotGqa},
      {{"seq_length", kArgs}, SeqLength},
      {{"moe_bias_etp", kTC}, MoeBiasEtp},
      {{"one_precision", kTC}, OnePrecision},
      {{"bf16_end_layers", kTC}, Bf16EndLayers},
      {{"mtp_position_embedding", kArgs}, MtpPosition},
      {{"save_interval", kArgs}, SaveInterval},
      {{"overlap_param_gather", kArgs}, OverlapParamGather},
      {{"min_lr", kArgs}, LearningRate},
      {{"one_data_source", kArgs}, OneDataSource},
      {{"moe_fields_need_experts", kTC}, MoeFieldsNeedExperts},
      {{"flex_dispatcher",
        "megatron/core/transformer/transformer_config.py: TransformerConfig.__post_init__ (ncclep); "
        "megatron/core/transformer/moe/token_dispatcher.py: MoEFlexTokenDispatcher.__init__ (DeepEP)"},
       FlexDispatcher},
  };
  return t;
}

// Layout grammar: stages split by '|'; inside, symbols E t m L, "X*n" repeats the previous symbol
// or parenthesised group, ',' is cosmetic; "(...)*n" may contain '|'.
std::string ExpandLayout(const std::string& s, size_t& i, bool& ok) {
  std::string out;
  while (i < s.size() && ok) {
    const char c = s[i];
    if (c == ')') return out;
    std::string unit;
    if (c == '(') {
      ++i;
      unit = ExpandLayout(s, i, ok);
      if (i >= s.size() || s[i] != ')') { ok = false; return out; }
      ++i;
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit = std::string(1, c);
      ++i;
    } else if (c == ',' || c == ' ') {
      ++i;
      continue;
    } else {
      ok = false;
      return out;
    }
    if (i < s.size() && s[i] == '*') {
      size_t j = ++i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j == i) { ok = false; return out; }
      const int n = std::stoi(s.substr(i, j - i));
      i = j;
      std::string rep;
      for (int k = 0; k < n; ++k) rep += unit;
      unit = rep;
    }
    out += unit;
  }
  return out;
}

}  // namespace

std::vector<std::string> LayoutStages(const std::string& layout) {
  size_t i = 0;
  bool ok = true;
  const std::string flat = ExpandLayout(layout, i, ok);
  if (!ok || i != layout.size()) return {};
  std::vector<std::string> stages(1);
  for (char c : flat) {
    if (c == '|') stages.emplace_back();
    else stages.back() += c;
  }
  return stages;
}

std::vector<MegatronRule> RulesOf(const std::vector<MegatronRuleFn>& table) {
  std::vector<MegatronRule> r;
  for (const MegatronRuleFn& f : table) r.push_back(f.rule);
  return r;
}

std::vector<MegatronRuleFailure> RunRules(const std::vector<MegatronRuleFn>& table,
                                          const MegatronArgs& args) {
  std::vector<MegatronRuleFailure> out;
  for (const MegatronRuleFn& f : table)
    f.fn(args, [&](const std::string& msg) { out.push_back({f.rule.id, msg, f.rule.source}); });
  return out;
}

const std::vector<MegatronRule>& MegatronRules() {
  static const std::vector<MegatronRule> rules = RulesOf(RuleTable());
  return rules;
}

std::vector<MegatronRuleFailure> CheckMegatronArgs(const MegatronArgs& args) {
  return RunRules(RuleTable(), args);
}

std::string FormatRuleFailures(const std::vector<MegatronRuleFailure>& failures) {
  std::string s;
  for (const auto& f : failures) s += f.rule + ": " + f.message + " [" + f.source + "]\n";
  return s;
}

}  // namespace onboard
