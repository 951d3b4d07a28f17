// gpt-oss under FSDP (probe_weights_fsdp.h HfExpertStack): its fused expert tensors [E, ...] are
// FSDP2-sharded along dim 0, i.e. by expert, so a rank holds whole experts [e0, e0 + n) and none of the
// others (hf_map_gpt_oss.cpp). The per-expert slots then differ between ranks, which HfFsdp's
// per-slot row chunks cannot gather; stacked again as [n, ...] they are exactly dim-0 chunks of the
// whole [E, ...] stacks (HfFsdpRows of E), which it can.
// Legend: the six slots are gate w [n, I, h], gate b [n, I], up w, up b, down w [n, h, I], down b [n, h]
// (I, h: this rank's TP widths); a bias the rank does not hold stays undefined.
#include "backends/probe_weights_fsdp.h"

namespace onboard::backends {
namespace {

// The six tensors of expert x, in slot order.
std::vector<torch::Tensor*> Parts(HfMlpWeights& x) {
  return {&x.gate.w, &x.gate.b, &x.up.w, &x.up.b, &x.down.w, &x.down.b};
}

}  // namespace

HfExpertStack StackOwnedExperts(HfLayerWeights& l, int64_t whole_e0) {
  HfExpertStack s;
  s.whole_e0 = whole_e0;
  std::vector<HfMlpWeights>& ex = l.experts.experts;
  // Step 1: the rank's run of experts [e0, e0 + n).
  int64_t e = 0;
  while (e < int64_t(ex.size()) && !ex[size_t(e)].down.w.defined()) ++e;
  s.e0 = e;
  while (e < int64_t(ex.size()) && ex[size_t(e)].down.w.defined()) ++e;
  s.n = e - s.e0;
  if (s.n == 0) return s;
  // Step 2: each part stacked over the run (undefined on every expert: left undefined).
  s.parts.resize(6);
  for (size_t k = 0; k < 6; ++k) {
    if (!Parts(ex[size_t(s.e0)])[k]->defined()) continue;
    std::vector<torch::Tensor> rows;
    for (int64_t i = s.e0; i < s.e0 + s.n; ++i) rows.push_back(*Parts(ex[size_t(i)])[k]);
    s.parts[k] = torch::stack(rows);
  }
  return s;
}

std::vector<torch::Tensor*> HfExpertStackSlots(HfExpertStack& s) {
  std::vector<torch::Tensor*> out;
  for (torch::Tensor& t : s.parts)
    if (t.defined()) out.push_back(&t);
  return out;
}

void BindStackedExperts(HfLayerWeights& l, const HfExpertStack& s) {
  std::vector<HfMlpWeights>& ex = l.experts.experts;
  // The slots hold either this rank's chunk (n experts from e0) or the gathered stack (from whole_e0).
  const int64_t rows = s.parts.empty() ? 0 : s.parts[0].size(0);
  const int64_t first = rows == s.n ? s.e0 : s.whole_e0;
  for (int64_t e = 0; e < int64_t(ex.size()); ++e) {
    const bool held = e >= first && e < first + rows;
    std::vector<torch::Tensor*> parts = Parts(ex[size_t(e)]);
    for (size_t k = 0; k < 6; ++k)
      *parts[k] = held && s.parts[k].defined() ? s.parts[k][e - first] : torch::Tensor();
  }
}

}  // namespace onboard::backends
