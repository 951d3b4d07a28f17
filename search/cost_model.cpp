// Step-time model of one plan. Units: seconds, bytes, FLOPs, FLOP/s, tokens.
//
// Legend: t = tp, e = ep, p = pp, v = interleave, m = micro-batches per step, T = micro_batch*seq,
// h = hidden, k = top_k, w = dispatch width (hidden or latent), E = routed experts, s = seq,
// P = peak FLOP/s, HBM = HBM bytes/s. Per micro-batch, per device, one layer:
//   GEMM time        = max(flops / (P * eff(m,n,k)), weight bytes / (HBM * hbm_eff))
//   eff(m,n,k)       = gemm_eff_max * cal / (1 + d0/m + d0/n + d0/k)
//   dense GEMMs      : flops = T * dense_gemm_flops / t,   m = T, k = h, n = flops/(2 T h)
//   routed GEMMs     : R = T/t * k * imbalance token copies on the rank, E/e experts there,
//                      m = R / (E/e) tokens per expert (small!), n = expert width, k = w
//   attention core   : T * core_flops / t / (P * eff_kind)          fused kernels (bwd = 2.5x fwd)
//                      unfused softmax: batched GEMMs on s x s + score traffic H/t*s*(8+5*dropout) B/token
//   elementwise      : elementwise_passes * kept activation bytes / (HBM * hbm_eff)   (bwd = 2x)
//   backward GEMMs   : 2x forward (full fine-tuning), 1x (LoRA: no weight grads for the frozen base)
//   recompute        : full = one more forward of the block (incl. its TP collective, EP a2a);
//                      selective = one more attention-core forward (unfused) / KDA conv+gates
//   TP               : per block 1 all-reduce fwd + 1 bwd of T*h*2 bytes (SP: RS+AG, same bytes)
//   EP all-to-all    : per MoE layer dispatch+combine fwd and bwd (4), T/t*k*w*2*imbalance bytes each
//                      (1.5 B/elem with fp8 dispatch); exposed unless req.overlap_ep_comm
// Per step:
//   stage time/mb    = sum over its layers (+ head on the last stage) + exposed FSDP per mb
//   step             = m * t_mb + bubble + p2p + exposed DP sync + optimizer
//   bubble           = (p-1)/v * t_mb                      (1F1B: (p-1)/(m+p-1) of the step)
//   FSDP per mb      = AG weights fwd + AG bwd + RS grads; exposed = max(0, comm - compute) + comm/layers
//   DP sync per step = replica all-reduce (HSDP) / DDP all-reduce / ZeRO-1 RS+AG, overlapped with the
//                      last micro-batch's backward
//   optimizer        = local params * adam_bytes_per_param / (HBM * hbm_eff)
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "search/cost_model.h"

namespace onboard {
namespace {

struct BlockTime {
  double fwd = 0, bwd = 0, rc = 0;   // compute, seconds per micro-batch
  double tp = 0;                     // exposed TP comm (fwd + bwd + recompute)
  double a2a = 0;                    // exposed EP all-to-all
};

struct LayerTime {
  BlockTime mixer, channel;
  double total() const {
    return mixer.fwd + mixer.bwd + mixer.rc + mixer.tp + channel.fwd + channel.bwd + channel.rc + channel.tp +
           channel.a2a;
  }
};

std::string Fmt(double v, int prec = 3) {
  std::ostringstream os;
  os.precision(prec);
  os << v;
  return os.str();
}

class TimeModel {
 public:
  TimeModel(const CostContext& c, const Plan& p) : c_(c), p_(p) {
    t_ = static_cast<double>(p.deg.tp);
    T_ = static_cast<double>(p.micro_batch * p.seq);
    eff_ = c.k.gemm_eff_max * c.req->calibration.compute_efficiency;
    hbm_ = c.hbm_bps * c.k.hbm_eff * c.req->calibration.memory_bound_efficiency;
    lora_ = p.mode == FinetuneMode::kLoRA;
    a2a_elem_bytes_ = p.compute_dtype == "fp8" ? 1.5 : 2.0;  // fp8 dispatch (1 B) + bf16 combine (2 B)
    const Topology& topo = c.req->topology;
    const CostCalibration& cal = c.req->calibration;
    tp_ar_ = CollectiveCost(topo, cal, Collective::kAllReduce, p.deg.tp, 1, T_ * c.prof.hidden * 2);
  }

  double Gemm(double flops, double m, double n, double k, double weight_bytes, double eff_scale) const {
    if (flops <= 0) return 0;
    const double d0 = c_.k.gemm_dim0;
    const double eff = eff_ * eff_scale / (1 + d0 / std::max(m, 1.0) + d0 / std::max(n, 1.0) + d0 / std::max(k, 1.0));
    return std::max(flops / (c_.peak_flops * eff), weight_bytes / hbm_);
  }

  double CoreEff(const LayerProfile& lp) const {
    if (lp.mixer_kind == "DSA") return c_.k.sparse_attn_eff;
    if (lp.softmax) return c_.k.flash_attn_eff;
    return c_.k.linear_attn_eff;
  }

  LayerTime Layer(size_t l) const {
    const LayerProfile& lp = c_.prof.layers[l];
    const double h = lp.hidden, s = static_cast<double>(p_.seq);
    const Recompute rm = PolicyFor(p_, lp.mixer_kind), rc = PolicyFor(p_, lp.channel_kind);
    const double bwd_gemm = lora_ ? 1.0 : 2.0;
    const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
    LayerTime out;
    // Step 1: mixer = projections + attention core + elementwise.
    BlockTime& mx = out.mixer;
    const double mflops = T_ * lp.mixer_gemm_flops / t_;
    const double mg = Gemm(mflops, T_, mflops / (2 * T_ * h), h, mflops / T_, 1.0);
    double core_f = 0, core_b = 0;
    if (lp.softmax && c_.prof.unfused_attention && lp.mixer_kind != "DSA") {
      const double flops = T_ * lp.core_flops / t_ * (2 * s / (s + 1));  // full s x s, no causal skip
      const double hd = h / std::max<double>(lp.heads, 1);
      const double g = Gemm(flops, s, s, hd, 0, 1.0);
      const double traffic = T_ * (lp.heads / t_) * s * (c_.k.unfused_score_passes + (c_.prof.dropout > 0 ? 5 : 0));
      core_f = g + traffic / hbm_;
      core_b = 2 * core_f;
    } else {
      core_f = T_ * lp.core_flops / t_ / (c_.peak_flops * CoreEff(lp) * c_.req->calibration.compute_efficiency);
      core_b = c_.k.attn_bwd_ratio * core_f;
    }
    const double mix_bytes = (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div + lp.act_mixer / t_;
    const double mel = c_.k.elementwise_passes * T_ * mix_bytes / hbm_;
    const double lora_f = lora_ ? 2 * T_ * static_cast<double>(p_.lora_rank) * lp.lora_params_per_rank / t_ /
                                      (c_.peak_flops * eff_ * 0.5)
                                : 0;
    mx.fwd = mg + core_f + mel + lora_f * 0.5;
    mx.bwd = bwd_gemm * mg + core_b + 2 * mel + lora_f;
    if (rm == Recompute::kFull) mx.rc = mx.fwd;
    else if (rm == Recompute::kSelective) mx.rc = (c_.prof.unfused_attention && lp.softmax) ? core_f : 0.5 * mel;
    double tp_count = 2 + (rm == Recompute::kFull ? 1 : 0);
    mx.tp = tp_count * tp_ar_.seconds;
    // Step 2: channel = dense MLP / shared experts / router / latent + routed experts.
    BlockTime& ch = out.channel;
    const double cflops = T_ * (lp.dense_gemm_flops - lp.mixer_gemm_flops) / t_;
    double cg = Gemm(cflops, T_, cflops / (2 * T_ * h), h, cflops / T_, 1.0);
    double routed = 0, a2a_one = 0;
    if (lp.top_k > 0 && lp.experts > 0) {
      const double R = T_ / t_ * static_cast<double>(lp.top_k) * c_.req->expert_imbalance;
      const double per_rank = static_cast<double>(lp.experts) / static_cast<double>(p_.deg.ep);
      const double m_e = R / per_rank;
      const double wbytes = per_rank * lp.expert_params_each * c_.base_weight_bytes;
      routed = Gemm(R * 2 * lp.expert_params_each, m_e, lp.expert_inter, lp.dispatch_width, wbytes,
                    c_.req->calibration.grouped_gemm_efficiency);
      if (p_.deg.ep > 1)
        a2a_one = CollectiveCost(c_.req->topology, c_.req->calibration, Collective::kAllToAll, p_.deg.ep, 1,
                                 R * lp.dispatch_width * a2a_elem_bytes_, lp.cross_node_fraction)
                      .seconds;
    }
    const double ch_bytes = (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div + lp.act_channel / t_ +
                            lp.act_routed * c_.req->expert_imbalance / t_;
    const double cel = c_.k.elementwise_passes * T_ * ch_bytes / hbm_;
    ch.fwd = cg + routed + cel;
    ch.bwd = bwd_gemm * (cg + routed) + 2 * cel;
    if (rc == Recompute::kFull) ch.rc = ch.fwd;
    ch.tp = (2 + (rc == Recompute::kFull ? 1 : 0)) * tp_ar_.seconds;
    ch.a2a = (4 + (rc == Recompute::kFull ? 2 : 0)) * a2a_one;
    return out;
  }

  double HeadTime() const {
    const double flops = T_ * c_.prof.head_flops / t_;
    const double g = Gemm(flops, T_, c_.prof.vocab / t_, c_.prof.hidden, flops / T_, 1.0);
    const double ce = 4 * 4 * T_ * c_.prof.vocab / t_ / hbm_;  // fp32 logits: softmax + grad passes
    return g * (1 + (lora_ ? 1.0 : 2.0)) + ce;
  }

  const CommCost& tp_ar() const { return tp_ar_; }

 private:
  const CostContext& c_;
  const Plan& p_;
  double t_ = 1, T_ = 0, eff_ = 0, hbm_ = 0, a2a_elem_bytes_ = 2;
  bool lora_ = false;
  CommCost tp_ar_;
};

std::vector<int64_t> StageStarts(const Plan& p, const std::vector<LayerTime>& lt) {
  if (!p.stage_layer_starts.empty()) return p.stage_layer_starts;
  const int64_t chunks = p.deg.pp * p.deg.interleave;
  if (chunks == 1) return {0};
  std::vector<double> cost(lt.size());
  for (size_t i = 0; i < lt.size(); ++i) cost[i] = lt[i].total();
  return BalancedSplit(cost, chunks);
}

std::vector<LayerTime> AllLayers(const TimeModel& tm, size_t n) {
  std::vector<LayerTime> lt;
  lt.reserve(n);
  for (size_t i = 0; i < n; ++i) lt.push_back(tm.Layer(i));
  return lt;
}

}  // namespace

std::vector<int64_t> PlanStageStarts(const CostContext& c, const Plan& p) {
  TimeModel tm(c, p);
  return StageStarts(p, AllLayers(tm, c.prof.layers.size()));
}

double RecomputeSeconds(const CostContext& c, const Plan& p, const std::string& kind, Recompute level) {
  Plan q = p;
  q.recompute[kind] = level;
  TimeModel tm(c, q);
  double s = 0;
  for (size_t i = 0; i < c.prof.layers.size(); ++i) {
    const LayerProfile& lp = c.prof.layers[i];
    if (lp.mixer_kind != kind && lp.channel_kind != kind) continue;
    const LayerTime x = tm.Layer(i);
    if (lp.mixer_kind == kind) s += x.mixer.rc + x.mixer.tp;
    if (lp.channel_kind == kind) s += x.channel.rc + x.channel.tp + x.channel.a2a;
  }
  return s;
}

MemoryBreakdown EstimatePlanMemory(const CostContext& c, const Plan& p) {
  TimeModel tm(c, p);
  const auto lt = AllLayers(tm, c.prof.layers.size());
  return EstimateMemory(c, p, StageStarts(p, lt), nullptr);
}

PlanEstimate EstimatePlan(const CostContext& c, const Plan& p) {
  PlanEstimate e;
  const PlanRequest& req = *c.req;
  const Topology& topo = req.topology;
  const CostCalibration& cal = req.calibration;
  const ParallelDegrees& d = p.deg;
  TimeModel tm(c, p);
  const auto lt = AllLayers(tm, c.prof.layers.size());
  const auto starts = StageStarts(p, lt);
  int mem_stage = 0;
  e.memory = EstimateMemory(c, p, starts, &mem_stage);
  e.fits = e.memory.total <= e.memory.usable();
  // Step 1: per-stage time per micro-batch (compute + exposed TP/EP) and FSDP traffic.
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  const double t = static_cast<double>(d.tp), ep = static_cast<double>(d.ep);
  const bool lora = p.mode == FinetuneMode::kLoRA;
  const double gbytes = lora ? c.base_weight_bytes : 2.0;
  struct Stage {
    double compute = 0, rc = 0, tp = 0, a2a = 0, a2a_exposed = 0, fsdp = 0, fsdp_exposed = 0, bwd = 0;
    double dense = 0, expert = 0, lora = 0;
    int64_t layers = 0;
    std::map<std::string, double> by_kind;
  };
  std::vector<Stage> st(d.pp);
  for (size_t ch = 0; ch < starts.size(); ++ch) {
    Stage& s = st[ch % d.pp];
    const int64_t end = ch + 1 < starts.size() ? starts[ch + 1] : L;
    for (int64_t l = starts[ch]; l < end; ++l) {
      const LayerTime& x = lt[l];
      const LayerProfile& lp = c.prof.layers[l];
      s.by_kind[lp.mixer_kind] += x.mixer.fwd + x.mixer.bwd;
      s.by_kind[lp.channel_kind] += x.channel.fwd + x.channel.bwd;
      s.compute += x.mixer.fwd + x.mixer.bwd + x.channel.fwd + x.channel.bwd;
      s.bwd += x.mixer.bwd + x.channel.bwd;
      s.rc += x.mixer.rc + x.channel.rc;
      s.tp += x.mixer.tp + x.channel.tp;
      s.a2a += x.channel.a2a;
      s.dense += lp.dense_params / t;
      s.expert += lp.expert_params / ep;
      s.lora += static_cast<double>(p.lora_rank) * lp.lora_params_per_rank / t;
      ++s.layers;
    }
  }
  st.front().dense += (c.prof.embed_params + c.prof.vision_params) / t;
  st.back().dense += (c.prof.head_params + c.prof.other_params) / t;
  const double head = tm.HeadTime();
  st.back().by_kind["head"] += head;
  st.back().compute += head;
  std::string fsdp_tier, efsdp_tier;
  for (Stage& s : st) {
    if (p.zero_stage >= 3 && d.dp_shard > 1) {
      const double ag = CollectiveCost(topo, cal, Collective::kAllGather, d.dp_shard, d.tp, s.dense * gbytes).seconds;
      const double rs_bytes = lora ? s.lora * 4 : s.dense * 4;
      const CommCost rs = CollectiveCost(topo, cal, Collective::kReduceScatter, d.dp_shard, d.tp, rs_bytes);
      s.fsdp += 2 * ag + rs.seconds;
      fsdp_tier = rs.tier;
    }
    if (p.zero_stage >= 3 && d.expert_fsdp > 1 && s.expert > 0) {
      const CommCost ag = CollectiveCost(topo, cal, Collective::kAllGather, d.expert_fsdp, d.ep, s.expert * gbytes);
      const double rs = lora ? 0
                             : CollectiveCost(topo, cal, Collective::kReduceScatter, d.expert_fsdp, d.ep, s.expert * 4)
                                   .seconds;
      s.fsdp += 2 * ag.seconds + rs;
      efsdp_tier = ag.tier;
    }
    const double busy = s.compute + s.rc;
    // EP all-to-all overlapped with another micro-batch's compute when the framework does so.
    s.a2a_exposed = req.overlap_ep_comm ? std::max(0.0, s.a2a - busy) : s.a2a;
    s.fsdp_exposed = std::max(0.0, s.fsdp - busy) + (s.layers > 0 ? s.fsdp / static_cast<double>(s.layers) : 0);
    s.fsdp_exposed = std::min(s.fsdp_exposed, s.fsdp);
  }
  size_t crit = 0;
  auto mb_time = [](const Stage& s) { return s.compute + s.rc + s.tp + s.a2a_exposed + s.fsdp_exposed; };
  for (size_t i = 1; i < st.size(); ++i)
    if (mb_time(st[i]) > mb_time(st[crit])) crit = i;
  const Stage& cs = st[crit];
  const double t_mb = mb_time(cs);
  const double m = static_cast<double>(p.num_micro_batches);
  const double pp = static_cast<double>(d.pp), v = static_cast<double>(d.interleave);
  // Step 2: pipeline bubble and point-to-point.
  const double bubble = d.pp > 1 ? (pp - 1) / v * t_mb : 0;
  double p2p = 0;
  std::string p2p_tier;
  if (d.pp > 1) {
    const int64_t stride = d.tp * d.dp_shard * d.dp_replicate;
    const CommCost one = CollectiveCost(topo, cal, Collective::kP2P, 2, stride,
                                        static_cast<double>(p.micro_batch * p.seq) * c.prof.hidden * 2 / t);
    p2p = (m * 2 * v + 2 * (pp - 1)) * one.seconds;
    p2p_tier = one.tier;
  }
  // Step 3: data-parallel gradient sync once per step, overlapped with the last backward.
  double sync = 0;
  std::string sync_tier;
  const double grad_dense = lora ? cs.lora : cs.dense, grad_exp = lora ? 0 : cs.expert;
  const int64_t dp = d.dp_replicate * d.dp_shard;
  if (p.zero_stage >= 3) {
    if (d.dp_replicate > 1) {
      const CommCost ar = CollectiveCost(topo, cal, Collective::kAllReduce, d.dp_replicate, d.dp_shard * d.tp,
                                         4 * (grad_dense / d.dp_shard + grad_exp / d.expert_fsdp));
      sync = ar.seconds;
      sync_tier = ar.tier;
    }
  } else if (dp > 1) {
    const Collective kind = p.zero_stage == 1 ? Collective::kReduceScatter : Collective::kAllReduce;
    const CommCost g = CollectiveCost(topo, cal, kind, dp, d.tp, 4 * grad_dense);
    sync = g.seconds;
    sync_tier = g.tier;
    if (p.zero_stage == 1) sync += CollectiveCost(topo, cal, Collective::kAllGather, dp, d.tp, 2 * grad_dense).seconds;
    const int64_t edp = d.expert_fsdp * d.dp_replicate;
    if (grad_exp > 0 && edp > 1)
      sync += CollectiveCost(topo, cal, Collective::kAllReduce, edp, d.ep, 4 * grad_exp).seconds;
  }
  const double sync_exposed = std::max(0.0, sync - cs.bwd);
  // Step 4: optimizer step (memory-bound).
  const double opt_dp = p.zero_stage >= 1 ? (p.zero_stage >= 3 ? static_cast<double>(d.dp_shard) : static_cast<double>(dp)) : 1.0;
  const double local_params = lora ? cs.lora / opt_dp : cs.dense / opt_dp + cs.expert / (p.zero_stage >= 3 ? d.expert_fsdp : 1);
  const double optimizer = local_params * c.k.adam_bytes_per_param / (c.hbm_bps * c.k.hbm_eff);
  // Step 5: terms, one per line; exposed parts add up to the step time.
  auto add = [&e](const std::string& name, double total, double exposed, const std::string& tier,
                  const std::string& formula) {
    if (total <= 0 && exposed <= 0) return;
    e.time_terms.push_back({name, total, exposed, tier, formula});
  };
  const std::string mstr = Fmt(m);
  for (const auto& [kind, secs] : cs.by_kind) {
    add("compute." + kind, m * secs, m * secs, "",
        mstr + " micro-batches x " + Fmt(secs * 1e3) + " ms fwd+bwd on stage " + std::to_string(crit));
    e.compute_s_by_kind[kind] = m * secs;
  }
  add("recompute", m * cs.rc, m * cs.rc, "", mstr + " x " + Fmt(cs.rc * 1e3) + " ms extra forward");
  add("comm.tp", m * cs.tp, m * cs.tp, tm.tp_ar().tier,
      mstr + " x " + Fmt(cs.tp / std::max(tm.tp_ar().seconds, 1e-30), 3) + " all-reduces x " +
          Fmt(tm.tp_ar().seconds * 1e3) + " ms (tp=" + std::to_string(d.tp) + ", not overlapped)");
  add("comm.ep_a2a", m * cs.a2a, m * cs.a2a_exposed, d.ep > 1 ? topo.tiers[TierForGroup(topo, d.ep)].name : "",
      mstr + " x " + Fmt(cs.a2a * 1e3) + " ms (dispatch+combine fwd+bwd per MoE layer, ep=" + std::to_string(d.ep) +
          ", imbalance " + Fmt(req.expert_imbalance) +
          (req.overlap_ep_comm ? ", overlapped with compute)" : ", not overlapped)"));
  add("comm.fsdp", m * cs.fsdp, m * cs.fsdp_exposed, fsdp_tier.empty() ? efsdp_tier : fsdp_tier,
      mstr + " x (AG fwd + AG bwd + RS) = " + Fmt(cs.fsdp * 1e3) + " ms, overlapped with " +
          Fmt((cs.compute + cs.rc) * 1e3) + " ms compute");
  add("bubble", bubble, bubble, "", "(p-1)/v * t_mb = " + Fmt(pp - 1) + "/" + Fmt(v) + " * " + Fmt(t_mb * 1e3) + " ms");
  add("comm.pp_p2p", p2p, p2p, p2p_tier, "(m*2v + 2(p-1)) sends of T*h*2/t bytes");
  add("comm.dp_sync", sync, sync_exposed, sync_tier, "grad sync once per step, overlapped with last backward");
  add("optimizer", optimizer, optimizer, "", Fmt(local_params / 1e9) + " G local params x " +
                                                 Fmt(c.k.adam_bytes_per_param) + " B / HBM");
  e.step_s = 0;
  for (const TimeTerm& x : e.time_terms) {
    e.step_s += x.exposed_s;
    if (x.name.rfind("comm.", 0) == 0) {
      e.exposed_comm_s += x.exposed_s;
      e.overlapped_comm_s += x.total_s - x.exposed_s;
    }
  }
  e.bubble_s = bubble;
  const double tokens = static_cast<double>(p.global_batch * p.seq);
  e.tokens_per_s = tokens / e.step_s;
  e.model_flops = tokens * c.prof.model_flops_per_token * (lora ? 2.0 : 3.0);
  e.mfu = e.model_flops / (e.step_s * static_cast<double>(d.world()) * c.peak_flops);
  if (mem_stage != 0) e.notes.push_back("memory peaks on pipeline stage " + std::to_string(mem_stage));
  return e;
}

Status CheckPlanAgainstModel(const CostContext& c, const Plan& p) {
  ONBOARD_RETURN_IF_ERROR(ValidatePlan(p, c.req->topology.num_devices, c.prof.experts, c.prof.min_heads,
                                       static_cast<int64_t>(c.prof.layers.size())));
  if (p.seq != c.prof.seq)
    return Status(ErrorCode::kBadInput, "plan seq=" + std::to_string(p.seq) + " differs from request seq=" +
                                            std::to_string(c.prof.seq));
  if (p.global_batch < 1)
    return Status(ErrorCode::kBadInput, "global_batch=" + std::to_string(p.global_batch) + " must be >= 1");
  return Status::Ok();
}

CostContext MakeCostContext(const PlanRequest& req) {
  CostContext c;
  c.req = &req;
  c.prof = BuildProfile(req.model, req.seq, req.dropout, req.attention_kernel == "unfused");
  const DeviceType& dev = req.topology.device;
  c.peak_flops = (req.compute_dtype == "fp8" && dev.tflops_fp8 > 0 ? dev.tflops_fp8 : dev.tflops_bf16) * 1e12;
  c.hbm_bps = dev.hbm_gbps * 1e9;
  if (req.mode == FinetuneMode::kLoRA)
    c.base_weight_bytes = req.base_dtype == "mxfp4" ? DTypeBytes(DType::kMXFP4) : req.base_dtype == "fp8" ? 1.0 : 2.0;
  c.global_batch_target = req.global_batch;
  return c;
}

}  // namespace onboard
