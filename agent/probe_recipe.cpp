// The agent's probe recipe (see probe_recipe.h).
#include "agent/probe_recipe.h"

#include <algorithm>
#include <string>

#include "backends/probe_schedule.h"

namespace onboard::agent {

ProbeConfig ProbeRecipe(const RunRequest& req) {
  const ProbeSettings& s = req.probe;
  // Step 1: the mode's recipe, the one home of the probe's training numbers.
  ProbeConfig c = DefaultProbeConfig(req.mode);
  c.ranks = s.ranks;
  c.ranks_per_node = s.ranks_per_node;  // checked by ProbeConfig::Validate (it must divide ranks)
  // Step 2: a shorter (or longer) run keeps the recipe's shape: warm-up at most a quarter of the
  // steps, and a LoRA base phase in proportion to the adapter steps.
  if (s.steps) {
    c.steps = *s.steps;
    c.warmup = std::min<int64_t>(c.warmup, std::max<int64_t>(1, c.steps / 4));
    if (req.mode == FinetuneMode::kLoRA) c.base_steps = -1;
  }
  if (s.seq) c.seq = *s.seq;
  // Step 3: the global batch as whole sequences per rank (the recipe's batch / ranks, >= 1).
  const int64_t per_rank = s.micro_batch ? *s.micro_batch : std::max<int64_t>(1, c.batch / s.ranks);
  c.batch = per_rank * s.ranks;
  if (s.learning_rate) c.lr = *s.learning_rate;
  // LoRA: the probe adapts with the run's own adapter rank (its default is the recipe's, kLoraRank),
  // at most the probe's kMaxLoraRank: the proxy is narrower than any rank above it.
  if (req.mode == FinetuneMode::kLoRA) c.lora_rank = std::min(req.lora_rank, backends::kMaxLoraRank);
  if (s.grad_clip) c.clip = *s.grad_clip;
  // Step 4: what is the run's, not the recipe's.
  c.seed = s.seed;
  c.timeout_s = s.timeout_s;
  c.worker_binary = s.worker_binary;
  c.threads_per_rank = 1;
  // A negative control (tests, `onboard run --probe-control`); no_image is the image probe's only.
  c.control = s.control == kControlNoImage ? std::string() : s.control;
  // The loop probes the generated kernels it delivers: KDA (ProbeConfig's default) and the fused
  // DSA kernel (`onboard probe` keeps the torch ops by default); round 1 checks both against the
  // reference ops (loss parity) and the kernel-fallback rule moves a failed family back to them.
  c.dsa_kernel = ProbeKernel::kGenerated;
  // Step 5: the run's observation thresholds, so the probe's report judges as the rules do.
  c.thresholds = static_cast<const ObservationThresholds&>(req.thresholds);
  return c;
}

ProbeConfig ImageProbeRecipe(const RunRequest& req) {
  // Step 1: the run's recipe and overrides in full mode (no adapters, no base phase).
  RunRequest full = req;
  full.mode = FinetuneMode::kFull;
  ProbeConfig c = ProbeRecipe(full);
  // Step 2: the image task on an unsplit tower; only the image task's own control.
  c.task = ProbeTask::kImage;
  c.tp = 1;
  c.pp = 1;
  c.control = req.probe.control == kControlNoImage ? req.probe.control : std::string();
  return c;
}

}  // namespace onboard::agent
