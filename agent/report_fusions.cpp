// FusionsSection (see agent/report_fusions.h).
#include "agent/report_fusions.h"

#include "search/cost_model.h"
#include "search/fusion_plan_graph.h"
#include "search/fusion_plan_json.h"

namespace onboard::agent {
namespace {

// Step 2: what the fusions are worth in the cost model (search/fusion_cost.h): the final plan's step
// with fused kernels against the same plan with every fused attention-side kernel unfused (softmax
// scores stored, the KDA prologue and the DSA indexer as separate kernels).
void AddCostValue(const RunState& st, nlohmann::json* j) {
  const PlanRound* pr = st.final_plan();
  if (pr == nullptr || pr->request.attention_kernel == "unfused") return;
  PlanRequest fused = pr->request;
  fused.model = st.model;
  PlanRequest unfused = fused;
  unfused.attention_kernel = "unfused";
  const Plan& p = pr->search.best.plan;
  const PlanEstimate ef = EstimatePlan(MakeCostContext(fused), p);
  const PlanEstimate eu = EstimatePlan(MakeCostContext(unfused), p);
  (*j)["cost_model"] = {{"fused_step_s", ef.step_s},
                        {"unfused_step_s", eu.step_s},
                        {"fused_activation_bytes", ef.memory.activations},
                        {"unfused_activation_bytes", eu.memory.activations}};
}

}  // namespace

// Step 1: the plan (from the graph when there is one), with the final plan's GEMM input precision
// (fp8 / mxfp8 / nvfp4 fuse each norm with its quantise step); Step 2: its value in the cost model.
nlohmann::json FusionsSection(const RunState& st) {
  FusionOptions o;
  o.seq = st.req.seq;
  if (const PlanRound* pr = st.final_plan(); pr != nullptr) {  // its precision and bf16 first / last layers
    o.gemm_input = pr->search.best.plan.compute_dtype;
    o.bf16_layers_first = pr->search.best.plan.bf16_layers_first;
    o.bf16_layers_last = pr->search.best.plan.bf16_layers_last;
  }
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
  AddCostValue(st, &j);
  return j;
}

}  // namespace onboard::agent
