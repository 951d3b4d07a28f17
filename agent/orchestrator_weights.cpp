// Stage "weights": when the model is a checkpoint directory with safetensors, load its weights through
// the backend (mmap, dequantised to fp32), run the forward on token ids and compare the logits; record
// the bytes each rank of the final plan reads (TP ranks x FSDP ranks 0 and last). See
// agent/orchestrator_stages.h; the report section is agent/report_weights.h.
// Reference: the request's .npy (verify_reference), else an fp64 forward of the same weights (a
// precision check of the fp32 load and forward, not an independent check of the semantics: that is
// `onboard verify --reference` with the framework's logits, and the HfFamilies.* tests).
#include <algorithm>
#include <filesystem>

#include "agent/orchestrator_stages.h"
#include "backends/backend_entry.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

// A fixed 8-token sequence (ids 1, 2, ... spread over the vocabulary by a prime stride).
std::string DefaultIds(int64_t vocab) {
  std::string s = "[[";
  for (int64_t i = 0; i < 8; ++i)
    s += (i ? "," : "") + std::to_string((1 + i * 7919) % std::max<int64_t>(vocab, 1));
  return s + "]]\n";
}

// Step 5: LoRA on the real embedding, layers 0-1 and head over the request's text (probe_weights.h).
// It runs when the request names a text (its own request: --no-probe skips the proxy probes only). A
// probe that cannot run (bad text, a rank died) is recorded, not fatal: the load itself passed.
std::string ProbeRealWeights(RunState& st, int64_t layers) {
  WeightsStage& w = st.weights;
  if (st.req.weights_text.empty()) {
    w.probe_reason = "no real-weights LoRA probe: no text given (onboard run --weights-text FILE)";
    return "";
  }
  WeightsProbeOptions o;
  o.checkpoint = st.req.model_path;
  o.text_file = st.req.weights_text;
  o.layers = {0, std::min<int64_t>(layers, 2) - 1};
  o.ranks = st.req.probe.ranks;
  o.batch = 4 * o.ranks;
  o.seed = st.req.probe.seed;
  o.timeout_s = st.req.probe.timeout_s;
  o.worker_binary = st.req.probe.worker_binary;
  o.out_dir = (fs::path(st.req.out_dir) / "weights" / "probe").string();
  Expected<WeightsProbeResult> r = backend::RunWeightsProbe(o);
  if (!r.ok()) {
    w.probe_reason = "real-weights LoRA probe failed: " + r.status().message();
    return "; LoRA probe failed";
  }
  w.probe = *r;
  w.probed = true;
  st.artifacts["weights/probe/adapter"] = r->adapter_dir;
  return std::string("; LoRA probe on real layers: ") + (r->learned ? "learned" : "not_learned");
}

}  // namespace

bool IsCheckpointDir(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_directory(path, ec)) return false;
  if (fs::exists(fs::path(path) / "model.safetensors.index.json", ec)) return true;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

Expected<std::string> StageWeights(RunState& st) {
  WeightsStage& w = st.weights;
  // Step 1: only a directory with safetensors has weights to load.
  if (!IsCheckpointDir(st.req.model_path)) {
    w.reason =
        "no weights loaded: the model is a config or graph file, not a checkpoint directory with safetensors";
    return std::string("skipped: no safetensors");
  }
  // Step 2: the ids, and the plan's TP / FSDP degrees for the per-rank bytes.
  std::error_code ec;
  fs::create_directories(fs::path(st.req.out_dir) / "weights", ec);
  HfVerifyOptions o;
  o.checkpoint = st.req.model_path;
  o.ids_path = st.req.verify_ids;
  if (o.ids_path.empty()) {
    ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "weights/input_ids.json", DefaultIds(st.model.vocab)));
    o.ids_path = st.artifacts["weights/input_ids.json"];
  }
  if (const PlanRound* p = st.final_plan()) {
    const ParallelDegrees& d = p->search.best.plan.deg;
    w.tp = d.tp;
    w.fsdp = d.dp_shard;
    o.expert_tp = d.etp > 1;  // Megatron: etp = tp splits each routed expert; etp = 1 folds EP over TP
  }
  // Step 3: the reference: the request's, or an fp64 forward of the same weights.
  w.reference = st.req.verify_reference.empty()
                    ? "fp64 forward of the same weights (precision only)"
                    : "reference file " + fs::path(st.req.verify_reference).filename().string();
  o.reference = st.req.verify_reference;
  if (o.reference.empty()) {
    HfVerifyOptions ref = o;
    ref.dtype = FloatDtype::kFP64;
    ref.logits_out = (fs::path(st.req.out_dir) / "weights" / "logits_fp64.npy").string();
    Expected<HfVerifyResult> r64 = backend::RunHfVerify(ref);
    if (!r64.ok()) {
      w.reason = "weights did not load: " + r64.status().message();
      return r64.status();
    }
    st.artifacts["weights/logits_fp64.npy"] = ref.logits_out;
    o.reference = ref.logits_out;
  }
  // Step 4: the fp32 load + forward, compared; per-rank bytes under the plan.
  o.logits_out = (fs::path(st.req.out_dir) / "weights" / "logits.npy").string();
  o.tp = w.tp;
  o.fsdp = w.fsdp;
  Expected<HfVerifyResult> r = backend::RunHfVerify(o);
  if (!r.ok()) {
    w.reason = "weights did not load: " + r.status().message();
    return r.status();
  }
  st.artifacts["weights/logits.npy"] = o.logits_out;
  w.result = *r;
  w.loaded = true;
  const std::string probe = ProbeRealWeights(st, r->layers_run);
  return std::to_string(r->tensors_used) + " tensors loaded, logits vs " + w.reference + ": " +
         (r->passed ? "PASS" : "FAIL") + probe;
}

}  // namespace onboard::agent
