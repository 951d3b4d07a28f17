// Trace serialisation (see agent/trace.h).
#include "agent/trace.h"

namespace onboard::agent {

void Trace::AddObservation(int round, const std::string& stage, nlohmann::json observed, std::string outcome) {
  observations_.push_back(
      {{"round", round}, {"stage", stage}, {"observed", std::move(observed)}, {"outcome", std::move(outcome)}});
}

nlohmann::json StageTimingToJson(const StageTiming& t) {
  return {{"stage", t.stage}, {"round", t.round},     {"start_s", t.start_s},
          {"seconds", t.seconds}, {"ok", t.ok}, {"summary", t.summary}};
}

nlohmann::json RuleTableToJson() {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : RuleTable())
    rules.push_back({{"name", r.name}, {"family", r.family}, {"watches", r.watches},
                     {"threshold", r.threshold_field}});
  return rules;
}

nlohmann::json Trace::ToJson() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& x : decisions_) d.push_back(x.ToJson());
  nlohmann::json s = nlohmann::json::array();
  for (const auto& x : stages_) s.push_back(StageTimingToJson(x));
  return {{"decisions", d}, {"observations", observations_}, {"stages", s}, {"rules", RuleTableToJson()}};
}

}  // namespace onboard::agent
