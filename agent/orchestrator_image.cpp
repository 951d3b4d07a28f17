// Stage image_probe of the orchestrator (see orchestrator_stages.h; issue 12 item 6): for a model
// with a vision tower, one extra probe in round 1 that trains the proxy's tower (ViT blocks, 2x2
// merge, projector into the LM) on the image task, whose answers only the image holds. It is the
// report's evidence that the image path learns: loss on the image-conditioned answers against the
// no-image baseline ln 8, and the answers' exact-match accuracy, judged by the learning verdict.
// Bounded like the other probes (the run's probe steps, seq, batch and timeout, full mode, tp 1,
// pp 1) and traced (a stage timing and an observation).
// Units: seconds; loss in nats.
#include <filesystem>

#include "agent/orchestrator_stages.h"
#include "agent/probe_recipe.h"
#include "backends/backend_entry.h"
#include "report/report_format.h"

namespace onboard::agent {

namespace fs = std::filesystem;

bool HasVisionTower(const RunState& st) {
  return ProxyFromModel(st.model, st.req.probe.proxy_blocks).vision.blocks > 0;
}

Expected<std::string> StageImageProbe(RunState& st, Emitter& em, const CancelToken& cancel) {
  // Step 1: the image recipe on the proxy, with round 1's kernel fallbacks (if any fired).
  const ProxySpec spec = ProxyFromModel(st.model, st.req.probe.proxy_blocks);
  ProbeConfig cfg = ImageProbeRecipe(st.req);
  ApplyKernelFallbacks(st.knobs, &cfg);
  cfg.out_dir = (fs::path(st.req.out_dir) / "probe" / "image").string();
  st.image.ran = true;
  st.image.log_dir = cfg.out_dir;
  std::error_code ec;
  fs::create_directories(cfg.out_dir, ec);
  em.Emit({{"type", "stage_progress"},
           {"stage", "image_probe"},
           {"round", 1},
           {"done", 0},
           {"total", cfg.steps},
           {"message",
            "image task, vision tower " + spec.vision.source + ", " + std::to_string(cfg.ranks) + " ranks"}});
  // Step 2: run it; a failure is kept for the report.
  LoopProbeObserver observer(cancel, em, "image_probe", 1, cfg.steps);
  Expected<ProbeResult> res = backend::RunProbeSpec(spec, cfg, &observer);
  if (cancel.cancelled()) return Status(ErrorCode::kInternal, "cancelled during the image probe");
  if (!res.ok()) {
    st.image.error = res.status().message();
    return Status(res.status().code(), "image probe failed: " + st.image.error);
  }
  st.image.result = std::move(*res);
  const ProbeResult& r = st.image.result;
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "probe/image/probe.json", ProbeResultToJson(r)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "probe/image/probe.txt", FormatProbeResult(r)));
  // Step 3: trace what it showed.
  const std::string summary = "image task " + r.convergence + ": loss " + FmtFixed(r.final_loss, 3) +
                              " vs no-image " + FmtFixed(r.baseline_nats, 3) + " nats, accuracy " +
                              FmtPct(r.skill) + " (target " + FmtPct(r.skill_target) + ")";
  st.trace.AddObservation(1, "image_probe",
                          {{"convergence", r.convergence},
                           {"final_loss", r.final_loss},
                           {"no_image_baseline_nats", r.baseline_nats},
                           {"image_accuracy", r.skill}},
                          st.image.learned() ? "the image path learns" : "the image path did NOT learn");
  return summary;
}

}  // namespace onboard::agent
