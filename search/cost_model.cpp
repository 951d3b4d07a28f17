// Step-time model of one plan: the layers (search/layer_time.h) summed per pipeline stage
// (search/stage_time.h), then the pipeline, the data-parallel sync and the optimizer step.
// Units: seconds, bytes, FLOPs, FLOP/s, tokens. Legend of the per-layer terms: search/layer_time.cpp.
//
// Per step:
//   t_mb             = the slowest stage's time per micro-batch (search/stage_time.cpp: its layers, head,
//                      MTP layers, exposed EP / FSDP comm; DualPipe's rank folding)
//   step             = m * t_mb + bubble + p2p + exposed DP sync + optimizer
//   bubble           = (p-1)/v * t_mb                      (1F1B: (p-1)/(m+p-1) of the step)
//   PP p2p           = (m*2v + 2(p-1)) sends of T*h*2/t bytes (blocking: batch_p2p_comm); interleaved with
//                      overlap_p2p_comm (req.overlap_pp_p2p: Megatron-LM default with vp > 1, Megatron-Bridge
//                      CommOverlapConfig / NeMo 2 MegatronCommOverlapCallback when pp > 1 and vp > 1):
//                      exposed = 2(p-1) x one + m*2v x max(0, one - t_mb/(2v)) (async isend/irecv behind a
//                      chunk pass)
//   DualPipe         : bubble = (p/2 - 1)(F&B + B - 3W), F&B = t_mb, B = W = (bwd + recompute)/2
//                      (DeepSeek-V3 report Table 2); EP all-to-all overlapped with the paired chunk
//                      (as overlap_ep_comm, with its SM tax); PP sends hidden
//   DP sync per step = replica all-reduce (HSDP) / DDP all-reduce / ZeRO-1 (distributed optimizer)
//                      RS of grads (fp32; bf16 with grad_dtype bf16) + AG
//                      of bf16 params over dp*c, overlapped with the last micro-batch's backward
//                      (experts: over the expert-DP group); LoRA: the adapters' grads only, the routed
//                      experts' adapters over the expert-DP group, RS over expert-FSDP, like the experts
//   optimizer        = local params * (2 * (4 + moments) + grad + 2) / HBM: fp32 master and the m, v moments
//                      (8 B fp32, 4 B bf16: optimizer_dtype) read and written, the grad read (4 B, 2 B with
//                      grad_dtype bf16), the bf16 weight written: 30 B all fp32, 20 B Bridge's precision-
//                      aware recipes, 22 B the DeepSeek-V3 report's bf16 moments beside fp32 grads;
//                      param_dtype bf16 (FSDP2, NeMo AutoModel): the bf16 parameter is the master, no
//                      copy: 2 * (2 + moments) + grad = 14 B all bf16
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "search/cost_model.h"
#include "search/ep_a2a_traffic.h"
#include "search/layer_time.h"
#include "search/stage_time.h"

namespace onboard {
namespace {

// The a2a term's split by tier, for the first MoE layer, when the request gives measured or limited
// routing ("" otherwise: the term reads as it always has). Per token, one direction, bf16 (x w x 2 B).
std::string EpTierSplitText(const CostContext& c, const Plan& p) {
  const PlanRequest& req = *c.req;
  if (req.expert_nodes_per_token <= 0 && req.max_route_nodes <= 0) return "";
  for (const LayerProfile& lp : c.prof.layers) {
    if (lp.top_k <= 0 || lp.experts <= 0) continue;
    const EpTierTraffic t = EpA2aTraffic(lp.top_k, p.deg.ep, p.deg.etp, req.topology.tiers.front().group_size,
                                         lp.cross_node_fraction, EpRoutingOf(req, p));
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "; %s, %.3g nodes/token of %.3g: slow tier %.3g copies = %.4g B/token, fast tier %.3g "
                  "copies = %.4g B/token per direction",
                  EpDispatcherName(p.ep_dispatcher), t.nodes_per_token, t.nodes, t.slow_copies,
                  t.slow_copies * lp.dispatch_width * 2, t.fast_copies,
                  t.fast_copies * lp.dispatch_width * 2);
    return buf;
  }
  return "";
}

// `v` to `prec` significant digits, as an ostream with precision(prec) prints it (%g; snprintf
// because a stream per number was a tenth of the search's time).
std::string Fmt(double v, int prec = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

// Step 2: pipeline bubble and point-to-point sends of the critical stage `cs` (t_mb seconds per mb).
struct PipelineCost {
  double bubble = 0, p2p = 0, p2p_exposed = 0, w_half = 0;
  std::string tier;
};
PipelineCost Pipeline(const CostContext& c, const Plan& p, const Stage& cs, double t_mb) {
  const PlanRequest& req = *c.req;
  const ParallelDegrees& d = p.deg;
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  const double m = static_cast<double>(p.num_micro_batches);
  const double pp = static_cast<double>(d.pp), v = static_cast<double>(d.interleave);
  PipelineCost pc;
  // DualPipe (DeepSeek-V3 report Table 2): bubble = (p/2 - 1) * (F&B + B - 3W), F&B = one overlapped
  // forward+backward pair (t_mb), B = W = half the backward (input and weight gradients).
  pc.w_half = (cs.bwd + cs.rc) / 2;
  pc.bubble = d.pp <= 1  ? 0
              : dualpipe ? (pp / 2 - 1) * std::max(0.0, t_mb + pc.w_half - 3 * pc.w_half)
                         : (pp - 1) / v * t_mb;
  if (d.pp > 1) {
    const int64_t stride = d.tp * d.cp * d.dp_shard * d.dp_replicate;
    const CommCost one = CollectiveCost(req.topology, req.calibration, Collective::kP2P, 2, stride,
                                        TokensPerRank(p) * c.prof.hidden * 2 / static_cast<double>(d.tp));
    pc.p2p = (m * 2 * v + 2 * (pp - 1)) * one.seconds;
    pc.tier = one.tier;
    pc.p2p_exposed = pc.p2p;
    // Interleaved with overlap_p2p_comm (req.overlap_pp_p2p): each send is posted async and waited on
    // when the next chunk needs it, behind one chunk pass (t_mb / 2v per send, seconds); the 2(p-1)
    // warm-up / cool-down hand-offs stay on the critical path.
    if (req.overlap_pp_p2p && d.interleave > 1)
      pc.p2p_exposed = 2 * (pp - 1) * one.seconds + m * 2 * v * std::max(0.0, one.seconds - t_mb / (2 * v));
  }
  if (dualpipe) pc.p2p_exposed = 0.0;  // DualPipe hides PP sends in the overlapped pairs
  return pc;
}

// Step 3: data-parallel gradient sync once per step, overlapped with the last backward; the
// distributed optimizer's parameter all-gather overlaps the next step's first forward.
struct DpSync {
  double seconds = 0, exposed = 0;
  std::string tier;
};
DpSync GradSync(const CostContext& c, const Plan& p, const Stage& cs) {
  const Topology& topo = c.req->topology;
  const CostCalibration& cal = c.req->calibration;
  const ParallelDegrees& d = p.deg;
  const bool lora = p.mode == FinetuneMode::kLoRA;
  double sync = 0, gather = 0;
  DpSync out;
  const double grad_dense = lora ? cs.lora : cs.dense, grad_exp = lora ? cs.lora_expert : cs.expert;
  const int64_t dp = d.dp_replicate * d.dp_shard;
  const int64_t dcp = dp * d.cp;   // dense grads are reduced over dp x cp (Megatron)
  const double gb = GradBytes(p);  // bytes per reduced gradient
  if (p.zero_stage >= 3) {
    if (d.dp_replicate > 1) {
      const CommCost ar = CollectiveCost(topo, cal, Collective::kAllReduce, d.dp_replicate, d.dp_shard * d.cp * d.tp,
                                         4 * (grad_dense / d.dp_shard + grad_exp / d.expert_fsdp));
      sync = ar.seconds;
      out.tier = ar.tier;
    }
  } else if (dcp > 1) {
    const Collective kind = p.zero_stage == 1 ? Collective::kReduceScatter : Collective::kAllReduce;
    const CommCost g = CollectiveCost(topo, cal, kind, dcp, d.tp, gb * grad_dense);
    sync = g.seconds;
    out.tier = g.tier;
    if (p.zero_stage == 1) gather += CollectiveCost(topo, cal, Collective::kAllGather, dcp, d.tp, 2 * grad_dense).seconds;
    const int64_t edp = d.expert_fsdp * d.dp_replicate;
    if (grad_exp > 0 && edp > 1) {
      sync += CollectiveCost(topo, cal, kind, edp, d.ep * d.etp, gb * grad_exp).seconds;
      if (p.zero_stage == 1)
        gather += CollectiveCost(topo, cal, Collective::kAllGather, edp, d.ep * d.etp, 2 * grad_exp).seconds;
    }
  }
  out.exposed = std::max(0.0, sync - cs.bwd) + std::max(0.0, gather - cs.fwd);
  out.seconds = sync + gather;
  return out;
}

// Step 4: optimizer step (memory-bound) over the critical stage's local parameters.
struct OptimizerCost {
  double seconds = 0, local_params = 0, adam_bytes = 0;
};
OptimizerCost OptimizerStep(const CostContext& c, const Plan& p, const Stage& cs) {
  const ParallelDegrees& d = p.deg;
  const bool lora = p.mode == FinetuneMode::kLoRA;
  const int64_t dcp = d.dp_replicate * d.dp_shard * d.cp;
  const double opt_dp = p.zero_stage >= 1 ? (p.zero_stage >= 3 ? static_cast<double>(d.dp_shard) : static_cast<double>(dcp)) : 1.0;
  const double opt_edp = p.zero_stage >= 1 ? static_cast<double>(p.zero_stage >= 3 ? d.expert_fsdp : d.expert_fsdp * d.dp_replicate) : 1.0;
  OptimizerCost o;
  o.local_params = (lora ? cs.lora : cs.dense) / opt_dp + (lora ? cs.lora_expert : cs.expert) / opt_edp;
  const double moment_bytes = p.optimizer_dtype == Precision::kBF16 ? 4.0 : 8.0;
  const bool bf16_master = p.param_dtype == Precision::kBF16;
  o.adam_bytes = 2 * ((bf16_master ? 2 : 4) + moment_bytes) + GradBytes(p) + (bf16_master ? 0 : 2);
  o.seconds = o.local_params * o.adam_bytes / (c.hbm_bps * c.k.hbm_eff);
  return o;
}

// Step 5: the terms, one per line, in the order the estimate lists them; their exposed parts add up to
// the step time.
void AddTerms(const CostContext& c, const Plan& p, const TimeModel& tm, const StageTimes& sts, size_t crit,
              const PipelineCost& pc, const DpSync& sync, const OptimizerCost& opt, PlanEstimate* e) {
  const PlanRequest& req = *c.req;
  const Topology& topo = req.topology;
  const ParallelDegrees& d = p.deg;
  const Stage& cs = sts.stages[crit];
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  const double m = static_cast<double>(p.num_micro_batches);
  const double pp = static_cast<double>(d.pp), v = static_cast<double>(d.interleave);
  const double t_mb = cs.MicroBatchSeconds();
  auto add = [e](const std::string& name, double total, double exposed, const std::string& tier,
                 const std::string& formula) {
    if (total <= 0 && exposed <= 0) return;
    e->time_terms.push_back({name, total, exposed, tier, formula});
  };
  const std::string mstr = Fmt(m);
  for (const auto& [kind, secs] : cs.by_kind) {
    add("compute." + kind, m * secs, m * secs, "",
        mstr + " micro-batches x " + Fmt(secs * 1e3) + " ms fwd+bwd on stage " + std::to_string(crit));
    e->compute_s_by_kind[kind] = m * secs;
  }
  add("launch", m * cs.host, m * cs.host, "",
      mstr + " x " + Fmt(cs.host * 1e3) + " ms host launch / MoE dispatcher sync not hidden (cuda_graph=" +
          CudaGraphName(p.cuda_graph) + ")");
  add("recompute", m * cs.rc, m * cs.rc, "", mstr + " x " + Fmt(cs.rc * 1e3) + " ms extra forward");
  if (e->memory.offloaded > 0) {  // CPU offloading: each pass's copy against that pass's compute
    const double copy = e->memory.offloaded / c.host_link_bps;
    const double exposed = std::max(0.0, copy - cs.fwd) + std::max(0.0, copy - cs.bwd);
    add("offload", m * 2 * copy, m * exposed, "host",
        mstr + " x 2 x " + Fmt(copy * 1e3) + " ms (" + Fmt(e->memory.offloaded / 1073741824.0) + " GiB of " +
            std::to_string(req.cpu_offload_layers) +
            " layers to host in the forward, back in the backward, " + Fmt(c.host_link_bps / 1e9) +
            " GB/s), overlapped with " + Fmt(cs.fwd * 1e3) + " / " + Fmt(cs.bwd * 1e3) + " ms fwd / bwd");
  }
  add("comm.tp", m * cs.tp_total, m * cs.tp, tm.tp_ar().tier,
      mstr + " x " + Fmt(cs.tp / std::max(tm.tp_ar().seconds, 1e-30), 3) + " all-reduces x " +
          Fmt(tm.tp_ar().seconds * 1e3) + " ms (tp=" + std::to_string(d.tp) +
          (p.tp_comm_overlap ? ", exposed share with tp_comm_overlap)" : ", not overlapped)"));
  add("comm.cp", m * cs.cp_total, m * cs.cp, d.cp > 1 ? topo.tiers[TierForStridedGroup(topo, d.cp, d.tp)].name : "",
      mstr + " x " + Fmt(cs.cp_total * 1e3) + " ms CP exchange (cp=" + std::to_string(d.cp) + ", " +
          CpCommName(p.cp_comm) + "; KDA state / DSA gathers), " + Fmt(cs.cp * 1e3) + " ms not hidden by attention");
  add("comm.ep_a2a", m * cs.a2a, m * cs.a2a_exposed,
      d.ep > 1 ? topo.tiers[TierForGroup(topo, d.ep)].name : "",
      mstr + " x " + Fmt(cs.a2a * 1e3) + " ms (dispatch+combine fwd+bwd per MoE layer, ep=" +
          std::to_string(d.ep) + ", imbalance " + Fmt(req.expert_imbalance) +
          (req.overlap_ep_comm || dualpipe ? ", overlapped with compute" : ", not overlapped") +
          EpTierSplitText(c, p) + ")");
  add("comm.fsdp", m * cs.fsdp, m * cs.fsdp_exposed, sts.fsdp_tier.empty() ? sts.efsdp_tier : sts.fsdp_tier,
      mstr +
          (FsdpGathersOncePerStep(p)
               ? " x (AG + RS once per step: the stage stays gathered, fsdp_pipelining per_step) / m = "
               : " x (AG fwd + AG bwd + RS) = ") +
          Fmt(cs.fsdp * 1e3) + " ms, overlapped with " + Fmt((cs.compute + cs.rc) * 1e3) + " ms compute");
  add("bubble", pc.bubble, pc.bubble, "",
      dualpipe ? "DualPipe (p/2-1)(F&B + B - 3W) = " + Fmt(pp / 2 - 1) + " * (" + Fmt(t_mb * 1e3) + " - " +
                     Fmt(2 * pc.w_half * 1e3) + ") ms"
               : "(p-1)/v * t_mb = " + Fmt(pp - 1) + "/" + Fmt(v) + " * " + Fmt(t_mb * 1e3) + " ms");
  add("comm.pp_p2p", pc.p2p, pc.p2p_exposed, pc.tier,
      std::string("(m*2v + 2(p-1)) sends of T*h*2/t bytes") +
          (dualpipe ? ", hidden by DualPipe"
           : req.overlap_pp_p2p && d.interleave > 1
               ? ", overlapped with the chunks but 2(p-1) (overlap_p2p_comm)"
               : ""));
  add("comm.dp_sync", sync.seconds, sync.exposed, sync.tier,
      "grad sync once per step, overlapped with the last backward (param all-gather: with the first "
      "forward)");
  add("optimizer", opt.seconds, opt.seconds, "",
      Fmt(opt.local_params / 1e9) + " G local params x " + Fmt(opt.adam_bytes) + " B / HBM");
}

// Every layer's time under `p` (AllLayers); the bf16 first / last layers over CostContext::bf16_twin.
std::vector<LayerTime> PlanLayers(const CostContext& c, const Plan& p, const TimeModel& tm) {
  if (!c.bf16_twin) return AllLayers(tm, c.prof);
  const TimeModel bf16(*c.bf16_twin, p);
  return AllLayers(tm, c.prof, &bf16);
}

}  // namespace

std::vector<int64_t> PlanStageStarts(const CostContext& c, const Plan& p) {
  if (!p.stage_layer_starts.empty() || p.deg.pp * p.deg.interleave == 1) return StageStarts(p, {});
  const TimeModel tm(c, p);
  return StageStarts(p, PlanLayers(c, p, tm));
}

double RecomputeSeconds(const CostContext& c, const Plan& p, BlockKind kind, Recompute level) {
  Plan q = p;
  q.recompute[BlockKindName(kind)] = level;
  const TimeModel tm(c, q);
  std::optional<TimeModel> bf16;  // the bf16 first / last layers' classes (CostContext::bf16_twin)
  if (c.bf16_twin) bf16.emplace(*c.bf16_twin, q);
  // One Layer() per class of equal layers that holds `kind`, summed over the layers in order.
  const auto kind_it = std::find(c.prof.kinds.begin(), c.prof.kinds.end(), kind);
  if (kind_it == c.prof.kinds.end()) return 0;
  const size_t id = static_cast<size_t>(kind_it - c.prof.kinds.begin());
  std::vector<LayerTime> per_class(c.prof.class_first.size());
  for (size_t k = 0; k < per_class.size(); ++k) {
    const LayerProfile& first = c.prof.layers[c.prof.class_first[k]];
    if (first.mixer_kind_id == id || first.channel_kind_id == id)
      per_class[k] = (first.bf16_gemms && bf16 ? *bf16 : tm).Layer(c.prof.class_first[k]);
  }
  double s = 0;
  for (const LayerProfile& lp : c.prof.layers) {
    const LayerTime& x = per_class[lp.class_id];
    if (lp.mixer_kind_id == id) s += x.mixer.rc + x.mixer.tp;
    if (lp.channel_kind_id == id) s += x.channel.rc + x.channel.tp + x.channel.a2a;
  }
  return s;
}

MemoryBreakdown EstimatePlanMemory(const CostContext& c, const Plan& p) {
  // Layer times only decide the stage split: skip them when there is nothing to split (the search
  // prunes most layouts here, so this is its hot path).
  if (!p.stage_layer_starts.empty() || p.deg.pp * p.deg.interleave == 1)
    return EstimateMemory(c, p, StageStarts(p, {}), nullptr);
  const TimeModel tm(c, p);
  const auto lt = PlanLayers(c, p, tm);
  return EstimateMemory(c, p, StageStarts(p, lt), nullptr);
}

PlanEstimate EstimatePlan(const CostContext& c, const Plan& p) {
  PlanEstimate e;
  const TimeModel tm(c, p);
  const auto lt = PlanLayers(c, p, tm);
  const auto starts = StageStarts(p, lt);
  int mem_stage = 0;
  e.memory = EstimateMemory(c, p, starts, &mem_stage);
  e.fits = e.memory.total <= e.memory.usable();
  // Step 1: per-stage time per micro-batch (compute + exposed TP/EP/FSDP); the slowest stage sets t_mb.
  const StageTimes sts = SumStageTimes(c, p, tm, lt, starts);
  size_t crit = 0;
  for (size_t i = 1; i < sts.stages.size(); ++i)
    if (sts.stages[i].MicroBatchSeconds() > sts.stages[crit].MicroBatchSeconds()) crit = i;
  const Stage& cs = sts.stages[crit];
  // Steps 2-4: pipeline bubble and sends, DP gradient sync, optimizer step.
  const PipelineCost pc = Pipeline(c, p, cs, cs.MicroBatchSeconds());
  const DpSync sync = GradSync(c, p, cs);
  const OptimizerCost opt = OptimizerStep(c, p, cs);
  // Step 5: the terms; their exposed parts add up to the step time.
  AddTerms(c, p, tm, sts, crit, pc, sync, opt, &e);
  e.step_s = 0;
  for (const TimeTerm& x : e.time_terms) {
    e.step_s += x.exposed_s;
    if (x.name.rfind("comm.", 0) == 0) {
      e.exposed_comm_s += x.exposed_s;
      e.overlapped_comm_s += x.total_s - x.exposed_s;
    }
  }
  e.bubble_s = pc.bubble;
  const double tokens = static_cast<double>(p.global_batch * p.seq);
  e.tokens_per_s = tokens / e.step_s;
  const bool lora = p.mode == FinetuneMode::kLoRA;
  e.model_flops = tokens * c.prof.model_flops_per_token * (lora ? 2.0 : 3.0);
  e.mfu = e.model_flops / (e.step_s * static_cast<double>(p.deg.world()) * c.datasheet_peak_flops);
  if (mem_stage != 0) e.notes.push_back("memory peaks on pipeline stage " + std::to_string(mem_stage));
  if (!c.gemm_share_note.empty()) e.notes.push_back(c.gemm_share_note);
  return e;
}

Status CheckPlanAgainstModel(const CostContext& c, const Plan& p) {
  ONBOARD_RETURN_IF_ERROR(ValidatePlan(p, c.req->topology.num_devices, c.prof.experts, c.prof.min_heads,
                                       static_cast<int64_t>(c.prof.layers.size())));
  if (p.seq != c.prof.seq)
    return Status(ErrorCode::kBadInput, "plan seq=" + std::to_string(p.seq) + " differs from request seq=" +
                                            std::to_string(c.prof.seq));
  if (p.bf16_layers_first != c.req->bf16_layers_first || p.bf16_layers_last != c.req->bf16_layers_last)
    return Status(ErrorCode::kBadInput,
                  "plan bf16_layers_first/last=" + std::to_string(p.bf16_layers_first) + "/" +
                      std::to_string(p.bf16_layers_last) + " differ from the request's " +
                      std::to_string(c.req->bf16_layers_first) + "/" +
                      std::to_string(c.req->bf16_layers_last) + " (the cost context marks those layers)");
  if (p.global_batch < 1)
    return Status(ErrorCode::kBadInput, "global_batch=" + std::to_string(p.global_batch) + " must be >= 1");
  if (c.req->cpu_offload_layers > 0) {  // Megatron-Core TransformerConfig's cpu_offloading checks
    if (p.deg.pp != 1)
      return Status(ErrorCode::kBadInput, "cpu_offload_layers=" + std::to_string(c.req->cpu_offload_layers) +
                                              " needs pp=1 (pp=" + std::to_string(p.deg.pp) + ")");
    for (const auto& [kind, r] : p.recompute)
      if (r != Recompute::kNone)
        return Status(ErrorCode::kBadInput,
                      "cpu_offload_layers=" + std::to_string(c.req->cpu_offload_layers) +
                          " needs no recompute (" + kind + "=" + RecomputeName(r) + ")");
  }
  for (const LayerProfile& lp : c.prof.layers)  // expert TP splits each expert's FFN width
    if (p.deg.etp > 1 && lp.top_k > 0 && std::fmod(lp.expert_inter, static_cast<double>(p.deg.etp)) != 0)
      return Status(ErrorCode::kBadInput, "etp=" + std::to_string(p.deg.etp) +
                                              " must divide the expert FFN width " +
                                              std::to_string(static_cast<int64_t>(lp.expert_inter)));
  return Status::Ok();
}

// The share of its datasheet tensor peak a device sustains. gemm_eff_max is the share of the peak the
// largest GEMMs reach; a device whose best measured bf16 matmul (MAMF, hardware catalog) is a smaller
// share cannot reach it: its datasheet peak assumes a clock it does not hold under matmul load (GB200:
// 72.9%, B200 77.6%), and the same tensor cores at the same clock run the attention cores and the fp8
// GEMMs, so every tensor rate is scaled by MAMF share / gemm_eff_max. Never above 1: a device with
// headroom above the ceiling (A100 86.9%) still reaches only the ceiling at LLM shapes. No
// measurement (GB300, H800): 1.
double SustainedTensorRate(const DeviceType& dev, double gemm_eff_max) {
  const double mamf = MeasuredMatmulFlops(dev.name);
  if (mamf <= 0 || dev.tflops_bf16 <= 0) return 1.0;
  return std::min(1.0, mamf / (dev.tflops_bf16 * 1e12) / gemm_eff_max);
}

// The GEMM recipe of `compute` on `dev`: its datasheet peak, its share of it, and the bytes its
// quantisation moves and saves (cost_model.h). fp8 / mxfp8 on a device without fp8 run bf16
// (PlanRequest::Validate refuses nvfp4 on a device without fp4, planner.cpp).
void SetGemmPrecision(Precision compute, const DeviceType& dev, CostContext* c) {
  const bool fp8 = (compute == Precision::kFP8 || compute == Precision::kMXFP8) && dev.tflops_fp8 > 0;
  const bool fp4 = compute == Precision::kNVFP4 && dev.tflops_fp4 > 0;
  c->quantised = fp8 || fp4;
  c->datasheet_peak_flops = (fp4 ? dev.tflops_fp4 : fp8 ? dev.tflops_fp8 : dev.tflops_bf16) * 1e12;
  c->quantised_gemm_eff = fp4 ? c->k.nvfp4_gemm_eff : fp8 ? c->k.fp8_gemm_eff : 1.0;
  c->quant_bytes = fp4 ? c->k.nvfp4_quant_bytes : fp8 ? c->k.fp8_quant_bytes : 0.0;
  c->saved_input_bytes = c->quantised ? DTypeBytes(PrecisionElement(compute)) : 0.0;  // 1, or 0.5625
  if (fp4)  // the one GEMM share not calibrated on a training run: every estimate says so
    c->gemm_share_note = "nvfp4 GEMM share of the fp4 peak (nvfp4_gemm_eff " + Fmt(c->k.nvfp4_gemm_eff) +
                         ") is not calibrated: no measured NVFP4 run in the calibration set (taken from TE's "
                         "B300 GEMM benchmark; search/README.md, issue 13's twentieth pass)";
}

CostContext MakeCostContext(const PlanRequest& req) {
  CostContext c;
  c.req = &req;
  c.prof =
      BuildProfile(req.model, req.seq, req.dropout, req.attention_kernel == "unfused", req.unfused_framework);
  const DeviceType& dev = req.topology.device;
  SetGemmPrecision(req.compute_dtype, dev, &c);
  const double tensor_rate = SustainedTensorRate(dev, c.k.gemm_eff_max);
  c.peak_flops = c.datasheet_peak_flops * tensor_rate;
  c.attn_peak_flops = dev.tflops_bf16 * 1e12 * tensor_rate;
  if (req.bf16_layers_first > 0 || req.bf16_layers_last > 0)
    MarkBf16GemmLayers(req.bf16_layers_first, req.bf16_layers_last, &c.prof);
  c.host_fed = dev.name.rfind("localhost", 0) != 0;  // LocalhostTopology's device (core/topology.cpp)
  c.hbm_bps = dev.hbm_gbps * 1e9;
  c.exp_per_s = SoftmaxExpsPerSecond(dev.name);
  c.per_expert_launches = PerExpertGemmLaunches(dev.name);
  c.host_link_bps = HostLinkBytesPerSecond(dev.name);
  c.expert_ops = ExpertHostOpsPerExpert(c.quantised ? req.compute_dtype : Precision::kBF16);
  c.loss = FindCrossEntropy(req.cross_entropy);
  ONBOARD_ASSERT(c.loss != nullptr, "cross_entropy '" + req.cross_entropy + "' passed PlanRequest::Validate");
  if (req.mode == FinetuneMode::kLoRA)
    c.base_weight_bytes = DTypeBytes(PrecisionElement(req.base_dtype));  // bf16 2, fp8 1, mxfp4 0.53125
  c.global_batch_target = req.global_batch;
  if (c.quantised && (req.bf16_layers_first > 0 || req.bf16_layers_last > 0)) {
    // The bf16 twin of the marked layers (its datasheet peak stays the plan's: MFU's denominator).
    auto twin = std::make_shared<CostContext>(c);
    SetGemmPrecision(Precision::kBF16, dev, twin.get());
    twin->peak_flops = twin->datasheet_peak_flops * tensor_rate;
    twin->datasheet_peak_flops = c.datasheet_peak_flops;
    twin->gemm_share_note.clear();
    twin->expert_ops = ExpertHostOpsPerExpert(Precision::kBF16);
    c.bf16_twin = std::move(twin);
  }
  return c;
}

}  // namespace onboard
