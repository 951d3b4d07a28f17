// Recompute per block kind in the probe (probe.h ProbeConfig::recompute): the kinds the proxy has,
// the policy each takes, and the `--recompute KIND=none|selective|full,...` list.
//
// What each policy does in the probe (backends/fsdp_unit.h, proxy_forward.cpp):
//   full       the region is recomputed in backward from its input (a layer whose token mixer and
//              channel kinds are both full: the whole unit, after FSDP's backward re-gather)
//   selective  token mixers: the core attention is recomputed from the saved q, k, v (KDA: the
//              chunked delta-rule recurrence; MLA/DSA: scores, mask, softmax, attention x values);
//              the projections, norms and gates stay saved (Megatron's selective = core_attn).
//              Channel kinds (MLP, MoE): as none (Megatron's selective recompute leaves the MLP)
//   none       every activation of the region is kept for backward
// Embedding and output head are never recomputed (Megatron recomputes transformer layers only).
#include <sstream>

#include "backends/probe.h"

namespace onboard {
namespace {

const std::vector<std::string>& Kinds() {
  static const std::vector<std::string> k = {"KDA", "MLA", "DSA", "MoE", "MLP", "*"};
  return k;
}

// The canonical name of `text` (case-insensitive: "kda", "moe", "mlp"), or "".
std::string CanonicalKind(const std::string& text) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const std::string& k : Kinds())
    if (lower(k) == lower(text)) return k;
  return "";
}

}  // namespace

Recompute ProbeConfig::recompute_for(const std::string& kind) const {
  auto it = recompute.find(kind);
  if (it != recompute.end()) return it->second;
  auto all = recompute.find("*");
  return all != recompute.end() ? all->second : Recompute::kFull;
}

std::string ProxyMixerKind(const ProxySpec& spec, size_t layer) {
  if (spec.layers[layer].mixer == ProxyMixer::kKDA) return "KDA";
  return spec.index_topk > 0 && spec.index_heads > 0 ? "DSA" : "MLA";
}

std::string ProxyChannelKind(const ProxySpec& spec, size_t layer) {
  return spec.layers[layer].channel == ProxyChannel::kMoE ? "MoE" : "MLP";
}

Expected<Recompute> ParseRecomputePolicy(const std::string& text, const std::string& where,
                                         const std::string& field) {
  return ParseRecompute(where, field, text);  // the one parser (core/plan.h)
}

Status ParseRecomputeList(const std::string& text, std::map<std::string, Recompute>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return BadInput("--recompute", "recompute", "needs KIND=none|selective|full items", item);
    const std::string kind = CanonicalKind(item.substr(0, eq));
    if (kind.empty())
      return BadInput("--recompute", "recompute", "kind must be one of KDA, MLA, DSA, MoE, MLP or *",
                      item.substr(0, eq));
    ONBOARD_ASSIGN_OR_RETURN(Recompute r,
                             ParseRecomputePolicy(item.substr(eq + 1), "--recompute", "recompute." + kind));
    (*out)[kind] = r;
  }
  return Status::Ok();
}

Status ValidateRecompute(const ProbeConfig& c) {
  for (const auto& [kind, r] : c.recompute)
    if (CanonicalKind(kind) != kind)
      return BadInput("probe config", "recompute." + kind, "kind must be one of KDA, MLA, DSA, MoE, MLP or *",
                      RecomputeName(r));
  return Status::Ok();
}

}  // namespace onboard
