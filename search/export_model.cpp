// DescribeModel / ExportStageStarts: the model facts and pipeline boundaries every engine export
// shares (see export_model.h). Rope base/scaling and norm epsilon are read from config.json
// (the IR does not carry them); field names are the Hugging Face ones (rope_theta, rope_scaling
// {type|rope_type, factor, original_max_position_embeddings, beta_fast, beta_slow, mscale,
// mscale_all_dim, low_freq_factor, high_freq_factor}, rms_norm_eps | layer_norm_eps).
#include "search/export_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/lora_targets.h"
#include "search/cost_model.h"

namespace onboard {
namespace {

using nlohmann::json;

// Step 1 helper: the config.json next to / at model.source, parsed; null when unreadable.
json ReadSourceConfig(const std::string& source) {
  if (source.empty()) return nullptr;
  std::string path = source;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/config.json";
  if (path.size() < 5 || path.substr(path.size() - 5) != ".json") return nullptr;
  std::ifstream f(path);
  if (!f) return nullptr;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return nullptr;
  if (j.contains("text_config") && j["text_config"].is_object()) {
    json t = j["text_config"];
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!t.contains(it.key())) t[it.key()] = it.value();
    return t;
  }
  return j;
}

double NumOr(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : fallback;
}

void ReadRope(const json& c, ExportModel* m, std::vector<std::string>* notes) {
  if (c.is_null()) {
    notes->push_back("config.json not readable from the model source: rope base and norm epsilon are defaults");
    return;
  }
  if (c.contains("rope_theta") && c["rope_theta"].is_number()) {
    m->rope_theta = c["rope_theta"].get<double>();
    m->rope_from_config = true;
  }
  m->norm_eps = NumOr(c, "rms_norm_eps", NumOr(c, "layer_norm_eps", NumOr(c, "layer_norm_epsilon", m->norm_eps)));
  auto rs = c.find("rope_scaling");
  if (rs == c.end() || !rs->is_object()) return;
  RopeScaling& r = m->rope;
  if (rs->contains("type") && (*rs)["type"].is_string()) r.type = (*rs)["type"].get<std::string>();
  if (rs->contains("rope_type") && (*rs)["rope_type"].is_string()) r.type = (*rs)["rope_type"].get<std::string>();
  r.factor = NumOr(*rs, "factor", 1.0);
  r.original_max_position = static_cast<int64_t>(NumOr(*rs, "original_max_position_embeddings", 0));
  r.beta_fast = NumOr(*rs, "beta_fast", 32);
  r.beta_slow = NumOr(*rs, "beta_slow", 1);
  r.mscale = NumOr(*rs, "mscale", 1.0);
  r.mscale_all_dim = NumOr(*rs, "mscale_all_dim", 0.0);
  r.low_freq_factor = NumOr(*rs, "low_freq_factor", 1.0);
  r.high_freq_factor = NumOr(*rs, "high_freq_factor", 4.0);
}

// Step 2 helper: mixer counts and the attention dims of the first softmax layer.
void ReadMixers(const ModelIR& ir, ExportModel* m) {
  const AttentionSpec* first = nullptr;
  for (const LayerSpec& l : ir.layers) {
    const AttentionSpec& a = l.attn;
    switch (a.kind) {
      case MixerKind::kMHA: case MixerKind::kGQA: ++m->n_softmax; break;
      case MixerKind::kMLA: ++m->n_mla; break;
      case MixerKind::kDSA: ++m->n_dsa; break;
      case MixerKind::kKDA: ++m->n_kda; break;
      case MixerKind::kGatedDeltaNet: ++m->n_gdn; break;
      case MixerKind::kLinearAttention: ++m->n_linear; break;
      case MixerKind::kSlidingWindow: ++m->n_window; break;
    }
    if (!first && IsSoftmaxAttention(a.kind)) first = &a;
  }
  if (!first && !ir.layers.empty()) first = &ir.layers.front().attn;
  if (!first) return;
  const AttentionSpec& a = *first;
  m->heads = a.num_heads;
  m->kv_heads = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  m->head_dim = a.head_dim;
  m->v_head_dim = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  m->qkv_bias = a.qkv_bias;
  m->qk_norm = a.qk_norm;
  m->attn_output_gate = a.output_gate;
  m->mla = m->n_mla + m->n_dsa > 0 && m->n_softmax == 0 &&
           (a.kind == MixerKind::kMLA || (a.kind == MixerKind::kDSA && a.dsa_base == MixerKind::kMLA));
  m->q_lora_rank = a.q_lora_rank;
  m->kv_lora_rank = a.kv_lora_rank;
  m->qk_nope_dim = a.qk_nope_head_dim;
  m->qk_rope_dim = a.qk_rope_head_dim;
  if (a.kind == MixerKind::kDSA) {
    m->index_heads = a.index_heads;
    m->index_head_dim = a.index_head_dim;
    m->index_topk = a.index_topk;
  }
}

// Step 3 helper: dense / MoE channel facts (the first MoE layer speaks for all of them).
void ReadChannels(const ModelIR& ir, ExportModel* m) {
  const MoESpec* moe = nullptr;
  for (const LayerSpec& l : ir.layers) {
    const bool is_moe = l.channel == ChannelKind::kMoE;
    m->moe_layer.push_back(is_moe);
    if (is_moe && !moe) moe = &l.moe;
    if (!is_moe && m->dense_ffn == 0) {
      m->dense_ffn = l.mlp.intermediate;
      m->swiglu = l.mlp.gated && l.mlp.act == Activation::kSwiGLU;
      m->activation = ActivationName(l.mlp.act);
      m->linear_bias = l.mlp.bias || l.attn.o_bias;
    }
    m->layer_norm = m->layer_norm || l.norm_bias;
  }
  if (!moe) return;
  m->experts = moe->num_experts;
  m->top_k = moe->top_k;
  m->expert_ffn = moe->expert_intermediate;
  m->shared_experts = moe->num_shared;
  m->shared_ffn = moe->shared_intermediate;
  m->latent_dim = moe->latent_dim;
  m->router_sigmoid = moe->router == RouterActivation::kSigmoid;
  m->expert_score_bias = moe->expert_score_bias;
  m->renormalize = moe->renormalize;
  m->shared_gate = moe->shared_gate;
  m->groups = moe->num_groups;
  m->topk_groups = moe->topk_groups;
  m->routed_scaling = moe->routed_scaling;
  m->linear_bias = m->linear_bias || moe->expert_bias;
  if (m->dense_ffn == 0) {
    m->swiglu = moe->gated && moe->act == Activation::kSwiGLU;
    m->activation = ActivationName(moe->act);
  }
}

}  // namespace

int64_t ExportModel::first_moe_layer() const {
  for (size_t i = 0; i < moe_layer.size(); ++i)
    if (moe_layer[i]) return static_cast<int64_t>(i);
  return -1;
}

bool ExportModel::lora_adapts_routed_experts() const {
  return first_moe_layer() >= 0 && AdaptsRoutedExperts(shared_experts);
}

ExportModel DescribeModel(const ModelIR& ir, std::vector<std::string>* notes) {
  ExportModel m;
  m.name = ir.name;
  m.model_type = ir.model_type;
  m.layers = static_cast<int64_t>(ir.layers.size());
  m.hidden = ir.hidden;
  m.vocab = ir.vocab;
  m.max_position = ir.max_position;
  m.tied = ir.tied_embeddings;
  m.mtp_layers = ir.mtp_layers;
  const json config = ReadSourceConfig(ir.source);
  ReadRope(config, &m, notes);
  auto nope = config.is_object() ? config.find("mla_use_nope") : config.end();
  m.mla_nope = config.is_object() && nope != config.end() && nope->is_boolean() && nope->get<bool>();
  ReadMixers(ir, &m);
  ReadChannels(ir, &m);
  return m;
}

std::vector<int64_t> ExportStageStarts(const Plan& p, const ModelIR& ir) {
  const int64_t chunks = p.deg.pp * p.deg.interleave;
  if (chunks <= 1) return {0};
  if (static_cast<int64_t>(p.stage_layer_starts.size()) == chunks) return p.stage_layer_starts;
  // The plan carries no boundaries (a hand-written layout): balance the layers' forward FLOPs.
  const ModelStats stats = ComputeStats(ir, p.seq);
  std::vector<double> cost;
  for (const LayerStats& l : stats.layers) cost.push_back(l.flops_per_token);
  return BalancedSplit(cost, chunks);
}

std::vector<int64_t> StageSizes(const std::vector<int64_t>& starts, int64_t layers) {
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < starts.size(); ++i)
    sizes.push_back((i + 1 < starts.size() ? starts[i + 1] : layers) - starts[i]);
  return sizes;
}

// The only place the exports read the context-parallel degree.
int64_t PlanContextParallel(const Plan& plan) { return plan.deg.cp; }

Recompute StrongestRecompute(const Plan& p) {
  Recompute r = Recompute::kNone;
  for (const auto& [k, v] : p.recompute)
    if (static_cast<int>(v) > static_cast<int>(r)) r = v;
  return r;
}

std::string MixedRecomputeNote(const Plan& p) {
  std::string per_kind;
  bool mixed = false;
  for (const auto& [k, v] : p.recompute) {
    per_kind += (per_kind.empty() ? "" : ", ") + k + "=" + RecomputeName(v);
    mixed = mixed || v != p.recompute.begin()->second;
  }
  return mixed ? "recompute per block kind (" + per_kind + "): the engine takes one setting; the strongest is exported" : "";
}

std::string PlanFlexDispatcher(const Plan& p) {
  if (p.ep_dispatcher == EpDispatcher::kAllToAll || p.deg.ep * p.deg.etp <= 1) return "";
  return EpDispatcherName(p.ep_dispatcher);
}

std::string Num(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace onboard
