// libFuzzer target: layout / published-runs / measured-runs JSON text (`plan --evaluate FILE`) ->
// ParseLayoutJson, then each run the way `plan --evaluate` takes it (cli/plan_command.cpp
// RunEvaluate): a run with its own model -> ResolveUnstatedRecompute -> RequestForRun; a single
// layout -> a fixed small MoE request (the command line's MODEL and --topology) -> EvaluatePlan.
// Invariants beyond "no crash": a rejected file is kBadInput/kNotFound with a one-line message; an
// accepted run has degrees >= 1, pp*vp stage starts (or none), measurements finite and > 0, a model
// whose sizes fit int64 and, unless skipped, a topology that passes ValidateTopology.
// Measured-runs files name HF configs relative to the file: the input is read as if it sat in
// tests/data (configs from tests/data/hf/); inputs naming an absolute, "..", or non-.json config
// path are skipped so that the target reads nothing outside tests/data.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "search/calibration_table.h"
#include "search/layout_file.h"
#include "search/planner.h"

namespace {

const std::string kOrigin = std::string(ONBOARD_TEST_DATA) + "/fuzz.layout.json";

void Require(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

// True when every configs.*.file stays inside tests/data and names a .json config.
bool ConfigPathsConfined(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return true;
  auto cfgs = j.find("configs");
  if (cfgs == j.end() || !cfgs->is_object()) return true;
  for (const auto& e : *cfgs) {
    if (!e.is_object()) continue;
    auto f = e.find("file");
    if (f == e.end() || !f->is_string()) continue;
    const std::string& p = f->get_ref<const std::string&>();
    if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos || p.size() < 5 ||
        p.compare(p.size() - 5, 5, ".json") != 0)
      return false;
  }
  return true;
}

// The command line's MODEL and --topology for a single layout: a small MoE decoder on 64 H100s.
const onboard::PlanRequest& BaseRequest() {
  static const onboard::PlanRequest req = [] {
    onboard::PlanRequest r;
    auto m = onboard::ModelFromDims(
        R"({"hidden":512,"ffn":1024,"heads":8,"kv_heads":2,"layers":4,"vocab":1024,"experts":8,"top_k":2,)"
        R"("moe_ffn":256,"gated":true})",
        "fuzz-model");
    auto t = onboard::TopologyForHardware("H100-80GB", 64, 0, "fuzz-topology");
    Require(m.ok() && t.ok(), "base request", m.ok() ? t.status().ToString() : m.status().ToString());
    r.model = *m;
    r.topology = *t;
    r.mode = onboard::FinetuneMode::kLoRA;  // the CLI's default --mode
    return r;
  }();
  return req;
}

void CheckRun(const onboard::LayoutRun& run) {
  const onboard::Plan& p = run.plan;
  const onboard::ParallelDegrees& d = p.deg;
  Require(d.tp >= 1 && d.pp >= 1 && d.cp >= 1 && d.ep >= 1 && d.etp >= 1 && d.interleave >= 1 &&
              d.dp_shard >= 1 && d.dp_replicate >= 1 && p.micro_batch >= 1,
          "accepted run has a degree < 1", onboard::PlanSummary(p));
  Require(p.stage_layer_starts.empty() ||
              static_cast<int64_t>(p.stage_layer_starts.size()) == d.pp * d.interleave,
          "stage starts are not pp*vp", std::to_string(p.stage_layer_starts.size()));
  for (const auto& m : {run.measured_step_s, run.measured_tokens_per_s_per_gpu, run.measured_tflops_per_gpu})
    Require(!m || (std::isfinite(*m) && *m > 0), "accepted measurement is not finite and > 0",
            std::to_string(*m));
  if (!run.has_model) return;
  Require(!run.model.layers.empty() && onboard::ModelSizeFitsInt64(run.model), "accepted model too large",
          run.id);
  if (run.skipped.empty())
    Require(onboard::ValidateTopology(run.topology).ok(), "accepted run's topology is invalid",
            onboard::ValidateTopology(run.topology).ToString());
}

// One run as cli/plan_command.cpp RunEvaluate costs it (without printing).
void Evaluate(onboard::LayoutRun run) {
  if (!run.skipped.empty()) {
    (void)onboard::MakeCalibrationRow(run, nullptr);
    return;
  }
  onboard::PlanRequest req;
  if (run.has_model) {
    onboard::ResolveUnstatedRecompute(&run);
    req = onboard::RequestForRun(run);
  } else {
    req = BaseRequest();
    onboard::ApplyRunOptions(run, &req);
    if (run.plan.seq == 0) run.plan.seq = req.seq;
    req.seq = run.plan.seq;
    if (run.mode_stated) {
      req.mode = run.plan.mode;
      if (run.plan.mode == onboard::FinetuneMode::kLoRA) req.lora_rank = run.plan.lora_rank;
    } else {
      run.plan.mode = req.mode;
      if (req.mode == onboard::FinetuneMode::kLoRA && run.plan.lora_rank == 0)
        run.plan.lora_rank = req.lora_rank;
    }
    if (run.layout_layers >= 0 && run.layout_layers != static_cast<int64_t>(req.model.layers.size())) return;
  }
  auto est = onboard::EvaluatePlan(req, run.plan);
  if (!est.ok()) return;
  (void)onboard::EstimateToJson(run.plan, *est);
  if (run.measured_tokens_per_s_per_gpu) (void)onboard::MakeCalibrationRow(run, &*est);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;  // layout files are KiB; bigger inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!ConfigPathsConfined(text)) return 0;
  auto runs = onboard::ParseLayoutJson(text, kOrigin);
  if (!runs.ok()) {
    const onboard::Status& st = runs.status();
    Require(st.code() == onboard::ErrorCode::kBadInput || st.code() == onboard::ErrorCode::kNotFound,
            "rejection is neither kBadInput nor kNotFound", st.ToString());
    Require(st.message().find('\n') == std::string::npos, "error is not one line", st.message());
    return 0;
  }
  Require(!runs->empty(), "accepted file has no run", text.substr(0, 80));
  for (const onboard::LayoutRun& run : *runs) {
    CheckRun(run);
    Evaluate(run);
  }
  return 0;
}
