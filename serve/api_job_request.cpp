// POST /v1/jobs body -> agent::RunRequest: model and topology sources, options, 1:1 field mapping.
#include "serve/api_job_request.h"

#include "agent/topology_source.h"
#include "core/topology.h"
#include "search/plan_request_checks.h"

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace onboard::serve {

using nlohmann::json;

namespace {

HttpError Bad(const std::string& field, const std::string& problem) {
  return HttpError{400, "bad_request", "field '" + field + "': " + problem};
}

// The first key of `obj` not in `allowed`, or "".
std::string UnknownKey(const json& obj, const std::set<std::string>& allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!allowed.count(it.key())) return it.key();
  }
  return "";
}

bool IsTopologyName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.') return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Typed option readers: kBadInput "request: field 'options.seq': must be an integer (got "x")".
Status WrongType(const std::string& field, const char* want, const json& v) {
  return BadInput("request", field, std::string("must be ") + want, v.dump());
}

// Type conversion only: ranges are RunRequest::Validate's (ParseJobSubmission runs it).
Status ReadInt(const json& v, const std::string& field, int64_t& out) {
  if (!v.is_number_integer()) return WrongType(field, "an integer", v);
  out = v.get<int64_t>();
  return Status::Ok();
}

Status ReadDouble(const json& v, const std::string& field, double& out) {
  if (!v.is_number()) return WrongType(field, "a number", v);
  out = v.get<double>();
  return Status::Ok();
}

Status ReadBool(const json& v, const std::string& field, bool& out) {
  if (!v.is_boolean()) return WrongType(field, "true or false", v);
  out = v.get<bool>();
  return Status::Ok();
}

using Setter = std::function<Status(const json&, agent::RunRequest&)>;

// An integer that fits the field's type T (a type, not a range: RunRequest::Validate checks ranges).
template <typename T>
Setter IntField(const std::string& f, std::function<void(agent::RunRequest&, T)> set) {
  return [=](const json& v, agent::RunRequest& r) {
    int64_t x = 0;
    ONBOARD_RETURN_IF_ERROR(ReadInt(v, f, x));
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
      return WrongType(f, sizeof(T) == 4 ? "a 32-bit integer" : "a 64-bit integer", v);
    set(r, static_cast<T>(x));
    return Status::Ok();
  };
}

Setter DoubleField(const std::string& f, std::function<void(agent::RunRequest&, double)> set) {
  return [=](const json& v, agent::RunRequest& r) {
    double x = 0;
    ONBOARD_RETURN_IF_ERROR(ReadDouble(v, f, x));
    set(r, x);
    return Status::Ok();
  };
}

Setter BoolField(const std::string& f, std::function<void(agent::RunRequest&, bool)> set) {
  return [=](const json& v, agent::RunRequest& r) {
    bool x = false;
    ONBOARD_RETURN_IF_ERROR(ReadBool(v, f, x));
    set(r, x);
    return Status::Ok();
  };
}

const std::map<std::string, Setter>& ProbeSetters() {
  using R = agent::RunRequest;
  static const std::map<std::string, Setter> kSetters = {
      {"enabled", BoolField("options.probe.enabled", [](R& r, bool v) { r.probe.enabled = v; })},
      {"ranks", IntField<int>("options.probe.ranks", [](R& r, int v) { r.probe.ranks = v; })},
      {"ranks_per_node",
       IntField<int64_t>("options.probe.ranks_per_node", [](R& r, int64_t v) { r.probe.ranks_per_node = v; })},
      {"steps", IntField<int>("options.probe.steps", [](R& r, int v) { r.probe.steps = v; })},
      {"seq", IntField<int64_t>("options.probe.seq", [](R& r, int64_t v) { r.probe.seq = v; })},
      {"micro_batch",
       IntField<int64_t>("options.probe.micro_batch", [](R& r, int64_t v) { r.probe.micro_batch = v; })},
      {"proxy_blocks",
       IntField<int64_t>("options.probe.proxy_blocks", [](R& r, int64_t v) { r.probe.proxy_blocks = v; })},
      {"timeout_s", DoubleField("options.probe.timeout_s", [](R& r, double v) { r.probe.timeout_s = v; })},
      {"learning_rate",
       DoubleField("options.probe.learning_rate", [](R& r, double v) { r.probe.learning_rate = v; })},
      {"grad_clip", DoubleField("options.probe.grad_clip", [](R& r, double v) { r.probe.grad_clip = v; })},
      {"seed",
       [](const json& v, R& r) {  // uint64: a type, so a negative seed is refused here
         if (!v.is_number_unsigned()) return WrongType("options.probe.seed", "a non-negative integer", v);
         r.probe.seed = v.get<uint64_t>();
         return Status::Ok();
       }},
  };
  return kSetters;
}

// A precision option: a string the one parser (core/precision.h) accepts for `use`, into `member`.
Setter PrecisionOption(const char* field, PrecisionUse use, Precision agent::RunRequest::*member) {
  return [field, use, member](const json& v, agent::RunRequest& r) {
    if (!v.is_string()) return WrongType(std::string("options.") + field, "a string", v);
    Expected<Precision> p = ParsePrecision("run request", field, v.get<std::string>(), use);
    if (!p.ok()) return p.status();
    r.*member = *p;
    return Status::Ok();
  };
}

const std::map<std::string, Setter>& OptionSetters() {
  using R = agent::RunRequest;
  static const std::map<std::string, Setter> kSetters = {
      {"mode",
       [](const json& v, R& r) {
         if (!v.is_string()) return WrongType("options.mode", "a string", v);
         ONBOARD_ASSIGN_OR_RETURN(r.mode, ParseFinetuneMode("request", "options.mode", v.get<std::string>()));
         return Status::Ok();
       }},
      {"base_dtype", PrecisionOption("base_dtype", PrecisionUse::kFrozenBase, &R::base_dtype)},
      {"compute_dtype", PrecisionOption("compute_dtype", PrecisionUse::kCompute, &R::compute_dtype)},
      {"bf16_layers_first",  // the rule: RunRequest::Validate
       IntField<int64_t>("options.bf16_layers_first", [](R& r, int64_t v) { r.bf16_layers_first = v; })},
      {"bf16_layers_last",
       IntField<int64_t>("options.bf16_layers_last", [](R& r, int64_t v) { r.bf16_layers_last = v; })},
      {"lora_rank", IntField<int64_t>("options.lora_rank", [](R& r, int64_t v) { r.lora_rank = v; })},
      {"seq", IntField<int64_t>("options.seq", [](R& r, int64_t v) { r.seq = v; })},
      {"global_batch",
       IntField<int64_t>("options.global_batch", [](R& r, int64_t v) { r.global_batch = v; })},
      // Issue 18's expert routing: types here; ranges RunRequest::Validate (CheckExpertRouting).
      {"expert_nodes_per_token",
       DoubleField("options.expert_nodes_per_token", [](R& r, double v) { r.expert_nodes_per_token = v; })},
      {"max_route_nodes",
       IntField<int64_t>("options.max_route_nodes", [](R& r, int64_t v) { r.max_route_nodes = v; })},
      {"ep_dispatcher",
       [](const json& v, R& r) {
         if (!v.is_string()) return WrongType("options.ep_dispatcher", "a string", v);
         ONBOARD_ASSIGN_OR_RETURN(r.ep_dispatcher,
                                  ParseEpDispatcher("run request", "ep_dispatcher", v.get<std::string>()));
         return Status::Ok();
       }},
      {"max_rounds", IntField<int>("options.max_rounds", [](R& r, int v) { r.max_rounds = v; })},
      {"threads", IntField<int>("options.threads", [](R& r, int v) { r.threads = v; })},
      {"generate_kernels",
       BoolField("options.generate_kernels", [](R& r, bool v) { r.generate_kernels = v; })},
      {"probe",
       [](const json& v, R& r) {
         if (!v.is_object()) return WrongType("options.probe", "an object", v);
         for (auto it = v.begin(); it != v.end(); ++it) {
           auto s = ProbeSetters().find(it.key());
           if (s == ProbeSetters().end())
             return BadInput("request", "options.probe." + it.key(), "unknown option");
           ONBOARD_RETURN_IF_ERROR(s->second(it.value(), r));
         }
         return Status::Ok();
       }},
  };
  return kSetters;
}

}  // namespace

std::optional<std::string> DecodeBase64(const std::string& text) {
  static const std::array<int, 256> kTable = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(a[i])] = i;
    return t;
  }();
  size_t n = text.size();
  while (n > 0 && text[n - 1] == '=' && text.size() - n < 2) --n;
  if (n % 4 == 1) return std::nullopt;
  if (text.size() != n && text.size() % 4 != 0) return std::nullopt;  // padding only on full quanta
  std::string out;
  out.reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    int v = kTable[static_cast<unsigned char>(text[i])];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

ApiResult<json> ParseModelSource(const json& model, const AllowedRoots& roots) {
  if (model.is_string()) return ParseModelSource(json{{"path", model}}, roots);
  if (!model.is_object()) return Bad("model", "must be a path string or an object");
  std::string unknown = UnknownKey(model, {"path", "config", "onnx_base64", "name"});
  if (!unknown.empty()) return Bad("model." + unknown, "unknown key (expected path, config, onnx_base64, name)");
  int sources = static_cast<int>(model.contains("path")) + static_cast<int>(model.contains("config")) +
                static_cast<int>(model.contains("onnx_base64"));
  if (sources != 1) return Bad("model", "give exactly one of path, config, onnx_base64");
  json out = json::object();
  if (model.contains("name")) {
    if (!model["name"].is_string() || model["name"].get<std::string>().size() > 256) {
      return Bad("model.name", "must be a string of at most 256 bytes");
    }
    out["name"] = model["name"];
  }
  if (model.contains("path")) {
    if (!model["path"].is_string()) return Bad("model.path", "must be a string");
    auto resolved = roots.Resolve(model["path"].get<std::string>(), "model.path");
    if (!resolved.ok()) return resolved.error();
    out["path"] = resolved.value();
  } else if (model.contains("config")) {
    if (!model["config"].is_object()) return Bad("model.config", "must be a JSON object (a config.json)");
    out["config"] = model["config"];
  } else {
    if (!model["onnx_base64"].is_string()) return Bad("model.onnx_base64", "must be a base64 string");
    auto bytes = DecodeBase64(model["onnx_base64"].get<std::string>());
    if (!bytes) return Bad("model.onnx_base64", "is not valid base64");
    if (bytes->empty()) return Bad("model.onnx_base64", "decodes to zero bytes");
    out["onnx_base64"] = model["onnx_base64"];
    out["onnx_bytes"] = bytes->size();
  }
  return out;
}

ApiResult<json> ParseTopologySource(const json& topology, const AllowedRoots& roots) {
  if (topology.is_string()) {
    const std::string name = topology.get<std::string>();
    if (!IsTopologyName(name)) {
      return Bad("topology", "a name is [A-Za-z0-9_.-] without a leading '.'; use {\"path\": ...} for a file (got " +
                                 name.substr(0, 80) + ")");
    }
    // A name means a shipped topology only: no file of the working directory, no oracle.
    auto shipped = agent::ShippedTopologyPath(name);
    if (!shipped.ok()) return HttpError{404, "not_found", shipped.status().message()};
    return json(name);
  }
  if (!topology.is_object()) return Bad("topology", "must be a name, {\"path\": ...} or an inline topology object");
  if (topology.size() == 1 && topology.contains("path")) {
    if (!topology["path"].is_string()) return Bad("topology.path", "must be a string");
    auto resolved = roots.Resolve(topology["path"].get<std::string>(), "topology.path");
    if (!resolved.ok()) return resolved.error();
    return json{{"path", resolved.value()}};
  }
  // Inline topology: parsed for real so a bad one is a 400 now, not a failed job later.
  auto parsed = ParseTopologyJson(topology.dump(), "request topology");
  if (!parsed.ok()) return Bad("topology", parsed.status().message());
  return topology;
}

ApiResult<json> ParseJobSubmission(const json& body, const AllowedRoots& roots) {
  std::string unknown = UnknownKey(body, {"model", "topology", "options"});
  if (!unknown.empty()) return Bad(unknown, "unknown key (expected model, topology, options)");
  if (!body.contains("model")) return Bad("model", "is required");
  if (!body.contains("topology")) return Bad("topology", "is required");
  json out = json::object();
  auto model = ParseModelSource(body["model"], roots);
  if (!model.ok()) return model.error();
  out["model"] = model.value();
  auto topo = ParseTopologySource(body["topology"], roots);
  if (!topo.ok()) return topo.error();
  out["topology"] = topo.value();
  out["options"] = body.value("options", json::object());
  if (!out["options"].is_object()) return Bad("options", "must be an object");
  // Options are checked by building the orchestrator request now (same code the worker runs).
  auto req = ToRunRequest(out, "/nonexistent/validation-only");
  if (!req.ok()) return HttpError{400, "bad_request", req.status().message()};
  Status valid = req->Validate();
  if (!valid.ok()) return HttpError{400, "bad_request", valid.message()};
  return out;
}

Expected<agent::RunRequest> ToRunRequest(const json& normalized, const std::string& out_dir) {
  agent::RunRequest r;
  r.out_dir = out_dir;
  const json& model = normalized.at("model");
  if (model.contains("name")) r.model_name = model["name"].get<std::string>();
  if (model.contains("path")) {
    r.model_path = model["path"].get<std::string>();
  } else if (model.contains("config")) {
    r.model_bytes = model["config"].dump();
    r.model_format = "json";
    if (r.model_name.empty()) r.model_name = "config.json";
  } else {
    auto bytes = DecodeBase64(model.at("onnx_base64").get<std::string>());
    if (!bytes) return BadInput("request", "model.onnx_base64", "is not valid base64");
    r.model_bytes = std::move(*bytes);
    r.model_format = "onnx";
    if (r.model_name.empty()) r.model_name = "model.onnx";
  }
  const json& topo = normalized.at("topology");
  if (topo.is_string()) {
    ONBOARD_ASSIGN_OR_RETURN(r.topology, agent::ShippedTopologyPath(topo.get<std::string>()));
  } else if (topo.size() == 1 && topo.contains("path")) r.topology = topo["path"].get<std::string>();
  else r.topology = topo.dump();
  const json& opts = normalized.value("options", json::object());
  for (auto it = opts.begin(); it != opts.end(); ++it) {
    auto s = OptionSetters().find(it.key());
    if (s == OptionSetters().end()) return BadInput("request", "options." + it.key(), "unknown option");
    ONBOARD_RETURN_IF_ERROR(s->second(it.value(), r));
  }
  return r;
}

json PublicRequestView(const json& normalized) {
  json v = normalized;
  if (v.contains("model") && v["model"].is_object() && v["model"].contains("onnx_base64")) {
    v["model"].erase("onnx_base64");
  }
  return v;
}

}  // namespace onboard::serve
