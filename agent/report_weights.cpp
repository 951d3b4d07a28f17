// report.json's "weights" section (see agent/report_weights.h).
#include "agent/report_weights.h"

namespace onboard::agent {

using nlohmann::json;

namespace {

// The real-weights LoRA probe: which weights it trained on, the held-out losses and the verdict.
json LoraProbeJson(const WeightsStage& w) {
  if (!w.probed) return {{"ran", false}, {"reason", w.probe_reason}};
  const WeightsProbeResult& p = w.probe;
  return {{"ran", true},
          {"layers", {p.layers_first, p.layers_last}},
          {"tensors", p.tensors_used},
          {"dtypes", p.dtypes},
          {"rank_bytes", p.rank_bytes},
          {"targets", p.targets},
          {"lora_rank", p.options.lora_rank},
          {"lora_alpha", p.options.lora_alpha},
          {"ranks", p.options.ranks},
          {"steps", p.options.steps},
          {"text", p.options.text_file},
          {"held_out_frozen", p.held_out_frozen},
          {"held_out_final", p.held_out_final},
          {"min_fall", kWeightsProbeMinFall},
          {"verdict", p.learned ? "learned" : "not_learned"},
          {"adapter", p.adapter_dir}};
}

}  // namespace

json WeightsSection(const RunState& st) {
  const WeightsStage& w = st.weights;
  if (!w.loaded) return {{"loaded", false}, {"reason", w.reason}};
  const HfVerifyResult& r = w.result;
  json j = {{"loaded", true},
            {"model_type", r.model_type},
            {"layout", r.layout},
            {"layers_run", r.layers_run},
            {"tensors", r.tensors_used},
            {"dtypes", r.dtypes},
            {"compute_dtype", "fp32"},
            {"dequant", r.dequant},
            {"bytes_read", r.bytes_touched},
            {"checkpoint_bytes", r.checkpoint_bytes},
            {"tp", w.tp},
            {"fsdp", w.fsdp},
            {"ranks", json::array()}};
  if (!r.rank_bytes_error.empty()) j["ranks_error"] = r.rank_bytes_error;
  for (const HfRankBytes& b : r.rank_bytes)
    j["ranks"].push_back({{"tp_rank", b.tp_rank}, {"fsdp_rank", b.fsdp_rank}, {"bytes_read", b.bytes}});
  if (r.compared)
    j["check"] = {
        {"ours", "fp32 forward"},       {"reference", w.reference}, {"rtol", kVerifyRtol},
        {"atol_frac", kVerifyAtolFrac}, {"max_abs", r.max_abs},     {"max_rel", r.max_rel},
        {"top1_agree", r.top1_agree},   {"rows", r.rows},           {"verdict", r.passed ? "PASS" : "FAIL"}};
  j["lora_probe"] = LoraProbeJson(w);
  return j;
}

}  // namespace onboard::agent
