// Channel time of one layer (dense MLP / shared experts / router / latent + routed experts, their EP
// all-to-all) for one micro-batch on one device: Step 3 of the per-layer model (search/layer_time.h).
// The formulas, their units and sources are in the legend at the top of search/layer_time.cpp
// (dense and routed GEMMs, routed wgrad, router, permute+unpermute, sort chunks, fp8 row padding,
// LoRA adapters, expert TP, EP all-to-all, SwiGLU storage, eager passes, expert launches).
#include <algorithm>
#include <cmath>

#include "search/layer_time.h"

namespace onboard {

// The routed experts' share of one channel (0 where the layer has none), seconds per micro-batch.
struct TimeModel::Routed {
  double gemm = 0, wgrad = 0, moe_mem = 0, pad = 0, a2a_f = 0, a2a_b = 0, lora_f = 0, lora_b = 0, quant = 0;
  double expert_launch = 0, expert_launch_bwd = 0;
  EagerPasses eager;
};

// Step 3: channel = dense MLP / shared experts / router / latent + routed experts.
void TimeModel::Channel(const LayerProfile& lp, BlockTime* ch) const {
  const CostConstants& k = c_.k;
  const double h = lp.hidden;
  const Recompute rc = pol_[lp.channel_kind_id];
  const double bwd_gemm = lora_ ? 1.0 : 2.0;
  const double rep_div = p_.deg.sequence_parallel ? t_ : 1.0;
  const double cflops = T_ * (lp.dense_gemm_flops - lp.mixer_gemm_flops) / t_;
  const double cg = Gemm(cflops, T_, cflops / (2 * T_ * h), h, cflops / T_, 1.0);
  double quant = Quant(T_ * lp.channel_gemm_inputs / t_);
  const Routed r = RoutedExperts(lp);
  quant += r.quant;
  ch->expert_launch = r.expert_launch;
  ch->expert_launch_bwd = r.expert_launch_bwd;
  const double ch_bytes = (lp.act_norms / 2 + 2 * h + lp.dropout_mask_bytes / 2) / rep_div +
                          lp.act_channel / t_ +
                          RoutedActBytes(lp, p_.deg.etp) * c_.req->expert_imbalance / t_;
  const double cel = k.elementwise_passes * T_ * ch_bytes / hbm_;
  const double store = SwiGluStore(lp);
  ch->fwd = cg + r.gemm + cel + r.moe_mem + r.pad + quant + store + r.lora_f + r.eager.fwd;
  ch->bwd = bwd_gemm * cg + r.gemm + r.wgrad + 2 * (cel + r.moe_mem) + r.pad + quant + store + r.lora_b +
            r.eager.bwd;
  if (rc == Recompute::kFull)
    ch->rc = ch->fwd;
  else if (rc == Recompute::kSelective)  // expert activation functions (moe_act), the clamp with them
    ch->rc = GatedRoutedExperts(lp) ? SwiGluRecompute(lp) + r.eager.clamp_fwd : cel;
  if (rc != Recompute::kFull) ch->rc += NormRecompute(lp);
  ch->tp = TpExposed(cg) + TpExposed(bwd_gemm * cg) + (rc == Recompute::kFull ? TpExposed(cg) : 0);
  ch->tp_total = (2 + (rc == Recompute::kFull ? 1 : 0)) * tp_ar_.seconds;
  ch->a2a = r.a2a_f + r.a2a_b + (rc == Recompute::kFull ? r.a2a_f : 0);
}

// The routed experts of one layer: grouped GEMMs (forward = dgrad, + wgrad into main_grad), router and
// permute traffic, fp8 row padding and quantisation, LoRA adapters, per-expert host ops, eager passes,
// and the EP all-to-all (+ the expert-TP gather / scatter).
TimeModel::Routed TimeModel::RoutedExperts(const LayerProfile& lp) const {
  Routed r;
  if (lp.top_k <= 0 || lp.experts <= 0) return r;
  const CostConstants& k = c_.k;
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
  r.gemm = Gemm(Rg * 2 * each * padded, m_e, lp.expert_inter / etp, lp.dispatch_width, wbytes, ge);
  // Weight grads accumulate into main_grad (TE GroupedLinear fuse_wgrad_accumulation): each
  // expert's wgrad GEMM reads and writes its grad buffer, memory-bound when few tokens reach it.
  r.wgrad = lora_ ? 0
                  : Gemm(Rg * 2 * each * padded, m_e, lp.expert_inter / etp, lp.dispatch_width,
                         per_rank * each * 2 * GradBytes(p_), ge);
  const double sort = !flex_ && p_.deg.ep > 1 && per_rank > 1 ? k.sort_chunks_passes : 0.0;
  r.moe_mem =
      (k.router_passes * T_ / t_ * static_cast<double>(lp.experts) +
       (k.permute_passes + sort) * R * lp.dispatch_width * 2 + sort * (Rg - R) * lp.dispatch_width * 2) /
      hbm_;  // permute before the dispatch (R copies), the sort after the ETP gather (Rg)
  r.pad = Fp8RowPadding(Rg, lp);
  // The routed experts' adapters (LoRA, layers without a shared expert): every copy passes one
  // expert's adapters, r * (in + out) per adapted matrix, split over etp like the expert.
  const double adapters = lora_ ? 2 * Rg * static_cast<double>(p_.lora_rank) *
                                      lp.lora_expert_params_per_rank / static_cast<double>(lp.experts) / etp /
                                      (c_.peak_flops * eff_ * k.lora_gemm_eff)
                                : 0;
  r.lora_f = adapters;  // forward seconds; backward as the dense adapters'
  r.lora_b = k.lora_bwd_ratio * adapters;
  r.quant = Quant(T_ / t_ * imb * RoutedGemmInputs(lp, p_.deg.etp));
  r.expert_launch = ExpertLaunchExposed(per_rank, r.gemm + r.quant);
  r.expert_launch_bwd = ExpertHostSeconds(per_rank, c_.expert_ops.bwd);
  r.eager = EagerExpertPasses(lp, R);
  const double elems = R * lp.dispatch_width;
  if (p_.deg.ep > 1) {
    const double f = CrossNodeFactor(lp);
    auto a2a = [&](double bytes) { return Coll(Collective::kAllToAll, p_.deg.ep, p_.deg.etp, bytes, f); };
    r.a2a_f = a2a(elems * dispatch_bytes_) + a2a(elems * k.combine_bytes);
    r.a2a_b = 2 * a2a(elems * k.combine_bytes);
  }
  if (p_.deg.etp > 1) {  // ETP: all-gather the received tokens, reduce-scatter the outputs (bf16);
                         // backward: reduce-scatter dX, all-gather dY (MoEAlltoAllTokenDispatcher)
    const double ag = Coll(Collective::kAllGather, p_.deg.etp, 1, etp * elems * k.combine_bytes);
    const double rs = Coll(Collective::kReduceScatter, p_.deg.etp, 1, etp * elems * k.combine_bytes);
    r.a2a_f += ag + rs;
    r.a2a_b += ag + rs;
  }
  return r;
}

// Seconds of one pass of Megatron-Core TEGroupedMLP's fp8 row padding for `rows` expert rows: TE
// grouped GEMMs need each expert's rows aligned (16, MXFP8 32), so where neither the router
// (moe_router_padding_for_quantization) nor HybridEP's fused permute padded them, Fp8Padding copies the
// permuted input into an aligned buffer and Fp8Unpadding copies the fc2 output back (Megatron-LM
// experts.py, skip_routed_expert_padding in moe_utils.py). Forward: both copies, read + write; backward:
// their autograd twins move the same bytes (dY padded, dX unpadded). Uniform-random counts are almost
// never all aligned, so TE's early return (m_splits already aligned) is not counted.
double TimeModel::Fp8RowPadding(double rows, const LayerProfile& lp) const {
  if (!c_.quantised || !c_.req->fp8_expert_padding || p_.ep_dispatcher == EpDispatcher::kHybridEP) return 0;
  return 2 * rows * (lp.dispatch_width * dispatch_bytes_ + lp.hidden * c_.k.combine_bytes) / hbm_;
}

// Host seconds of `ops` stream operations per local expert; 0 under a full-iteration graph or where
// grouped GEMMs are one launch.
double TimeModel::ExpertHostSeconds(double local_experts, double ops) const {
  if (!c_.host_fed || !c_.per_expert_launches || p_.cuda_graph == CudaGraph::kFull) return 0;
  return ops * local_experts * c_.k.launch_s_per_kernel;
}

// Host time of the per-expert ops of one forward (expert_host_ops.h) not hidden behind their `gpu`
// seconds: the dispatcher's device-to-host sync just before leaves the host no run-ahead.
double TimeModel::ExpertLaunchExposed(double local_experts, double gpu) const {
  return std::max(0.0, ExpertHostSeconds(local_experts, c_.expert_ops.fwd) - gpu);
}

// Seconds of the eager elementwise passes around the routed experts of R dispatched copies (Megatron-Core
// TEGroupedMLP outside its fused kernels): the GLU clamp over R x I (under expert TP: R etp gathered
// copies at width I / etp) and the prob-weighted fc2 bias over R x the dispatch width, in fp32 where
// HybridEP hands fp32 probs over.
TimeModel::EagerPasses TimeModel::EagerExpertPasses(const LayerProfile& lp, double R) const {
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

// SwiGLU copies of gated routed experts on this rank per micro-batch, times the expert width I.
double TimeModel::SwiGluElems(const LayerProfile& lp) const {
  return T_ / t_ * c_.req->expert_imbalance * static_cast<double>(lp.top_k) * lp.expert_inter;
}

// fp8_act_input_store: the 2I-wide SwiGLU input quantised to fp8 (one direction's pass).
double TimeModel::SwiGluStore(const LayerProfile& lp) const {
  if (!c_.req->fp8_act_input_store || !GatedRoutedExperts(lp)) return 0;
  return 3 * 2 * SwiGluElems(lp) / hbm_;
}

// MoE selective (moe_act): the SwiGLU output recomputed from its stored input.
double TimeModel::SwiGluRecompute(const LayerProfile& lp) const {
  const double in_bytes = c_.req->fp8_act_input_store ? 1.0 : 2.0;
  return SwiGluElems(lp) * (2 * in_bytes + 2) / hbm_;
}

// Share of a token's top_k copies that cross past the first tier, relative to a plain all-to-all
// of uniform picks (search/ep_a2a_traffic.h): group-limited routing (topk_groups), and with
// DeepEP/HybridEP the distinct remote nodes a token reaches (measured expert_nodes_per_token, or
// N(1-(1-1/N)^k) for k uniform picks), capped by node-limited routing (max_route_nodes).
double TimeModel::CrossNodeFactor(const LayerProfile& lp) const {
  return EpA2aTraffic(lp.top_k, p_.deg.ep, p_.deg.etp, c_.req->topology.tiers.front().group_size,
                      lp.cross_node_fraction, EpRoutingOf(*c_.req, p_))
      .beyond_first_tier;
}

}  // namespace onboard
