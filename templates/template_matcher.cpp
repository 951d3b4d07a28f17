// Matches a model's modules to optimisation templates (see template_library.h).
// A module with no matching template is kept in the result with `unknown_reason` set, never dropped.
#include <map>
#include <sstream>
#include <tuple>

#include "templates/template_library.h"

namespace onboard {
namespace {

// Groups layers sharing (module, kind, activation/detail) into one ModuleMatch.
struct ModuleKey {
  std::string module, kind, activation, detail;
  bool operator<(const ModuleKey& o) const {
    return std::tie(module, kind, activation, detail) < std::tie(o.module, o.kind, o.activation, o.detail);
  }
};

std::string MixerDetail(const AttentionSpec& a) {
  std::ostringstream d;
  d << a.num_heads << " heads";
  if (a.kind == MixerKind::kGQA || a.kind == MixerKind::kSlidingWindow) d << ", " << a.num_kv_heads << " kv";
  if (a.kind == MixerKind::kDSA)
    d << ", base " << MixerKindName(a.dsa_base) << ", indexer top-" << a.index_topk;
  if (a.kind == MixerKind::kMLA || (a.kind == MixerKind::kDSA && a.dsa_base == MixerKind::kMLA))
    d << ", kv latent " << a.kv_lora_rank;
  if (a.kind == MixerKind::kSlidingWindow && a.window > 0) d << ", window " << a.window;
  if (a.output_gate) d << ", output gate";
  return d.str();
}

std::string ChannelDetail(const LayerSpec& l) {
  std::ostringstream d;
  if (l.channel == ChannelKind::kMoE) {
    d << l.moe.num_experts << " experts top-" << l.moe.top_k;
    if (l.moe.num_shared > 0) d << ", " << l.moe.num_shared << " shared";
    if (l.moe.latent_dim > 0) d << ", latent " << l.moe.latent_dim;
    d << ", " << RouterActivationName(l.moe.router) << " router";
  } else {
    d << "width " << l.mlp.intermediate;
  }
  return d.str();
}

// Step 2 for one module: the most specific template wins (exact kind over "*"); among equals the
// last one loaded (user overrides come last).
void Choose(const TemplateLibrary& lib, const std::string& activation, ModuleMatch& m) {
  const OptTemplate* best = nullptr;
  int best_score = -1;
  std::vector<std::string> rejected_by_activation;
  for (const auto& t : lib.templates) {
    if (t.module != m.module) continue;
    int score = t.kind == m.kind ? 2 : (t.kind == "*" ? 1 : -1);
    if (score < 0) continue;
    if (!activation.empty() && !t.activations.empty()) {
      bool ok = false;
      for (const auto& a : t.activations) ok = ok || a == activation;
      if (!ok) {
        rejected_by_activation.push_back(t.name);
        continue;
      }
    }
    if (score >= best_score) {
      best = &t;
      best_score = score;
    }
  }
  if (best) {
    m.chosen = *best;
    return;
  }
  std::ostringstream why;
  why << "no template for " << m.module << " kind '" << m.kind << "'";
  if (!rejected_by_activation.empty()) {
    why << " with activation '" << activation << "' (";
    for (size_t i = 0; i < rejected_by_activation.size(); ++i) why << (i ? ", " : "") << rejected_by_activation[i];
    why << " do not list it)";
  }
  m.unknown_reason = why.str();
}

}  // namespace

std::string LayerRanges(const std::vector<int64_t>& layers) {
  std::ostringstream out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out << (i ? "," : "") << layers[i];
    if (j > i) out << "-" << layers[j];
    i = j + 1;
  }
  return out.str();
}

TemplateMatch MatchTemplates(const ModelIR& model, const TemplateLibrary& lib) {
  TemplateMatch out;
  // Step 1: enumerate modules in model order.
  std::vector<std::pair<ModuleMatch, std::string>> mods;  // (module, activation)
  {
    ModuleMatch e;
    e.module = "embedding";
    e.kind = "*";
    e.detail = "vocab " + std::to_string(model.vocab) + " x " + std::to_string(model.hidden);
    mods.push_back({e, ""});
  }
  if (model.vision) {
    ModuleMatch v;
    v.module = "vision_tower";
    v.kind = model.vision->kind.empty() ? "unknown" : model.vision->kind;
    v.detail = std::to_string(model.vision->depth) + " blocks, width " + std::to_string(model.vision->hidden);
    mods.push_back({v, ""});
  }
  std::map<ModuleKey, size_t> index;
  auto add_layer = [&](const ModuleKey& key, int64_t layer) {
    auto it = index.find(key);
    if (it == index.end()) {
      ModuleMatch m;
      m.module = key.module;
      m.kind = key.kind;
      m.detail = key.detail;
      if (!key.activation.empty()) m.detail += ", activation " + key.activation;
      index[key] = mods.size();
      mods.push_back({m, key.activation});
      it = index.find(key);
    }
    mods[it->second].first.layers.push_back(layer);
  };
  for (const auto& l : model.layers)
    add_layer({"mixer", MixerKindName(l.attn.kind), "", MixerDetail(l.attn)}, l.index);
  for (const auto& l : model.layers) {
    Activation act = l.channel == ChannelKind::kMoE ? l.moe.act : l.mlp.act;
    add_layer({"channel", ChannelKindName(l.channel), ActivationName(act), ChannelDetail(l)}, l.index);
  }
  {
    ModuleMatch h;
    h.module = "head";
    h.kind = "*";
    h.detail = model.tied_embeddings ? "tied to the embeddings" : "vocab " + std::to_string(model.vocab);
    mods.push_back({h, ""});
  }
  // Step 2: choose a template for each module.
  for (auto& [m, act] : mods) {
    Choose(lib, act, m);
    if (!m.chosen) ++out.unknown;
    out.modules.push_back(std::move(m));
  }
  return out;
}

nlohmann::json TemplateMatchToJson(const TemplateMatch& m) {
  nlohmann::json mods = nlohmann::json::array();
  for (const auto& mm : m.modules) {
    nlohmann::json j = {{"module", mm.module}, {"kind", mm.kind}, {"detail", mm.detail}};
    if (!mm.layers.empty()) {
      // Displayed 1-based, like `onboard inspect` and the HF layer lists.
      std::vector<int64_t> one_based(mm.layers);
      for (int64_t& l : one_based) ++l;
      j["layers"] = LayerRanges(one_based);
      j["layer_count"] = mm.layers.size();
    }
    if (mm.chosen) {
      j["template"] = TemplateToJson(*mm.chosen);
    } else {
      j["template"] = nullptr;
      j["unknown"] = mm.unknown_reason;
    }
    mods.push_back(std::move(j));
  }
  return {{"modules", mods}, {"unknown", m.unknown}};
}

}  // namespace onboard
