// MixerFusionBytesOf / ApplyMixerFusion (see search/fusion_cost.h for the terms and their source).
#include "search/fusion_cost.h"

#include "search/fusion_plan.h"

namespace onboard {

MixerFusionBytes MixerFusionBytesOf(const ModelIR& model, const LayerSpec& layer, int64_t seq) {
  MixerFusionBytes out;
  if (layer.attn.kind != MixerKind::kKDA && layer.attn.kind != MixerKind::kDSA) return out;
  FusionOptions o;
  o.seq = seq;
  // Step 1: the layer's fusion terms; only the mixer's in-kernel fusions count here (the other chains
  // are framework-level fusions that the cost model's constants already assume).
  for (const FusionTerm& t : PlanLayerFusions(model, layer, o).terms) {
    if (t.kind != FusionKind::kKdaPrologue && t.kind != FusionKind::kDsaIndexerTopk) continue;
    // Step 2: one stored copy kept, write + read moved (bytes per token).
    out.kept += t.bytes_saved / 2;
    out.moved += t.bytes_saved;
    out.launches += t.launches_saved;
  }
  return out;
}

void ApplyMixerFusion(const ModelIR& model, const LayerSpec& layer, int64_t seq, bool unfused_kernels,
                      LayerProfile* lp) {
  const MixerFusionBytes b = MixerFusionBytesOf(model, layer, seq);
  lp->fused_mixer_bytes = b.moved;
  if (unfused_kernels) {
    lp->act_mixer += b.kept;
    lp->unfused_mixer_launches = b.launches;
  }
}

}  // namespace onboard
