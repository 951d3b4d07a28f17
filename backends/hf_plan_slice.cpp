// Loading by plan: which layers, experts and FSDP rows one rank owns (see hf_model.h; the mapping
// itself is MapHfSlice in hf_map.cpp, the windows HfWeightReader). Units: layers, experts, rows.
#include <algorithm>

#include "backends/hf_model.h"

namespace onboard {

HfRankSlice SliceForRank(const HfForwardConfig& c, const std::vector<int64_t>& stage_starts, int64_t stage,
                         int64_t ep, int64_t ep_index) {
  const int64_t n = int64_t(c.ir.layers.size()), stages = int64_t(stage_starts.size());
  ONBOARD_ASSERT(stage >= 0 && stage < stages && ep >= 1 && ep_index >= 0 && ep_index < ep, "rank outside the plan");
  HfRankSlice s;
  s.layers.first = stage_starts[size_t(stage)];
  s.layers.last = stage + 1 < stages ? stage_starts[size_t(stage + 1)] - 1 : n - 1;
  s.embedding = stage == 0;
  s.head = stage == stages - 1;
  const HfExpertSpan own = HfExpertRange(HfRoutedExperts(c), ep, ep_index);
  s.expert_begin = own.begin;
  s.expert_end = own.end;
  return s;
}

int64_t HfRoutedExperts(const HfForwardConfig& c) {
  int64_t experts = 0;
  for (const LayerSpec& l : c.ir.layers)
    if (l.channel == ChannelKind::kMoE) experts = l.moe.num_experts;
  return experts;
}

HfExpertSpan HfExpertRange(int64_t num_experts, int64_t parts, int64_t index) {
  ONBOARD_ASSERT(parts >= 1 && index >= 0 && index < parts, "expert group outside [0, parts)");
  const int64_t per = num_experts / parts;
  return {index * per, index == parts - 1 ? num_experts : (index + 1) * per};
}

HfRowSpan HfFsdpRows(int64_t rows, int64_t n, int64_t rank) {
  ONBOARD_ASSERT(n >= 1 && rank >= 0 && rank < n, "fsdp rank outside [0, n)");
  const int64_t chunk = (rows + n - 1) / n;  // torch.chunk's chunk size
  const int64_t begin = std::min(rows, rank * chunk);
  return {begin, std::min(rows, begin + chunk) - begin};
}

}  // namespace onboard
