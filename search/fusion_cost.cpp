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

FrameworkFusionBytes FrameworkFusionBytesOf(const ModelIR& model, const LayerSpec& layer, int64_t seq) {
  FrameworkFusionBytes out;
  FusionOptions o;
  o.seq = seq;
  for (const FusionTerm& t : PlanLayerFusions(model, layer, o).terms) {
    if (t.kind == FusionKind::kKdaPrologue || t.kind == FusionKind::kDsaIndexerTopk) continue;
    MixerFusionBytes& side = t.channel_side ? out.channel : out.mixer;
    side.kept += t.bytes_saved / 2;  // one stored copy (bytes per token)
    side.moved += t.bytes_saved;     // write + read
    side.launches += t.launches_saved;
  }
  return out;
}

void ApplyMixerFusion(const ModelIR& model, const LayerSpec& layer, int64_t seq, bool unfused_kernels,
                      LayerProfile* lp, bool unfused_framework) {
  const MixerFusionBytes b = MixerFusionBytesOf(model, layer, seq);
  lp->fused_mixer_bytes = b.moved;
  if (unfused_kernels) {
    lp->act_mixer += b.kept;
    lp->unfused_mixer_launches = b.launches;
  }
  if (unfused_framework) {
    const FrameworkFusionBytes f = FrameworkFusionBytesOf(model, layer, seq);
    lp->act_mixer += f.mixer.kept;
    lp->act_channel += f.channel.kept;
    lp->unfused_mixer_launches += f.mixer.launches + f.channel.launches;
  }
}

}  // namespace onboard
