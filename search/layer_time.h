// Time of one decoder layer on one device for one micro-batch, split into the terms the step-time
// model adds up (search/cost_model.cpp). Internal to search/: search/layer_time.cpp holds the mixer,
// the CP exchange and the host launches, search/layer_time_channel.cpp the channel (dense MLP, router,
// routed experts, EP all-to-all). The formulas and their sources are in the legends at the top of
// those two files. Units: seconds, bytes, FLOPs, FLOP/s, tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "search/cost_model.h"
#include "search/ep_a2a_traffic.h"

namespace onboard {

// The request's measured routing (expert_nodes_per_token, max_route_nodes) with the plan's dispatcher.
inline EpRouting EpRoutingOf(const PlanRequest& req, const Plan& p) {
  return {req.expert_nodes_per_token, req.max_route_nodes, p.ep_dispatcher};
}

struct BlockTime {
  double fwd = 0, bwd = 0, rc = 0;  // compute, seconds per micro-batch
  double tp = 0, tp_total = 0;      // TP comm (fwd + bwd + recompute): exposed, and in all
  double a2a = 0;                   // EP all-to-all (fwd + bwd + recompute)
  double cp = 0, cp_total = 0;      // CP exchange: exposed after overlap with the core, and in all
  double host = 0;                  // exposed host launch / dispatcher-sync time
  double expert_launch = 0;         // exposed per-expert launches after the dispatcher's sync (fwd)
  double expert_launch_bwd = 0;     // host seconds of the per-expert backward ops (hidden where it can)
};

struct LayerTime {
  BlockTime mixer, channel;
  double total() const {
    return mixer.fwd + mixer.bwd + mixer.rc + mixer.tp + mixer.cp + channel.fwd + channel.bwd + channel.rc +
           channel.tp + channel.a2a + channel.host;
  }
};

// The per-layer model of one plan: built once per costed plan, read by Layer() for each class of equal
// layers (the search's hot path).
class TimeModel {
 public:
  TimeModel(const CostContext& c, const Plan& p);

  // Seconds of one GEMM of `flops` with dims m x n x k: max(flops / (P * eff(m,n,k)), weight bytes / HBM).
  double Gemm(double flops, double m, double n, double k, double weight_bytes, double eff_scale) const {
    if (flops <= 0) return 0;
    const double d0 = c_.k.gemm_dim0;
    const double eff =
        eff_ * eff_scale / (1 + d0 / std::max(m, 1.0) + d0 / std::max(n, 1.0) + d0 / std::max(k, 1.0));
    return std::max(flops / (c_.peak_flops * eff), weight_bytes / hbm_);
  }

  // Mixer, channel and the host time of layer `l` (Steps 1-4 of the legends).
  LayerTime Layer(size_t l) const;
  // The output head + cross-entropy of one micro-batch, forward and backward.
  double HeadTime() const;
  const CommCost& tp_ar() const { return tp_ar_; }
  // CollectiveCost in seconds, memoised for this plan.
  double Coll(Collective kind, int64_t n, int64_t stride, double bytes, double beyond = 1.0) const;

 private:
  struct EagerPasses {
    double fwd = 0, bwd = 0, clamp_fwd = 0;
  };
  struct Routed;  // the routed experts' share of a channel (layer_time_channel.cpp)

  // layer_time.cpp
  void Mixer(const LayerProfile& lp, BlockTime* mx) const;
  void ContextParallel(const LayerProfile& lp, double core_f, bool recomputed, BlockTime* mx) const;
  double CoreEff(const LayerProfile& lp) const;
  double SoftmaxExpSeconds(const LayerProfile& lp) const;
  double TpExposed(double gemm) const;
  double NormRecompute(const LayerProfile& lp) const;
  // fp8 quantisation of `elems` GEMM input elements (one pass).
  double Quant(double elems) const { return c_.quant_bytes * elems / hbm_; }

  // layer_time_channel.cpp
  void Channel(const LayerProfile& lp, BlockTime* ch) const;
  Routed RoutedExperts(const LayerProfile& lp) const;
  double Fp8RowPadding(double rows, const LayerProfile& lp) const;
  double ExpertHostSeconds(double local_experts, double ops) const;
  double ExpertLaunchExposed(double local_experts, double gpu) const;
  EagerPasses EagerExpertPasses(const LayerProfile& lp, double R) const;
  double SwiGluElems(const LayerProfile& lp) const;
  double SwiGluStore(const LayerProfile& lp) const;
  double SwiGluRecompute(const LayerProfile& lp) const;
  double CrossNodeFactor(const LayerProfile& lp) const;

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

// Every layer's time: one Layer() per class of equal layers (ModelProfile::class_first), copied to
// the others (same inputs, same arithmetic, same answer; the search's hot path). The bf16 first / last
// layers' classes (LayerProfile::bf16_gemms) from `bf16` when given (a TimeModel over
// CostContext::bf16_twin).
std::vector<LayerTime> AllLayers(const TimeModel& tm, const ModelProfile& prof,
                                 const TimeModel* bf16 = nullptr);

// First layer of each pipeline chunk: the plan's own split, else BalancedSplit of the layer times.
std::vector<int64_t> StageStarts(const Plan& p, const std::vector<LayerTime>& lt);

}  // namespace onboard
