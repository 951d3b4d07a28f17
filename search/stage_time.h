// Per-stage time and parameters of one micro-batch (Step 1 of the step-time model, search/cost_model.cpp):
// the layers' times (search/layer_time.h) summed over each pipeline stage's chunks, with the head and the
// MTP layers on the last stage, the FSDP traffic and the EP / FSDP comm left exposed, and DualPipe's
// rank folding. Internal to search/. Units: seconds per micro-batch, parameters (count).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search/layer_time.h"

namespace onboard {

struct Stage {
  double compute = 0, rc = 0, tp = 0, tp_total = 0, a2a = 0, a2a_exposed = 0, fsdp = 0, fsdp_exposed = 0,
         bwd = 0;
  double cp = 0, cp_total = 0, host = 0, fwd = 0;
  double dense = 0, expert = 0, lora = 0, lora_expert = 0;  // parameters on one device of the stage
  int64_t layers = 0;
  std::map<std::string, double> by_kind;  // fwd+bwd seconds per block kind name (+ "head", "mtp")
  std::vector<double> kind_s;             // fwd+bwd seconds per ModelProfile::kinds entry (< 0: none)

  // Seconds of one micro-batch on this stage: compute, recompute and the exposed comm and host time.
  double MicroBatchSeconds() const { return compute + rc + tp + cp + host + a2a_exposed + fsdp_exposed; }
};

struct StageTimes {
  std::vector<Stage> stages;  // one per pipeline stage (DualPipe: per rank)
  std::string fsdp_tier, efsdp_tier;
};

// Step 1 of EstimatePlan: the stages of plan p with layer times `lt` split at `starts`.
StageTimes SumStageTimes(const CostContext& c, const Plan& p, const TimeModel& tm,
                         const std::vector<LayerTime>& lt, const std::vector<int64_t>& starts);

}  // namespace onboard
