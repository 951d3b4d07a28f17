// report.json builder (see agent/report_json.h).
// Units: seconds (*_s), bytes (*_bytes), tokens; loss in nats.
#include "agent/report_json.h"

#include <cmath>
#include <filesystem>

#include "agent/probe_recipe.h"
#include "agent/report_fusions.h"
#include "agent/report_image.h"
#include "agent/report_weights.h"
#include "backends/probe.h"
#include "backends/probe_schedule.h"

namespace onboard::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// NaN/Inf are not JSON: write them as strings.
json Num(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "NaN" : (v > 0 ? "Inf" : "-Inf");
}

// The probe settings as the rounds train them: the recipe with the request's overrides
// (agent/probe_recipe.h); lr and clip are where the rules start from.
json ProbeSettingsJson(const RunRequest& r) {
  const ProbeConfig c = ProbeRecipe(r);
  json j = {{"enabled", r.probe.enabled},
            {"ranks", r.probe.ranks},
            {"steps", c.steps},
            {"seq", c.seq},
            {"batch", c.batch},
            {"warmup", c.warmup},
            {"proxy_blocks", r.probe.proxy_blocks},
            {"learning_rate", c.lr},
            {"grad_clip", c.clip},
            {"seed", r.probe.seed}};
  if (!r.probe.control.empty()) j["control"] = r.probe.control;  // a negative control's run
  if (r.mode == FinetuneMode::kLoRA) {
    j["lora_rank"] = c.lora_rank;
    j["base_steps"] = backends::LoraBaseSteps(c);
  }
  return j;
}

json RequestJson(const RunRequest& r) {
  return {
      {"model", r.model_path.empty()
                    ? "(in-memory " + (r.model_format.empty() ? std::string("config") : r.model_format) + ")"
                    : fs::path(r.model_path).filename().string()},
      {"topology", r.topology.find('{') != std::string::npos ? "(inline JSON)"
                                                             : fs::path(r.topology).filename().string()},
      {"mode", FinetuneModeName(r.mode)},
      {"lora_rank", r.lora_rank},
      {"seq", r.seq},
      {"global_batch", r.global_batch},
      {"base_dtype", PrecisionName(r.base_dtype)},
      {"max_rounds", r.max_rounds},
      {"templates_override", r.templates_override.empty()
                                 ? json(nullptr)
                                 : json(fs::path(r.templates_override).filename().string())},
      {"probe", ProbeSettingsJson(r)},
      {"thresholds",
       {{"divergence_factor", r.thresholds.divergence_factor},
        {"expert_imbalance", r.thresholds.expert_imbalance},
        {"comm_share", r.thresholds.comm_share},
        {"memory_over_prediction", r.thresholds.memory_over_prediction},
        {"calibration_tolerance", r.thresholds.calibration_tolerance},
        {"expert_nodes_change", r.thresholds.expert_nodes_change},
        {"expert_a2a_exposed_share", r.thresholds.expert_a2a_exposed_share}}}};
}

json ModelJson(const RunState& st) {
  const ModelIR& m = st.model;
  const ModelStats& s = st.stats;
  json j = {{"name", m.name},
            {"model_type", m.model_type},
            {"architecture", m.architecture},
            {"layers", m.layers.size()},
            {"hidden", m.hidden},
            {"vocab", m.vocab},
            {"max_position", m.max_position},
            {"dtype", DTypeName(m.dtype)},
            {"expert_dtype", DTypeName(m.expert_dtype)},
            {"summary", SummarizeLayers(m)},
            {"total_params", s.total_params},
            {"active_params", s.active_params},
            {"embedding_params", s.embedding_params},
            {"head_params", s.head_params},
            {"vision_params", s.vision_params},
            {"flops_per_token", s.flops_per_token},
            {"weight_bytes", s.weight_bytes},
            {"stats_seq", s.seq},
            {"warnings", m.warnings}};
  if (m.vision)
    j["vision"] = {{"kind", m.vision->kind}, {"depth", m.vision->depth}, {"hidden", m.vision->hidden},
                   {"params", m.vision->params}};
  return j;
}

json TopologyJson(const Topology& t) {
  json tiers = json::array();
  for (const auto& c : t.tiers)
    tiers.push_back({{"name", c.name}, {"group_size", c.group_size}, {"bw_gbps", c.bw_gbps},
                     {"latency_us", c.latency_us}, {"efficiency", c.efficiency}});
  json device = {{"name", t.device.name},
                 {"tflops_bf16", t.device.tflops_bf16},
                 {"tflops_fp8", t.device.tflops_fp8},
                 {"hbm_gib", t.device.hbm_gib}};
  if (t.device.tflops_fp4 > 0) device["tflops_fp4"] = t.device.tflops_fp4;  // only where the device has it
  return {{"name", t.name}, {"devices", t.num_devices}, {"device", device}, {"tiers", tiers}};
}

json CandidateJson(const PlanCandidate& c) {
  return {{"summary", PlanSummary(c.plan)}, {"plan", PlanToJson(c.plan)}, {"estimate", EstimateToJson(c.estimate)}};
}

json CalibrationJson(const CostCalibration& c) {
  return {{"compute_efficiency", c.compute_efficiency}, {"grouped_gemm_efficiency", c.grouped_gemm_efficiency},
          {"memory_bound_efficiency", c.memory_bound_efficiency}, {"tier_bandwidth", c.tier_bandwidth},
          {"latency", c.latency}, {"source", c.source}};
}

json PlanSection(const RunState& st) {
  const PlanRound* fp = st.final_plan();
  if (!fp) return nullptr;
  const SearchResult& r = fp->search;
  json j = {{"feasible", r.feasible},
            {"chosen", CandidateJson(r.best)},
            {"why", r.explanation},
            {"candidates_enumerated", r.candidates_enumerated},
            {"candidates_evaluated", r.candidates_evaluated}};
  json runners = json::array(), pareto = json::array(), rejected = json::array(), rounds = json::array();
  for (const auto& c : r.runners_up) runners.push_back(CandidateJson(c));
  for (const auto& c : r.pareto)
    pareto.push_back({{"summary", PlanSummary(c.plan)}, {"step_s", c.estimate.step_s},
                      {"memory_bytes", c.estimate.memory.total}, {"mfu", c.estimate.mfu}});
  for (const auto& g : r.rejected)
    rejected.push_back({{"reason", g.reason}, {"count", g.count}, {"example", g.example}});
  auto rc_name = [](const PlanConstraints& c) { return c.recompute ? RecomputeName(*c.recompute) : ""; };
  for (const auto& p : st.plans)
    rounds.push_back({{"round", p.round},
                      {"reason", p.reason},
                      {"summary", PlanSummary(p.search.best.plan)},
                      {"feasible", p.search.feasible},
                      {"step_s", p.search.best.estimate.step_s},
                      {"mfu", p.search.best.estimate.mfu},
                      {"memory_bytes", p.search.best.estimate.memory.total},
                      {"expert_imbalance", p.request.expert_imbalance},
                      {"recompute_constraint", rc_name(p.request.constraints)},
                      {"memory_margin", p.request.constraints.memory_margin},
                      {"calibration", CalibrationJson(p.request.calibration)}});
  j["runners_up"] = runners;
  j["pareto"] = pareto;
  j["rejected"] = rejected;
  j["rounds"] = rounds;
  j["bias_balancing"] = st.knobs.bias_balancing;
  return j;
}

json KernelsSection(const RunState& st) {
  const KernelStage& k = st.kernels;
  json rows = json::array();
  for (const auto& r : k.rows)
    rows.push_back({{"kernel", r.kernel}, {"shape", r.shape}, {"against", r.against}, {"rel_err", Num(r.rel_err)},
                    {"state_err", Num(r.state_err)}, {"tol", r.tol}, {"nonfinite_match", r.nonfinite_match},
                    {"pass", r.pass}, {"note", r.note}});
  int passed = 0;
  for (const auto& r : k.rows) passed += r.pass ? 1 : 0;
  return {{"ran", k.ran},         {"skipped_reason", k.skipped_reason}, {"generated", k.generated},
          {"rows", rows},         {"passed", passed},                   {"total", k.rows.size()},
          {"fallbacks", st.knobs.kernel_fallbacks}, {"notes", k.notes}, {"dir", "kernels"}};
}

json ProbeRoundJson(const ProbeRound& pr, const std::string& out_dir) {
  std::error_code ec;
  json j = {{"round", pr.round},
            {"knobs",
             {{"learning_rate", pr.knobs.learning_rate},
              {"grad_clip", pr.knobs.grad_clip},
              {"expert_placement", pr.knobs.expert_placement}}},
            {"log_dir", fs::relative(pr.log_dir, out_dir, ec).string()}};
  j["layout"] = pr.layout.ToJson();
  if (!pr.error.empty()) {
    j["error"] = pr.error;
    return j;
  }
  const ProbeResult& p = pr.result;
  json loss = json::array(), grad = json::array(), step_s = json::array();
  for (const auto& s : p.steps) {
    loss.push_back(Num(s.loss));
    grad.push_back(Num(s.grad_norm));
    step_s.push_back(s.step_s);
  }
  LossTrend t = ComputeLossTrend(p);
  CommShareReport c = ProbeCommShare(p, ObservationThresholds{});
  std::vector<double> load = MeasuredExpertLoad(p);
  int64_t ep = p.config.ep_degree();
  std::vector<double> ranks = load.empty() ? std::vector<double>{} : RankLoads(load, ep, p.config.expert_placement);
  j["proxy"] = p.spec.PatternString();
  j["params"] = {{"total", p.params.total}, {"trainable", p.params.trainable}};
  j["config"] = {{"ranks", p.config.ranks},
                 {"ep", ep},
                 {"fsdp", p.config.fsdp_degree()},
                 {"steps", p.config.steps},
                 {"seq", p.config.seq},
                 {"batch", p.config.batch},
                 {"lr", p.config.lr},
                 {"clip", p.config.clip},
                 {"kda_kernel", ProbeKernelName(p.config.kda_kernel)},
                 {"dsa_kernel", ProbeKernelName(p.config.dsa_kernel)},
                 {"control", p.config.control}};
  j["convergence"] = p.convergence;
  // What the KDA layers ran and, in round 1, the kernel loss parity (issue 12); what the DSA cores
  // ran is in each round's probe/roundN/rank<r>.json ("dsa_calls").
  j["kda_calls"] = {{"generated", p.kda_calls.generated}, {"torch", p.kda_calls.torch}};
  json parity = json::array();
  for (const ProbeLossParity& lp : p.loss_parity) parity.push_back(LossParityToJson(lp));
  j["loss_parity"] = parity;
  j["checks"] = p.checks;
  j["task_floor"] = p.task_floor;
  j["baselines"] = {{"no_learning_nats", Num(p.baseline_nats)}, {"floor_nats", Num(p.floor_nats)},
                    {"loss_target_nats", Num(p.loss_target)}};
  j["skill"] = {{"metric", p.skill_metric},
                {"value", Num(p.skill)},
                {"target", p.skill_target},
                {"final_loss", Num(p.final_loss)},
                {"held_out_accuracy", Num(p.held_out_accuracy)},
                {"held_out_tokens", p.held_out_tokens},
                {"last_steps_accuracy", Num(p.last_steps_accuracy)}};
  j["loss"] = loss;
  j["grad_norm"] = grad;
  j["loss_ratio"] = Num(t.ratio);
  j["expert_load"] = load;
  j["rank_load"] = ranks;
  j["rank_imbalance"] = MaxOverMean(ranks);
  j["measured"] = {{"step_s", step_s}, {"mean_step_s", c.step_s}, {"comm_s", c.comm_s},
                   {"comm_share", c.share}, {"peak_bytes", MeasuredPeakBytes(p)}, {"wall_s", p.wall_s}};
  j["measured"]["pp_bubble"] = MeasuredPpBubble(p);
  // Expert communication (issue 18): the report's per-round before/after table.
  if (json ec = ExpertCommToJson(p); !ec.is_null()) j["expert_comm"] = ec;
  if (p.prediction.available) {
    j["predicted"] = {{"step_s", p.prediction.step_s}, {"memory_bytes", p.prediction.memory_bytes},
                      {"comm_s", p.prediction.comm_s}, {"topology", p.prediction.topology}};
    // Per collective, bubble and live-tensor memory: measured beside predicted (issue 17).
    j["comparison"] = PredictionComparisonToJson(p.prediction);
  }
  json ds = json::array();
  for (const auto& d : pr.decisions) ds.push_back(d.rule);
  j["decisions"] = ds;
  return j;
}

// Before/after placement: the round whose expert_imbalance decision re-placed experts, and the
// next round that ran with the new placement.
json ExpertBalanceSection(const RunState& st) {
  for (size_t i = 0; i < st.probes.size(); ++i)
    for (const auto& d : st.probes[i].decisions) {
      if (d.rule != "expert_imbalance") continue;
      json j = {{"round", st.probes[i].round},
                {"before", d.observed.value("rank_load_before", json::array())},
                {"before_max_over_mean", d.observed.value("rank_max_over_mean", 0.0)},
                {"predicted_after", d.observed.value("rank_load_after_predicted", json::array())},
                {"predicted_max_over_mean", d.observed.value("rank_max_over_mean_after_predicted", 0.0)},
                {"expert_load", d.observed.value("expert_load", json::array())},
                {"action", d.action}};
      if (i + 1 < st.probes.size() && st.probes[i + 1].error.empty()) {
        const ProbeResult& next = st.probes[i + 1].result;
        std::vector<double> load = MeasuredExpertLoad(next);
        if (!load.empty()) {
          std::vector<double> ranks = RankLoads(load, next.config.ep_degree(), next.config.expert_placement);
          j["measured_after"] = ranks;
          j["measured_after_max_over_mean"] = MaxOverMean(ranks);
        }
      }
      return j;
    }
  return nullptr;
}

}  // namespace

json PlanToJson(const Plan& p) {
  json rc = json::object();
  for (const auto& [k, v] : p.recompute) rc[k] = RecomputeName(v);
  // The field list is kept as a table.
  // clang-format off
  return {{"dp_replicate", p.deg.dp_replicate}, {"dp_shard", p.deg.dp_shard}, {"tp", p.deg.tp},
          {"pp", p.deg.pp}, {"ep", p.deg.ep}, {"expert_fsdp", p.deg.expert_fsdp},
          {"interleave", p.deg.interleave}, {"sequence_parallel", p.deg.sequence_parallel},
          {"micro_batch", p.micro_batch}, {"num_micro_batches", p.num_micro_batches}, {"seq", p.seq},
          {"global_batch", p.global_batch}, {"recompute", rc},
          {"mode", FinetuneModeName(p.mode)}, {"lora_rank", p.lora_rank},
          {"base_dtype", PrecisionName(p.base_dtype)}, {"compute_dtype", PrecisionName(p.compute_dtype)},
          {"stage_layer_starts", p.stage_layer_starts}};
  // clang-format on
}

json EstimateToJson(const PlanEstimate& e) {
  json terms = json::array();
  for (const auto& t : e.time_terms)
    terms.push_back({{"name", t.name}, {"total_s", t.total_s}, {"exposed_s", t.exposed_s}, {"tier", t.tier},
                     {"formula", t.formula}});
  const MemoryBreakdown& m = e.memory;
  return {{"step_s", e.step_s},
          {"tokens_per_s", e.tokens_per_s},
          {"mfu", e.mfu},
          {"model_flops", e.model_flops},
          {"bubble_s", e.bubble_s},
          {"exposed_comm_s", e.exposed_comm_s},
          {"overlapped_comm_s", e.overlapped_comm_s},
          {"fits", e.fits},
          {"time_terms", terms},
          {"compute_s_by_kind", e.compute_s_by_kind},
          {"memory", {{"weights", m.weights}, {"grads", m.grads}, {"optimizer", m.optimizer},
                      {"activations", m.activations}, {"a2a_buffers", m.a2a_buffers},
                      {"workspace", m.workspace}, {"total", m.total}, {"capacity", m.capacity},
                      {"margin", m.margin}}},
          {"notes", e.notes}};
}

json ArtifactsToJson(const RunState& st) {
  json names = json::array();
  for (const auto& entry : st.artifacts) names.push_back(entry.first);  // std::map: sorted
  return names;
}

json BuildReportJson(const RunState& st) {
  json j;
  j["schema"] = "onboard.report/1";
  j["request"] = RequestJson(st.req);
  j["model"] = ModelJson(st);
  j["topology"] = TopologyJson(st.topology);
  json tm = TemplateMatchToJson(st.match);
  tm["sources"] = st.library.sources.size() == 1 && st.library.sources[0] == "embedded"
                      ? json::array({"embedded"}) : json::array();
  for (const auto& s : st.library.sources)
    if (s != "embedded") tm["sources"].push_back(s.rfind("override:", 0) == 0 ? "override" : "templates dir");
  j["templates"] = tm;
  j["plan"] = PlanSection(st);
  j["kernels"] = KernelsSection(st);
  j["fusions"] = FusionsSection(st);
  j["weights"] = WeightsSection(st);
  json rounds = json::array();
  for (const auto& pr : st.probes) rounds.push_back(ProbeRoundJson(pr, st.req.out_dir));
  j["probe"] = {{"enabled", st.req.probe.enabled}, {"rounds", rounds}};
  if (json im = ImageProbeSection(st); !im.is_null()) j["image_probe"] = im;  // issue 12 item 6
  j["expert_balance"] = ExpertBalanceSection(st);
  json trace = st.trace.ToJson();
  j["decisions"] = trace["decisions"];
  j["observations"] = trace["observations"];
  j["rules"] = trace["rules"];
  j["timeline"] = trace["stages"];
  j["notes"] = st.notes;
  bool converged = st.probes.empty() || (st.probes.back().error.empty() && st.probes.back().result.convergence == "converged");
  j["outcome"] = {{"plan_feasible", st.final_plan() && st.final_plan()->search.feasible},
                  {"probe_rounds", st.probes.size()},
                  {"decisions", st.trace.decisions().size()},
                  {"converged", converged},
                  {"unknown_modules", st.match.unknown},
                  {"kernel_fallbacks", st.knobs.kernel_fallbacks.size()}};
  if (j.contains("image_probe")) j["outcome"]["image_learned"] = j["image_probe"]["learned"];
  j["artifacts"] = ArtifactsToJson(st);
  return j;
}

json StripNondeterministic(json r) {
  if (r.contains("timeline"))
    for (auto& s : r["timeline"]) {
      s.erase("seconds");
      s.erase("start_s");
    }
  if (r.contains("probe") && r["probe"].contains("rounds"))
    for (auto& p : r["probe"]["rounds"]) {
      p.erase("measured");
      p.erase("predicted");
      p.erase("comparison");
      p.erase("expert_comm");  // all-to-all wall times
    }
  if (r.contains("plan") && r["plan"].is_object()) r["plan"].erase("wall_s");
  return r;
}

}  // namespace onboard::agent
