// Tensor-parallel shards of one mapped decoder layer, in Megatron-LM's layout (megatron/core/
// tensor_parallel/layers.py ColumnParallelLinear / RowParallelLinear; transformer/attention.py):
//   column-parallel (output rows split, bias split): q/k/v by heads (query groups for k/v), MLA
//     q_b_proj (or q_proj) and kv_b_proj by heads, gate/up by intermediate rows;
//   row-parallel (input columns split, bias added once after the all-reduce: kept on rank 0):
//     o_proj by heads, down by intermediate columns;
//   replicated: norms, q/k norms (per head dim), MLA q_a/kv_a (latent), the MoE router, its score bias
//     and qwen2_moe's shared-expert gate;
//   MoE experts: shared experts split as a dense MLP (Megatron's SharedExpertMLP is tensor-parallel);
//     routed experts split the same way per expert under expert tensor parallel = tp (Megatron's
//     default: --expert-tensor-parallel-size unset takes the TP size), or, with ETP = 1 and EP folded
//     over the TP group, stay whole and each TP rank owns HfExpertRange(E, tp, rank) of them.
//     Either way the ranks' routed sums add up to the full routed sum (the all-reduce / combine).
//   Latent MoE (kimi_k3): routed_expert_down_proj / _norm / _up_proj replicated (Megatron's
//     fc1_latent_proj / fc2_latent_proj are duplicated, not TP-split). The norm acts on the whole routed
//     sum, so the ranks' partial latent sums are all-reduced [T, L] before it (Megatron's token combine
//     over the expert-TP group; probe_weights_model.cpp's Channel) and every rank then computes the same
//     latent_up(norm(sum)); only the shared experts' outputs are partial. So here, unlike the rest of the
//     layer, the ranks' HfMoe outputs do NOT sum to the channel.
//   KDA (Kimi-Linear), by KDA heads: q/k/v projections and their short convolutions (depthwise, one
//     filter per channel: they split with their channels), dt_bias [H*d], the decay gate's f_b and the
//     output gate's g_b (column-parallel after the replicated low-rank f_a / g_a), b_proj (beta) by
//     heads, A_log [1, 1, H, 1] by its head dim; o_norm (one [d] weight shared by every head, the norm
//     per head) replicated; o_proj row-parallel as above.
//   Megatron fuses q/k/v as linear_qkv with rows ordered per query group [q heads of the group, k, v]
//   and fc1 as [gate shard; up shard]; MegatronQkvShard / MegatronFc1Shard give those per rank.
//   HfTpSplitOf states the same split by checkpoint name, for loading a rank's slice straight from the
//   mapping (HfWeightReader::OwnTpSlice); HfTpLoad.* checks the two agree bit for bit.
// Shapes: linears [out, in]; H heads, KV groups, d head dim, I intermediate. Units: rows/columns.
#include <cctype>
#include <iterator>

#include "backends/hf_model.h"

namespace onboard {
namespace {

// Rows [rank * n / tp, (rank + 1) * n / tp) of a column-parallel linear (weight and bias).
HfLinear Rows(const HfLinear& l, int64_t tp, int64_t rank) {
  if (!l.w.defined()) return l;
  ONBOARD_ASSERT(l.w.size(0) % tp == 0, "column-parallel rows must divide by tp");
  const int64_t n = l.w.size(0) / tp;
  return {l.w.narrow(0, rank * n, n), l.b.defined() ? l.b.narrow(0, rank * n, n) : torch::Tensor()};
}

// Columns of a row-parallel linear; the bias stays on rank 0 only.
HfLinear Cols(const HfLinear& l, int64_t tp, int64_t rank) {
  if (!l.w.defined()) return l;
  ONBOARD_ASSERT(l.w.size(1) % tp == 0, "row-parallel columns must divide by tp");
  const int64_t n = l.w.size(1) / tp;
  return {l.w.narrow(1, rank * n, n), rank == 0 ? l.b : torch::Tensor()};
}

// A KDA mixer's per-head tensors beyond q/k/v/o, for local spec `a` (H/tp heads of d): the short
// convolutions and dt_bias with their channels, A_log by heads, the gates' second projections and b_proj
// by rows; f_a, g_a (low rank, replicated) and o_norm ([d], every head's) stay whole.
void KdaShard(const AttentionSpec& a, int64_t tp, int64_t rank, HfAttentionWeights* s) {
  const int64_t D = a.num_heads * a.head_dim;
  for (torch::Tensor* t : {&s->q_conv, &s->k_conv, &s->v_conv, &s->dt_bias}) *t = t->narrow(0, rank * D, D);
  s->a_log = s->a_log.narrow(2, rank * a.num_heads, a.num_heads);
  for (HfLinear* col : {&s->f_b, &s->beta, &s->g_b}) *col = Rows(*col, tp, rank);
}

HfMlpWeights MlpShard(const HfMlpWeights& m, int64_t tp, int64_t rank) {
  return {Rows(m.gate, tp, rank), Rows(m.up, tp, rank), Cols(m.down, tp, rank)};
}

// The same split by checkpoint name, "model.layers.N." + one of these.
struct SplitRow {
  const char* tail;
  HfTpSplit split;
};
// KDA (Kimi-Linear): A_log [1, 1, H, 1] is one row of H columns (HfWeightReader's column window).
constexpr SplitRow kTpSplits[] = {
    {"self_attn.q_proj.weight", HfTpSplit::kRows},   {"self_attn.q_proj.bias", HfTpSplit::kRows},
    {"self_attn.k_proj.weight", HfTpSplit::kRows},   {"self_attn.k_proj.bias", HfTpSplit::kRows},
    {"self_attn.v_proj.weight", HfTpSplit::kRows},   {"self_attn.v_proj.bias", HfTpSplit::kRows},
    {"self_attn.q_b_proj.weight", HfTpSplit::kRows}, {"self_attn.kv_b_proj.weight", HfTpSplit::kRows},
    {"self_attn.sinks", HfTpSplit::kRows},           {"self_attn.o_proj.weight", HfTpSplit::kCols},
    {"self_attn.o_proj.bias", HfTpSplit::kRank0},    {"mlp.gate_proj.weight", HfTpSplit::kRows},
    {"mlp.up_proj.weight", HfTpSplit::kRows},        {"mlp.down_proj.weight", HfTpSplit::kCols},
    {"self_attn.q_conv1d.weight", HfTpSplit::kRows}, {"self_attn.k_conv1d.weight", HfTpSplit::kRows},
    {"self_attn.v_conv1d.weight", HfTpSplit::kRows}, {"self_attn.dt_bias", HfTpSplit::kRows},
    {"self_attn.A_log", HfTpSplit::kCols},           {"self_attn.f_b_proj.weight", HfTpSplit::kRows},
    {"self_attn.b_proj.weight", HfTpSplit::kRows},   {"self_attn.g_b_proj.weight", HfTpSplit::kRows},
    {"self_attn.g_proj.weight", HfTpSplit::kRows},  // kimi_k3: per-head output gates
};
// An expert MLP's projections, after "<expert prefix>." (HF names; mixtral's w1 / w3 / w2).
constexpr SplitRow kExpertSplits[] = {
    {"gate_proj.weight", HfTpSplit::kRows}, {"up_proj.weight", HfTpSplit::kRows},
    {"down_proj.weight", HfTpSplit::kCols}, {"w1.weight", HfTpSplit::kRows},
    {"w3.weight", HfTpSplit::kRows},        {"w2.weight", HfTpSplit::kCols},
};
constexpr const char* kSharedPrefixes[] = {"mlp.shared_experts.", "mlp.shared_expert.",
                                           "block_sparse_moe.shared_experts."};
constexpr const char* kRoutedPrefixes[] = {"mlp.experts.", "block_sparse_moe.experts."};

HfTpSplit ExpertSplit(const std::string& rest) {
  for (const SplitRow& r : kExpertSplits)
    if (rest == r.tail) return r.split;
  return HfTpSplit::kWhole;
}

// `tail` past "<prefix>E." for a routed expert E, or "" when `tail` names no routed expert.
std::string RoutedExpertRest(const std::string& tail) {
  for (const char* p : kRoutedPrefixes) {
    const std::string prefix = p;
    if (tail.compare(0, prefix.size(), prefix) != 0) continue;
    size_t i = prefix.size();
    while (i < tail.size() && std::isdigit(static_cast<unsigned char>(tail[i]))) ++i;
    if (i > prefix.size() && i < tail.size() && tail[i] == '.') return tail.substr(i + 1);
  }
  return "";
}

}  // namespace

HfTpSplit HfTpSplitOf(const std::string& name, bool expert_tp) {
  const std::string layers = "model.layers.";
  if (name.compare(0, layers.size(), layers) != 0) return HfTpSplit::kWhole;
  size_t i = layers.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == layers.size() || i >= name.size() || name[i] != '.') return HfTpSplit::kWhole;
  const std::string tail = name.substr(i + 1);
  for (const SplitRow& r : kTpSplits)
    if (tail == r.tail) return r.split;
  for (const char* p : kSharedPrefixes) {
    const std::string prefix = p;
    if (tail.compare(0, prefix.size(), prefix) == 0) return ExpertSplit(tail.substr(prefix.size()));
  }
  const std::string rest = RoutedExpertRest(tail);
  return expert_tp && !rest.empty() ? ExpertSplit(rest) : HfTpSplit::kWhole;
}

std::vector<std::string> HfSharedExpertPrefixes() {
  return {std::begin(kSharedPrefixes), std::end(kSharedPrefixes)};
}

std::vector<std::string> HfRoutedExpertPrefixes() {
  return {std::begin(kRoutedPrefixes), std::end(kRoutedPrefixes)};
}

bool HfIsRoutedExpert(const std::string& name) {
  const std::string layers = "model.layers.";
  if (name.compare(0, layers.size(), layers) != 0) return false;
  const size_t dot = name.find('.', layers.size());
  return dot != std::string::npos && !RoutedExpertRest(name.substr(dot + 1)).empty();
}

Status CheckTpDivides(const HfForwardConfig& c, const LayerSpec& l, int64_t tp, bool expert_tp) {
  const AttentionSpec& a = l.attn;
  const int64_t inter = l.channel == ChannelKind::kMoE ? 0 : l.mlp.intermediate;
  auto fail = [&](const char* field, int64_t v) {
    return BadInput(c.config_path, field, "must be divisible by tp=" + std::to_string(tp) + " (Megatron)",
                    std::to_string(v));
  };
  if (tp < 1) return BadInput(c.config_path, "tp", "must be >= 1", std::to_string(tp));
  if (a.kind == MixerKind::kKDA && a.num_heads % tp != 0)
    return fail("linear_attn_config.num_heads", a.num_heads);
  if (a.num_heads % tp != 0) return fail("num_attention_heads", a.num_heads);
  if (a.kind != MixerKind::kMLA && a.num_kv_heads % tp != 0)
    return fail("num_key_value_heads", a.num_kv_heads);
  if (inter % tp != 0) return fail("intermediate_size", inter);
  if (l.channel != ChannelKind::kMoE) return Status::Ok();
  if (expert_tp && l.moe.expert_intermediate % tp != 0)
    return fail("moe_intermediate_size", l.moe.expert_intermediate);
  if (!expert_tp && l.moe.num_experts % tp != 0)
    return fail("num_experts (EP folded over TP)", l.moe.num_experts);
  return Status::Ok();
}

LayerSpec HfTpLocalSpec(const LayerSpec& l, int64_t tp, bool expert_tp) {
  LayerSpec s = l;
  s.attn.num_heads /= tp;
  if (s.attn.kind != MixerKind::kMLA) s.attn.num_kv_heads /= tp;
  if (s.attn.kind == MixerKind::kKDA) s.attn.num_v_heads /= tp;
  if (l.channel != ChannelKind::kMoE) s.mlp.intermediate /= tp;
  if (l.channel == ChannelKind::kMoE && expert_tp) s.moe.expert_intermediate /= tp;
  return s;
}

HfTpLayer TpShardLayer(const LayerSpec& l, const HfLayerWeights& w, int64_t tp, int64_t rank,
                       bool expert_tp) {
  ONBOARD_ASSERT(tp >= 1 && rank >= 0 && rank < tp, "tp rank outside [0, tp)");
  HfTpLayer out{HfTpLocalSpec(l, tp, expert_tp), w};
  const AttentionSpec& a = out.spec.attn;
  HfAttentionWeights& s = out.weights.attn;
  // Step 1: attention, by heads (k/v by query groups; MLA latent projections replicated; KDA's
  // per-head tensors by KdaShard).
  for (HfLinear* col : {&s.q, &s.k, &s.v, &s.q_b, &s.kv_b, &s.g}) *col = Rows(*col, tp, rank);  // g: kimi_k3
  s.o = Cols(s.o, tp, rank);
  if (s.sinks.defined()) s.sinks = s.sinks.narrow(0, rank * a.num_heads, a.num_heads);
  if (a.kind == MixerKind::kKDA) KdaShard(a, tp, rank, &s);
  // Step 2: a dense MLP by intermediate.
  if (!w.moe) {
    out.weights.mlp = MlpShard(w.mlp, tp, rank);
    return out;
  }
  // Step 3: MoE: shared experts by intermediate; routed experts by intermediate or by ownership.
  HfMoeWeights& m = out.weights.experts;
  if (m.has_shared) m.shared = MlpShard(m.shared, tp, rank);
  if (expert_tp) {
    for (HfMlpWeights& e : m.experts) e = MlpShard(e, tp, rank);
    return out;
  }
  const HfExpertSpan own = HfExpertRange(int64_t(m.experts.size()), tp, rank);
  for (int64_t e = 0; e < int64_t(m.experts.size()); ++e)
    if (e < own.begin || e >= own.end) m.experts[size_t(e)] = HfMlpWeights{};
  return out;
}

torch::Tensor MegatronQkvShard(const AttentionSpec& full, const HfAttentionWeights& w, int64_t tp,
                               int64_t rank) {
  const int64_t groups = full.num_kv_heads / tp, per = full.num_heads / full.num_kv_heads, d = full.head_dim;
  std::vector<torch::Tensor> rows;
  for (int64_t g = rank * groups; g < (rank + 1) * groups; ++g) {
    rows.push_back(w.q.w.narrow(0, g * per * d, per * d));
    rows.push_back(w.k.w.narrow(0, g * d, d));
    rows.push_back(w.v.w.narrow(0, g * d, d));
  }
  return torch::cat(rows, 0);
}

torch::Tensor MegatronFc1Shard(const HfMlpWeights& m, int64_t tp, int64_t rank) {
  return torch::cat({Rows(m.gate, tp, rank).w, Rows(m.up, tp, rank).w}, 0);
}

}  // namespace onboard
