// report.json's "image_probe" section (issue 12 item 6): round 1's image probe of a model with a
// vision tower (agent/orchestrator_image.cpp). Absent (null) when none ran: a text-only model, or
// probing off. Shape: {verdict, learned, proxy, vision_tower, config {ranks, steps, seq, batch, lr,
// control}, final_loss, no_image_baseline_nats (ln 8), loss_target_nats, image_accuracy,
// accuracy_target, task, checks[], loss[], log_dir} or {error, learned: false, log_dir} when the
// probe could not run. `learned` is the verdict "converged": anything else fails the image path.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/orchestrator_state.h"

namespace onboard::agent {

nlohmann::json ImageProbeSection(const RunState& st);

}  // namespace onboard::agent
