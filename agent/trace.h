// The agent's trace (trace.json): for every round, what was observed, which rule fired and what
// changed; plus the stage timeline. Rounds where no rule fired are recorded too, with the
// observations, so a reviewer sees why the loop stopped.
// Units: seconds since the run started.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/orchestrator.h"
#include "agent/rules/rules.h"

namespace onboard::agent {

class Trace {
 public:
  void AddDecision(const Decision& d) { decisions_.push_back(d); }
  // An observation that did not fire a rule ("round 2: loss ratio 0.41, imbalance 1.08 -> stop").
  void AddObservation(int round, const std::string& stage, nlohmann::json observed, std::string outcome);
  void AddStage(const StageTiming& t) { stages_.push_back(t); }

  const std::vector<Decision>& decisions() const { return decisions_; }
  const std::vector<StageTiming>& stages() const { return stages_; }

  // {"decisions":[...], "observations":[...], "stages":[...], "rules":[table]}
  nlohmann::json ToJson() const;

 private:
  std::vector<Decision> decisions_;
  nlohmann::json observations_ = nlohmann::json::array();
  std::vector<StageTiming> stages_;
};

nlohmann::json StageTimingToJson(const StageTiming& t);
nlohmann::json RuleTableToJson();

}  // namespace onboard::agent
