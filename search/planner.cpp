// Request validation, plan summaries, and the device-count search of the same topology family.
#include <cmath>
#include <sstream>

#include "search/cost_model.h"
#include "search/plan_explain.h"
#include "search/plan_request_checks.h"
#include "search/planner.h"

namespace onboard {

Status CostCalibration::Validate() const {
  auto bad = [](double v) { return !std::isfinite(v) || v <= 0 || v > 10; };
  const std::string f = source.empty() ? "calibration" : source;
  if (bad(compute_efficiency)) return BadInput(f, "compute_efficiency", "must be in (0, 10]", std::to_string(compute_efficiency));
  if (bad(grouped_gemm_efficiency))
    return BadInput(f, "grouped_gemm_efficiency", "must be in (0, 10]", std::to_string(grouped_gemm_efficiency));
  if (bad(memory_bound_efficiency))
    return BadInput(f, "memory_bound_efficiency", "must be in (0, 10]", std::to_string(memory_bound_efficiency));
  if (bad(latency)) return BadInput(f, "latency", "must be in (0, 10]", std::to_string(latency));
  for (size_t i = 0; i < tier_bandwidth.size(); ++i)
    if (bad(tier_bandwidth[i]))
      return BadInput(f, "tier_bandwidth[" + std::to_string(i) + "]", "must be in (0, 10]", std::to_string(tier_bandwidth[i]));
  return Status::Ok();
}

Status PlanRequest::Validate() const {
  const std::string f = "plan request";
  ONBOARD_RETURN_IF_ERROR(ValidateTopology(topology));
  ONBOARD_RETURN_IF_ERROR(calibration.Validate());
  if (model.layers.empty()) return BadInput(model.source.empty() ? f : model.source, "layers", "model has no layers", "0");
  if (model.hidden <= 0) return BadInput(model.source.empty() ? f : model.source, "hidden", "must be > 0", std::to_string(model.hidden));
  if (!ModelSizeFitsInt64(model)) return BadInput(model.source.empty() ? f : model.source, "(dims)", "model too large to count");
  ONBOARD_RETURN_IF_ERROR(CheckPlanShape(f, mode, lora_rank, seq, global_batch));
  ONBOARD_RETURN_IF_ERROR(CheckPrecisionUse(f, "base_dtype", base_dtype, PrecisionUse::kFrozenBase));
  ONBOARD_RETURN_IF_ERROR(CheckPrecisionUse(f, "compute_dtype", compute_dtype, PrecisionUse::kCompute));
  if (compute_dtype == Precision::kNVFP4 && !(topology.device.tflops_fp4 > 0))
    return BadInput(topology.source.empty() ? f : topology.source, "device.tflops_fp4",
                    "compute_dtype nvfp4 needs a device with NVFP4 tensor cores (Blackwell: tflops_fp4 > 0)",
                    std::to_string(topology.device.tflops_fp4));
  ONBOARD_RETURN_IF_ERROR(CheckBf16LayerRequest(f, compute_dtype, bf16_layers_first, bf16_layers_last,
                                                static_cast<int64_t>(model.layers.size())));
  if (!(expert_imbalance >= 1) || !std::isfinite(expert_imbalance) || expert_imbalance > 64)
    return BadInput(f, "expert_imbalance", "must be in [1, 64]", std::to_string(expert_imbalance));
  if (!(dropout >= 0 && dropout < 1)) return BadInput(f, "dropout", "must be in [0, 1)", std::to_string(dropout));
  if (attention_kernel != "flash" && attention_kernel != "unfused")
    return BadInput(f, "attention_kernel", "must be flash or unfused", attention_kernel);
  ONBOARD_RETURN_IF_ERROR(CheckCrossEntropy(f, cross_entropy));
  if (!(constraints.memory_margin >= 0 && constraints.memory_margin < 0.9))
    return BadInput(f, "memory_margin", "must be in [0, 0.9)", std::to_string(constraints.memory_margin));
  if (!(constraints.reserved_gib >= 0) || constraints.reserved_gib > topology.device.hbm_gib)
    return BadInput(f, "reserved_gib", "must be in [0, hbm_gib]", std::to_string(constraints.reserved_gib));
  if (constraints.schedule != "1f1b" && constraints.schedule != "dualpipe" && constraints.schedule != "any")
    return BadInput(f, "constraints.schedule", "must be 1f1b, dualpipe or any", constraints.schedule);
  if (constraints.zero_stage != 0 && constraints.zero_stage != 1 && constraints.zero_stage != 3)
    return BadInput(f, "constraints.zero_stage", "must be 0 (searched), 1 or 3",
                    std::to_string(constraints.zero_stage));
  if (constraints.etp < 0 || constraints.etp > topology.num_devices)
    return BadInput(f, "constraints.etp",
                    "must be in [0, " + std::to_string(topology.num_devices) + "] (0 = searched)",
                    std::to_string(constraints.etp));
  ONBOARD_RETURN_IF_ERROR(
      CheckExpertRouting(f, "", expert_nodes_per_token, max_route_nodes, MaxRoutedTopK(model)));
  if (cpu_offload_layers < 0 || cpu_offload_layers >= static_cast<int64_t>(model.layers.size()))
    return BadInput(f, "cpu_offload_layers",
                    "must be in [0, layers=" + std::to_string(model.layers.size()) + ")",
                    std::to_string(cpu_offload_layers));
  if (cpu_offload_layers > 0 && HostLinkBytesPerSecond(topology.device.name) <= 0)
    return BadInput(f, "cpu_offload_layers",
                    "needs the device's host-link bandwidth: device '" + topology.device.name +
                        "' has no host-link figure in the hardware catalog",
                    std::to_string(cpu_offload_layers));
  if (threads < 1 || threads > 256) return BadInput(f, "threads", "must be in [1, 256]", std::to_string(threads));
  if (top_n < 0) return BadInput(f, "top_n", "must be >= 0", std::to_string(top_n));
  return Status::Ok();
}

std::string PlanSummary(const Plan& p) {
  std::ostringstream os;
  os << "dp_rep=" << p.deg.dp_replicate << (p.zero_stage >= 3 ? " fsdp=" : " dp=") << p.deg.dp_shard;
  if (p.zero_stage < 3) os << " zero" << p.zero_stage;
  if (p.deg.cp > 1) os << " cp=" << p.deg.cp;
  os << " tp=" << p.deg.tp << " pp=" << p.deg.pp;
  if (p.deg.interleave > 1) os << " v=" << p.deg.interleave;
  os << " ep=" << p.deg.ep;
  if (p.deg.etp > 1) os << " etp=" << p.deg.etp;
  os << " efsdp=" << p.deg.expert_fsdp;
  os << " mb=" << p.micro_batch << "x" << p.num_micro_batches;
  if (p.deg.sequence_parallel) os << " sp";
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe) os << " dualpipe";
  std::string rc;
  for (const auto& [k, v] : p.recompute)
    if (v != Recompute::kNone) rc += (rc.empty() ? "" : ",") + k + ":" + RecomputeName(v);
  os << " rc=" << (rc.empty() ? "none" : rc);
  return os.str();
}

Topology ResizeTopology(const Topology& t, int64_t world) {
  Topology r = t;
  r.num_devices = world;
  r.name = t.name + "@" + std::to_string(world);
  r.tiers.clear();
  for (const CommTier& c : t.tiers) {
    if (c.group_size >= world || world % c.group_size != 0) continue;
    r.tiers.push_back(c);
  }
  CommTier last = t.tiers.back();
  last.group_size = world;
  r.tiers.push_back(last);
  return r;
}

Expected<WorldSizeResult> SmallestFittingWorld(const PlanRequest& req, int64_t max_world) {
  ONBOARD_RETURN_IF_ERROR(req.Validate());
  WorldSizeResult out;
  // Unit: the fast-tier group when the fabric has several tiers (whole nodes), else 8 devices.
  const int64_t unit = req.topology.tiers.size() > 1 ? req.topology.tiers.front().group_size : 8;
  // Lower bound without searching: model states alone (16 B/param full, base bytes in LoRA).
  const double params = static_cast<double>(ComputeStats(req.model, req.seq).total_params);
  const double bpp = req.mode == FinetuneMode::kFull
                         ? 16.0
                         : DTypeBytes(PrecisionElement(req.base_dtype));  // bf16 2, fp8 1, mxfp4 0.53125
  const double usable = req.topology.device.hbm_gib * 1073741824.0 * (1 - req.constraints.memory_margin);
  auto fits_at = [&](int64_t world, PlanCandidate* best) -> Expected<bool> {
    if (params * bpp / static_cast<double>(world) > usable) {
      out.tried.push_back(std::to_string(world) + ": model states alone need " +
                          GibStr(params * bpp / static_cast<double>(world)) + " GiB per device, has " + GibStr(usable));
      return false;
    }
    PlanRequest r = req;
    r.topology = ResizeTopology(req.topology, world);
    r.top_n = 0;
    ONBOARD_ASSIGN_OR_RETURN(SearchResult sr, SearchPlans(r));
    if (sr.feasible) {
      *best = sr.best;
      out.tried.push_back(std::to_string(world) + ": fits, " + PlanSummary(sr.best.plan));
      return true;
    }
    const MemoryBreakdown& m = sr.best.estimate.memory;
    out.tried.push_back(std::to_string(world) + ": needs " + GibStr(m.total) + " GiB per device, has " +
                        GibStr(m.usable()));
    return false;
  };
  // Step 1: double from the current size until a fit (or max_world).
  int64_t lo = req.topology.num_devices, hi = 0;
  PlanCandidate best;
  for (int64_t w = std::max(unit, lo * 2); w <= max_world; w *= 2) {
    ONBOARD_ASSIGN_OR_RETURN(bool ok, fits_at(w, &best));
    if (ok) {
      hi = w;
      break;
    }
    lo = w;
  }
  if (hi == 0) {
    return Status(ErrorCode::kInfeasible, "no device count up to " + std::to_string(max_world) + " fits");
  }
  out.world = hi;
  out.best = best;
  // Step 2: bisect on multiples of `unit` between the last miss and the first fit.
  while (hi - lo > unit) {
    int64_t mid = (lo + hi) / 2 / unit * unit;
    if (mid <= lo) mid = lo + unit;
    if (mid >= hi) break;
    PlanCandidate b;
    ONBOARD_ASSIGN_OR_RETURN(bool ok, fits_at(mid, &b));
    if (ok) {
      hi = mid;
      out.world = mid;
      out.best = b;
    } else {
      lo = mid;
    }
  }
  return out;
}

}  // namespace onboard
