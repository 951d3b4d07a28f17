// report.json's image_probe section (see report_image.h).
#include "agent/report_image.h"

#include <cmath>
#include <filesystem>

namespace onboard::agent {

namespace {

nlohmann::json Num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

nlohmann::json ImageProbeSection(const RunState& st) {
  const ImageProbe& im = st.image;
  if (!im.ran) return nullptr;
  std::error_code ec;
  nlohmann::json j = {{"log_dir", std::filesystem::relative(im.log_dir, st.req.out_dir, ec).string()}};
  // Step 1: a probe that could not run is a failed image path.
  if (!im.error.empty()) {
    j["error"] = im.error;
    j["learned"] = false;
    return j;
  }
  // Step 2: the verdict and its numbers (backends/probe_report.cpp's learning verdict).
  const ProbeResult& r = im.result;
  j["verdict"] = r.convergence;
  j["learned"] = im.learned();
  j["proxy"] = r.spec.PatternString();
  j["vision_tower"] = r.spec.vision.source;
  j["config"] = {{"ranks", r.config.ranks}, {"steps", r.config.steps}, {"seq", r.config.seq},
                 {"batch", r.config.batch}, {"lr", r.config.lr},       {"control", r.config.control}};
  j["final_loss"] = Num(r.final_loss);
  j["no_image_baseline_nats"] = Num(r.baseline_nats);
  j["loss_target_nats"] = Num(r.loss_target);
  j["image_accuracy"] = Num(r.skill);
  j["accuracy_target"] = Num(r.skill_target);
  j["task"] = r.task_floor;
  j["checks"] = r.checks;
  nlohmann::json loss = nlohmann::json::array();
  for (const ProbeStep& s : r.steps) loss.push_back(Num(s.loss));
  j["loss"] = loss;
  return j;
}

}  // namespace onboard::agent
