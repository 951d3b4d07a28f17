// FusionsSection (see agent/report_fusions.h).
#include "agent/report_fusions.h"

#include "search/fusion_plan_graph.h"
#include "search/fusion_plan_json.h"

namespace onboard::agent {

nlohmann::json FusionsSection(const RunState& st) {
  FusionOptions o;
  o.seq = st.req.seq;
  bool from_graph = false;
  Expected<FusionPlan> plan = PlanFusionsForModelFile(st.model, st.req.model_path, o, &from_graph);
  if (!plan.ok()) {  // the graph was read once already to build the model: report, do not fail the run
    nlohmann::json j = FusionPlanJson(PlanFusions(st.model, o), /*per_layer=*/false);
    j["source"] = "model IR";
    j["graph_error"] = plan.status().ToString();
    return j;
  }
  nlohmann::json j = FusionPlanJson(*plan, /*per_layer=*/false);
  j["source"] = from_graph ? "model IR + ONNX graph" : "model IR";
  return j;
}

}  // namespace onboard::agent
