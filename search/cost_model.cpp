// Step-time model of one plan. Units: seconds, bytes, FLOPs, FLOP/s, tokens.
//
// Legend: t = tp, c = cp, e = ep, p = pp, v = interleave, m = micro-batches per step,
// T = micro_batch*seq/c tokens of one micro-batch on one device, h = hidden, k = top_k,
// w = dispatch width (hidden or latent), E = routed experts, s = seq, P = GEMM peak FLOP/s (fp8 peak
// for fp8/mxfp8), Pa = attention peak (bf16), HBM = HBM bytes/s * hbm_eff. Constants: CostConstants
// (cost_model.h) with their sources. Per micro-batch, per device, one layer:
//   GEMM time        = max(flops / (P * eff(m,n,k)), weight bytes / HBM)
//   eff(m,n,k)       = gemm_eff_max * cal * (fp8 ? fp8_gemm_eff : 1) / (1 + d0/m + d0/n + d0/k)
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
//   fp8 quantisation : fp8_quant_bytes * GEMM input elements / HBM, fwd (inputs) and bwd (output grads)
//   backward GEMMs   : 2x forward (full fine-tuning), 1x (LoRA: no weight grads for the frozen base)
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
//   EP all-to-all    : per MoE layer dispatch + combine, fwd (fp8 or bf16 dispatch, bf16 combine) and
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
// Per step:
//   stage time/mb    = sum over its layers (+ head, MTP layers + their head on the last stage)
//                      + exposed FSDP per mb
//   step             = m * t_mb + bubble + p2p + exposed DP sync + optimizer
//   bubble           = (p-1)/v * t_mb                      (1F1B: (p-1)/(m+p-1) of the step)
//   PP p2p           = (m*2v + 2(p-1)) sends of T*h*2/t bytes (blocking: batch_p2p_comm); interleaved with
//                      overlap_p2p_comm (req.overlap_pp_p2p: Megatron-LM default with vp > 1, Megatron-Bridge
//                      CommOverlapConfig / NeMo 2 MegatronCommOverlapCallback when pp > 1 and vp > 1):
//                      exposed = 2(p-1) x one + m*2v x max(0, one - t_mb/(2v)) (async isend/irecv behind a
//                      chunk pass)
//   DualPipe         : bubble = (p/2 - 1)(F&B + B - 3W), F&B = t_mb, B = W = (bwd + recompute)/2
//                      (DeepSeek-V3 report Table 2); EP all-to-all overlapped with the paired chunk
//                      (as overlap_ep_comm, with its SM tax); PP sends hidden; rank r = mean of stages
//                      r and p-1-r in time, their sum in parameters
//   FSDP per mb      = AG weights fwd + AG bwd + RS grads; exposed = max(0, comm - compute) + comm/layers
//   DP sync per step = replica all-reduce (HSDP) / DDP all-reduce / ZeRO-1 (distributed optimizer)
//                      RS of grads (fp32; bf16 with grad_dtype bf16) + AG
//                      of bf16 params over dp*c, overlapped with the last micro-batch's backward
//                      (experts: over the expert-DP group); LoRA: the adapters' grads only, the routed
//                      experts' adapters over the expert-DP group, RS over expert-FSDP, like the experts
//   optimizer        = local params * (2 * (4 + moments) + grad + 2) / HBM: fp32 master and the m, v moments
//                      (8 B fp32, 4 B bf16: optimizer_dtype) read and written, the grad read (4 B, 2 B with
//                      grad_dtype bf16), the bf16 weight written: 30 B all fp32, 20 B Bridge's precision-
//                      aware recipes, 22 B the DeepSeek-V3 report's bf16 moments beside fp32 grads
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "search/cost_model.h"
#include "search/ep_a2a_traffic.h"

namespace onboard {
namespace {

// The request's measured routing (expert_nodes_per_token, max_route_nodes) with the plan's dispatcher.
EpRouting EpRoutingOf(const PlanRequest& req, const Plan& p) {
  return {req.expert_nodes_per_token, req.max_route_nodes, p.ep_dispatcher};
}

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

struct BlockTime {
  double fwd = 0, bwd = 0, rc = 0;   // compute, seconds per micro-batch
  double tp = 0, tp_total = 0;       // TP comm (fwd + bwd + recompute): exposed, and in all
  double a2a = 0;                    // EP all-to-all (fwd + bwd + recompute)
  double cp = 0, cp_total = 0;       // CP exchange: exposed after overlap with the core, and in all
  double host = 0;                   // exposed host launch / dispatcher-sync time
  double expert_launch = 0;          // exposed per-expert launches after the dispatcher's sync (fwd)
  double expert_launch_bwd = 0;      // host seconds of the per-expert backward ops (hidden where it can)
};

struct LayerTime {
  BlockTime mixer, channel;
  double total() const {
    return mixer.fwd + mixer.bwd + mixer.rc + mixer.tp + mixer.cp + channel.fwd + channel.bwd + channel.rc +
           channel.tp + channel.a2a + channel.host;
  }
};

// `v` to `prec` significant digits, as an ostream with precision(prec) prints it (%g; snprintf
// because a stream per number was a tenth of the search's time).
std::string Fmt(double v, int prec = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

class TimeModel {
 public:
  TimeModel(const CostContext& c, const Plan& p) : c_(c), p_(p), pol_(KindPolicies(c, p)) {
    const CostConstants& k = c.k;
    t_ = static_cast<double>(p.deg.tp);
    T_ = TokensPerRank(p);
    eff_ = k.gemm_eff_max * c.req->calibration.compute_efficiency * (c.fp8 ? k.fp8_gemm_eff : 1.0);
    hbm_ = c.hbm_bps * k.hbm_eff * c.req->calibration.memory_bound_efficiency;
    lora_ = p.mode == FinetuneMode::kLoRA;
    flex_ = p.ep_dispatcher != EpDispatcher::kAllToAll;
    dispatch_bytes_ = c.fp8 && flex_ ? k.fp8_dispatch_bytes : k.combine_bytes;
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
    if (lp.mixer == MixerKind::kDSA) return c_.k.sparse_attn_eff;
    if (lp.softmax) return c_.k.flash_attn_eff;
    return c_.k.linear_attn_eff;
  }

  // Fused softmax attention (not DSA): one exponential per score element on the SFUs, in series with
  // the tensor-core matmuls (BMM1 -> softmax -> BMM2). Scores per token = core_flops / (2 (d_qk + d_v)),
  // d_qk + d_v = cp_kv_elems / H for MLA (K, V per head), 2 attn_out_elems / H otherwise (d_qk = d_v).
  double SoftmaxExpSeconds(const LayerProfile& lp) const {
    if (!lp.softmax || lp.mixer == MixerKind::kDSA || c_.exp_per_s <= 0 || lp.heads <= 0) return 0;
    const double H = static_cast<double>(lp.heads);
    const double dqk_dv = lp.mixer == MixerKind::kMLA ? lp.cp_kv_elems / H : 2 * lp.attn_out_elems / H;
    if (dqk_dv <= 0) return 0;
    return T_ * lp.core_flops / (2 * dqk_dv) / t_ / (c_.exp_per_s * c_.req->calibration.compute_efficiency);
  }

  // fp8 quantisation of `elems` GEMM input elements (one pass).
  double Quant(double elems) const { return c_.fp8 ? c_.k.fp8_quant_bytes * elems / hbm_ : 0; }

  // Exposed seconds of one block's TP all-reduce (SP: all-gather + reduce-scatter) in a pass whose
  // GEMMs take `gemm` s. Not overlapped: all of it. tp_comm_overlap (TE userbuffers): the collective is
  // split into t chunks pipelined with the GEMM, so one chunk (c/t) stays exposed, plus what the GEMM
  // cannot cover, plus the SMs the pipelined reduce-scatter takes from the GEMM it overlaps.
  double TpExposed(double gemm) const {
    const double c = tp_ar_.seconds;
    if (!p_.tp_comm_overlap || c <= 0) return c;
    return c / t_ + std::max(0.0, c - c / t_ - gemm) + c_.k.tp_overlap_sm_tax * std::min(c - c / t_, gemm);
  }

  LayerTime Layer(size_t l) const {
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

  double HeadTime() const {
    const double flops = T_ * c_.prof.head_flops / t_;
    const double g = Gemm(flops, T_, c_.prof.vocab / t_, c_.prof.hidden, flops / T_, 1.0);
    const double ce = 4 * 4 * T_ * c_.prof.vocab / t_ / hbm_;  // fp32 logits: softmax + grad passes
    return g * (1 + (lora_ ? 1.0 : 2.0)) + ce;
  }

  const CommCost& tp_ar() const { return tp_ar_; }

  // CollectiveCost in seconds, memoised for this plan: every layer of a kind asks the same question
  // (same group, same bytes), and this is the search's hot path. Same inputs, same answer.
  double Coll(Collective kind, int64_t n, int64_t stride, double bytes, double beyond = 1.0) const {
    for (const Memo& m : memo_)
      if (m.kind == kind && m.n == n && m.stride == stride && m.bytes == bytes && m.beyond == beyond)
        return m.seconds;
    const double sec =
        CollectiveCost(c_.req->topology, c_.req->calibration, kind, n, stride, bytes, beyond).seconds;
    if (memo_.size() < 16) memo_.push_back({kind, n, stride, bytes, beyond, sec});
    return sec;
  }

 private:
  // Step 1: mixer = projections + attention core + elementwise (+ CP exchange).
  void Mixer(const LayerProfile& lp, BlockTime* mx) const {
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
    const double mix_bytes = (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div + lp.act_mixer / t_;
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
  void ContextParallel(const LayerProfile& lp, double core_f, bool recomputed, BlockTime* mx) const {
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

  // Step 3: channel = dense MLP / shared experts / router / latent + routed experts.
  void Channel(const LayerProfile& lp, BlockTime* ch) const {
    const CostConstants& k = c_.k;
    const double h = lp.hidden;
    const Recompute rc = pol_[lp.channel_kind_id];
    const double bwd_gemm = lora_ ? 1.0 : 2.0;
    const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
    const double cflops = T_ * (lp.dense_gemm_flops - lp.mixer_gemm_flops) / t_;
    const double cg = Gemm(cflops, T_, cflops / (2 * T_ * h), h, cflops / T_, 1.0);
    double routed = 0, routed_wgrad = 0, moe_mem = 0, pad = 0, a2a_f = 0, a2a_b = 0, routed_lora_f = 0,
           routed_lora_b = 0, quant = Quant(T_ * lp.channel_gemm_inputs / t_);
    EagerPasses eager;
    if (lp.top_k > 0 && lp.experts > 0) {
      const double imb = c_.req->expert_imbalance;
      const double R = T_ / t_ * static_cast<double>(lp.top_k) * imb;
      // Expert TP (etp ranks share each expert, Megatron MoE folding): the dispatched copies are
      // all-gathered over the etp group, so a rank runs Rg = R * etp copies at expert width / etp.
      const double etp = static_cast<double>(p_.deg.etp), Rg = R * etp;
      const double per_rank = static_cast<double>(lp.experts) / static_cast<double>(p_.deg.ep);
      const double m_e = Rg / per_rank;
      const double padded = std::ceil(m_e / k.gemm_tile_m) * k.gemm_tile_m / std::max(m_e, 1.0);
      const double each = lp.expert_params_each / etp;  // this rank's share of one expert
      const double wbytes = per_rank * each * c_.base_weight_bytes;
      const double ge = k.grouped_gemm_eff * c_.req->calibration.grouped_gemm_efficiency;
      routed = Gemm(Rg * 2 * each * padded, m_e, lp.expert_inter / etp, lp.dispatch_width, wbytes, ge);
      // Weight grads accumulate into main_grad (TE GroupedLinear fuse_wgrad_accumulation): each
      // expert's wgrad GEMM reads and writes its grad buffer, memory-bound when few tokens reach it.
      routed_wgrad = lora_ ? 0
                           : Gemm(Rg * 2 * each * padded, m_e, lp.expert_inter / etp, lp.dispatch_width,
                                  per_rank * each * 2 * GradBytes(), ge);
      const double sort = !flex_ && p_.deg.ep > 1 && per_rank > 1 ? k.sort_chunks_passes : 0.0;
      moe_mem =
          (k.router_passes * T_ / t_ * static_cast<double>(lp.experts) +
           (k.permute_passes + sort) * R * lp.dispatch_width * 2 + sort * (Rg - R) * lp.dispatch_width * 2) /
          hbm_;  // permute before the dispatch (R copies), the sort after the ETP gather (Rg)
      pad = Fp8RowPadding(Rg, lp);
      // The routed experts' adapters (LoRA, layers without a shared expert): every copy passes one
      // expert's adapters, r * (in + out) per adapted matrix, split over etp like the expert.
      const double adapters = lora_ ? 2 * Rg * static_cast<double>(p_.lora_rank) *
                                          lp.lora_expert_params_per_rank / static_cast<double>(lp.experts) /
                                          etp / (c_.peak_flops * eff_ * k.lora_gemm_eff)
                                    : 0;
      routed_lora_f = adapters;  // forward seconds; backward as the dense adapters'
      routed_lora_b = k.lora_bwd_ratio * adapters;
      const double routed_quant = Quant(T_ / t_ * imb * RoutedGemmInputs(lp, p_.deg.etp));
      quant += routed_quant;
      ch->expert_launch = ExpertLaunchExposed(per_rank, routed + routed_quant);
      ch->expert_launch_bwd = ExpertHostSeconds(per_rank, c_.expert_ops.bwd);
      eager = EagerExpertPasses(lp, R);
      const double elems = R * lp.dispatch_width;
      if (p_.deg.ep > 1) {
        const double f = CrossNodeFactor(lp);
        auto a2a = [&](double bytes) { return Coll(Collective::kAllToAll, p_.deg.ep, p_.deg.etp, bytes, f); };
        a2a_f = a2a(elems * dispatch_bytes_) + a2a(elems * k.combine_bytes);
        a2a_b = 2 * a2a(elems * k.combine_bytes);
      }
      if (p_.deg.etp > 1) {  // ETP: all-gather the received tokens, reduce-scatter the outputs (bf16);
                             // backward: reduce-scatter dX, all-gather dY (MoEAlltoAllTokenDispatcher)
        const double ag = Coll(Collective::kAllGather, p_.deg.etp, 1, etp * elems * k.combine_bytes);
        const double rs = Coll(Collective::kReduceScatter, p_.deg.etp, 1, etp * elems * k.combine_bytes);
        a2a_f += ag + rs;
        a2a_b += ag + rs;
      }
    }
    const double ch_bytes = (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div +
                            lp.act_channel / t_ +
                            RoutedActBytes(lp, p_.deg.etp) * c_.req->expert_imbalance / t_;
    const double cel = k.elementwise_passes * T_ * ch_bytes / hbm_;
    const double store = SwiGluStore(lp);
    ch->fwd = cg + routed + cel + moe_mem + pad + quant + store + routed_lora_f + eager.fwd;
    ch->bwd = bwd_gemm * cg + routed + routed_wgrad + 2 * (cel + moe_mem) + pad + quant + store +
              routed_lora_b + eager.bwd;
    if (rc == Recompute::kFull) ch->rc = ch->fwd;
    else if (rc == Recompute::kSelective)  // expert activation functions (moe_act), the clamp with them
      ch->rc = GatedRoutedExperts(lp) ? SwiGluRecompute(lp) + eager.clamp_fwd : cel;
    if (rc != Recompute::kFull) ch->rc += NormRecompute(lp);
    ch->tp = TpExposed(cg) + TpExposed(bwd_gemm * cg) + (rc == Recompute::kFull ? TpExposed(cg) : 0);
    ch->tp_total = (2 + (rc == Recompute::kFull ? 1 : 0)) * tp_ar_.seconds;
    ch->a2a = a2a_f + a2a_b + (rc == Recompute::kFull ? a2a_f : 0);
  }

  // Seconds of one pass of Megatron-Core TEGroupedMLP's fp8 row padding for `rows` expert rows: TE
  // grouped GEMMs need each expert's rows aligned (16, MXFP8 32), so where neither the router
  // (moe_router_padding_for_quantization) nor HybridEP's fused permute padded them, Fp8Padding copies the
  // permuted input into an aligned buffer and Fp8Unpadding copies the fc2 output back (Megatron-LM
  // experts.py, skip_routed_expert_padding in moe_utils.py). Forward: both copies, read + write; backward:
  // their autograd twins move the same bytes (dY padded, dX unpadded). Uniform-random counts are almost
  // never all aligned, so TE's early return (m_splits already aligned) is not counted.
  double Fp8RowPadding(double rows, const LayerProfile& lp) const {
    if (!c_.fp8 || !c_.req->fp8_expert_padding || p_.ep_dispatcher == EpDispatcher::kHybridEP) return 0;
    return 2 * rows * (lp.dispatch_width * dispatch_bytes_ + lp.hidden * c_.k.combine_bytes) / hbm_;
  }

  // Host seconds of `ops` stream operations per local expert; 0 under a full-iteration graph or where
  // grouped GEMMs are one launch.
  double ExpertHostSeconds(double local_experts, double ops) const {
    if (!c_.host_fed || !c_.per_expert_launches || p_.cuda_graph == CudaGraph::kFull) return 0;
    return ops * local_experts * c_.k.launch_s_per_kernel;
  }

  // Host time of the per-expert ops of one forward (expert_host_ops.h) not hidden behind their `gpu`
  // seconds: the dispatcher's device-to-host sync just before leaves the host no run-ahead.
  double ExpertLaunchExposed(double local_experts, double gpu) const {
    return std::max(0.0, ExpertHostSeconds(local_experts, c_.expert_ops.fwd) - gpu);
  }

  // Seconds of the eager elementwise passes around the routed experts of R dispatched copies (Megatron-Core
  // TEGroupedMLP outside its fused kernels): the GLU clamp over R x I (under expert TP: R etp gathered
  // copies at width I / etp) and the prob-weighted fc2 bias over R x the dispatch width, in fp32 where
  // HybridEP hands fp32 probs over.
  struct EagerPasses {
    double fwd = 0, bwd = 0, clamp_fwd = 0;
  };
  EagerPasses EagerExpertPasses(const LayerProfile& lp, double R) const {
    const CostConstants& k = c_.k;
    const bool fp32_probs = p_.ep_dispatcher == EpDispatcher::kHybridEP;
    const double bias = R * lp.expert_bias_elems / hbm_, clamp_elems = R * lp.clamp_elems;
    EagerPasses e;
    e.clamp_fwd = clamp_elems * k.clamp_fwd_bytes / hbm_;
    e.fwd = e.clamp_fwd + bias * (fp32_probs ? k.expert_bias_fp32_fwd_bytes : k.expert_bias_fwd_bytes);
    e.bwd = clamp_elems * k.clamp_bwd_bytes / hbm_ +
            bias * (fp32_probs ? k.expert_bias_fp32_bwd_bytes : k.expert_bias_bwd_bytes);
    return e;
  }

  // Bytes per element of the main-grad buffer the weight-grad GEMMs accumulate into (Megatron DDP:
  // fp32, bf16 with grad_reduce_in_fp32=False: Plan::grad_dtype).
  double GradBytes() const { return p_.grad_dtype == Precision::kBF16 ? 2.0 : 4.0; }

  // RMSNorm recompute of one block (req.recompute_norms): one more norm forward over its input.
  double NormRecompute(const LayerProfile& lp) const {
    if (!c_.req->recompute_norms) return 0;
    const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
    return 2 * T_ * (lp.act_norms / 2) / rep_div / hbm_;
  }

  // SwiGLU copies of gated routed experts on this rank per micro-batch, times the expert width I.
  double SwiGluElems(const LayerProfile& lp) const {
    return T_ / t_ * c_.req->expert_imbalance * static_cast<double>(lp.top_k) * lp.expert_inter;
  }

  // fp8_act_input_store: the 2I-wide SwiGLU input quantised to fp8 (one direction's pass).
  double SwiGluStore(const LayerProfile& lp) const {
    if (!c_.req->fp8_act_input_store || !GatedRoutedExperts(lp)) return 0;
    return 3 * 2 * SwiGluElems(lp) / hbm_;
  }

  // MoE selective (moe_act): the SwiGLU output recomputed from its stored input.
  double SwiGluRecompute(const LayerProfile& lp) const {
    const double in_bytes = c_.req->fp8_act_input_store ? 1.0 : 2.0;
    return SwiGluElems(lp) * (2 * in_bytes + 2) / hbm_;
  }

  // Share of a token's top_k copies that cross past the first tier, relative to a plain all-to-all
  // of uniform picks (search/ep_a2a_traffic.h): group-limited routing (topk_groups), and with
  // DeepEP/HybridEP the distinct remote nodes a token reaches (measured expert_nodes_per_token, or
  // N(1-(1-1/N)^k) for k uniform picks), capped by node-limited routing (max_route_nodes).
  double CrossNodeFactor(const LayerProfile& lp) const {
    return EpA2aTraffic(lp.top_k, p_.deg.ep, p_.deg.etp, c_.req->topology.tiers.front().group_size,
                        lp.cross_node_fraction, EpRoutingOf(*c_.req, p_))
        .beyond_first_tier;
  }

  const CostContext& c_;
  const Plan& p_;
  const std::vector<Recompute> pol_;  // recompute policy per ModelProfile::kinds entry
  double t_ = 1, T_ = 0, eff_ = 0, hbm_ = 0, dispatch_bytes_ = 2;
  bool lora_ = false, flex_ = false;
  CommCost tp_ar_;
  struct Memo {
    Collective kind;
    int64_t n, stride;
    double bytes, beyond, seconds;
  };
  mutable std::vector<Memo> memo_;
};

std::vector<int64_t> StageStarts(const Plan& p, const std::vector<LayerTime>& lt) {
  if (!p.stage_layer_starts.empty()) return p.stage_layer_starts;
  const int64_t chunks = p.deg.pp * p.deg.interleave;
  if (chunks == 1) return {0};
  std::vector<double> cost(lt.size());
  for (size_t i = 0; i < lt.size(); ++i) cost[i] = lt[i].total();
  return BalancedSplit(cost, chunks);
}

// Every layer's time: one Layer() per class of equal layers (ModelProfile::class_first), copied to
// the others (same inputs, same arithmetic, same answer; the search's hot path).
std::vector<LayerTime> AllLayers(const TimeModel& tm, const ModelProfile& prof) {
  std::vector<LayerTime> per_class;
  per_class.reserve(prof.class_first.size());
  for (size_t first : prof.class_first) per_class.push_back(tm.Layer(first));
  std::vector<LayerTime> lt;
  lt.reserve(prof.layers.size());
  for (const LayerProfile& lp : prof.layers) lt.push_back(per_class[lp.class_id]);
  return lt;
}

}  // namespace

std::vector<int64_t> PlanStageStarts(const CostContext& c, const Plan& p) {
  if (!p.stage_layer_starts.empty() || p.deg.pp * p.deg.interleave == 1) return StageStarts(p, {});
  TimeModel tm(c, p);
  return StageStarts(p, AllLayers(tm, c.prof));
}

double RecomputeSeconds(const CostContext& c, const Plan& p, BlockKind kind, Recompute level) {
  Plan q = p;
  q.recompute[BlockKindName(kind)] = level;
  TimeModel tm(c, q);
  // One Layer() per class of equal layers that holds `kind`, summed over the layers in order.
  const auto kind_it = std::find(c.prof.kinds.begin(), c.prof.kinds.end(), kind);
  if (kind_it == c.prof.kinds.end()) return 0;
  const size_t id = static_cast<size_t>(kind_it - c.prof.kinds.begin());
  std::vector<LayerTime> per_class(c.prof.class_first.size());
  for (size_t k = 0; k < per_class.size(); ++k) {
    const LayerProfile& first = c.prof.layers[c.prof.class_first[k]];
    if (first.mixer_kind_id == id || first.channel_kind_id == id)
      per_class[k] = tm.Layer(c.prof.class_first[k]);
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
  TimeModel tm(c, p);
  const auto lt = AllLayers(tm, c.prof);
  return EstimateMemory(c, p, StageStarts(p, lt), nullptr);
}

PlanEstimate EstimatePlan(const CostContext& c, const Plan& p) {
  PlanEstimate e;
  const PlanRequest& req = *c.req;
  const Topology& topo = req.topology;
  const CostCalibration& cal = req.calibration;
  const ParallelDegrees& d = p.deg;
  TimeModel tm(c, p);
  const auto lt = AllLayers(tm, c.prof);
  const auto starts = StageStarts(p, lt);
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  int mem_stage = 0;
  e.memory = EstimateMemory(c, p, starts, &mem_stage);
  e.fits = e.memory.total <= e.memory.usable();
  // Step 1: per-stage time per micro-batch (compute + exposed TP/EP) and FSDP traffic.
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  const double t = static_cast<double>(d.tp),
               ep = static_cast<double>(d.ep * d.etp);  // experts split ep x etp
  const bool lora = p.mode == FinetuneMode::kLoRA;
  const double gbytes = lora ? c.base_weight_bytes : 2.0;
  struct Stage {
    double compute = 0, rc = 0, tp = 0, tp_total = 0, a2a = 0, a2a_exposed = 0, fsdp = 0, fsdp_exposed = 0,
           bwd = 0;
    double cp = 0, cp_total = 0, host = 0, fwd = 0;
    double dense = 0, expert = 0, lora = 0, lora_expert = 0;
    int64_t layers = 0;
    std::map<std::string, double> by_kind;
    std::vector<double> kind_s;  // fwd+bwd seconds per ModelProfile::kinds entry (< 0: none)
  };
  std::vector<Stage> st(d.pp);
  for (Stage& s : st) s.kind_s.assign(c.prof.kinds.size(), -1.0);
  auto add_kind = [](Stage& s, size_t id, double secs) {
    s.kind_s[id] = (s.kind_s[id] < 0 ? 0.0 : s.kind_s[id]) + secs;
  };
  for (size_t ch = 0; ch < starts.size(); ++ch) {
    Stage& s = st[ch % d.pp];
    const int64_t end = ch + 1 < starts.size() ? starts[ch + 1] : L;
    for (int64_t l = starts[ch]; l < end; ++l) {
      const LayerTime& x = lt[l];
      const LayerProfile& lp = c.prof.layers[l];
      add_kind(s, lp.mixer_kind_id, x.mixer.fwd + x.mixer.bwd);
      add_kind(s, lp.channel_kind_id, x.channel.fwd + x.channel.bwd);
      s.compute += x.mixer.fwd + x.mixer.bwd + x.channel.fwd + x.channel.bwd;
      s.bwd += x.mixer.bwd + x.channel.bwd;
      s.rc += x.mixer.rc + x.channel.rc;
      s.tp += x.mixer.tp + x.channel.tp;
      s.tp_total += x.mixer.tp_total + x.channel.tp_total;
      s.a2a += x.channel.a2a;
      s.cp += x.mixer.cp;
      s.cp_total += x.mixer.cp_total;
      s.host += x.channel.host;
      s.fwd += x.mixer.fwd + x.channel.fwd;
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
  const double head = tm.HeadTime();
  st.back().by_kind["head"] += head;
  st.back().compute += head;
  // MTP layers (DeepSeek-V3 sec. 2.2): each is one more decoder layer (the last layer's kind), an
  // h x 2h projection and its own head + loss, all on the last pipeline stage.
  if (p.mtp_layers > 0 && L > 0) {
    Stage& s = st.back();
    const LayerTime& x = lt[L - 1];
    const LayerProfile& lp = c.prof.layers[L - 1];
    const double mtp = static_cast<double>(p.mtp_layers);
    const double proj = tm.Gemm(TokensPerRank(p) * 4 * lp.hidden * lp.hidden / t, TokensPerRank(p), lp.hidden / t,
                                2 * lp.hidden, 2 * lp.hidden * lp.hidden * 2 / t, 1.0) * (lora ? 2.0 : 3.0);
    const double one = x.mixer.fwd + x.mixer.bwd + x.channel.fwd + x.channel.bwd + proj + head;
    s.by_kind["mtp"] += mtp * one;
    s.compute += mtp * one;
    s.bwd += mtp * (x.mixer.bwd + x.channel.bwd);
    s.rc += mtp * (x.mixer.rc + x.channel.rc);
    s.tp += mtp * (x.mixer.tp + x.channel.tp);
    s.tp_total += mtp * (x.mixer.tp_total + x.channel.tp_total);
    s.a2a += mtp * x.channel.a2a;
    s.cp += mtp * x.mixer.cp;
    s.cp_total += mtp * x.mixer.cp_total;
    s.host += mtp * x.channel.host;
    s.fwd += mtp * (x.mixer.fwd + x.channel.fwd);
    s.dense += mtp * (lp.dense_params + 2 * lp.hidden * lp.hidden) / t;
    s.expert += mtp * lp.expert_params / ep;
  }
  std::string fsdp_tier, efsdp_tier;
  // FSDP with pipelining keeps the stage's weights gathered across micro-batches and reduce-scatters
  // grads once per step (torchtitan apply_fsdp: reshard_after_forward=False when PP is on); without
  // PP every micro-batch gathers forward and backward and reduce-scatters.
  const double fsdp_ags = d.pp > 1 ? 1.0 : 2.0;
  const double fsdp_per_mb = d.pp > 1 ? 1.0 / static_cast<double>(p.num_micro_batches) : 1.0;
  for (Stage& s : st) {
    if (p.zero_stage >= 3 && d.dp_shard > 1) {
      const double ag = CollectiveCost(topo, cal, Collective::kAllGather, d.dp_shard, d.tp * d.cp, s.dense * gbytes).seconds;
      const double rs_bytes = lora ? s.lora * 4 : s.dense * 4;
      const CommCost rs = CollectiveCost(topo, cal, Collective::kReduceScatter, d.dp_shard, d.tp * d.cp, rs_bytes);
      s.fsdp += fsdp_per_mb * (fsdp_ags * ag + rs.seconds);
      fsdp_tier = rs.tier;
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
      efsdp_tier = ag.tier;
    }
    const double busy = s.compute + s.rc;
    // EP all-to-all overlapped with another micro-batch's compute when the framework does so.
    // Overlap still costs the SMs the comm kernels hold while they run.
    s.a2a_exposed = req.overlap_ep_comm || dualpipe
                        ? std::max(0.0, s.a2a - busy) + c.k.a2a_overlap_sm_tax * std::min(s.a2a, busy)
                        : s.a2a;
    s.fsdp_exposed = std::max(0.0, s.fsdp - busy) + (s.layers > 0 ? s.fsdp / static_cast<double>(s.layers) : 0);
    s.fsdp_exposed = std::min(s.fsdp_exposed, s.fsdp);
  }
  if (dualpipe) {
    // DualPipe: rank r runs stage r for half the micro-batches and stage p-1-r for the other half
    // (time: the mean of the two) and holds both stages' parameters (their sum).
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
    st = std::move(ranks);
  }
  size_t crit = 0;
  auto mb_time = [](const Stage& s) {
    return s.compute + s.rc + s.tp + s.cp + s.host + s.a2a_exposed + s.fsdp_exposed;
  };
  for (size_t i = 1; i < st.size(); ++i)
    if (mb_time(st[i]) > mb_time(st[crit])) crit = i;
  const Stage& cs = st[crit];
  const double t_mb = mb_time(cs);
  const double m = static_cast<double>(p.num_micro_batches);
  const double pp = static_cast<double>(d.pp), v = static_cast<double>(d.interleave);
  // Step 2: pipeline bubble and point-to-point.
  // DualPipe (DeepSeek-V3 report Table 2): bubble = (p/2 - 1) * (F&B + B - 3W), F&B = one overlapped
  // forward+backward pair (t_mb), B = W = half the backward (input and weight gradients).
  const double w_half = (cs.bwd + cs.rc) / 2;
  const double bubble = d.pp <= 1  ? 0
                        : dualpipe ? (pp / 2 - 1) * std::max(0.0, t_mb + w_half - 3 * w_half)
                                   : (pp - 1) / v * t_mb;
  double p2p = 0, p2p_exposed = 0;
  std::string p2p_tier;
  if (d.pp > 1) {
    const int64_t stride = d.tp * d.cp * d.dp_shard * d.dp_replicate;
    const CommCost one = CollectiveCost(topo, cal, Collective::kP2P, 2, stride, TokensPerRank(p) * c.prof.hidden * 2 / t);
    p2p = (m * 2 * v + 2 * (pp - 1)) * one.seconds;
    p2p_tier = one.tier;
    p2p_exposed = p2p;
    // Interleaved with overlap_p2p_comm (req.overlap_pp_p2p): each send is posted async and waited on
    // when the next chunk needs it, behind one chunk pass (t_mb / 2v per send, seconds); the 2(p-1)
    // warm-up / cool-down hand-offs stay on the critical path.
    if (req.overlap_pp_p2p && d.interleave > 1)
      p2p_exposed = 2 * (pp - 1) * one.seconds + m * 2 * v * std::max(0.0, one.seconds - t_mb / (2 * v));
  }
  if (dualpipe) p2p_exposed = 0.0;  // DualPipe hides PP sends in the overlapped pairs
  // Step 3: data-parallel gradient sync once per step, overlapped with the last backward; the
  // distributed optimizer's parameter all-gather overlaps the next step's first forward.
  double sync = 0, gather = 0;
  std::string sync_tier;
  const double grad_dense = lora ? cs.lora : cs.dense, grad_exp = lora ? cs.lora_expert : cs.expert;
  const int64_t dp = d.dp_replicate * d.dp_shard;
  const int64_t dcp = dp * d.cp;                     // dense grads are reduced over dp x cp (Megatron)
  const bool bf16_grads = p.grad_dtype == Precision::kBF16;
  const double gb = bf16_grads ? 2.0 : 4.0;  // bytes per reduced gradient
  if (p.zero_stage >= 3) {
    if (d.dp_replicate > 1) {
      const CommCost ar = CollectiveCost(topo, cal, Collective::kAllReduce, d.dp_replicate, d.dp_shard * d.cp * d.tp,
                                         4 * (grad_dense / d.dp_shard + grad_exp / d.expert_fsdp));
      sync = ar.seconds;
      sync_tier = ar.tier;
    }
  } else if (dcp > 1) {
    const Collective kind = p.zero_stage == 1 ? Collective::kReduceScatter : Collective::kAllReduce;
    const CommCost g = CollectiveCost(topo, cal, kind, dcp, d.tp, gb * grad_dense);
    sync = g.seconds;
    sync_tier = g.tier;
    if (p.zero_stage == 1) gather += CollectiveCost(topo, cal, Collective::kAllGather, dcp, d.tp, 2 * grad_dense).seconds;
    const int64_t edp = d.expert_fsdp * d.dp_replicate;
    if (grad_exp > 0 && edp > 1) {
      sync += CollectiveCost(topo, cal, kind, edp, d.ep * d.etp, gb * grad_exp).seconds;
      if (p.zero_stage == 1)
        gather += CollectiveCost(topo, cal, Collective::kAllGather, edp, d.ep * d.etp, 2 * grad_exp).seconds;
    }
  }
  const double sync_exposed = std::max(0.0, sync - cs.bwd) + std::max(0.0, gather - cs.fwd);
  sync += gather;
  // Step 4: optimizer step (memory-bound).
  const double opt_dp = p.zero_stage >= 1 ? (p.zero_stage >= 3 ? static_cast<double>(d.dp_shard) : static_cast<double>(dcp)) : 1.0;
  const double opt_edp = p.zero_stage >= 1 ? static_cast<double>(p.zero_stage >= 3 ? d.expert_fsdp : d.expert_fsdp * d.dp_replicate) : 1.0;
  const double local_params =
      (lora ? cs.lora : cs.dense) / opt_dp + (lora ? cs.lora_expert : cs.expert) / opt_edp;
  const double moment_bytes = p.optimizer_dtype == Precision::kBF16 ? 4.0 : 8.0;
  const double adam_bytes = 2 * (4 + moment_bytes) + gb + 2;
  const double optimizer = local_params * adam_bytes / (c.hbm_bps * c.k.hbm_eff);
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
  add("launch", m * cs.host, m * cs.host, "",
      mstr + " x " + Fmt(cs.host * 1e3) + " ms host launch / MoE dispatcher sync not hidden (cuda_graph=" +
          CudaGraphName(p.cuda_graph) + ")");
  add("recompute", m * cs.rc, m * cs.rc, "", mstr + " x " + Fmt(cs.rc * 1e3) + " ms extra forward");
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
  add("comm.fsdp", m * cs.fsdp, m * cs.fsdp_exposed, fsdp_tier.empty() ? efsdp_tier : fsdp_tier,
      mstr + " x (AG fwd + AG bwd + RS; with PP: AG + RS once per step) = " + Fmt(cs.fsdp * 1e3) + " ms, overlapped with " +
          Fmt((cs.compute + cs.rc) * 1e3) + " ms compute");
  add("bubble", bubble, bubble, "",
      dualpipe ? "DualPipe (p/2-1)(F&B + B - 3W) = " + Fmt(pp / 2 - 1) + " * (" + Fmt(t_mb * 1e3) + " - " +
                     Fmt(2 * w_half * 1e3) + ") ms"
               : "(p-1)/v * t_mb = " + Fmt(pp - 1) + "/" + Fmt(v) + " * " + Fmt(t_mb * 1e3) + " ms");
  add("comm.pp_p2p", p2p, p2p_exposed, p2p_tier,
      std::string("(m*2v + 2(p-1)) sends of T*h*2/t bytes") +
          (dualpipe ? ", hidden by DualPipe"
           : req.overlap_pp_p2p && d.interleave > 1
               ? ", overlapped with the chunks but 2(p-1) (overlap_p2p_comm)"
               : ""));
  add("comm.dp_sync", sync, sync_exposed, sync_tier,
      "grad sync once per step, overlapped with the last backward (param all-gather: with the first forward)");
  add("optimizer", optimizer, optimizer, "", Fmt(local_params / 1e9) + " G local params x " +
                                                 Fmt(adam_bytes) + " B / HBM");
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
  for (const LayerProfile& lp : c.prof.layers)  // expert TP splits each expert's FFN width
    if (p.deg.etp > 1 && lp.top_k > 0 && std::fmod(lp.expert_inter, static_cast<double>(p.deg.etp)) != 0)
      return Status(ErrorCode::kBadInput, "etp=" + std::to_string(p.deg.etp) +
                                              " must divide the expert FFN width " +
                                              std::to_string(static_cast<int64_t>(lp.expert_inter)));
  return Status::Ok();
}

CostContext MakeCostContext(const PlanRequest& req) {
  CostContext c;
  c.req = &req;
  c.prof =
      BuildProfile(req.model, req.seq, req.dropout, req.attention_kernel == "unfused", req.unfused_framework);
  const DeviceType& dev = req.topology.device;
  c.fp8 =
      (req.compute_dtype == Precision::kFP8 || req.compute_dtype == Precision::kMXFP8) && dev.tflops_fp8 > 0;
  c.peak_flops = (c.fp8 ? dev.tflops_fp8 : dev.tflops_bf16) * 1e12;
  c.attn_peak_flops = dev.tflops_bf16 * 1e12;
  c.host_fed = dev.name.rfind("localhost", 0) != 0;  // LocalhostTopology's device (core/topology.cpp)
  c.hbm_bps = dev.hbm_gbps * 1e9;
  c.exp_per_s = SoftmaxExpsPerSecond(dev.name);
  c.per_expert_launches = PerExpertGemmLaunches(dev.name);
  c.expert_ops = ExpertHostOpsPerExpert(c.fp8 ? req.compute_dtype : Precision::kBF16);
  if (req.mode == FinetuneMode::kLoRA)
    c.base_weight_bytes = DTypeBytes(PrecisionElement(req.base_dtype));  // bf16 2, fp8 1, mxfp4 0.53125
  c.global_batch_target = req.global_batch;
  return c;
}

}  // namespace onboard
