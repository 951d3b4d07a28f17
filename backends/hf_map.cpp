// MapHfSlice / MapHfWeights: embedding, decoder layers (per family mapper), final norm and head;
// for a whole-model load, the unmapped-tensor check (see hf_model.h).
#include <cctype>
#include <set>

#include "backends/hf_model.h"

namespace onboard {
namespace {

// Layer index of "<root>layers.N.<...>", or -1.
int64_t LayerOf(const std::string& name, const std::string& root) {
  const std::string kPrefix = root + "layers.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int64_t n = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && n < (int64_t{1} << 40); ++i)
    n = n * 10 + (name[i] - '0');
  return n;
}

// Why a tensor is unmapped, when its name says more: a vision tower's tensor in a checkpoint whose
// config.json declares no vision_config (a text-only model: nothing reads the tower).
std::string UnmappedWhy(const HfForwardConfig& c, const std::string& name) {
  static const char* const kVisionPrefixes[] = {"model.visual.",       "visual.",
                                                "vision_tower.",       "mm_projector.",
                                                "model.vision_tower.", "model.mm_projector."};
  if (c.has_vision_config) return "";
  for (const char* p : kVisionPrefixes)
    if (name.rfind(p, 0) == 0) return " (a vision tensor, but " + c.config_path + " has no vision_config)";
  return "";
}

// Step 3: tensors the checkpoint holds that no module took. Layers outside the range and MTP layers
// (index >= num_hidden_layers when the config declares them) are skipped on purpose.
Status CheckAllMapped(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt, const std::vector<std::string>& names,
                      int64_t first, int64_t last) {
  const std::set<std::string> used(names.begin(), names.end());
  const int64_t n = int64_t(c.ir.layers.size());
  for (const TensorInfo& t : ckpt.inventory().tensors) {
    if (used.count(t.name)) continue;
    auto skipped = [&](const std::string& prefix) {
      return !prefix.empty() && t.name.compare(0, prefix.size(), prefix) == 0;
    };
    if (skipped(c.skipped_prefix) || skipped(c.skipped_prefix2)) continue;
    const int64_t layer = LayerOf(t.name, c.weights_root);
    if (layer >= 0 && (layer < first || layer > last) && layer < n) continue;
    if (layer >= n && c.ir.mtp_layers > 0 && layer < n + c.ir.mtp_layers) continue;
    if (t.name.size() > 9 && t.name.compare(t.name.size() - 9, 9, "inv_freq") == 0) continue;  // rotary buffers
    return BadInput(t.file, t.name,
                    "tensor is not mapped to any module of " + c.ir.model_type + UnmappedWhy(c, t.name));
  }
  return Status::Ok();
}

Expected<HfLayerWeights> MapLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  switch (c.layout) {
    case HfLayout::kLlama:
      return MapLlamaLayer(c, l, r);
    case HfLayout::kMixtral:
      return MapMixtralLayer(c, l, r);
    case HfLayout::kDeepSeekV3:
      return MapDeepSeekLayer(c, l, r);
    case HfLayout::kGlm4Moe:
      return MapGlm4MoeLayer(c, l, r);
    case HfLayout::kGptOss:
      return MapGptOssLayer(c, l, r);
    case HfLayout::kKimiLinear:
      return MapKimiLinearLayer(c, l, r);
    case HfLayout::kKimiK3:
      return MapKimiK3Layer(c, l, r);
  }
  return MapLlamaLayer(c, l, r);
}

}  // namespace

Expected<HfModelWeights> MapHfSlice(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt, const HfRankSlice& s,
                                    torch::ScalarType dtype) {
  const int64_t n = int64_t(c.ir.layers.size());
  const int64_t last = s.layers.last < 0 ? n - 1 : s.layers.last;
  if (s.layers.first < 0 || s.layers.first > last || last >= n)
    return BadInput(c.config_path, "--layers", "range must lie inside 0-" + std::to_string(n - 1),
                    std::to_string(s.layers.first) + "-" + std::to_string(last));
  HfWeightReader r(ckpt, dtype);
  r.SetRoot(c.weights_root);
  r.OwnExperts(s.expert_begin, s.expert_end);
  if (s.tp > 1 && !s.expert_tp) {  // EP folded over the TP group: the rank's whole experts
    ONBOARD_ASSERT(s.expert_begin == 0 && s.expert_end < 0, "EP folded over TP takes all experts");
    const HfExpertSpan own = HfExpertRange(HfRoutedExperts(c), s.tp, s.tp_rank);
    r.OwnExperts(own.begin, own.end);
  }
  r.OwnTpSlice(s.tp, s.tp_rank, s.expert_tp);
  r.OwnFsdpShard(s.fsdp, s.fsdp_rank, s.expert_fsdp, s.expert_fsdp_rank);
  HfModelWeights w;
  // Step 1: embedding (first stage), final norm + head (last stage; tied: the embedding itself).
  const bool tied = c.ir.tied_embeddings && !ckpt.Has(c.head_name);
  if (s.embedding || (s.head && tied)) {
    ONBOARD_ASSIGN_OR_RETURN(w.embed, r.Read("model.embed_tokens.weight", {c.ir.vocab, c.ir.hidden}));
  }
  if (s.head) {
    ONBOARD_ASSIGN_OR_RETURN(w.final_norm, r.Read("model.norm.weight", {c.ir.hidden}));
    if (tied) {
      w.lm_head = w.embed;
    } else {
      ONBOARD_ASSIGN_OR_RETURN(w.lm_head, r.Read(c.head_name, {c.ir.vocab, c.ir.hidden}));
    }
  }
  // Step 2: the slice's layers by the family's mapper (experts outside the slice left empty).
  for (int64_t i = s.layers.first; i <= last; ++i) {
    const LayerSpec& l = c.ir.layers[size_t(i)];
    Expected<HfLayerWeights> lw = MapLayer(c, l, r);
    if (!lw.ok()) return lw.status();
    w.layers.push_back(std::move(*lw));
  }
  w.used = r.used();
  w.dtypes_seen = r.dtypes();
  return w;
}

Expected<HfModelWeights> MapHfWeights(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt,
                                      HfLayerRange range, torch::ScalarType dtype) {
  HfRankSlice s;
  s.layers = range;
  ONBOARD_ASSIGN_OR_RETURN(HfModelWeights w, MapHfSlice(c, ckpt, s, dtype));
  // Step 3: every checkpoint tensor inside the range was taken by some module.
  const int64_t last = range.last < 0 ? int64_t(c.ir.layers.size()) - 1 : range.last;
  ONBOARD_RETURN_IF_ERROR(CheckAllMapped(c, ckpt, w.used, range.first, last));
  return w;
}

}  // namespace onboard
