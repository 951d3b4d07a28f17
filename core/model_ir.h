// ModelIR: one model as every later stage reads it.
// Units: dimensions are element counts; parameters are counts of scalars (MXFP4/fp8 weights counted
// unpacked, one per element); bytes are bytes; FLOPs are floating-point operations (multiply-add = 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gate_form.h"  // GateForm: KDA decay gate parameterisation

namespace onboard {

enum class DType { kF32, kF16, kBF16, kFP8, kMXFP4, kNVFP4, kI8, kU8, kI32, kI64, kBool, kF64, kUnknown };
const char* DTypeName(DType d);            // "bf16", "fp8", "mxfp4", ...
double DTypeBytes(DType d);                // bytes per element; MXFP4 = 0.53125 (4 bits + e8m0 per 32),
                                           // NVFP4 = 0.5625 (4 bits + e4m3 per 16)
DType ParseDType(const std::string& s);    // "bfloat16"/"bf16"/"BF16" -> kBF16; unknown -> kUnknown

// Token mixer kinds.
enum class MixerKind {
  kMHA,            // full multi-head attention (kv heads == heads)
  kGQA,            // grouped-query attention (1 < kv heads < heads); MQA when kv heads == 1
  kMLA,            // multi-head latent attention (DeepSeek-V2/V3, Kimi)
  kDSA,            // MLA or GQA + lightning indexer choosing top-k keys (DeepSeek-V3.2, flagship)
  kKDA,            // Kimi Delta Attention: gated delta rule with per-channel decay
  kGatedDeltaNet,  // gated DeltaNet (Qwen3-Next), scalar decay per head
  kLinearAttention,// lightning / plain linear attention (MiniMax-01)
  kSlidingWindow,  // softmax attention restricted to a window (gpt-oss alternating layers)
};
const char* MixerKindName(MixerKind k);    // "MHA", "GQA", "MLA", "DSA", "KDA", ...


struct AttentionSpec {
  MixerKind kind = MixerKind::kMHA;
  int64_t num_heads = 0;        // query heads
  int64_t num_kv_heads = 0;     // key/value heads (GQA); == num_heads for MHA/MLA
  int64_t head_dim = 0;         // q/k head dim (softmax attention, KDA/GDN key dim)
  int64_t v_head_dim = 0;       // value head dim (defaults to head_dim)
  bool qkv_bias = false;        // biases on q/k/v projections
  bool o_bias = false;          // bias on output projection
  bool qk_norm = false;         // per-head RMSNorm on q and k (Qwen3)
  bool qk_norm_full = false;    // with qk_norm: one RMSNorm over all heads (H*d and KV*d weights, MiniMax-M2)
  bool output_gate = false;     // sigmoid output gate (gated attention / gated MLA)
  int64_t window = 0;           // sliding window length in tokens (kSlidingWindow), 0 = none
  bool sinks = false;           // learned per-head attention sink (gpt-oss)
  double rope_attention_factor = 1.0;  // YaRN attention factor scaling RoPE's cos/sin (HF rope_scaling
                                       // rope_type yarn); 1 = none
  // MLA
  int64_t q_lora_rank = 0;      // 0 = full-rank q projection
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  // DSA lightning indexer (kind == kDSA; base says what the main attention is)
  MixerKind dsa_base = MixerKind::kMLA;
  int64_t index_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  // KDA / gated DeltaNet / linear attention
  int64_t num_v_heads = 0;      // value heads (grouped values when > num_heads)
  int64_t conv_kernel = 0;      // short causal depthwise conv width (0 = none)
  GateForm gate_form = GateForm::kNone;
  double gate_lower_bound = 0;  // bounded gate lower bound (< 0)
  bool full_rank_gate = false;  // KDA decay gate from a full-rank projection (else low-rank)
  int64_t chunk_size = 64;      // chunk length used by chunked kernels
};

enum class Activation { kSwiGLU, kGeGLU, kGELU, kSiTU, kReLU2, kSiLU, kUnknown };
const char* ActivationName(Activation a);

enum class ChannelKind { kDenseMLP, kMoE };

struct MlpSpec {
  Activation act = Activation::kSwiGLU;
  int64_t intermediate = 0;     // FFN width
  bool gated = true;            // gate+up+down (3 matrices) vs up+down (2)
  bool bias = false;
};

enum class RouterActivation { kSoftmax, kSigmoid };
const char* ChannelKindName(ChannelKind c);             // "MLP" | "MoE"
const char* RouterActivationName(RouterActivation r);  // "softmax" | "sigmoid"
const char* GateFormName(GateForm g);                  // "none" | "original" | "bounded"
// True for kinds whose cost grows with the number of keys attended (MHA/GQA/MLA/DSA/sliding window).
bool IsSoftmaxAttention(MixerKind k);

struct MoESpec {
  int64_t num_experts = 0;            // routed experts
  int64_t top_k = 0;                  // routed experts per token
  int64_t num_shared = 0;             // shared experts (always active)
  int64_t shared_intermediate = 0;    // width of each shared expert's FFN
  int64_t expert_intermediate = 0;    // width of each routed expert's FFN
  int64_t latent_dim = 0;             // latent MoE: routed experts run at this width (0 = hidden)
  bool latent_norm = false;           // norm on the latent down-projection
  RouterActivation router = RouterActivation::kSoftmax;
  bool router_bias = false;           // bias on the router linear (gpt-oss)
  bool expert_score_bias = false;     // aux-loss-free correction bias (DeepSeek-V3 e_score_correction_bias)
  bool shared_gate = false;           // sigmoid gate on the shared expert output (Qwen2/3-Next)
  int64_t num_groups = 1;             // router groups (group-limited routing)
  int64_t topk_groups = 1;
  double routed_scaling = 1.0;
  bool renormalize = true;
  Activation act = Activation::kSwiGLU;
  bool expert_bias = false;           // biases inside expert FFNs (gpt-oss)
  double act_clamp = 0;  // clamped GLU (gpt-oss swiglu_limit): gate <= c, -c <= up <= c; 0 = none
  bool gated = true;                  // experts are gate+up+down (3 matrices) vs up+down (2)
};

struct LayerSpec {
  int64_t index = 0;            // 0-based layer index
  AttentionSpec attn;
  ChannelKind channel = ChannelKind::kDenseMLP;
  MlpSpec mlp;                  // when channel == kDenseMLP
  MoESpec moe;                  // when channel == kMoE
  int64_t norms = 2;            // RMSNorm/LayerNorm vectors of width hidden in this layer
  bool norm_bias = false;       // LayerNorm (weight+bias) instead of RMSNorm
};

struct VisionTower {
  std::string kind;             // "moonvit", "glm4v", "siglip", ...
  int64_t depth = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;     // MLP width of each block
  int64_t heads = 0;
  int64_t patch = 0;
  int64_t in_channels = 3;
  int64_t temporal_patch = 1;
  int64_t merge = 1;            // spatial merge factor per side (2x2 merge -> 2)
  int64_t out_hidden = 0;       // projector output width (LM hidden)
  int64_t params = 0;           // exact parameter count of the tower incl. projector
};

struct ModelIR {
  std::string name;             // file stem or _name_or_path
  std::string source;           // path it was read from
  std::string model_type;       // e.g. "kimi_k3"
  std::string architecture;     // e.g. "KimiK3ForConditionalGeneration"
  std::string family;           // "decoder" | "encoder"
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t max_position = 0;     // context length in tokens
  bool tied_embeddings = false;
  DType dtype = DType::kBF16;           // weights not otherwise listed
  DType expert_dtype = DType::kBF16;    // routed expert weights (fp8 / mxfp4 from quantization_config)
  DType linear_dtype = DType::kUnknown; // other matmul weights inside layers (attention, dense MLP,
                                        // shared experts; not routers); kUnknown = same as dtype
  std::string quantization;             // quant_method, "" when none
  bool final_norm = true;
  bool has_position_embedding = false;  // learned absolute positions (BERT-like)
  int64_t type_vocab = 0;               // token-type embeddings (BERT)
  int64_t extra_params = 0;             // exact params not covered by the fields above (ONNX pooler etc.)
  std::vector<LayerSpec> layers;
  std::optional<VisionTower> vision;
  std::vector<std::string> warnings;    // what was guessed (unknown model_type, defaults taken)
  int64_t mtp_layers = 0;               // multi-token-prediction layers in the checkpoint (not counted)
};

// ---- Per-layer and whole-model statistics (model_stats.cpp) ----

struct LayerStats {
  int64_t params = 0;           // parameters in this layer
  int64_t active_params = 0;    // parameters one token touches
  int64_t attn_params = 0;
  int64_t channel_params = 0;
  int64_t expert_params = 0;    // routed expert parameters (all experts)
  double flops_per_token = 0;   // forward FLOPs per token at the given seq (matmuls + attention)
  double attn_flops_per_token = 0;  // sequence-dependent part (scores/values, indexer, state updates)
  double act_bytes_per_token = 0;   // activation bytes per token kept for backward (16-bit, no recompute)
};

struct ModelStats {
  int64_t seq = 0;                  // sequence length the FLOPs were computed at
  std::vector<LayerStats> layers;
  int64_t embedding_params = 0;     // input embeddings (+ positions/type)
  int64_t head_params = 0;          // output head (0 when tied)
  int64_t vision_params = 0;
  int64_t other_params = 0;         // final norm + extra
  int64_t total_params = 0;
  int64_t active_params = 0;
  double flops_per_token = 0;       // forward FLOPs per token incl. head
  double weight_bytes = 0;          // all weights at their storage dtypes
  std::vector<std::pair<DType, double>> weight_bytes_by_dtype;
};

// Counts parameters, FLOPs and bytes. seq = tokens in the sequence (for attention terms).
// Formulas and units: top of core/model_stats.cpp. Requires ModelSizeFitsInt64(model).
ModelStats ComputeStats(const ModelIR& model, int64_t seq);

// False when the parameter count would not fit int64 (absurd dimensions); parsers reject such input.
bool ModelSizeFitsInt64(const ModelIR& model);

// "1-93: 69 KDA + 24 MLA/DSA, MoE 896x top-16 latent 3584"-style folded summary lines.
std::vector<std::string> SummarizeLayers(const ModelIR& model);

}  // namespace onboard
