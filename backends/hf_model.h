// HfModel: a Hugging Face checkpoint's weights placed into modules, and the forward over them.
//
// Mapping (hf_map_*.cpp, one file per naming family) turns checkpoint tensor names into these
// structs; an absent tensor is kBadInput naming it and its expected shape, a tensor no module takes is
// kBadInput naming it ("unmapped"). The forward (hf_forward.cpp, hf_attention.cpp, hf_moe.cpp) follows
// transformers' modeling code for the family.
// Shapes: weights as nn.Linear stores them, [out, in]; activations [S, hidden] for one sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "backends/hf_forward_config.h"
#include "backends/hf_layer_range.h"
#include "backends/hf_rope.h"
#include "parsers/safetensors_dtype.h"
#include "parsers/safetensors_weights.h"

namespace onboard {

struct HfLinear {
  torch::Tensor w;  // [out, in]
  torch::Tensor b;  // [out] or undefined
};

struct HfAttentionWeights {
  // GQA / MHA
  HfLinear q, k, v, o;
  torch::Tensor q_norm, k_norm;           // [head_dim] (Qwen3) or undefined
  torch::Tensor sinks;                    // [H] per-head sink logit (gpt-oss) or undefined
  // MLA (DeepSeek-V3)
  HfLinear q_a, q_b, kv_a, kv_b;          // q_a/q_b when q_lora_rank > 0, else q
  torch::Tensor q_a_norm, kv_a_norm;      // [q_lora_rank], [kv_lora_rank]
  // DSA lightning indexer (DeepSeek-V3.2): wq_b [nI*dI, q_lora_rank], wk [dI, hidden], k_norm
  // LayerNorm [dI] (weight + bias), weights_proj [nI, hidden]
  HfLinear idx_wq_b, idx_wk, idx_weights;
  torch::Tensor idx_k_norm_w, idx_k_norm_b;
  // KDA (Kimi-Linear; q/k/v/o above): short convs [H*d, 1, K], A_log [H], dt_bias [H*d], decay gate
  // f_a [d, hidden] -> f_b [H*d, d], beta b_proj [H, hidden], output gate g_a -> g_b, o_norm [d]
  torch::Tensor q_conv, k_conv, v_conv, a_log, dt_bias, o_norm;
  HfLinear f_a, f_b, beta, g_a, g_b;
  // kimi_k3 g_proj [H*d, hidden]: the full-rank KDA output gate (use_full_rank_gate, in place of g_a ->
  // g_b), or the gated MLA's per-head output gate (mla_use_output_gate) after the value up-projection
  HfLinear g;
};

struct HfMlpWeights {
  HfLinear gate, up, down;  // down(act(gate x) * up x); gpt-oss experts carry biases
};

struct HfMoeWeights {
  HfLinear router;                        // [E, hidden]
  torch::Tensor score_bias;               // e_score_correction_bias [E] (DeepSeek-V3) or undefined
  std::vector<HfMlpWeights> experts;      // E routed experts
  bool has_shared = false;
  HfMlpWeights shared;                    // shared expert(s) fused into one MLP
  HfLinear shared_gate;                   // Qwen2-MoE sigmoid gate [1, hidden] or undefined
  // Latent MoE (kimi_k3 routed_expert_hidden_size L): routed experts run on latent_down(x) [T, L]; their
  // weighted sum is RMSNorm'd (latent_norm [L], when latent_moe_use_norm) and latent_up'd back to hidden.
  HfLinear latent_down, latent_up;  // [L, hidden], [hidden, L] or undefined
  torch::Tensor latent_norm;        // [L] or undefined
};

struct HfLayerWeights {
  int64_t index = 0;
  torch::Tensor input_norm, post_norm;    // [hidden]
  HfAttentionWeights attn;
  bool moe = false;
  HfMlpWeights mlp;
  HfMoeWeights experts;
};

// One checkpoint encoding the weights were read in: a safetensors element type, or MXFP4 (gpt-oss's
// `_blocks` + `_scales` pair of U8 tensors: e2m1 pairs x one e8m0 scale per 32 values), which no
// safetensors header names.
struct HfWeightDtype {
  SafetensorsDtype storage = SafetensorsDtype::kF32;  // the header's dtype (U8 for MXFP4's blocks)
  bool mxfp4 = false;
  bool operator==(const HfWeightDtype& o) const { return storage == o.storage && mxfp4 == o.mxfp4; }
};
std::string HfWeightDtypeName(const HfWeightDtype& d);  // SafetensorsDtypeName ("BF16", ...) or "MXFP4"

struct HfModelWeights {
  torch::Tensor embed;                    // [vocab, hidden]
  torch::Tensor final_norm;               // [hidden]
  torch::Tensor lm_head;                  // [vocab, hidden] (the embedding when tied)
  std::vector<HfLayerWeights> layers;     // the layers loaded, in order
  std::vector<std::string> used;          // checkpoint tensors read (scales included)
  std::vector<HfWeightDtype> dtypes_seen;  // distinct checkpoint dtypes read, in first-read order
};

// hf_tp_slice.cpp: how a tensor-parallel rank holds checkpoint tensor `name` (the names TpShardLayer's fields
// come from): whole, its 1/tp of the rows (column-parallel weights and biases, sinks), its 1/tp of the
// columns (row-parallel weights), or on rank 0 only (row-parallel biases). Shared experts always split
// (Megatron's SharedExpertMLP is tensor-parallel); routed experts (".experts.E.") split only when
// `expert_tp` (expert tensor parallel = tp, Megatron's default), else they stay whole and the TP
// ranks own whole experts instead (HfExpertRange).
enum class HfTpSplit { kWhole, kRows, kCols, kRank0 };
HfTpSplit HfTpSplitOf(const std::string& name, bool expert_tp = true);
// True when `name` is one routed expert's tensor ("model.layers.N.mlp.experts.E...").
bool HfIsRoutedExpert(const std::string& name);
// The shared-expert MLPs' module prefixes after "model.layers.N." (the names HfTpSplitOf splits):
// "mlp.shared_experts." (DeepSeek, GLM), Qwen's "mlp.shared_expert.", Kimi's
// "block_sparse_moe.shared_experts.".
std::vector<std::string> HfSharedExpertPrefixes();
// The routed experts' prefixes after "model.layers.N." (expert E's MLP is prefix + "E."): "mlp.experts."
// (Qwen, DeepSeek, GLM), "block_sparse_moe.experts." (Mixtral, Kimi).
std::vector<std::string> HfRoutedExpertPrefixes();

// hf_plan_slice.cpp: experts [begin, end) of group `index` when `num_experts` are split over `parts`
// groups of num_experts / parts (the last takes the remainder). One home for EP and for EP folded over
// a TP group.
struct HfExpertSpan {
  int64_t begin = 0, end = 0;
};
HfExpertSpan HfExpertRange(int64_t num_experts, int64_t parts, int64_t index);
// Routed experts per MoE layer of the model (0 when dense).
int64_t HfRoutedExperts(const HfForwardConfig& c);

// Reads tensors by name with the expected shape, dequantised to `dtype` (F32/F64 checkpoints of that
// dtype alias the mapping; BF16/F16 convert; F8_E4M3 with `<name>_scale_inv` block-dequantises).
class HfWeightReader {
 public:
  HfWeightReader(const SafetensorsCheckpoint& ckpt, torch::ScalarType dtype) : ckpt_(ckpt), dtype_(dtype) {}
  [[nodiscard]] Expected<torch::Tensor> Read(const std::string& name, const std::vector<int64_t>& shape);
  // gpt-oss MXFP4 pair "<prefix>_blocks" U8 [..., out, in/32, 16] + "<prefix>_scales" U8 [..., out, in/32]
  // -> [..., out, in] (`shape`) in the compute dtype.
  // With nr >= 0 only experts (dim-0 rows) [r0, r0 + nr) are read -> [nr, out, in]; with dim 1 / 2 only
  // [d0, d0 + nd) of the out rows / in columns (in: whole 32-value blocks) -> [nr, nd, in] / [nr, out, nd]
  // (gpt-oss's fused experts under expert TP). Only those bytes of both tensors are read.
  [[nodiscard]] Expected<torch::Tensor> ReadMxfp4(const std::string& prefix,
                                                  const std::vector<int64_t>& shape, int64_t r0 = 0,
                                                  int64_t nr = -1, int64_t dim = 1, int64_t d0 = 0,
                                                  int64_t nd = -1);
  // Rows [r0, r0 + nr) of tensor `name` (whole shape `shape`) -> [nr, shape[1:]...], only those bytes
  // read (a rank's experts of a fused [E, ...] tensor). No TP / FSDP window applies.
  [[nodiscard]] Expected<torch::Tensor> ReadRows(const std::string& name, const std::vector<int64_t>& shape,
                                                 int64_t r0, int64_t nr);
  // Rows [r0, r0 + nr) of a fused [E, ...] tensor and along dim `dim` (>= 1) only [d0, d0 + nd) ->
  // [nr, ..., nd, ...], only those bytes read (a rank's expert-TP slice of its experts).
  [[nodiscard]] Expected<torch::Tensor> ReadSlab(const std::string& name, const std::vector<int64_t>& shape,
                                                 int64_t r0, int64_t nr, int64_t dim, int64_t d0, int64_t nd);
  // Linear weight [out, in] (+ bias [out] when `bias`).
  [[nodiscard]] Expected<HfLinear> Linear(const std::string& prefix, int64_t out, int64_t in, bool bias);
  [[nodiscard]] Expected<HfMlpWeights> Mlp(const std::string& prefix, int64_t hidden, int64_t inter,
                                           const char* gate = "gate_proj", const char* up = "up_proj",
                                           const char* down = "down_proj");
  // Routed experts this reader loads ([begin, end); end < 0 = all); others stay empty (plan slices).
  void OwnExperts(int64_t begin, int64_t end) {
    expert_begin_ = begin;
    expert_end_ = end;
  }
  bool OwnsExpert(int64_t e) const { return e >= expert_begin_ && (expert_end_ < 0 || e < expert_end_); }
  // Tensor-parallel rank `rank` of `tp`: Read then hands out only this rank's rows / columns of the
  // tensors HfTpSplitOf(name, expert_tp) splits, read from the mapping as a window (nothing else of
  // them is touched).
  void OwnTpSlice(int64_t tp, int64_t rank, bool expert_tp = true) {
    tp_ = tp;
    tp_rank_ = rank;
    expert_tp_ = expert_tp;
  }
  // FSDP rank `rank` of `n` (torchtitan's FSDP2: each parameter Shard(0)): Read hands out only this
  // rank's dim-0 chunk (HfFsdpRows) of what the TP slice leaves, read as a window. Routed experts
  // (HfIsRoutedExpert; gpt-oss's fused experts) use `expert_n` / `expert_rank` instead when
  // expert_n >= 1 (EP x FSDP: the expert-data-parallel ranks of the FSDP group).
  void OwnFsdpShard(int64_t n, int64_t rank, int64_t expert_n = -1, int64_t expert_rank = 0) {
    fsdp_ = n;
    fsdp_rank_ = rank;
    expert_fsdp_ = expert_n >= 1 ? expert_n : n;
    expert_fsdp_rank_ = expert_n >= 1 ? expert_rank : rank;
  }
  int64_t tp() const { return tp_; }
  int64_t tp_rank() const { return tp_rank_; }
  bool expert_tp() const { return expert_tp_; }
  int64_t fsdp(bool expert = false) const { return expert ? expert_fsdp_ : fsdp_; }
  int64_t fsdp_rank(bool expert = false) const { return expert ? expert_fsdp_rank_ : fsdp_rank_; }
  const std::vector<std::string>& used() const { return used_; }
  const std::vector<HfWeightDtype>& dtypes() const { return dtypes_; }
  torch::ScalarType dtype() const { return dtype_; }
  const SafetensorsCheckpoint& checkpoint() const { return ckpt_; }
  // The decoder's root in the checkpoint's names (HfForwardConfig::weights_root): every "model.X" the
  // mappers ask for is read as root + "X" ("model.language_model.X" for GLM-4.5V); errors and used()
  // name the checkpoint's own names.
  void SetRoot(const std::string& root) { root_ = root; }
  std::string Physical(const std::string& name) const;

 private:
  const SafetensorsCheckpoint& ckpt_;
  torch::ScalarType dtype_;
  std::vector<std::string> used_;
  std::vector<HfWeightDtype> dtypes_;
  void SawDtype(HfWeightDtype d);  // appends d to dtypes_ unless already there
  int64_t expert_begin_ = 0, expert_end_ = -1;
  int64_t tp_ = 1, tp_rank_ = 0;
  bool expert_tp_ = true;
  int64_t fsdp_ = 1, fsdp_rank_ = 0, expert_fsdp_ = 1, expert_fsdp_rank_ = 0;
  std::string root_ = "model.";
  [[nodiscard]] Expected<const TensorInfo*> Lookup(const std::string& name,
                                                   const std::vector<int64_t>& shape);
  [[nodiscard]] Expected<torch::Tensor> ReadWindow(const TensorInfo& t, HfTpSplit split, bool expert);
  [[nodiscard]] Expected<torch::Tensor> DecodeRect(const TensorInfo& t, int64_t r0, int64_t nr, int64_t c0,
                                                   int64_t nc);
  // The slab's window of `t` viewed as [dims before `dim`, the rest] (ReadSlab's bytes).
  [[nodiscard]] Expected<WeightWindow> SlabWindow(const TensorInfo& t, int64_t r0, int64_t nr, int64_t dim,
                                                  int64_t d0, int64_t nd);
};

// hf_plan_slice.cpp: FSDP2's dim-0 chunk of `rows` for rank `rank` of `n` (torch.chunk: chunks of
// ceil(rows / n), the last ones shorter or empty). Units: rows.
struct HfRowSpan {
  int64_t begin = 0, len = 0;
};
HfRowSpan HfFsdpRows(int64_t rows, int64_t n, int64_t rank);

// hf_map_llama.cpp: q/k/v/o (+ biases, + q_norm/k_norm) under `prefix` ("model.layers.3.self_attn").
[[nodiscard]] Expected<HfAttentionWeights> MapGqaAttention(const std::string& prefix, const AttentionSpec& a,
                                                           int64_t hidden, HfWeightReader& r);
// Routed experts `prefix`.E.{gate,up,down} with the given projection names.
[[nodiscard]] Expected<std::vector<HfMlpWeights>> MapExperts(const std::string& prefix, const MoESpec& m,
                                                             int64_t hidden, HfWeightReader& r, const char* gate,
                                                             const char* up, const char* down);

// hf_map_deepseek.cpp: DeepSeek-style sigmoid MoE under `prefix` ("model.layers.3.mlp"): gate.weight,
// gate.e_score_correction_bias, experts.E.*, shared_experts.* (also GLM-4.5's layout).
[[nodiscard]] Expected<HfMoeWeights> MapSigmoidMoe(const std::string& prefix, const MoESpec& m,
                                                   int64_t hidden, HfWeightReader& r);

// hf_map_llama.cpp: what every decoder layer mapper starts from: layer `l`'s HF name prefix
// ("model.layers.N."), then its index, both RMSNorm weights ({input,post_attention}_layernorm) and
// whether its channel is MoE.
inline std::string HfLayerPrefix(const LayerSpec& l) {
  return "model.layers." + std::to_string(l.index) + ".";
}
[[nodiscard]] Expected<HfLayerWeights> MapLayerNorms(const std::string& prefix, const LayerSpec& l,
                                                     int64_t hidden, HfWeightReader& r);

// hf_map_{llama,mixtral,deepseek,glm,gpt_oss,kimi_linear}.cpp: one decoder layer's weights.
[[nodiscard]] Expected<HfLayerWeights> MapLlamaLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapMixtralLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapDeepSeekLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapGlm4MoeLayer(const HfForwardConfig& c, const LayerSpec& l,
                                                       HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapGptOssLayer(const HfForwardConfig& c, const LayerSpec& l,
                                                      HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapKimiLinearLayer(const HfForwardConfig& c, const LayerSpec& l,
                                                          HfWeightReader& r);
[[nodiscard]] Expected<HfLayerWeights> MapKimiK3Layer(const HfForwardConfig& c, const LayerSpec& l,
                                                      HfWeightReader& r);
// hf_map_deepseek.cpp: MLA projections under `prefix` ("model.layers.3.self_attn"), + g_proj when
// a.output_gate; the DeepSeek-V3.2 indexer under `prefix` ("...self_attn.indexer") into *w.
[[nodiscard]] Expected<HfAttentionWeights> MapMla(const std::string& prefix, const AttentionSpec& a,
                                                  int64_t hidden, HfWeightReader& r);
[[nodiscard]] Status MapIndexer(const std::string& prefix, const AttentionSpec& a, int64_t hidden,
                                HfWeightReader& r, HfAttentionWeights* w);
// hf_map_kimi_linear.cpp: a KDA mixer under `prefix` (g_proj when a.full_rank_gate, else g_a/g_b), and
// Kimi's block_sparse_moe (gate + e_score_correction_bias, experts.E.w1/w3/w2, shared_experts.*).
[[nodiscard]] Expected<HfAttentionWeights> MapKda(const std::string& prefix, const AttentionSpec& a,
                                                  int64_t hidden, HfWeightReader& r);
[[nodiscard]] Expected<HfMoeWeights> MapKimiMoe(const std::string& prefix, const MoESpec& m, int64_t hidden,
                                                HfWeightReader& r);

// hf_map.cpp: embedding, the layers in `range`, final norm and head; with the full range, every
// checkpoint tensor must have been taken (MTP layers past num_hidden_layers excepted).
[[nodiscard]] Expected<HfModelWeights> MapHfWeights(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt,
                                                    HfLayerRange range, torch::ScalarType dtype);

// hf_plan_slice.cpp: what one rank of a plan owns: its pipeline stage's layers (embedding on the first
// stage, final norm + head on the last) and its expert-parallel share of the routed experts.
struct HfRankSlice {
  HfLayerRange layers;
  bool embedding = true;
  bool head = true;
  int64_t expert_begin = 0, expert_end = -1;  // [begin, end), end < 0 = all
  int64_t tp = 1, tp_rank = 0;                // tensor-parallel rank: its rows / columns only
  // Routed experts under tp > 1: true = expert TP (each expert's gate/up rows, down columns); false =
  // EP folded over the TP group (rank tp_rank owns whole experts HfExpertRange(E, tp, tp_rank)).
  bool expert_tp = true;
  int64_t fsdp = 1, fsdp_rank = 0;  // FSDP rank: its dim-0 chunk of every tensor it holds
  int64_t expert_fsdp = -1, expert_fsdp_rank = 0;  // the routed experts' (-1: as fsdp; EP x FSDP)
};
// Rank (stage, ep_index) of `pp` stages split at `stage_starts` (first layer of each stage) and `ep`
// expert groups of num_experts / ep experts each.
HfRankSlice SliceForRank(const HfForwardConfig& c, const std::vector<int64_t>& stage_starts, int64_t stage,
                         int64_t ep, int64_t ep_index);
// Maps only what the slice owns (no unmapped-tensor check: the rest belongs to other ranks). The
// checkpoint's touched_bytes() afterwards is this rank's read volume.
[[nodiscard]] Expected<HfModelWeights> MapHfSlice(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt,
                                                  const HfRankSlice& s, torch::ScalarType dtype);

// hf_tp_slice.cpp: one tensor-parallel rank's shard of a mapped layer (Megatron's column/row split; see
// the file's legend). Summing HfAttention / channel (HfMlp or HfMoe) outputs of the tp shards over
// ranks (the all-reduce) gives the full layer's; `spec` has the per-rank heads / intermediate. MoE:
// router replicated, shared experts split, routed experts split (`expert_tp`) or owned whole by
// HfExpertRange(E, tp, rank) (the others left empty: HfMoe skips them).
struct HfTpLayer {
  LayerSpec spec;
  HfLayerWeights weights;
};
// kBadInput naming the field when heads, query groups, the intermediate width or (MoE) the routed
// experts' width (expert_tp) / count (folded) do not divide by tp.
[[nodiscard]] Status CheckTpDivides(const HfForwardConfig& c, const LayerSpec& l, int64_t tp,
                                    bool expert_tp = true);
HfTpLayer TpShardLayer(const LayerSpec& l, const HfLayerWeights& w, int64_t tp, int64_t rank,
                       bool expert_tp = true);
// The spec one TP rank's shard runs with: heads (and, but for MLA, query groups), the dense MLP's
// intermediate and, under expert TP, the routed experts' intermediate divided by tp (what TpShardLayer
// and a reader with OwnTpSlice hand out).
LayerSpec HfTpLocalSpec(const LayerSpec& l, int64_t tp, bool expert_tp = true);
// Megatron's fused shards: linear_qkv rows per local query group [q heads of the group, k, v];
// linear_fc1 = [gate rows of the rank; up rows of the rank].
torch::Tensor MegatronQkvShard(const AttentionSpec& full, const HfAttentionWeights& w, int64_t tp,
                               int64_t rank);
torch::Tensor MegatronFc1Shard(const HfMlpWeights& m, int64_t tp, int64_t rank);

// hf_forward.cpp: logits [S, vocab] for one sequence of token ids.
torch::Tensor HfForward(const HfForwardConfig& c, const HfModelWeights& w, const std::vector<int64_t>& ids);
// Logits [S, vocab] from input embeddings h [S, hidden] (GLM-4.5V: an image's features in place of its
// placeholders) with M-RoPE positions `mrope` (nullptr: 0..S-1).
torch::Tensor HfForwardEmbeds(const HfForwardConfig& c, const HfModelWeights& w, torch::Tensor h,
                              const HfMrope* mrope);

// Pieces shared by the forward files.
torch::Tensor HfRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps);
torch::Tensor HfApplyLinear(const torch::Tensor& x, const HfLinear& l);
torch::Tensor HfMlp(const HfForwardConfig& c, const torch::Tensor& x, const HfMlpWeights& w);
// A routed expert: HfMlp, or gpt-oss's clamped SwiGLU when c.swiglu_limit > 0.
torch::Tensor HfExpert(const HfForwardConfig& c, const torch::Tensor& x, const HfMlpWeights& w);
// `mrope`: M-RoPE positions for GQA layers (nullptr: 0..S-1).
torch::Tensor HfAttention(const HfForwardConfig& c, const LayerSpec& l, const HfAttentionWeights& w,
                          const torch::Tensor& x, const HfMrope* mrope = nullptr);
// Experts with no weights (another rank's) are skipped: the output is then this rank's share.
torch::Tensor HfMoe(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w, const torch::Tensor& x);
// HfMoe's routed part: the experts' weighted sum [T, L] at the latent width (latent MoE; else [T, hidden]),
// before HfLatentOut; a rank holding some experts or their TP slices gets its partial sum.
torch::Tensor HfMoeRouted(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                          const torch::Tensor& x);
// The shared expert(s) of an MoE channel on x (sigmoid-gated for qwen2_moe); undefined without one.
// One home for HfMoe and the EP path (hf_moe_ep.cpp).
torch::Tensor HfSharedExperts(const HfForwardConfig& c, const HfMoeWeights& w, const torch::Tensor& x);
// Latent MoE (one home for HfMoe and HfMoeEp): the routed experts' input (latent_down(x), else x) and
// their combined output back to hidden (latent_up(RMSNorm(y)), else y).
torch::Tensor HfLatentIn(const HfMoeWeights& w, const torch::Tensor& x);
torch::Tensor HfLatentOut(const HfForwardConfig& c, const HfMoeWeights& w, const torch::Tensor& y);

// hf_kda_layer.cpp: a Kimi-Linear KDA token mixer over x [S, hidden] -> [S, hidden].
torch::Tensor HfKdaMixer(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w,
                         const torch::Tensor& x);

// hf_dsa_indexer.cpp: keys each query attends under DSA, bool [S, S] (causal and among the query's
// index_topk highest index scores); q_resid = q_a_layernorm(q_a_proj(x)) [S, q_lora_rank].
torch::Tensor HfDsaSelectedKeys(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w,
                                const torch::Tensor& x, const torch::Tensor& q_resid);

// The routing decision: [T, k] expert ids and their weights (hf_moe.cpp).
struct HfRouting {
  torch::Tensor experts;  // int64 [T, k]
  torch::Tensor weights;  // [T, k] in the compute dtype
};
HfRouting HfRoute(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w, const torch::Tensor& x);

}  // namespace onboard
