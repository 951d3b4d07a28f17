// FusionPlanJson (see search/fusion_plan_json.h).
#include "search/fusion_plan_json.h"

namespace onboard {
namespace {

nlohmann::json TermsJson(const std::vector<FusionTerm>& list) {
  nlohmann::json terms = nlohmann::json::array();
  for (const FusionTerm& t : list) {
    nlohmann::json j = {{"kind", FusionKindName(t.kind)},
                        {"chain", t.chain},
                        {"launches_saved", t.launches_saved},
                        {"bytes_saved_per_token", t.bytes_saved},
                        {"formula", t.formula}};
    if (!t.blocked_by.empty()) j["blocked_by"] = t.blocked_by;
    terms.push_back(j);
  }
  return terms;
}

nlohmann::json LayerJson(const LayerFusion& l) {
  nlohmann::json j = {{"terms", TermsJson(l.terms)}};
  if (!l.blocked.empty()) j["blocked"] = TermsJson(l.blocked);
  return j;
}

}  // namespace

nlohmann::json FusionPlanJson(const FusionPlan& plan, bool per_layer) {
  nlohmann::json j = {{"seq", plan.options.seq},
                      {"act_bytes", plan.options.act_bytes},
                      {"launches_saved_per_forward", plan.SavedLaunches()},
                      {"bytes_saved_per_token", plan.SavedBytesPerToken()}};
  if (per_layer) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerFusion& l : plan.layers) {
      nlohmann::json lj = LayerJson(l);
      lj["layer"] = l.layer;
      layers.push_back(lj);
    }
    j["layers"] = layers;
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const FusionLayerRun& run : FoldFusionLayers(plan)) {
    const LayerFusion& l = plan.layers[run.first];
    nlohmann::json gj = LayerJson(l);
    gj["first_layer"] = l.layer + 1;
    gj["last_layer"] = plan.layers[run.last].layer + 1;
    gj["count"] = run.last - run.first + 1;
    gj["launches_saved"] = l.SavedLaunches();
    gj["bytes_saved_per_token"] = l.SavedBytesPerToken();
    groups.push_back(gj);
  }
  j["groups"] = groups;
  return j;
}

}  // namespace onboard
