// Per-stage time of one micro-batch (search/stage_time.h). Units: seconds per micro-batch, parameters.
//   stage time/mb    = sum over its layers (+ head, MTP layers + their head on the last stage)
//                      + exposed FSDP per mb + exposed EP all-to-all
//   MTP layer        = one more decoder layer (the last layer's kind) + an h x 2h projection + its own
//                      head and loss, on the last stage (DeepSeek-V3 report sec. 2.2)
//   FSDP per mb      = AG weights fwd + AG bwd + RS grads; exposed = max(0, comm - compute) + comm/layers;
//                      with PP the stage's weights stay gathered across micro-batches: AG + RS once per
//                      step (torchtitan apply_fsdp: reshard_after_forward=False when PP is on)
//   EP all-to-all    : exposed unless overlapped with another micro-batch's compute (overlap_ep_comm,
//                      DualPipe): then max(0, a2a - compute) + a2a_overlap_sm_tax x the overlapped part
//   DualPipe         : rank r runs stage r for half the micro-batches and stage p-1-r for the other half:
//                      the mean of the two in time, their sum in parameters
#include <algorithm>
#include <utility>

#include "search/stage_time.h"

namespace onboard {
namespace {

void AddKind(Stage& s, size_t id, double secs) {
  s.kind_s[id] = (s.kind_s[id] < 0 ? 0.0 : s.kind_s[id]) + secs;
}

// The time parts of `times` copies of layer x (1 per decoder layer; the MTP depth for MTP layers) beyond
// its compute, which the callers add with what else they charge.
void AddLayerTimes(Stage& s, const LayerTime& x, double times) {
  s.bwd += times * (x.mixer.bwd + x.channel.bwd);
  s.rc += times * (x.mixer.rc + x.channel.rc);
  s.tp += times * (x.mixer.tp + x.channel.tp);
  s.tp_total += times * (x.mixer.tp_total + x.channel.tp_total);
  s.a2a += times * x.channel.a2a;
  s.cp += times * x.mixer.cp;
  s.cp_total += times * x.mixer.cp_total;
  s.host += times * x.channel.host;
  s.fwd += times * (x.mixer.fwd + x.channel.fwd);
}

// The layers of each chunk, summed on its stage (chunk ch runs on stage ch % pp).
std::vector<Stage> SumLayers(const CostContext& c, const Plan& p, const std::vector<LayerTime>& lt,
                             const std::vector<int64_t>& starts) {
  const ParallelDegrees& d = p.deg;
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  const double t = static_cast<double>(d.tp),
               ep = static_cast<double>(d.ep * d.etp);  // experts split ep x etp
  std::vector<Stage> st(d.pp);
  for (Stage& s : st) s.kind_s.assign(c.prof.kinds.size(), -1.0);
  for (size_t ch = 0; ch < starts.size(); ++ch) {
    Stage& s = st[ch % d.pp];
    const int64_t end = ch + 1 < starts.size() ? starts[ch + 1] : L;
    for (int64_t l = starts[ch]; l < end; ++l) {
      const LayerTime& x = lt[l];
      const LayerProfile& lp = c.prof.layers[l];
      AddKind(s, lp.mixer_kind_id, x.mixer.fwd + x.mixer.bwd);
      AddKind(s, lp.channel_kind_id, x.channel.fwd + x.channel.bwd);
      s.compute += x.mixer.fwd + x.mixer.bwd + x.channel.fwd + x.channel.bwd;
      AddLayerTimes(s, x, 1.0);
      s.dense += lp.dense_params / t;
      s.expert += lp.expert_params / ep;
      s.lora += static_cast<double>(p.lora_rank) * lp.lora_params_per_rank / t;
      s.lora_expert +=
          static_cast<double>(p.lora_rank) * lp.lora_expert_params_per_rank / ep;  // like experts
      ++s.layers;
    }
  }
  for (Stage& s : st)  // by kind name (the terms' order), summed per layer in layer order as above
    for (size_t id = 0; id < s.kind_s.size(); ++id)
      if (s.kind_s[id] >= 0) s.by_kind[BlockKindName(c.prof.kinds[id])] = s.kind_s[id];
  st.front().dense += (c.prof.embed_params + c.prof.vision_params) / t;
  st.back().dense += (c.prof.head_params + c.prof.other_params) / t;
  return st;
}

// MTP layers (DeepSeek-V3 sec. 2.2): each is one more decoder layer (the last layer's kind), an
// h x 2h projection and its own head + loss, all on the last pipeline stage (`s`).
void AddMtpLayers(const CostContext& c, const Plan& p, const TimeModel& tm, const std::vector<LayerTime>& lt,
                  double head, Stage& s) {
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  if (p.mtp_layers <= 0 || L <= 0) return;
  const double t = static_cast<double>(p.deg.tp), ep = static_cast<double>(p.deg.ep * p.deg.etp);
  const bool lora = p.mode == FinetuneMode::kLoRA;
  const LayerProfile& lp = c.prof.layers[L - 1];
  // An MTP layer runs quantised even when the last decoder layer is a bf16 one (Megatron-Core's MTP
  // block asks get_fp8_context without a layer number): the plan's own TimeModel then.
  const LayerTime x = lp.bf16_gemms ? tm.Layer(static_cast<size_t>(L - 1)) : lt[L - 1];
  const double mtp = static_cast<double>(p.mtp_layers);
  const double proj = tm.Gemm(TokensPerRank(p) * 4 * lp.hidden * lp.hidden / t, TokensPerRank(p),
                              lp.hidden / t, 2 * lp.hidden, 2 * lp.hidden * lp.hidden * 2 / t, 1.0) *
                      (lora ? 2.0 : 3.0);
  const double one = x.mixer.fwd + x.mixer.bwd + x.channel.fwd + x.channel.bwd + proj + head;
  s.by_kind["mtp"] += mtp * one;
  s.compute += mtp * one;
  AddLayerTimes(s, x, mtp);
  s.dense += mtp * (lp.dense_params + 2 * lp.hidden * lp.hidden) / t;
  s.expert += mtp * lp.expert_params / ep;
}

// FSDP traffic per micro-batch of each stage, and the EP and FSDP comm its compute does not hide.
void AddFsdpAndExposure(const CostContext& c, const Plan& p, StageTimes* out) {
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  const PlanRequest& req = *c.req;
  const Topology& topo = req.topology;
  const CostCalibration& cal = req.calibration;
  const ParallelDegrees& d = p.deg;
  const bool lora = p.mode == FinetuneMode::kLoRA;
  const double gbytes = lora ? c.base_weight_bytes : 2.0;
  // FSDP (core/plan.h FsdpPipelining): every micro-batch gathers forward and backward and
  // reduce-scatters (Megatron-FSDP, and any FSDP without PP); torch FSDP2 under pipelining keeps the
  // stage gathered and reduce-scatters once per step: one gather and one reduce-scatter per step.
  const bool per_step = FsdpGathersOncePerStep(p);
  const double fsdp_ags = per_step ? 1.0 : 2.0;
  const double fsdp_per_mb = per_step ? 1.0 / static_cast<double>(p.num_micro_batches) : 1.0;
  for (Stage& s : out->stages) {
    if (p.zero_stage >= 3 && d.dp_shard > 1) {
      const double ag =
          CollectiveCost(topo, cal, Collective::kAllGather, d.dp_shard, d.tp * d.cp, s.dense * gbytes)
              .seconds;
      const double rs_bytes = lora ? s.lora * 4 : s.dense * 4;
      const CommCost rs =
          CollectiveCost(topo, cal, Collective::kReduceScatter, d.dp_shard, d.tp * d.cp, rs_bytes);
      s.fsdp += fsdp_per_mb * (fsdp_ags * ag + rs.seconds);
      out->fsdp_tier = rs.tier;
    }
    if (p.zero_stage >= 3 && d.expert_fsdp > 1 && s.expert > 0) {
      const CommCost ag =
          CollectiveCost(topo, cal, Collective::kAllGather, d.expert_fsdp, d.ep * d.etp, s.expert * gbytes);
      const double rs_bytes = lora ? s.lora_expert * 4 : s.expert * 4;  // LoRA: the experts' adapters
      const double rs = rs_bytes <= 0 ? 0
                                      : CollectiveCost(topo, cal, Collective::kReduceScatter, d.expert_fsdp,
                                                       d.ep * d.etp, rs_bytes)
                                            .seconds;
      s.fsdp += fsdp_per_mb * (fsdp_ags * ag.seconds + rs);
      out->efsdp_tier = ag.tier;
    }
    const double busy = s.compute + s.rc;
    // EP all-to-all overlapped with another micro-batch's compute when the framework does so.
    // Overlap still costs the SMs the comm kernels hold while they run.
    s.a2a_exposed = req.overlap_ep_comm || dualpipe
                        ? std::max(0.0, s.a2a - busy) + c.k.a2a_overlap_sm_tax * std::min(s.a2a, busy)
                        : s.a2a;
    s.fsdp_exposed =
        std::max(0.0, s.fsdp - busy) + (s.layers > 0 ? s.fsdp / static_cast<double>(s.layers) : 0);
    s.fsdp_exposed = std::min(s.fsdp_exposed, s.fsdp);
  }
}

// DualPipe: rank r runs stage r for half the micro-batches and stage p-1-r for the other half
// (time: the mean of the two) and holds both stages' parameters (their sum).
std::vector<Stage> DualPipeRanks(const std::vector<Stage>& st) {
  std::vector<Stage> ranks(st.size());
  for (size_t r = 0; r < st.size(); ++r) {
    const Stage &a = st[r], &b = st[st.size() - 1 - r];
    Stage& x = ranks[r];
    for (auto f : {&Stage::compute, &Stage::rc, &Stage::tp, &Stage::tp_total, &Stage::a2a,
                   &Stage::a2a_exposed, &Stage::fsdp, &Stage::fsdp_exposed, &Stage::bwd, &Stage::cp,
                   &Stage::cp_total, &Stage::host, &Stage::fwd})
      x.*f = (a.*f + b.*f) / 2;
    for (auto f : {&Stage::dense, &Stage::expert, &Stage::lora, &Stage::lora_expert}) x.*f = a.*f + b.*f;
    x.layers = a.layers + b.layers;
    for (const Stage* y : {&a, &b})
      for (const auto& [kind, secs] : y->by_kind) x.by_kind[kind] += secs / 2;
  }
  return ranks;
}

}  // namespace

StageTimes SumStageTimes(const CostContext& c, const Plan& p, const TimeModel& tm,
                         const std::vector<LayerTime>& lt, const std::vector<int64_t>& starts) {
  StageTimes out;
  // Step 1: the layers on each stage, then the head and the MTP layers on the last.
  out.stages = SumLayers(c, p, lt, starts);
  Stage& last = out.stages.back();
  const double head = tm.HeadTime();
  last.by_kind["head"] += head;
  last.compute += head;
  AddMtpLayers(c, p, tm, lt, head, last);
  // Step 2: FSDP traffic and the comm the stage's compute does not hide.
  AddFsdpAndExposure(c, p, &out);
  // Step 3: DualPipe folds stage r and p-1-r onto rank r.
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe) out.stages = DualPipeRanks(out.stages);
  return out;
}

}  // namespace onboard
