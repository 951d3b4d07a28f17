// Megatron-Core's reported FLOP count (search/megatron_reported_flops.h).
//
// Legend: h hidden, L decoder layers, s sequence (tokens), a query heads, g key/value groups, d head dim
// (kv_channels), f FFN width of one (routed) expert, k experts per token (1 for a dense MLP),
// V vocab padded to a multiple of 128 * tp. FLOPs per token:
//   12 L h^2 x [ (1 + g/a + s/h) * (d a / h)    attention: q and o, k and v (GQA), scores + values (full s)
//              + (f / h) * k * (3/2 if gated)   MLP: up and down, the gate's extra half
//              + V / (2 L h) ]                  logits
// 12 = 3 (forward, wgrad, dgrad) x 2 (two GEMMs of each size) x 2 (FLOPs per MAC), the 2021 paper's
// appendix (arXiv 2104.04473) without its recompute pass; NVIDIA/Megatron-LM@core_v0.9.0
// megatron/training/training.py:98-144.
#include "search/megatron_reported_flops.h"

namespace onboard {
namespace {

// Step 1 helper: the layer field where layer i differs from what the v0.9 count can express.
std::string UnexpressedField(const ModelIR& m, size_t i) {
  const LayerSpec& l = m.layers[i];
  const LayerSpec& l0 = m.layers[0];
  const std::string at = "layers[" + std::to_string(i) + "].";
  if (l.attn.kind != MixerKind::kMHA && l.attn.kind != MixerKind::kGQA) return at + "attn.kind";
  if (l.attn.num_heads != l0.attn.num_heads || l.attn.num_kv_heads != l0.attn.num_kv_heads ||
      l.attn.head_dim != l0.attn.head_dim)
    return at + "attn";
  if (l.channel != l0.channel) return at + "channel";
  if (l.channel == ChannelKind::kMoE) {
    if (l.moe.num_shared > 0) return at + "moe.num_shared";
    if (l.moe.top_k != l0.moe.top_k || l.moe.expert_intermediate != l0.moe.expert_intermediate ||
        l.moe.gated != l0.moe.gated)
      return at + "moe";
  } else if (l.mlp.intermediate != l0.mlp.intermediate || l.mlp.gated != l0.mlp.gated) {
    return at + "mlp";
  }
  return "";
}

}  // namespace

Expected<double> MegatronCoreV09FlopsPerToken(const ModelIR& m, int64_t seq, int64_t tp) {
  // Step 1: the model must be one the count's arguments describe.
  if (m.layers.empty() || m.hidden <= 0 || m.vocab <= 0 || seq <= 0 || tp <= 0)
    return BadInput(m.source, "layers", "no decoder to count", std::to_string(m.layers.size()));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string field = UnexpressedField(m, i);
    if (!field.empty())
      return BadInput(m.source, field,
                      "Megatron-Core v0.9's FLOP count describes uniform GQA/MHA decoders only",
                      MixerKindName(m.layers[i].attn.kind));
  }
  // Step 2: its arguments.
  const LayerSpec& l = m.layers[0];
  const double h = static_cast<double>(m.hidden), L = static_cast<double>(m.layers.size());
  const double s = static_cast<double>(seq), a = static_cast<double>(l.attn.num_heads);
  const double g = static_cast<double>(l.attn.num_kv_heads), d = static_cast<double>(l.attn.head_dim);
  const bool moe = l.channel == ChannelKind::kMoE;
  const double f = static_cast<double>(moe ? l.moe.expert_intermediate : l.mlp.intermediate);
  const double k = moe ? static_cast<double>(l.moe.top_k) : 1.0;
  const double gated = (moe ? l.moe.gated : l.mlp.gated) ? 1.5 : 1.0;
  const int64_t multiple = 128 * tp;
  const double V = static_cast<double>((m.vocab + multiple - 1) / multiple * multiple);
  // Step 3: the count, one term per line.
  const double attention = (1 + g / a + s / h) * (d * a / h);
  const double mlp = f / h * k * gated;
  const double logits = V / (2 * L * h);
  return 12 * L * h * h * (attention + mlp + logits);
}

Expected<double> ReportedFlopsPerToken(const std::string& formula, const ModelIR& m, int64_t seq,
                                       int64_t tp) {
  if (formula == kMegatronCoreV09Count) return MegatronCoreV09FlopsPerToken(m, seq, tp);
  return BadInput(m.source, "tflops_count.formula",
                  std::string("unknown FLOP count (known: ") + kMegatronCoreV09Count + ")", formula);
}

}  // namespace onboard
