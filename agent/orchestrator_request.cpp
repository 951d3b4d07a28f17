// RunRequest / Thresholds validation, event sinks and the emitter (see agent/orchestrator.h).
#include <chrono>
#include <cmath>
#include <sstream>

#include "agent/orchestrator.h"
#include "agent/orchestrator_state.h"
#include "agent/probe_recipe.h"
#include "search/plan_request_checks.h"

namespace onboard::agent {
namespace {
Status Range(const std::string& field, double v, double lo, double hi) {
  return CheckRange("run request", field, v, lo, hi);
}
}  // namespace

Status RunRequest::Validate() const {
  if (model_path.empty() == model_bytes.empty())
    return BadInput("run request", "model", "give exactly one of a model path or model bytes",
                    model_path.empty() ? "none" : "both");
  if (!model_format.empty() && model_format != "json" && model_format != "onnx")
    return BadInput("run request", "model_format", "must be json | onnx", model_format);
  if (topology.empty()) return BadInput("run request", "topology", "is required", "\"\"");
  if (out_dir.empty()) return BadInput("run request", "out_dir", "is required", "\"\"");
  // The plan's own fields: the plan request's checks (search/plan_request_checks.h), not a copy.
  ONBOARD_RETURN_IF_ERROR(CheckPlanShape("run request", mode, lora_rank, seq, global_batch));
  ONBOARD_RETURN_IF_ERROR(
      CheckPrecisionUse("run request", "base_dtype", base_dtype, PrecisionUse::kFrozenBase));
  ONBOARD_RETURN_IF_ERROR(
      CheckPrecisionUse("run request", "compute_dtype", compute_dtype, PrecisionUse::kCompute));
  // The model's layer count is not known here; StagePlan's PlanRequest::Validate checks it per model.
  ONBOARD_RETURN_IF_ERROR(
      CheckBf16LayerRequest("run request", compute_dtype, bf16_layers_first, bf16_layers_last, 0));
  // The model's top_k is not known here; StagePlan's PlanRequest::Validate checks it per model.
  ONBOARD_RETURN_IF_ERROR(
      CheckExpertRouting("run request", "", expert_nodes_per_token, max_route_nodes, kTopKUnknown));
  // Stage "weights" inputs: with a config or graph there are no weights to check or train, so they
  // are refused rather than silently skipped.
  const char* weights_field = !verify_ids.empty()         ? "verify_ids"
                              : !verify_reference.empty() ? "verify_reference"
                              : !weights_text.empty()     ? "weights_text"
                                                          : nullptr;
  if (weights_field && !IsCheckpointDir(model_path))  // one directory scan, only when one is set
    return BadInput("run request", weights_field,
                    "needs the model to be a checkpoint directory with safetensors",
                    model_path.empty() ? "an inline model" : model_path);
  ONBOARD_RETURN_IF_ERROR(Range("max_rounds", max_rounds, 1, 20));
  ONBOARD_RETURN_IF_ERROR(Range("threads", threads, 1, 256));
  ONBOARD_RETURN_IF_ERROR(Range("probe.ranks", probe.ranks, 1, 64));
  ONBOARD_RETURN_IF_ERROR(Range("probe.proxy_blocks", probe.proxy_blocks, 1, 64));
  if (probe.micro_batch) ONBOARD_RETURN_IF_ERROR(Range("probe.micro_batch", *probe.micro_batch, 1, 4096));
  ONBOARD_RETURN_IF_ERROR(Range("probe.timeout_s", probe.timeout_s, 1, 86400));
  // The recipe with the overrides is checked by the probe's own Validate (one home of its limits:
  // steps, seq, batch, lr, clip), on the layout every plan can fall back to (ep = fsdp = 1).
  ProbeConfig recipe = ProbeRecipe(*this);
  recipe.ep = recipe.fsdp = 1;
  // The checks that depend on the model (experts, layers) run per round; here the proxy holds one
  // layer of each mixer (KDA, and MLA with its DSA indexer), so a control that needs either passes.
  ProxySpec any_proxy;
  any_proxy.layers = {ProxyLayer{}, ProxyLayer{ProxyMixer::kMLA, ProxyChannel::kMoE}};
  if (Status st = recipe.Validate(any_proxy); !st.ok())
    return Status(st.code(), "run request probe settings: " + st.message());
  return thresholds.Validate();
}

bool IsCancelled(const Status& st) { return !st.ok() && st.message().rfind("cancelled", 0) == 0; }

void CollectingEventSink::OnEvent(const nlohmann::json& event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(event);
}

std::vector<nlohmann::json> CollectingEventSink::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

double NowEpochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Emitter::Emit(nlohmann::json event) {
  std::lock_guard<std::mutex> lock(mu_);
  event["ts"] = NowEpochSeconds();
  event["seq"] = seq_++;
  try {
    sink_.OnEvent(event);
  } catch (...) {  // a sink must not break the run
  }
}

void Emitter::Log(const std::string& level, const std::string& message) {
  Emit({{"type", "log"}, {"level", level}, {"message", message}});
}

double Emitter::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

}  // namespace onboard::agent
