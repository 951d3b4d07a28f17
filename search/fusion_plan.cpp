// PlanFusions: the fusible producer-consumer chains of each layer and what they save.
// Units: launches per layer forward pass; HBM bytes per token. Notation: H = hidden, b = activation
// bytes, f = fp32 bytes, i = index bytes; "write + read" = the producer's store and the consumer's load
// of an intermediate that the fused kernel keeps in registers or shared memory.
//
// Terms (one per chain; sources: the unfused op sequences of HF transformers' modeling code, the fused
// kernels named in each line):
//   norm+linear prologue   per input norm (<= 2): 1 launch, 2 H b (the normed input)
//   norm+quantise          quantised GEMM inputs (options.gemm_input fp8 / mxfp8 / nvfp4), in place of
//                          the prologue term: a GEMM that reads quantised inputs cannot take the norm
//                          into its prologue, so the fusible pair is norm -> quantise.
//                          fp8 / mxfp8: Transformer Engine's LayerNormLinear norm kernel writes the fp8
//                          rows and scales: per norm 1 launch (the cast), 2 H b (the 16-bit normed input
//                          the cast reads; the fp8 copy is written either way); the cost model's fp8
//                          quantisation term charges that read (search/cost_model.h fp8_quant_bytes:
//                          read 2 B, write 2 x 1 B).
//                          nvfp4: the per-tensor amax must be known before any element is cast, so the
//                          16-bit normed copy is written and the cast reads it whatever fuses; what fuses
//                          is the quantiser's amax pass into the norm kernel (TE's FUSED_NORM_AMAX_NVFP4;
//                          TE runs it unfused, Impl::UNFUSED, when the quantiser takes a post-RHT amax, as
//                          NVFP4BlockScaling does for activations: TransformerEngine@d0067d0 pytorch/csrc/
//                          extensions/normalization.cpp, common/recipe/__init__.py fp4_quant_fwd_inp
//                          random_hadamard_transform = not disable_rht, pytorch/quantization.py
//                          with_post_rht_amax): per norm 1 launch (the amax pass), H b (its read)
//   gated activation       gate/up GEMM writes 2I, act reads 2I writes I, down reads I (6I);
//                          fused epilogue writes I, down reads I (2I): 1 launch, 4 I b per active FFN
//   activation epilogue    ungated: 4I -> 2I: 1 launch, 2 I b
//   router+top-k+permute   logits and probabilities (E each, fp32) written and read, top-k indices
//                          (k) written and read: 3 launches (activation, top-k, permute), 4 E f + 2 k i
//   residual add           in the epilogue of the o_proj / down GEMM: 2 per layer, 1 launch, 2 H b each
//   rotary+attention       rotated q, k written and read: 1 launch, 2 (nq + nk) b; with q/k norm one
//                          more launch and 2 (nq + nk) b (FlashAttention-style prologue). The IR has no
//                          rotary flag: softmax attention is assumed rotary unless the model has learned
//                          absolute positions (has_position_embedding)
//   KDA prologue           three terms, as the kernel switches them (FlashKDA's use_gate_in_kernel,
//                          use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel): gate activation
//                          1 launch, 2 HV K f (the log decay); q/k L2 norm 2 launches, 2 (2 H K) b;
//                          beta sigmoid 1 launch, 2 HV b
//   DSA indexer+top-k      one fp32 score per causal key per query, (seq + 1) / 2 keys on average:
//                          1 launch, 2 f (seq + 1) / 2 (this project's CPU kernel: codegen/kernels)
//   MoE unpermute+combine  expert outputs (k rows of width W) unpermuted then combined: 1 launch, 2 k W b
#include "search/fusion_plan.h"

#include <cstdio>
#include <sstream>

#include "core/plan.h"

namespace onboard {
namespace {

std::string Num(double v) { return FusionNum(v); }

FusionTerm Term(FusionKind kind, std::string chain, double launches, double bytes, std::string formula) {
  FusionTerm t;
  t.kind = kind;
  t.chain = std::move(chain);
  t.launches_saved = launches;
  t.bytes_saved = bytes;
  t.formula = std::move(formula);
  return t;
}

// Rotary (and q/k norm) fused into the attention kernel's load of q and k.
void AddAttentionTerms(const ModelIR& m, const AttentionSpec& a, const FusionOptions& o,
                       std::vector<FusionTerm>* out) {
  const double b = o.act_bytes;
  if (a.kind == MixerKind::kKDA) {
    const double H = static_cast<double>(a.num_heads), K = static_cast<double>(a.head_dim);
    const double HV = static_cast<double>(a.num_v_heads > 0 ? a.num_v_heads : a.num_heads);
    out->push_back(Term(FusionKind::kKdaPrologue, "gate activation -> KDA kernel", 1,
                        2 * HV * K * o.fp32_bytes,
                        "2 x " + Num(HV * K) + " x " + Num(o.fp32_bytes) + " B (log decay: write + read)"));
    out->push_back(Term(FusionKind::kKdaPrologue, "q/k L2 norm -> KDA kernel", 2, 2 * 2 * H * K * b,
                        "2 x " + Num(2 * H * K) + " x " + Num(b) + " B (normed q, k: write + read)"));
    out->push_back(Term(FusionKind::kKdaPrologue, "beta sigmoid -> KDA kernel", 1, 2 * HV * b,
                        "2 x " + Num(HV) + " x " + Num(b) + " B (beta: write + read)"));
    out->back().beta_sigmoid = true;
    return;
  }
  if (!IsSoftmaxAttention(a.kind) || m.has_position_embedding) return;
  const bool mla = a.kind == MixerKind::kMLA || (a.kind == MixerKind::kDSA && a.dsa_base == MixerKind::kMLA);
  const double nq = mla ? static_cast<double>(a.num_heads * a.qk_rope_head_dim)
                        : static_cast<double>(a.num_heads * a.head_dim);
  const double nk = mla ? static_cast<double>(a.qk_rope_head_dim)
                        : static_cast<double>(a.num_kv_heads * a.head_dim);
  const double passes = a.qk_norm ? 2 : 1;
  out->push_back(Term(FusionKind::kRotaryAttention,
                      std::string(a.qk_norm ? "q/k norm + " : "") + "rotary -> attention q/k load", passes,
                      2 * passes * (nq + nk) * b,
                      Num(2 * passes) + " x (" + Num(nq) + " + " + Num(nk) + ") x " + Num(b) +
                          " B (rotated q, k: write + read" + (a.qk_norm ? ", also after the norm)" : ")")));
  if (a.kind == MixerKind::kDSA) {
    const double keys = (static_cast<double>(o.seq) + 1) / 2;
    out->push_back(Term(FusionKind::kDsaIndexerTopk, "indexer scores -> top-k per query block", 1,
                        2 * o.fp32_bytes * keys,
                        "2 x " + Num(keys) + " x " + Num(o.fp32_bytes) +
                            " B (one fp32 score per causal key, seq " + std::to_string(o.seq) + ")"));
  }
}

// An FFN's activation in its gate/up GEMM epilogue; `count` FFNs of width I per token.
void AddFfnTerm(Activation act, bool gated, double I, double count, const std::string& what,
                const FusionOptions& o, std::vector<FusionTerm>* out) {
  if (I <= 0 || count <= 0) return;
  const double b = o.act_bytes;
  if (gated) {
    out->push_back(Term(FusionKind::kGatedActivation, std::string(ActivationName(act)) + " gate*up -> " + what, 1,
                        4 * I * b * count,
                        "4 x " + Num(I) + " x " + Num(b) + " B x " + Num(count) +
                            " (gate, up written and read; product written once)"));
  } else {
    out->push_back(Term(FusionKind::kActivationEpilogue, std::string(ActivationName(act)) + " -> " + what, 1,
                        2 * I * b * count,
                        "2 x " + Num(I) + " x " + Num(b) + " B x " + Num(count) + " (activation output)"));
  }
}

void AddChannelTerms(const ModelIR& m, const LayerSpec& l, const FusionOptions& o, std::vector<FusionTerm>* out) {
  if (l.channel == ChannelKind::kDenseMLP) {
    AddFfnTerm(l.mlp.act, l.mlp.gated, static_cast<double>(l.mlp.intermediate), 1, "down projection", o, out);
    return;
  }
  const MoESpec& e = l.moe;
  const double E = static_cast<double>(e.num_experts), k = static_cast<double>(e.top_k);
  out->push_back(Term(FusionKind::kRouterTopkPermute, std::string("router -> ") + RouterActivationName(e.router) +
                                                          " -> top-k -> permute",
                      3, 4 * E * o.fp32_bytes + 2 * k * o.index_bytes,
                      "4 x " + Num(E) + " x " + Num(o.fp32_bytes) + " B + 2 x " + Num(k) + " x " +
                          Num(o.index_bytes) + " B (logits, probabilities; expert indices: write + read)"));
  AddFfnTerm(e.act, e.gated, static_cast<double>(e.expert_intermediate), k, "routed expert down projections", o,
             out);
  AddFfnTerm(e.act, e.gated, static_cast<double>(e.shared_intermediate), static_cast<double>(e.num_shared),
             "shared expert down projection", o, out);
  const double W = static_cast<double>(e.latent_dim > 0 ? e.latent_dim : m.hidden);
  out->push_back(Term(FusionKind::kMoeUnpermuteCombine, "expert outputs -> unpermute -> weighted combine", 1,
                      2 * k * W * o.act_bytes,
                      "2 x " + Num(k) + " x " + Num(W) + " x " + Num(o.act_bytes) +
                          " B (token-ordered expert outputs: write + read)"));
}

// The GEMM input precision of layer `index`: bf16 in the plan's bf16 first / last layers.
Precision LayerGemmInput(const ModelIR& m, int64_t index, const FusionOptions& o) {
  const int64_t L = static_cast<int64_t>(m.layers.size());
  return IsBf16EndLayer(index, L, o.bf16_layers_first, o.bf16_layers_last) ? Precision::kBF16 : o.gemm_input;
}

LayerFusion PlanLayer(const ModelIR& m, const LayerSpec& l, const FusionOptions& opts) {
  FusionOptions o = opts;
  o.gemm_input = LayerGemmInput(m, l.index, opts);
  LayerFusion lf;
  lf.layer = l.index;
  const double H = static_cast<double>(m.hidden), b = o.act_bytes;
  const char* norm = l.norm_bias ? "layernorm" : "rmsnorm";
  const std::string per_norm = "2 x " + Num(H) + " x " + Num(b) + " B (normed input: write + read)";
  // A norm before the projections: in its GEMM's prologue, or (quantised inputs) fused with the quantise.
  auto norm_term = [&](const std::string& consumer) {
    if (o.gemm_input == Precision::kNVFP4)
      return Term(FusionKind::kNormQuantize, std::string(norm) + " -> nvfp4 amax -> cast -> " + consumer, 1,
                  H * b,
                  "1 x " + Num(H) + " x " + Num(b) + " B (16-bit normed input: read by the amax pass)");
    if (QuantisedGemmInputs(o.gemm_input))
      return Term(FusionKind::kNormQuantize,
                  std::string(norm) + " -> " + PrecisionName(o.gemm_input) + " quantise -> " + consumer, 1,
                  2 * H * b,
                  "2 x " + Num(H) + " x " + Num(b) + " B (16-bit normed input: write + read by the cast)");
    return Term(FusionKind::kNormLinearPrologue, std::string(norm) + " -> " + consumer, 1, 2 * H * b,
                per_norm);
  };
  if (l.norms >= 1) lf.terms.push_back(norm_term("attention input projections"));
  AddAttentionTerms(m, l.attn, o, &lf.terms);
  const std::string residual = "2 x " + Num(H) + " x " + Num(b) + " B (branch output: write + read)";
  lf.terms.push_back(Term(FusionKind::kResidualAdd, "attention o_proj -> residual add", 1, 2 * H * b, residual));
  const size_t channel_first = lf.terms.size();
  if (l.norms >= 2) {
    lf.terms.push_back(
        norm_term(l.channel == ChannelKind::kMoE ? "router + expert inputs" : "gate/up projection"));
    lf.terms.back().feeds_channel = true;
  }
  AddChannelTerms(m, l, o, &lf.terms);
  lf.terms.push_back(Term(FusionKind::kResidualAdd,
                          std::string(l.channel == ChannelKind::kMoE ? "MoE combine" : "down projection") +
                              " -> residual add",
                          1, 2 * H * b, residual));
  for (size_t i = channel_first; i < lf.terms.size(); ++i) lf.terms[i].channel_side = true;
  return lf;
}

bool SameList(const std::vector<FusionTerm>& a, const std::vector<FusionTerm>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].chain != b[i].chain || a[i].formula != b[i].formula || a[i].blocked_by != b[i].blocked_by)
      return false;
  }
  return true;
}

bool SameTerms(const LayerFusion& a, const LayerFusion& b) {
  return SameList(a.terms, b.terms) && SameList(a.blocked, b.blocked);
}

}  // namespace

std::string FusionNum(double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

const char* FusionKindName(FusionKind k) {
  switch (k) {
    case FusionKind::kNormLinearPrologue: return "norm+linear prologue";
    case FusionKind::kNormQuantize:
      return "norm+quantise";
    case FusionKind::kGatedActivation: return "gated activation";
    case FusionKind::kActivationEpilogue: return "activation epilogue";
    case FusionKind::kRouterTopkPermute: return "router+top-k+permute";
    case FusionKind::kResidualAdd: return "residual add";
    case FusionKind::kRotaryAttention: return "rotary+attention prologue";
    case FusionKind::kKdaPrologue: return "KDA prologue";
    case FusionKind::kDsaIndexerTopk: return "DSA indexer+top-k";
    case FusionKind::kMoeUnpermuteCombine: return "MoE unpermute+combine";
    case FusionKind::kSoftmaxAttention:
      return "softmax attention";
  }
  return "?";
}

double LayerFusion::SavedLaunches() const {
  double s = 0;
  for (const FusionTerm& t : terms) s += t.launches_saved;
  return s;
}

double LayerFusion::SavedBytesPerToken() const {
  double s = 0;
  for (const FusionTerm& t : terms) s += t.bytes_saved;
  return s;
}

double FusionPlan::SavedLaunches() const {
  double s = 0;
  for (const LayerFusion& l : layers) s += l.SavedLaunches();
  return s;
}

double FusionPlan::SavedBytesPerToken() const {
  double s = 0;
  for (const LayerFusion& l : layers) s += l.SavedBytesPerToken();
  return s;
}

LayerFusion PlanLayerFusions(const ModelIR& model, const LayerSpec& layer, const FusionOptions& options) {
  return PlanLayer(model, layer, options);
}

FusionPlan PlanFusions(const ModelIR& model, const FusionOptions& options) {
  FusionPlan plan;
  plan.options = options;
  for (const LayerSpec& l : model.layers) plan.layers.push_back(PlanLayer(model, l, options));
  return plan;
}

std::vector<FusionLayerRun> FoldFusionLayers(const FusionPlan& plan) {
  std::vector<FusionLayerRun> runs;
  for (size_t i = 0; i < plan.layers.size();) {
    size_t j = i + 1;
    while (j < plan.layers.size() && SameTerms(plan.layers[i], plan.layers[j])) ++j;
    runs.push_back({i, j - 1});
    i = j;
  }
  return runs;
}

std::string FormatFusionPlan(const FusionPlan& plan) {
  std::ostringstream os;
  const FusionOptions& o = plan.options;
  os << "fusion plan (activations " << Num(o.act_bytes) << " B, fp32 " << Num(o.fp32_bytes) << " B, seq "
     << o.seq << "): launches saved per layer forward pass, HBM bytes of intermediates saved per token\n";
  char line[512];
  for (const FusionLayerRun& run : FoldFusionLayers(plan)) {
    const LayerFusion& l = plan.layers[run.first];
    if (run.first == run.last)
      os << "layer " << l.layer + 1 << ":\n";
    else
      os << "layers " << l.layer + 1 << "-" << plan.layers[run.last].layer + 1 << " (each):\n";
    for (const FusionTerm& t : l.terms) {
      std::snprintf(line, sizeof(line), "  %-26s %-62s %2.0f launch%s %10.0f B/token = %s\n",
                    FusionKindName(t.kind), t.chain.c_str(), t.launches_saved,
                    t.launches_saved == 1 ? "  " : "es", t.bytes_saved, t.formula.c_str());
      os << line;
    }
    std::snprintf(line, sizeof(line), "  %-26s %-62s %2.0f launches %10.0f B/token\n", "layer total", "",
                  l.SavedLaunches(), l.SavedBytesPerToken());
    os << line;
    for (const FusionTerm& t : l.blocked) {
      std::snprintf(line, sizeof(line), "  NOT fused: %-15s %-62s (%s)\n", FusionKindName(t.kind),
                    t.chain.c_str(), t.blocked_by.c_str());
      os << line;
    }
  }
  std::snprintf(line, sizeof(line), "model total: %.0f launches per forward pass, %.3f MB per token\n",
                plan.SavedLaunches(), plan.SavedBytesPerToken() / 1e6);
  os << line;
  return os.str();
}

}  // namespace onboard
