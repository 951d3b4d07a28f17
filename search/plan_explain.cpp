// Explanations printed with a search result. Units: GiB (2^30 B), ms, MiB.
#include "search/plan_explain.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace onboard {
namespace {

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double ExposedOf(const PlanEstimate& e, const std::string& name) {
  for (const auto& t : e.time_terms)
    if (t.name == name) return t.exposed_s;
  return 0;
}

}  // namespace

std::string GibStr(double bytes) { return F("%.1f", bytes / 1073741824.0); }

namespace {

// The data-parallel sharding of the non-expert weights: FSDP gathers them per micro-batch, the
// distributed optimizer keeps them (and their grads) replicated and shards the optimizer state.
std::string ExplainDataParallel(const ModelProfile& prof, const Plan& p, const PlanEstimate& e) {
  const ParallelDegrees& d = p.deg;
  const std::string params = F("%.3g", prof.total_params - prof.expert_params);
  if (p.zero_stage >= 3)
    return "fsdp " + std::to_string(d.dp_shard) + ": non-expert weights (" + params +
           " params) are sharded " + std::to_string(d.dp_shard) + " ways and all-gathered per micro-batch (" +
           F("%.0f", ExposedOf(e, "comm.fsdp") * 1e3) + " ms exposed per step)";
  return "dp " + std::to_string(d.dp_shard) + ", zero " + std::to_string(p.zero_stage) +
         ": non-expert weights (" + params + " params) and their grads are replicated, the optimizer state " +
         (p.zero_stage >= 1 ? "sharded " + std::to_string(d.dp_shard * d.cp) + " ways" : "replicated") +
         "; grads synchronised once per step (" + F("%.0f", ExposedOf(e, "comm.dp_sync") * 1e3) +
         " ms exposed)";
}

}  // namespace

std::vector<std::string> ExplainBest(const CostContext& c, const PlanCandidate& best,
                                     const std::vector<PlanCandidate>& fitting) {
  std::vector<std::string> out;
  const Plan& p = best.plan;
  const ParallelDegrees& d = p.deg;
  const PlanEstimate& e = best.estimate;
  const ModelProfile& prof = c.prof;
  const bool fsdp = p.zero_stage >= 3;
  const std::string shard = fsdp ? "fsdp" : "dp";
  out.push_back("layout: dp_replicate " + std::to_string(d.dp_replicate) + " x " + shard + " " +
                std::to_string(d.dp_shard) +
                (fsdp ? "" : " (distributed optimizer, zero " + std::to_string(p.zero_stage) + ")") +
                " x tp " + std::to_string(d.tp) + " x pp " + std::to_string(d.pp) + " = " +
                std::to_string(d.world()) + " devices" +
                (prof.experts > 0 ? "; ep " + std::to_string(d.ep) + " carved out of " + shard +
                                        "*tp=" + std::to_string(d.dp_shard * d.tp) + ", expert fsdp " +
                                        std::to_string(d.expert_fsdp)
                                  : std::string()));
  // Step 1: why this EP (experts per rank, a2a volume vs expert-weight memory), vs the best plan
  // at every other EP degree.
  if (prof.experts > 0) {
    double width = 0, topk = 0;
    int moe_layers = 0;
    for (const auto& lp : prof.layers)
      if (lp.top_k > 0) {
        width = lp.dispatch_width;
        topk = static_cast<double>(lp.top_k);
        ++moe_layers;
      }
    const double T = static_cast<double>(p.micro_batch * p.seq);
    const double a2a_bytes = T / static_cast<double>(d.tp) * topk * width * 2 * c.req->expert_imbalance;
    // Bytes per expert parameter on a device: FSDP shards all 16 (bf16 weight, fp32 grad, master and
    // moments); the distributed optimizer keeps the weight and grad (6) and shards the other 12 over
    // the expert data ranks.
    const double edp = static_cast<double>(d.expert_fsdp * d.dp_replicate);  // expert data ranks
    const double full_bytes = fsdp ? 16.0 : 6.0 + (p.zero_stage >= 1 ? 12.0 / edp : 12.0);
    const double wbytes = p.mode == FinetuneMode::kLoRA ? c.base_weight_bytes : full_bytes;
    const double expert_mem = prof.expert_params / static_cast<double>(d.ep) /
                              static_cast<double>(p.zero_stage >= 3 ? d.expert_fsdp : 1) * wbytes;
    const double per_rank = static_cast<double>(prof.experts) / static_cast<double>(d.ep);
    out.push_back("why ep=" + std::to_string(d.ep) + ": " + std::to_string(prof.experts) + " experts / " +
                  std::to_string(d.ep) + " = " + F("%.0f", per_rank) + " experts per rank, " +
                  F("%.0f", T / d.tp * topk * d.ep / prof.experts) +
                  " tokens per expert GEMM per micro-batch; a2a moves " + F("%.1f", a2a_bytes / 1048576.0) +
                  " MiB per rank per dispatch (T/tp*top_k*width*2 B = " + F("%.0f", T / d.tp) + "*" + F("%.0f", topk) +
                  "*" + F("%.0f", width) + "*2), x4 per MoE layer x " + std::to_string(moe_layers) +
                  " layers = " + F("%.0f", ExposedOf(e, "comm.ep_a2a") * 1e3) + " ms exposed per step");
    out.push_back("  expert weights per device: " + F("%.3g", prof.expert_params) + " params / ep " +
                  std::to_string(d.ep) + " / expert fsdp " + std::to_string(p.zero_stage >= 3 ? d.expert_fsdp : 1) +
                  " x " + F("%.3g", wbytes) + " B = " + GibStr(expert_mem) + " GiB");
    std::map<int64_t, const PlanCandidate*> by_ep;
    for (const auto& f : fitting) {
      auto& slot = by_ep[f.plan.deg.ep];
      if (!slot || f.estimate.step_s < slot->estimate.step_s) slot = &f;
    }
    for (const auto& [ep, cand] : by_ep) {
      if (ep == d.ep) continue;
      out.push_back("  vs ep=" + std::to_string(ep) + ": best " + F("%.3f", cand->estimate.step_s) + " s/step (" +
                    F("%+.1f", 100 * (cand->estimate.step_s / e.step_s - 1)) + "%), " +
                    GibStr(cand->estimate.memory.total) + " GiB/device, a2a " +
                    F("%.0f", ExposedOf(cand->estimate, "comm.ep_a2a") * 1e3) + " ms, expert fsdp comm " +
                    F("%.0f", ExposedOf(cand->estimate, "comm.fsdp") * 1e3) + " ms exposed");
    }
    if (by_ep.size() <= 1) out.push_back("  no other ep degree fits");
  }
  // Step 2: the data-parallel sharding of the non-expert weights, recompute, and the largest exposed term.
  if (d.dp_shard > 1) out.push_back(ExplainDataParallel(prof, p, e));
  std::string rc;
  for (const auto& [k, v] : p.recompute) rc += (rc.empty() ? "" : ", ") + k + "=" + RecomputeName(v);
  out.push_back("recompute: " + rc + " (least extra forward that fits: activations " +
                GibStr(e.memory.activations) + " GiB of " + GibStr(e.memory.usable()) + " usable)");
  const TimeTerm* top = nullptr;
  for (const auto& t : e.time_terms)
    if (!top || t.exposed_s > top->exposed_s) top = &t;
  if (top)
    out.push_back("largest term: " + top->name + " " + F("%.0f", top->exposed_s * 1e3) + " ms of " +
                  F("%.0f", e.step_s * 1e3) + " ms");
  return out;
}

std::vector<std::string> ExplainInfeasible(const CostContext& c, const PlanCandidate& closest) {
  std::vector<std::string> out;
  const PlanRequest& req = *c.req;
  const ModelProfile& prof = c.prof;
  const MemoryBreakdown& m = closest.estimate.memory;
  const double world = static_cast<double>(req.topology.num_devices);
  const double bpp = req.mode == FinetuneMode::kLoRA ? c.base_weight_bytes : 16.0;
  const std::string what = req.mode == FinetuneMode::kLoRA
                               ? "frozen base weights at " + F("%.3g", bpp) + " B per parameter"
                               : "model states at 16 B per parameter (fp32 weight 4 + grad 4 + Adam m,v 8)";
  out.push_back("nothing fits on " + std::to_string(req.topology.num_devices) + " x " + req.topology.device.name + ":");
  out.push_back("  " + what + ": " + F("%.4g", prof.total_params) + " params x " + F("%.3g", bpp) + " B = " +
                F("%.1f", prof.total_params * bpp / 1099511627776.0) + " TiB; / " + F("%.0f", world) +
                " devices = " + GibStr(prof.total_params * bpp / world) + " GiB per device before activations");
  out.push_back("  usable per device: " + GibStr(m.capacity) + " GiB HBM - " + GibStr(m.margin) + " GiB margin (" +
                F("%.0f", req.constraints.memory_margin * 100) + "%) = " + GibStr(m.usable()) + " GiB");
  out.push_back("  closest layout " + PlanSummary(closest.plan) + ": weights " + GibStr(m.weights) + " + grads " +
                GibStr(m.grads) + " + optimizer " + GibStr(m.optimizer) + " + activations " +
                GibStr(m.activations) + " + a2a " + GibStr(m.a2a_buffers) + " + workspace " + GibStr(m.workspace) +
                " = " + GibStr(m.total) + " GiB > " + GibStr(m.usable()) + " GiB");
  return out;
}

}  // namespace onboard
