// The orchestrator's stages, one function each (agent/orchestrator_stages.cpp,
// agent/orchestrator_probe.cpp). Each reads and extends the RunState and returns a one-line
// summary for the timeline, or an error that ends the run. Internal to agent/.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "agent/orchestrator_state.h"
#include "agent/topology_source.h"

namespace onboard::agent {

Expected<std::string> StageParse(RunState& st);
Expected<std::string> StageTemplates(RunState& st);
// Plans the full model with the current knobs; writes plan.json + exports (and plan_round<r>.json).
Expected<std::string> StagePlan(RunState& st, int round, const std::string& reason);
// Generates and checks the model's KDA/DSA kernels (sources + manifests in out/kernels), then
// applies the kernel-fallback rule.
Expected<std::string> StageKernels(RunState& st, Emitter& em, const CancelToken& cancel);
// One probe round with the current knobs (logs in out/probe/round<r>).
Expected<std::string> StageProbe(RunState& st, int round, Emitter& em, const CancelToken& cancel);
// Validates the last probe round and runs the rules; fills knobs.replan / knobs.reprobe.
Expected<std::string> StageValidate(RunState& st, int round, Emitter& em);
// A checkpoint directory's weights: loads them (per plan rank too) and checks the fp32 logits against
// the request's reference or an fp64 forward of the same weights (agent/orchestrator_weights.cpp).
Expected<std::string> StageWeights(RunState& st);
// Round 1's image probe (agent/orchestrator_image.cpp), for a model with a vision tower: the proxy's
// tower trained on the image task (ImageProbeRecipe); logs in out/probe/image, the result in st.image.
bool HasVisionTower(const RunState& st);
Expected<std::string> StageImageProbe(RunState& st, Emitter& em, const CancelToken& cancel);
// report.json / report.md / report.html / trace.json.
Expected<std::string> StageReport(RunState& st);

// The reference operator the templates name per kernel family ("kda", "dsa" -> reference_op), for
// the kernel-fallback rule (after the kernel checks, and on round 1's loss parity).
std::map<std::string, std::string> KernelReferenceOps(const RunState& st);

// A failed KDA or DSA kernel check or loss parity (rules_kernel_fallback.cpp) runs the probe's
// layers of that family on the reference ops (kda_kernel / dsa_kernel = torch).
void ApplyKernelFallbacks(const LoopKnobs& knobs, ProbeConfig* c);

// The loop's view of a running probe: each finished step becomes a stage_progress event of `stage`
// (OnStep runs on the launcher's thread; Emitter is thread-safe), and the launcher polls the loop's
// own CancelToken.
class LoopProbeObserver : public ProbeObserver {
 public:
  LoopProbeObserver(const CancelToken& cancel, Emitter& em, std::string stage, int round, int64_t total);
  bool cancelled() const override { return cancel_.cancelled(); }
  void OnStep(const ProbeStep& s) override;

 private:
  const CancelToken& cancel_;
  Emitter& em_;
  std::string stage_;
  int round_;
  int64_t total_;
};

// Writes text to out_dir/name and records it as an artifact.
Status WriteArtifact(RunState& st, const std::string& name, const std::string& text);

}  // namespace onboard::agent
