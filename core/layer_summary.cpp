// SummarizeLayers: folds a model's layer list into a few readable lines.
//
// Step 1: describe each layer's token mixer and channel mixer as short strings.
// Step 2: split the stack into runs of consecutive layers with the same channel description.
// Step 3: inside each run, count the mixer descriptions (in order of first appearance):
//   "1: KDA 96h x 128 conv4 gate bounded(-5) full-rank, MLP swiglu 33792"
//   "2-93: 68 KDA 96h x 128 ... + 24 DSA[MLA 96h ...; indexer 32h x 128 top-2048], MoE 896x top-16 ..."
// Layer numbers are 1-based in the display.
#include <sstream>

#include "core/model_ir.h"

namespace onboard {
namespace {

std::string MixerText(const AttentionSpec& a) {
  std::ostringstream os;
  const MixerKind base = a.kind == MixerKind::kDSA ? a.dsa_base : a.kind;
  const auto mla = [&](std::ostringstream& o) {
    o << "MLA " << a.num_heads << "h";
    if (a.q_lora_rank > 0) o << " q_lora " << a.q_lora_rank;
    o << " kv_lora " << a.kv_lora_rank << " qk " << a.qk_nope_head_dim << "+" << a.qk_rope_head_dim
      << " v " << a.v_head_dim;
  };
  const auto gqa = [&](std::ostringstream& o, MixerKind k) {
    o << MixerKindName(k) << " " << a.num_heads << "q/" << a.num_kv_heads << "kv x " << a.head_dim;
    if (a.v_head_dim > 0 && a.v_head_dim != a.head_dim) o << " v " << a.v_head_dim;
    if (a.window > 0) o << " window " << a.window;
  };
  switch (a.kind) {
    case MixerKind::kMHA:
    case MixerKind::kGQA:
    case MixerKind::kSlidingWindow:
      gqa(os, a.kind);
      break;
    case MixerKind::kMLA:
      mla(os);
      break;
    case MixerKind::kDSA:
      os << "DSA[";
      if (base == MixerKind::kMLA) mla(os); else gqa(os, base);
      break;
    case MixerKind::kKDA:
    case MixerKind::kGatedDeltaNet:
      os << MixerKindName(a.kind) << " " << a.num_heads << "h";
      if (a.num_v_heads > 0 && a.num_v_heads != a.num_heads) os << "/" << a.num_v_heads << "v";
      os << " x " << a.head_dim;
      if (a.v_head_dim > 0 && a.v_head_dim != a.head_dim) os << "/" << a.v_head_dim;
      if (a.conv_kernel > 0) os << " conv" << a.conv_kernel;
      if (a.gate_form == GateForm::kBounded) os << " bounded-gate(" << a.gate_lower_bound << ")";
      if (a.full_rank_gate) os << " full-rank";
      break;
    case MixerKind::kLinearAttention:
      os << "LinearAttention " << a.num_heads << "h x " << a.head_dim;
      break;
  }
  if (a.qkv_bias) os << " qkv-bias";
  if (a.qk_norm) os << " qk-norm";
  if (a.output_gate) os << " out-gate";
  if (a.sinks) os << " sinks";
  if (a.kind == MixerKind::kDSA)
    os << "; indexer " << a.index_heads << "h x " << a.index_head_dim << " top-" << a.index_topk << "]";
  return os.str();
}

std::string ChannelText(const LayerSpec& l) {
  std::ostringstream os;
  if (l.channel == ChannelKind::kDenseMLP) {
    os << "MLP " << ActivationName(l.mlp.act) << " " << l.mlp.intermediate;
    return os.str();
  }
  const MoESpec& m = l.moe;
  os << "MoE " << m.num_experts << "x top-" << m.top_k << " ffn " << m.expert_intermediate;
  if (m.latent_dim > 0) os << " latent " << m.latent_dim;
  if (m.num_shared > 0) os << " + " << m.num_shared << " shared x " << m.shared_intermediate;
  os << " " << RouterActivationName(m.router);
  if (m.num_groups > 1) os << " groups " << m.topk_groups << "/" << m.num_groups;
  return os.str();
}

std::string Range(int64_t first, int64_t last) {
  return first == last ? std::to_string(first + 1) : std::to_string(first + 1) + "-" + std::to_string(last + 1);
}

}  // namespace

std::vector<std::string> SummarizeLayers(const ModelIR& model) {
  std::vector<std::string> lines;
  const auto& layers = model.layers;
  size_t i = 0;
  while (i < layers.size()) {
    // Step 2: a run with the same channel mixer.
    const std::string channel = ChannelText(layers[i]);
    size_t j = i;
    std::vector<std::pair<std::string, int64_t>> mixers;  // Step 3: description -> count
    while (j < layers.size() && ChannelText(layers[j]) == channel) {
      const std::string m = MixerText(layers[j].attn);
      bool found = false;
      for (auto& [text, n] : mixers) {
        if (text == m) { ++n; found = true; break; }
      }
      if (!found) mixers.emplace_back(m, 1);
      ++j;
    }
    std::ostringstream os;
    os << Range(static_cast<int64_t>(i), static_cast<int64_t>(j - 1)) << ": ";
    for (size_t k = 0; k < mixers.size(); ++k) {
      if (k > 0) os << " + ";
      if (j - i > 1) os << mixers[k].second << " ";
      os << mixers[k].first;
    }
    os << ", " << channel;
    lines.push_back(os.str());
    i = j;
  }
  return lines;
}

}  // namespace onboard
