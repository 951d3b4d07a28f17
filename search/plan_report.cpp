// Text and JSON renderings of plans, estimates and search results.
// JSON numbers are rounded to 6 significant digits so golden files are stable; no wall-clock
// times go into JSON (they are in the text report only).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "search/planner.h"

namespace onboard {
namespace {

using nlohmann::json;
constexpr double kGiB = 1073741824.0;

double R6(double v) {
  if (v == 0 || !std::isfinite(v)) return std::isfinite(v) ? 0.0 : -1.0;
  const double mag = std::pow(10.0, 5 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * mag) / mag;
}

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

json PlanJson(const Plan& p) {
  json j;
  j["dp_replicate"] = p.deg.dp_replicate;
  j["dp_shard"] = p.deg.dp_shard;
  j["tp"] = p.deg.tp;
  j["pp"] = p.deg.pp;
  j["ep"] = p.deg.ep;
  j["expert_fsdp"] = p.deg.expert_fsdp;
  j["interleave"] = p.deg.interleave;
  j["sequence_parallel"] = p.deg.sequence_parallel;
  j["micro_batch"] = p.micro_batch;
  j["num_micro_batches"] = p.num_micro_batches;
  j["seq"] = p.seq;
  j["global_batch"] = p.global_batch;
  j["mode"] = FinetuneModeName(p.mode);
  j["lora_rank"] = p.lora_rank;
  j["base_dtype"] = PrecisionName(p.base_dtype);
  j["compute_dtype"] = PrecisionName(p.compute_dtype);
  j["zero_stage"] = p.zero_stage;
  json rc = json::object();
  for (const auto& [k, v] : p.recompute) rc[k] = RecomputeName(v);
  j["recompute"] = rc;
  j["stage_layer_starts"] = p.stage_layer_starts;
  if (p.deg.cp > 1) {  // only when used, so plans without CP keep their golden JSON
    j["cp"] = p.deg.cp;
    j["cp_comm"] = CpCommName(p.cp_comm);
  }
  if (p.optimizer_dtype != Precision::kFP32) j["optimizer_dtype"] = PrecisionName(p.optimizer_dtype);
  if (p.grad_dtype != Precision::kFP32) j["grad_dtype"] = PrecisionName(p.grad_dtype);
  if (p.param_dtype != Precision::kFP32) j["param_dtype"] = PrecisionName(p.param_dtype);
  if (p.fsdp_pipelining != FsdpPipelining::kPerMicroBatch)
    j["fsdp_pipelining"] = FsdpPipeliningName(p.fsdp_pipelining);
  if (p.mtp_layers > 0) j["mtp_layers"] = p.mtp_layers;
  if (p.bf16_layers_first > 0) j["bf16_layers_first"] = p.bf16_layers_first;
  if (p.bf16_layers_last > 0) j["bf16_layers_last"] = p.bf16_layers_last;
  j["summary"] = PlanSummary(p);
  return j;
}

json MemoryJson(const MemoryBreakdown& m) {
  json j = {{"weights_gib", R6(m.weights / kGiB)},
            {"grads_gib", R6(m.grads / kGiB)},
            {"optimizer_gib", R6(m.optimizer / kGiB)},
            {"activations_gib", R6(m.activations / kGiB)},
            {"a2a_buffers_gib", R6(m.a2a_buffers / kGiB)},
            {"workspace_gib", R6(m.workspace / kGiB)},
            {"total_gib", R6(m.total / kGiB)},
            {"capacity_gib", R6(m.capacity / kGiB)},
            {"margin_gib", R6(m.margin / kGiB)},
            {"usable_gib", R6(m.usable() / kGiB)}};
  if (m.offloaded > 0) j["offloaded_gib"] = R6(m.offloaded / kGiB);  // CPU offloading only
  return j;
}

json EstJson(const PlanEstimate& e) {
  json j;
  j["step_s"] = R6(e.step_s);
  j["tokens_per_s"] = R6(e.tokens_per_s);
  j["mfu"] = R6(e.mfu);
  j["fits"] = e.fits;
  j["bubble_s"] = R6(e.bubble_s);
  j["exposed_comm_s"] = R6(e.exposed_comm_s);
  j["overlapped_comm_s"] = R6(e.overlapped_comm_s);
  j["time_terms"] = json::array();
  for (const auto& t : e.time_terms)
    j["time_terms"].push_back({{"name", t.name}, {"total_s", R6(t.total_s)}, {"exposed_s", R6(t.exposed_s)},
                               {"tier", t.tier}, {"formula", t.formula}});
  j["memory"] = MemoryJson(e.memory);
  j["notes"] = e.notes;
  return j;
}

std::string MemLine(const MemoryBreakdown& m) {
  return "weights " + F("%.1f", m.weights / kGiB) + " | grads " + F("%.1f", m.grads / kGiB) +
         " | optimizer " + F("%.1f", m.optimizer / kGiB) + " | activations " +
         F("%.1f", m.activations / kGiB) + " | a2a " + F("%.1f", m.a2a_buffers / kGiB) + " | workspace " +
         F("%.1f", m.workspace / kGiB) + " | total " + F("%.1f", m.total / kGiB) + " of " +
         F("%.1f", m.usable() / kGiB) + " usable (" + F("%.1f", m.capacity / kGiB) + " - " +
         F("%.1f", m.margin / kGiB) + " margin)" +
         (m.offloaded > 0 ? " | offloaded to host " + F("%.1f", m.offloaded / kGiB) : "");
}

}  // namespace

std::string EstimateToJson(const Plan& plan, const PlanEstimate& e) {
  json j;
  j["plan"] = PlanJson(plan);
  j["estimate"] = EstJson(e);
  return j.dump(2);
}

std::string SearchResultToJson(const PlanRequest& req, const SearchResult& r) {
  json j;
  j["model"] = req.model.name;
  j["topology"] = req.topology.name;
  j["devices"] = req.topology.num_devices;
  j["mode"] = FinetuneModeName(req.mode);
  j["seq"] = req.seq;
  j["feasible"] = r.feasible;
  j["best"] = {{"plan", PlanJson(r.best.plan)}, {"estimate", EstJson(r.best.estimate)}};
  j["runners_up"] = json::array();
  for (const auto& c : r.runners_up) j["runners_up"].push_back({{"plan", PlanJson(c.plan)}, {"estimate", EstJson(c.estimate)}});
  j["pareto"] = json::array();
  for (const auto& c : r.pareto)
    j["pareto"].push_back({{"summary", PlanSummary(c.plan)}, {"step_s", R6(c.estimate.step_s)},
                           {"memory_gib", R6(c.estimate.memory.total / kGiB)}});
  j["rejected"] = json::array();
  for (const auto& g : r.rejected) j["rejected"].push_back({{"reason", g.reason}, {"count", g.count}, {"example", g.example}});
  j["candidates_enumerated"] = r.candidates_enumerated;
  j["candidates_evaluated"] = r.candidates_evaluated;
  j["explanation"] = r.explanation;
  return j.dump(2);
}

std::string FormatEstimate(const PlanRequest& req, const Plan& plan, const PlanEstimate& e) {
  std::ostringstream os;
  (void)req;
  os << "  " << PlanSummary(plan) << "\n";
  os << "  step " << F("%.3f", e.step_s) << " s | " << F("%.0f", e.tokens_per_s) << " tokens/s | MFU "
     << F("%.1f", e.mfu * 100) << "% | " << (e.fits ? "fits" : "DOES NOT FIT") << "\n";
  os << "  time per step (exposed / own duration, seconds):\n";
  for (const auto& t : e.time_terms) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "    %-16s %9.4f / %9.4f  %-8s ", t.name.c_str(), t.exposed_s, t.total_s, t.tier.c_str());
    os << buf << t.formula << "\n";
  }
  os << "  memory per device (GiB): " << MemLine(e.memory) << "\n";
  for (const auto& n : e.notes) os << "  note: " << n << "\n";
  return os.str();
}

std::string FormatSearchResult(const PlanRequest& req, const SearchResult& r) {
  std::ostringstream os;
  os << "model " << req.model.name << " on " << req.topology.name << " (" << req.topology.num_devices << " x "
     << req.topology.device.name << ", " << F("%.0f", req.topology.device.hbm_gib) << " GiB)\n";
  os << "mode "
     << (req.mode == FinetuneMode::kLoRA
             ? "LoRA r=" + std::to_string(req.lora_rank) + " base " + PrecisionName(req.base_dtype)
             : "full fine-tuning")
     << ", seq " << req.seq << "\n\n";
  os << (r.feasible ? "best plan:\n" : "NO PLAN FITS; closest layout:\n");
  os << FormatEstimate(req, r.best.plan, r.best.estimate);
  os << "\n" << (r.feasible ? "why:\n" : "memory arithmetic:\n");
  for (const auto& l : r.explanation) os << "  " << l << "\n";
  if (!r.runners_up.empty()) {
    os << "\nrunners-up:\n";
    for (size_t i = 0; i < r.runners_up.size(); ++i) {
      const auto& c = r.runners_up[i];
      os << "  " << i + 1 << ". " << PlanSummary(c.plan) << "  " << F("%.3f", c.estimate.step_s) << " s ("
         << F("%+.1f", 100 * (c.estimate.step_s / r.best.estimate.step_s - 1)) << "%), "
         << F("%.1f", c.estimate.memory.total / kGiB) << " GiB\n";
    }
  }
  if (!r.pareto.empty()) {
    os << "\npareto front (memory GiB -> step s):\n";
    for (const auto& c : r.pareto)
      os << "  " << F("%7.1f", c.estimate.memory.total / kGiB) << " -> " << F("%.3f", c.estimate.step_s) << "  "
         << PlanSummary(c.plan) << "\n";
  }
  if (!r.rejected.empty()) {
    os << "\nrejected:\n";
    for (const auto& g : r.rejected) os << "  " << g.reason << " x" << g.count << ": e.g. " << g.example << "\n";
  }
  os << "\ncandidates: " << r.candidates_enumerated << " recompute policies memory-checked, " << r.candidates_evaluated
     << " plans fully costed, " << F("%.2f", r.wall_s) << " s\n";
  return os.str();
}

}  // namespace onboard
