// POST /v1/plan: synchronous layout search (search/planner.h SearchPlans) for one model on one
// topology. Body: {"model": ModelSource, "topology": TopologySource, "options": {mode, lora_rank, seq,
// global_batch, base_dtype, compute_dtype, bf16_layers_first, bf16_layers_last, top_n,
// expert_nodes_per_token, max_route_nodes, ep_dispatcher}} (schemas in http_openapi.cpp). Nothing is stored.
#include "agent/topology_source.h"
#include "parsers/hf_config.h"
#include "parsers/load_model.h"
#include "parsers/onnx_model.h"
#include "search/plan_request_checks.h"
#include "search/planner.h"
#include "serve/api_job_request.h"
#include "serve/api_routes.h"
#include "serve/http_errors.h"

namespace onboard::serve {

using nlohmann::json;

namespace {

HttpError Bad(const std::string& field, const std::string& problem) {
  return HttpError{400, "bad_request", "field '" + field + "': " + problem};
}

ApiResult<ModelIR> LoadRequestModel(const json& model) {
  Expected<ModelIR> ir = Status(ErrorCode::kInternal, "no model");
  if (model.contains("path")) {
    ir = LoadModel(model["path"].get<std::string>());
  } else if (model.contains("config")) {
    ir = ParseHfConfigText(model["config"].dump(), "model.config");
  } else {
    auto bytes = DecodeBase64(model["onnx_base64"].get<std::string>());
    if (!bytes) return Bad("model.onnx_base64", "is not valid base64");
    ir = ParseOnnxBytes(*bytes, "model.onnx_base64");
  }
  if (!ir.ok()) return ErrorFromStatus(ir.status());
  if (model.contains("name")) ir->name = model["name"].get<std::string>();
  return std::move(ir).value();
}

// Reads the plan options into `r`; a 400 naming the option otherwise.
std::optional<HttpError> ReadPlanOptions(const json& opts, PlanRequest& r) {
  if (!opts.is_object()) return Bad("options", "must be an object");
  for (auto it = opts.begin(); it != opts.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    // Type conversion only: the ranges are PlanRequest::Validate's (search/plan_request_checks.h).
    auto to_int = [&](int64_t& out) -> std::optional<HttpError> {
      if (!v.is_number_integer()) return Bad("options." + k, "must be an integer (got " + v.dump() + ")");
      out = v.get<int64_t>();
      return std::nullopt;
    };
    auto to_double = [&](double& out) -> std::optional<HttpError> {
      if (!v.is_number()) return Bad("options." + k, "must be a number (got " + v.dump() + ")");
      out = v.get<double>();
      return std::nullopt;
    };
    std::optional<HttpError> err;
    int64_t tmp = 0;
    if (k == "mode") {
      Expected<FinetuneMode> m = v.is_string()
                                     ? ParseFinetuneMode("plan request", "options.mode", v.get<std::string>())
                                     : Expected<FinetuneMode>(FinetuneMode::kLoRA);
      if (!v.is_string())
        err = Bad("options.mode", "must be a string");
      else if (!m.ok())
        err = ErrorFromStatus(m.status());
      else
        r.mode = *m;
    } else if (k == "base_dtype" || k == "compute_dtype") {
      const bool base = k == "base_dtype";
      Expected<Precision> p = v.is_string()
                                  ? ParsePrecision("plan request", k, v.get<std::string>(),
                                                   base ? PrecisionUse::kFrozenBase : PrecisionUse::kCompute)
                                  : Expected<Precision>(Precision::kBF16);
      if (!v.is_string()) err = Bad("options." + k, "must be a string");
      else if (!p.ok())
        err = ErrorFromStatus(p.status());
      else
        (base ? r.base_dtype : r.compute_dtype) = *p;
    } else if (k == "bf16_layers_first") {  // the rule: PlanRequest::Validate
      err = to_int(r.bf16_layers_first);
    } else if (k == "bf16_layers_last") {
      err = to_int(r.bf16_layers_last);
    } else if (k == "lora_rank") {
      err = to_int(r.lora_rank);
    } else if (k == "seq") {
      err = to_int(r.seq);
    } else if (k == "global_batch") {
      err = to_int(r.global_batch);
    } else if (k == "expert_nodes_per_token") {  // issue 18; ranges: CheckExpertRouting
      err = to_double(r.expert_nodes_per_token);
    } else if (k == "max_route_nodes") {
      err = to_int(r.max_route_nodes);
    } else if (k == "ep_dispatcher") {
      Expected<EpDispatcher> d =
          v.is_string() ? ParseEpDispatcher("plan request", "ep_dispatcher", v.get<std::string>())
                        : Expected<EpDispatcher>(EpDispatcher::kAllToAll);
      if (!v.is_string())
        err = Bad("options.ep_dispatcher", "must be a string (got " + v.dump() + ")");
      else if (!d.ok())
        err = ErrorFromStatus(d.status());
      else
        r.ep_dispatcher = *d;
    } else if (k == "top_n") {
      err = to_int(tmp);  // a response-size limit of this endpoint, not a plan field's range
      if (!err && (tmp < 0 || tmp > 50))
        err = Bad("options.top_n", "must be an integer in [0, 50] (got " + v.dump() + ")");
      r.top_n = static_cast<int>(tmp);
    } else {
      err = Bad("options." + k,
                "unknown option (expected mode, lora_rank, seq, global_batch, base_dtype, "
                "compute_dtype, bf16_layers_first, bf16_layers_last, top_n, expert_nodes_per_token, "
                "max_route_nodes, ep_dispatcher)");
    }
    if (err) return err;
  }
  return std::nullopt;
}

void Plan(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonObject(req.body, "POST /v1/plan");
  if (!body.ok()) return SendError(res, body.error());
  const json& b = body.value();
  for (auto it = b.begin(); it != b.end(); ++it) {
    if (it.key() != "model" && it.key() != "topology" && it.key() != "options") {
      return SendError(res, Bad(it.key(), "unknown key (expected model, topology, options)"));
    }
  }
  if (!b.contains("model")) return SendError(res, Bad("model", "is required"));
  if (!b.contains("topology")) return SendError(res, Bad("topology", "is required"));
  // Step 1: sources (paths checked against the allowed roots).
  auto model_src = ParseModelSource(b["model"], ctx.roots);
  if (!model_src.ok()) return SendError(res, model_src.error());
  auto topo_src = ParseTopologySource(b["topology"], ctx.roots);
  if (!topo_src.ok()) return SendError(res, topo_src.error());
  // Step 2: the request.
  PlanRequest preq;
  if (auto err = ReadPlanOptions(b.value("options", json::object()), preq)) return SendError(res, *err);
  auto model = LoadRequestModel(model_src.value());
  if (!model.ok()) return SendError(res, model.error());
  preq.model = std::move(model.value());
  const json& t = topo_src.value();
  std::string spec = t.contains("path") ? t["path"].get<std::string>() : t.dump();
  if (t.is_string()) {
    auto shipped = agent::ShippedTopologyPath(t.get<std::string>());  // checked by ParseTopologySource
    if (!shipped.ok()) return SendError(res, ErrorFromStatus(shipped.status()));
    spec = *shipped;
  }
  auto topo = agent::ResolveTopology(spec);
  if (!topo.ok()) return SendError(res, ErrorFromStatus(topo.status()));
  preq.topology = std::move(topo).value();
  preq.threads = ctx.plan_threads;
  Status valid = preq.Validate();
  if (!valid.ok()) return SendError(res, ErrorFromStatus(valid));
  // Step 3: search.
  auto result = SearchPlans(preq);
  if (!result.ok()) return SendError(res, ErrorFromStatus(result.status()));
  json out = json::parse(SearchResultToJson(preq, *result), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return SendError(res, 500, "internal", "planner produced invalid JSON");
  SendJson(res, 200, out);
}

}  // namespace

const std::vector<RouteDecl>& PlanRouteDecls() {
  static const std::vector<RouteDecl> kDecls = {{"post", "/v1/plan", {200, 400, 403, 404}}};
  return kDecls;
}

void RegisterPlanRoute(httplib::Server& server, ApiContext& ctx) {
  ApiContext* c = &ctx;
  PostWithBodyLimit(server, "/v1/plan", c->max_body, [c](const httplib::Request& q, httplib::Response& r) { Plan(*c, q, r); });
}

}  // namespace onboard::serve
