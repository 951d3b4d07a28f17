// Time of one decoder layer on one device for one micro-batch (search/layer_time.h): the mixer, the CP
// exchange and the host launches here, the channel in search/layer_time_channel.cpp. The step-time model
// that adds the layers up is search/cost_model.cpp. Units: seconds, bytes, FLOPs, FLOP/s, tokens.
//
// Legend: t = tp, c = cp, e = ep, p = pp, v = interleave, m = micro-batches per step,
// T = micro_batch*seq/c tokens of one micro-batch on one device, h = hidden, k = top_k,
// w = dispatch width (hidden or latent), E = routed experts, s = seq, P = GEMM peak FLOP/s (fp8 peak
// for fp8/mxfp8, fp4 peak for nvfp4), Pa = attention peak (bf16), both datasheet x the device's
// sustained tensor rate (SustainedTensorRate, cost_model.cpp: measured matmul share / gemm_eff_max,
// <= 1), HBM = HBM bytes/s * hbm_eff. Constants: CostConstants (cost_model.h) with their sources. Per
// micro-batch, per device, one layer:
//   GEMM time        = max(flops / (P * eff(m,n,k)), weight bytes / HBM)
//   eff(m,n,k)       = gemm_eff_max * cal * q / (1 + d0/m + d0/n + d0/k), q = fp8_gemm_eff (fp8, mxfp8),
//                      nvfp4_gemm_eff (nvfp4) or 1 (bf16)
//   dense GEMMs      : flops = T * dense_gemm_flops / t,   m = T, k = h, n = flops/(2 T h)
//   routed GEMMs     : R = T/t * k * imbalance token copies on the rank, E/e experts there,
//                      m = R / (E/e) tokens per expert (small!), padded up to gemm_tile_m,
//                      x grouped_gemm_eff, n = expert width, k = w
//   router           : router_passes * T/t * E bytes / HBM fwd, 2x bwd        (memory-bound)
//   permute+unpermute: permute_passes * R * w * 2 bytes / HBM fwd, 2x bwd     (memory-bound)
//   sort chunks      : all-to-all dispatcher with E/e > 1 local experts: + sort_chunks_passes * R * w * 2
//                      bytes / HBM fwd, 2x bwd (flex dispatchers: none)
//   fp8 row padding  : (req.fp8_expert_padding, fp8, dispatcher not HybridEP) Megatron-Core TEGroupedMLP's
//                      Fp8Padding / Fp8Unpadding: 2 * Rg * (w * dispatch bytes + h * 2) bytes / HBM fwd
//                      (copy the permuted input rows and the fc2 output rows, read + write), 1x bwd
//   attention core   : T * core_flops / t / (Pa * eff_kind)  fused kernels (bwd = attn_bwd_ratio x fwd);
//                      sliding window / sinks / GQA / DSA top-k are in core_flops (core/model_stats.cpp);
//                      MLA trains un-absorbed (K,V up-projected), so its core is softmax at d_qk/d_v
//                      unfused softmax: batched GEMMs on s x s + score traffic H/t*s*(8 [+5 dropout]) B/token
//   softmax exps     : fused softmax (not DSA): + T * scores/t / X fwd and again bwd (P recomputed), X = the
//                      device's SFU exponentials/s (hardware catalog: Blackwell 5e12, Blackwell Ultra
//                      10.7e12, Hopper 4.2e12), in series with the matmuls (NVIDIA "Making Softmax More
//                      Efficient with Blackwell Ultra": BMM2 waits for the softmax);
//                      scores = core_flops / (2 (d_qk + d_v))
//   elementwise      : elementwise_passes * kept activation bytes / HBM   (bwd = 2x)
//   quantisation     : quant_bytes * GEMM input elements / HBM, fwd (inputs) and bwd (output grads);
//                      quant_bytes = fp8_quant_bytes (fp8, mxfp8) or nvfp4_quant_bytes (nvfp4)
//   backward GEMMs   : 2x forward (full fine-tuning), 1x (LoRA: no weight grads for the frozen base)
//   output head      : the T x h x V/t GEMM (x 3 full, x 2 LoRA) + the loss's own HBM passes,
//                      traffic_bytes (PlanRequest::cross_entropy, search/cross_entropy_cost.h) x T x V/t
//   LoRA adapters    : dense (attention, dense / shared MLP): 2 * T * r * lora_params_per_rank / t FLOPs
//                      forward at P * eff * lora_gemm_eff, backward lora_bwd_ratio (2) x that: the adapters
//                      train, dX and dA, dB (LoRA, Hu et al. 2021, arXiv 2106.09685) (in the mixer);
//                      routed experts' (core/lora_targets.h AdaptsRoutedExperts, one adapter per expert):
//                      the same form over the rank's Rg copies, each through one expert's adapters,
//                      2 * Rg * r * lora_expert_params_per_rank / E / etp (in the channel)
//   routed wgrad     : max(flops / (P * eff), E/e * expert params * 2 * g / HBM), g = main-grad bytes
//                      (4 fp32, 2 bf16: grad_dtype): the wgrad GEMM accumulates into main_grad, read +
//                      write (TE GroupedLinear fuse_wgrad_accumulation, accumulate=True; DeepGEMM issue
//                      #125: grouped wgrad is memory-bound); memory-bound below m ~ g * P * eff / HBM
//                      tokens per expert
//   recompute        : full = one more forward of the block (incl. its TP collective, EP a2a);
//                      selective = attention core (softmax) / KDA conv+gates / MLA up-projections
//   TP               : per block 1 all-reduce fwd + 1 bwd of T*h*2 bytes (SP: RS+AG, same bytes)
//   TP comm overlap  : (tp_comm_overlap, TE userbuffers) per collective c beside the pass's GEMMs g:
//                      exposed = c/t + max(0, c - c/t - g) + tp_overlap_sm_tax * min(c - c/t, g)
//   expert TP (etp)  : each expert's FFN split over etp ranks: the rank runs R*etp copies (all-gathered)
//                      at width I/etp, E/e experts there; + AG of the copies and RS of the outputs over
//                      the etp group fwd, RS + AG bwd (bf16, R*w*etp elements), counted with the EP comm
//   EP all-to-all    : per MoE layer dispatch + combine, fwd (fp8 dispatch for fp8 / mxfp8 plans on flex
//                      dispatchers, else bf16; bf16 combine) and
//                      bwd (bf16 both), R*w bytes/elem each; NVLink inside the domain, then IB with
//                      per-node de-duplication (DeepEP/HybridEP: a token crosses to a node once);
//                      split by tier in search/ep_a2a_traffic.h: slow-tier copies per token =
//                      k(1-1/N) plain, D(1-1/N) deduplicated, D = measured expert_nodes_per_token or
//                      N(1-(1-1/N)^k), capped by max_route_nodes (DeepSeek-V3 report sec. 2.1.2, 3.2.2)
//                      exposed unless req.overlap_ep_comm
//   CP (c > 1)       : softmax ring = all-gather-shaped pass of K,V (T*cp_kv_elems/t*2 B per rank) fwd,
//                      K,V + dK,dV bwd, per step of c equal core steps (TE AttnFuncWithCPAndKVP2P),
//                      block transfer b: fwd (c-1) max(0, b - core/c) (the last core hides nothing),
//                      bwd 2 max(0, b - core_b/c) + (c-2) max(0, 2b - core_b/c) (K,V only, then
//                      K,V + dK,dV, then dK,dV only); all-gather: KV once fwd,
//                      reduce-scatter dKV bwd, exposed. KDA: (c-1) p2p hops of the fp32 state (HV*dk*dv)
//                      fwd and bwd, sequential, + one inter-chunk correction 2*T*state FLOPs.
//                      softmax ring output correction: c steps x cp_correction_passes * T * out_elems/t
//                      * 2 B / HBM fwd, 2x bwd (not hidden: it runs between the steps' kernels)
//                      DSA: all-gather of indexer keys + latent KV (dsa_gather_elems * 2 B), RS bwd.
//   RMSNorm recompute: (req.recompute_norms) per block not fully recomputed, one more norm forward:
//                      2 * T * act_norms/2 / rep_div bytes / HBM (read its input, write its output)
//   SwiGLU storage   : gated routed experts, C = T/t * imbalance * top_k copies of I elements:
//                      fp8_act_input_store: quantise the 2I-wide input fwd, dequantise bwd,
//                      3 bytes per element each (read 2 + write 1, read 1 + write 2) / HBM;
//                      MoE selective (moe_act): recompute = read the input (2I x 2 B, or 1 B stored
//                      in fp8) + write the output (I x 2 B) per copy / HBM
//   eager passes     : Megatron-Core's elementwise ops outside fused kernels, bytes / HBM (gpt-oss):
//                      unfused RoPE (YaRN attention factor != 1): T * (H + KV) * d / t x (20 fwd, 16 bwd) B;
//                      GLU clamp: copies x I x (16 fwd, 20 bwd; + 16 under moe_act recompute) B;
//                      prob-weighted fc2 bias: R x dispatch width x (12 fwd, 12 bwd) B, (28, 36) B with
//                      HybridEP's fp32 probs (Megatron-LM rope_utils.py, fused_bias_geglu.py, experts.py)
//   launch           : launch_s_per_layer (+ moe_launch_s_per_layer) per layer per micro-batch, + 2 x
//                      unfused_mixer_launches x launch_s_per_kernel (the unfused KDA prologue / DSA
//                      indexer kernels, fwd + bwd: search/fusion_cost.h)
//   expert launches  : eager (no full-iteration graph), per local expert (E/e), ops counted from TE's
//                      GroupedLinear (expert_host_ops.cpp: bf16 2 fwd / 4 bwd, fp8 per-tensor current
//                      scaling 10 / 12, mxfp8 4 / 6) at launch_s_per_kernel each. Forward, per MoE layer
//                      forward (again under full recompute): + max(0, fwd ops x E/e x launch_s_per_kernel
//                      - routed GEMM + quantise time): the dispatcher's device-to-host sync just before
//                      leaves the host no run-ahead. Backward (no sync: the host runs ahead): bwd ops x
//                      E/e x launch_s_per_kernel join the layer's launch time, exposed only where that
//                      exceeds the layer's GPU time. NVIDIA devices only (hardware catalog: Ascend's
//                      grouped matmul is one launch)
#include <algorithm>
#include <cmath>

#include "search/layer_time.h"

namespace onboard {

TimeModel::TimeModel(const CostContext& c, const Plan& p) : c_(c), p_(p), pol_(KindPolicies(c, p)) {
  const CostConstants& k = c.k;
  t_ = static_cast<double>(p.deg.tp);
  T_ = TokensPerRank(p);
  eff_ = k.gemm_eff_max * c.req->calibration.compute_efficiency * c.quantised_gemm_eff;
  hbm_ = c.hbm_bps * k.hbm_eff * c.req->calibration.memory_bound_efficiency;
  lora_ = p.mode == FinetuneMode::kLoRA;
  flex_ = p.ep_dispatcher != EpDispatcher::kAllToAll;
  // DeepEP / HybridEP dispatch fp8 (e4m3) tokens; an nvfp4 plan dispatches bf16 and quantises after.
  const bool fp8_dispatch = c.quantised && c.req->compute_dtype != Precision::kNVFP4;
  dispatch_bytes_ = fp8_dispatch && flex_ ? k.fp8_dispatch_bytes : k.combine_bytes;
  const Topology& topo = c.req->topology;
  const CostCalibration& cal = c.req->calibration;
  tp_ar_ = CollectiveCost(topo, cal, Collective::kAllReduce, p.deg.tp, 1, T_ * c.prof.hidden * 2);
}

double TimeModel::CoreEff(const LayerProfile& lp) const {
  if (lp.mixer == MixerKind::kDSA) return c_.k.sparse_attn_eff;
  if (lp.softmax) return c_.k.flash_attn_eff;
  return c_.k.linear_attn_eff;
}

// Fused softmax attention (not DSA): one exponential per score element on the SFUs, in series with
// the tensor-core matmuls (BMM1 -> softmax -> BMM2). Scores per token = core_flops / (2 (d_qk + d_v)),
// d_qk + d_v = cp_kv_elems / H for MLA (K, V per head), 2 attn_out_elems / H otherwise (d_qk = d_v).
double TimeModel::SoftmaxExpSeconds(const LayerProfile& lp) const {
  if (!lp.softmax || lp.mixer == MixerKind::kDSA || c_.exp_per_s <= 0 || lp.heads <= 0) return 0;
  const double H = static_cast<double>(lp.heads);
  const double dqk_dv = lp.mixer == MixerKind::kMLA ? lp.cp_kv_elems / H : 2 * lp.attn_out_elems / H;
  if (dqk_dv <= 0) return 0;
  return T_ * lp.core_flops / (2 * dqk_dv) / t_ / (c_.exp_per_s * c_.req->calibration.compute_efficiency);
}

// Exposed seconds of one block's TP all-reduce (SP: all-gather + reduce-scatter) in a pass whose
// GEMMs take `gemm` s. Not overlapped: all of it. tp_comm_overlap (TE userbuffers): the collective is
// split into t chunks pipelined with the GEMM, so one chunk (c/t) stays exposed, plus what the GEMM
// cannot cover, plus the SMs the pipelined reduce-scatter takes from the GEMM it overlaps.
double TimeModel::TpExposed(double gemm) const {
  const double c = tp_ar_.seconds;
  if (!p_.tp_comm_overlap || c <= 0) return c;
  return c / t_ + std::max(0.0, c - c / t_ - gemm) + c_.k.tp_overlap_sm_tax * std::min(c - c / t_, gemm);
}

LayerTime TimeModel::Layer(size_t l) const {
  LayerTime out;
  const LayerProfile& lp = c_.prof.layers[l];
  Mixer(lp, &out.mixer);
  Channel(lp, &out.channel);
  // Step 4: host launch time not hidden behind the GPU (eager launches), and the MoE dispatcher's
  // device-to-host sync (always exposed without a full-iteration graph).
  const CostConstants& k = c_.k;
  const BlockTime &a = out.mixer, &b = out.channel;
  const double gpu = a.fwd + a.bwd + a.rc + b.fwd + b.bwd + b.rc;
  const double launch = (c_.host_fed && p_.cuda_graph == CudaGraph::kNone
                             ? k.launch_s_per_layer + 2 * lp.unfused_mixer_launches * k.launch_s_per_kernel
                             : 0) +
                        b.expert_launch_bwd;
  // Both repeat per forward pass of the MoE block: a recomputed forward dispatches again.
  const double forwards = pol_[lp.channel_kind_id] == Recompute::kFull ? 2 : 1;
  const double sync =
      c_.host_fed && lp.top_k > 0 && p_.cuda_graph != CudaGraph::kFull ? k.moe_sync_s_per_layer : 0;
  out.channel.host = std::max(0.0, launch - gpu) + forwards * sync + forwards * b.expert_launch;
  return out;
}

double TimeModel::HeadTime() const {
  const double flops = T_ * c_.prof.head_flops / t_;
  const double g = Gemm(flops, T_, c_.prof.vocab / t_, c_.prof.hidden, flops / T_, 1.0);
  const double ce = c_.loss->Traffic(p_.deg.tp) * T_ * c_.prof.vocab / t_ / hbm_;  // the loss's own passes
  return g * (1 + (lora_ ? 1.0 : 2.0)) + ce;
}

// CollectiveCost in seconds, memoised for this plan: every layer of a kind asks the same question
// (same group, same bytes), and this is the search's hot path. Same inputs, same answer.
double TimeModel::Coll(Collective kind, int64_t n, int64_t stride, double bytes, double beyond) const {
  for (const Memo& m : memo_)
    if (m.kind == kind && m.n == n && m.stride == stride && m.bytes == bytes && m.beyond == beyond)
      return m.seconds;
  const double sec =
      CollectiveCost(c_.req->topology, c_.req->calibration, kind, n, stride, bytes, beyond).seconds;
  if (memo_.size() < 16) memo_.push_back({kind, n, stride, bytes, beyond, sec});
  return sec;
}

// Step 1: mixer = projections + attention core + elementwise (+ CP exchange).
void TimeModel::Mixer(const LayerProfile& lp, BlockTime* mx) const {
  const CostConstants& k = c_.k;
  const double h = lp.hidden, s = static_cast<double>(p_.seq);
  const Recompute rm = pol_[lp.mixer_kind_id];
  const double bwd_gemm = lora_ ? 1.0 : 2.0;
  const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
  const double attn_peak = c_.attn_peak_flops * c_.req->calibration.compute_efficiency;
  const double mflops = T_ * lp.mixer_gemm_flops / t_;
  const double mg = Gemm(mflops, T_, mflops / (2 * T_ * h), h, mflops / T_, 1.0);
  double core_f = 0, core_b = 0;
  if (lp.softmax && c_.prof.unfused_attention && lp.mixer != MixerKind::kDSA) {
    const double flops = T_ * lp.core_flops / t_ * (2 * s / (s + 1));  // full s x s, no causal skip
    const double hd = h / std::max<double>(lp.heads, 1);
    const double g = Gemm(flops, s, s, hd, 0, c_.attn_peak_flops / c_.peak_flops);
    const double passes = k.unfused_score_passes + (c_.prof.dropout > 0 ? k.unfused_dropout_passes : 0);
    core_f = g + T_ * (lp.heads / t_) * s * passes / hbm_;
    core_b = 2 * core_f;
  } else {
    core_f = T_ * lp.core_flops / t_ / (attn_peak * CoreEff(lp));
    core_b = k.attn_bwd_ratio * core_f;
    const double ex = SoftmaxExpSeconds(lp);  // BMM2 waits for the SFU's exponentials
    core_f += ex;
    core_b += ex;  // backward recomputes P = exp(S - LSE) once
  }
  const double mix_bytes =
      (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div + lp.act_mixer / t_;
  const double mel = k.elementwise_passes * T_ * mix_bytes / hbm_;
  const double quant = Quant(T_ * lp.mixer_gemm_inputs / t_);
  const double lora_f = lora_ ? 2 * T_ * static_cast<double>(p_.lora_rank) * lp.lora_params_per_rank / t_ /
                                    (c_.peak_flops * eff_ * k.lora_gemm_eff)
                              : 0;
  const double rope_elems = T_ * lp.rope_unfused_elems / t_;  // unfused RoPE (0 when TE fuses it)
  mx->fwd = mg + core_f + mel + quant + lora_f + rope_elems * k.rope_unfused_fwd_bytes / hbm_;
  mx->bwd = bwd_gemm * mg + core_b + 2 * mel + quant + k.lora_bwd_ratio * lora_f +
            rope_elems * k.rope_unfused_bwd_bytes / hbm_;
  if (rm == Recompute::kFull) {
    mx->rc = mx->fwd;
  } else if (rm == Recompute::kSelective) {
    if (lp.mla_up_flops > 0) {
      const double f = T_ * lp.mla_up_flops / t_;
      mx->rc = Gemm(f, T_, f / (2 * T_ * h), h, 0, 1.0);
    } else if (lp.softmax) {
      mx->rc = core_f;
    } else {
      mx->rc = k.kda_selective_share * mel;
    }
  }
  if (rm != Recompute::kFull) mx->rc += NormRecompute(lp);
  mx->tp = TpExposed(mg) + TpExposed(bwd_gemm * mg) + (rm == Recompute::kFull ? TpExposed(mg) : 0);
  mx->tp_total = (2 + (rm == Recompute::kFull ? 1 : 0)) * tp_ar_.seconds;
  ContextParallel(lp, core_f, rm == Recompute::kFull, mx);
}

// Step 2: what CP ranks exchange for this mixer, and the part not hidden behind the core.
void TimeModel::ContextParallel(const LayerProfile& lp, double core_f, bool recomputed, BlockTime* mx) const {
  const int64_t cp = p_.deg.cp;
  if (cp <= 1) return;
  const CostCalibration& cal = c_.req->calibration;
  const double n = static_cast<double>(cp);
  double fwd = 0, bwd = 0, hidden_f = 0, hidden_b = 0;
  if (lp.kda_state_elems > 0) {
    // Sequential hand-off of the fp32 state, forward then backward, + one correction pass.
    const double hop = Coll(Collective::kP2P, 2, p_.deg.tp, lp.kda_state_elems / t_ * 4);
    const double fix = 2 * T_ * lp.kda_state_elems / t_ /
                       (c_.attn_peak_flops * cal.compute_efficiency * c_.k.linear_attn_eff);
    fwd = (n - 1) * hop + fix;
    bwd = (n - 1) * hop + 2 * fix;
  } else if (lp.dsa_gather_elems > 0) {
    const double bytes = n * T_ * lp.dsa_gather_elems * 2;  // latent is shared by the heads: not TP-split
    fwd = Coll(Collective::kAllGather, cp, p_.deg.tp, bytes);
    bwd = Coll(Collective::kReduceScatter, cp, p_.deg.tp, bytes);
  } else if (lp.cp_kv_elems > 0) {
    const double bytes = n * T_ * lp.cp_kv_elems / t_ * 2;  // K,V of every CP rank's chunk
    // The ring passes K,V by send/recv to the next CP rank (TE AttnFuncWithCPAndKVP2P): each step
    // waits for its slowest hop, one link; all-gather is NCCL's collective.
    const Collective kind = p_.cp_comm == CpComm::kRing ? Collective::kRingP2P : Collective::kAllGather;
    fwd = Coll(kind, cp, p_.deg.tp, bytes);
    bwd = Coll(kind, cp, p_.deg.tp, 2 * bytes);  // KV + dKV
    if (p_.cp_comm == CpComm::kRing) {
      // Per step of cp equal steps (load-balanced causal chunks), each waiting for its transfer
      // (TE AttnFuncWithCPAndKVP2P). Forward: step i+1's K,V beside step i's core (`if i <
      // (cp_size - 1)`), the last core hides nothing. Backward: every step sends, step 0 K,V only,
      // steps 1..cp-2 K,V + dK,dV, step cp-1 dK,dV only. c = one block's transfer.
      const double c = fwd / (n - 1), f = core_f / n, fb = c_.k.attn_bwd_ratio * core_f / n;
      hidden_f = fwd - (n - 1) * std::max(0.0, c - f);
      hidden_b = bwd - 2 * std::max(0.0, c - fb) - (n - 2) * std::max(0.0, 2 * c - fb);
      const double fix = n * c_.k.cp_correction_passes * T_ * lp.attn_out_elems / t_ * 2 / hbm_;
      mx->fwd += fix;
      mx->bwd += 2 * fix;
      if (recomputed) mx->rc += fix;
    } else {
      bwd = Coll(Collective::kReduceScatter, cp, p_.deg.tp, bytes);
    }
  }
  const double exp_f = std::max(0.0, fwd - hidden_f), exp_b = std::max(0.0, bwd - hidden_b);
  mx->cp_total = fwd + bwd + (recomputed ? fwd : 0);
  mx->cp = exp_f + exp_b + (recomputed ? exp_f : 0);
}

// RMSNorm recompute of one block (req.recompute_norms): one more norm forward over its input.
double TimeModel::NormRecompute(const LayerProfile& lp) const {
  if (!c_.req->recompute_norms) return 0;
  const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
  return 2 * T_ * (lp.act_norms / 2) / rep_div / hbm_;
}

std::vector<int64_t> StageStarts(const Plan& p, const std::vector<LayerTime>& lt) {
  if (!p.stage_layer_starts.empty()) return p.stage_layer_starts;
  const int64_t chunks = p.deg.pp * p.deg.interleave;
  if (chunks == 1) return {0};
  std::vector<double> cost(lt.size());
  for (size_t i = 0; i < lt.size(); ++i) cost[i] = lt[i].total();
  return BalancedSplit(cost, chunks);
}

// Every layer's time: one Layer() per class of equal layers (ModelProfile::class_first), copied to
// the others (same inputs, same arithmetic, same answer; the search's hot path). A class of bf16 first /
// last layers (LayerProfile::bf16_gemms) takes `bf16`'s, the plan's TimeModel over CostContext::bf16_twin.
std::vector<LayerTime> AllLayers(const TimeModel& tm, const ModelProfile& prof, const TimeModel* bf16) {
  std::vector<LayerTime> per_class;
  per_class.reserve(prof.class_first.size());
  for (size_t first : prof.class_first)
    per_class.push_back(bf16 != nullptr && prof.layers[first].bf16_gemms ? bf16->Layer(first)
                                                                         : tm.Layer(first));
  std::vector<LayerTime> lt;
  lt.reserve(prof.layers.size());
  for (const LayerProfile& lp : prof.layers) lt.push_back(per_class[lp.class_id]);
  return lt;
}

}  // namespace onboard
