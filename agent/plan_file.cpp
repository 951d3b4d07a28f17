// LoadPlanFile (see plan_file.h): the fields of PlanJson, each checked for type and range.
#include "agent/plan_file.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "search/plan_request_checks.h"  // kMaxLoraRank, kMaxSeq, kMaxGlobalBatch: the plan's own limits

namespace onboard::agent {
namespace {

using nlohmann::json;

// Typed access to the plan object's keys; errors name origin and path + key.
struct PlanFields {
  const json& j;
  const std::string& origin;
  const std::string& path;
  Status Int(const char* key, int64_t lo, int64_t hi, int64_t* out, bool required = false) const {
    auto it = j.find(key);
    if (it == j.end()) return required ? BadInput(origin, path + key, "missing") : Status::Ok();
    if (!it->is_number_integer()) return BadInput(origin, path + key, "must be an integer", it->dump());
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
      return BadInput(origin, path + key,
                      "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                      std::to_string(v));
    *out = v;
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out) const {
    auto it = j.find(key);
    if (it == j.end()) return Status::Ok();
    if (!it->is_boolean()) return BadInput(origin, path + key, "must be true or false", it->dump());
    *out = it->get<bool>();
    return Status::Ok();
  }
  Status Str(const char* key, std::string* out) const {
    auto it = j.find(key);
    if (it == j.end()) return Status::Ok();
    if (!it->is_string()) return BadInput(origin, path + key, "must be a string", it->dump());
    *out = it->get<std::string>();
    return Status::Ok();
  }
  // A precision (core/precision.h, its one parser) allowed for `use`; absent = the Plan default.
  Status Prec(const char* key, PrecisionUse use, Precision* out) const {
    if (j.find(key) == j.end()) return Status::Ok();
    std::string name;
    ONBOARD_RETURN_IF_ERROR(Str(key, &name));
    Expected<Precision> p = ParsePrecision(origin, path + key, name, use);
    if (!p.ok()) return p.status();
    *out = *p;
    return Status::Ok();
  }
};

// Step 2: degrees, batch and mode of the plan object at `path` ("best.plan.").
Status ReadPlanObject(const json& j, const std::string& origin, const std::string& path, Plan* p) {
  const PlanFields f{j, origin, path};
  constexpr int64_t kMax = int64_t{1} << 20;
  ONBOARD_RETURN_IF_ERROR(f.Int("dp_replicate", 1, kMax, &p->deg.dp_replicate, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("dp_shard", 1, kMax, &p->deg.dp_shard, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("tp", 1, kMax, &p->deg.tp, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("pp", 1, kMax, &p->deg.pp, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("ep", 1, kMax, &p->deg.ep, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("expert_fsdp", 1, kMax, &p->deg.expert_fsdp));
  ONBOARD_RETURN_IF_ERROR(f.Int("interleave", 1, 1024, &p->deg.interleave));
  ONBOARD_RETURN_IF_ERROR(f.Int("cp", 1, kMax, &p->deg.cp));
  ONBOARD_RETURN_IF_ERROR(f.Bool("sequence_parallel", &p->deg.sequence_parallel));
  ONBOARD_RETURN_IF_ERROR(f.Int("micro_batch", 1, kMax, &p->micro_batch, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("num_micro_batches", 1, kMax, &p->num_micro_batches, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("seq", 1, kMaxSeq, &p->seq));
  ONBOARD_RETURN_IF_ERROR(f.Int("global_batch", 0, kMaxGlobalBatch, &p->global_batch));
  ONBOARD_RETURN_IF_ERROR(f.Int("zero_stage", 0, 3, &p->zero_stage));
  ONBOARD_RETURN_IF_ERROR(f.Int("lora_rank", 0, kMaxLoraRank, &p->lora_rank));
  ONBOARD_RETURN_IF_ERROR(f.Prec("base_dtype", PrecisionUse::kFrozenBase, &p->base_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Prec("compute_dtype", PrecisionUse::kCompute, &p->compute_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Int("bf16_layers_first", 0, kMax, &p->bf16_layers_first));
  ONBOARD_RETURN_IF_ERROR(f.Int("bf16_layers_last", 0, kMax, &p->bf16_layers_last));
  ONBOARD_RETURN_IF_ERROR(f.Prec("optimizer_dtype", PrecisionUse::kOptimizerState, &p->optimizer_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Prec("grad_dtype", PrecisionUse::kGrads, &p->grad_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Prec("param_dtype", PrecisionUse::kOptimizerState, &p->param_dtype));
  std::string mode = "full", fsdp_pipelining;
  ONBOARD_RETURN_IF_ERROR(f.Str("fsdp_pipelining", &fsdp_pipelining));
  if (!fsdp_pipelining.empty()) {
    ONBOARD_ASSIGN_OR_RETURN(p->fsdp_pipelining,
                             ParseFsdpPipelining(origin, path + "fsdp_pipelining", fsdp_pipelining));
  }
  ONBOARD_RETURN_IF_ERROR(f.Str("mode", &mode));
  ONBOARD_ASSIGN_OR_RETURN(p->mode, ParseFinetuneMode(origin, path + "mode", mode));
  // Step 3: recompute per block kind: {"KDA": "full", ...}.
  auto rc = j.find("recompute");
  if (rc == j.end()) return Status::Ok();
  if (!rc->is_object())
    return BadInput(origin, path + "recompute", "must be an object of kind: policy", rc->dump());
  for (auto it = rc->begin(); it != rc->end(); ++it) {
    const std::string field = path + "recompute." + it.key();
    if (!it->is_string()) return BadInput(origin, field, "must be none, selective or full", it->dump());
    ONBOARD_ASSIGN_OR_RETURN(p->recompute[it.key()], ParseRecompute(origin, field, it->get<std::string>()));
  }
  return Status::Ok();
}

}  // namespace

Expected<Plan> ParsePlanJson(const std::string& text, const std::string& origin) {
  // Step 1: the document and where its plan object is.
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return BadInput(origin, "json", std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) return BadInput(origin, "plan", "must be a JSON object", j.dump().substr(0, 40));
  const json* obj = &j;
  std::string path;
  if (j.contains("best")) {
    if (!j["best"].is_object() || !j["best"].contains("plan"))
      return BadInput(origin, "best.plan", "missing (a search result without a best plan)");
    obj = &j["best"]["plan"];
    path = "best.plan.";
  } else if (j.contains("plan")) {
    obj = &j["plan"];
    path = "plan.";
  }
  if (!obj->is_object())
    return BadInput(origin, path.empty() ? "plan" : path.substr(0, path.size() - 1), "must be an object");
  Plan p;
  ONBOARD_RETURN_IF_ERROR(ReadPlanObject(*obj, origin, path, &p));
  return p;
}

Expected<Plan> LoadPlanFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return BadInput(path, "plan", "cannot read the plan file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ParsePlanJson(ss.str(), path);
}

}  // namespace onboard::agent
