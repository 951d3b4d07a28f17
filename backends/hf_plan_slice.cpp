// Loading by plan: which layers and experts one rank owns (see hf_model.h; the mapping itself is
// MapHfSlice in hf_map.cpp). Units: layers, experts.
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
  int64_t experts = 0;
  for (const LayerSpec& l : c.ir.layers)
    if (l.channel == ChannelKind::kMoE) experts = l.moe.num_experts;
  const int64_t per = experts / ep;
  s.expert_begin = ep_index * per;
  s.expert_end = ep_index == ep - 1 ? experts : (ep_index + 1) * per;
  return s;
}

}  // namespace onboard
