// The body of POST /v1/jobs (and the model/topology part of POST /v1/plan), validated and normalised.
//
//   {
//     "model":    "<path>"                                   (shorthand for {"path": ...})
//               | {"path": "<file or dir under an allowed root>"}
//               | {"config": { ...HF config.json object... }, "name": "optional display name"}
//               | {"onnx_base64": "<base64 ONNX protobuf>", "name": "optional"},
//     "topology": "<name under examples/topologies>"         ([A-Za-z0-9_.-], no leading '.')
//               | {"path": "<file under an allowed root>"}
//               | { ...inline topology JSON (examples/topologies/README.md)... },
//     "options":  { "mode": "lora"|"full", "lora_rank", "seq", "global_batch", "base_dtype", "compute_dtype",
//                   "bf16_layers_first", "bf16_layers_last",
//                   "max_rounds", "generate_kernels", "threads",
//                   "probe": {"enabled", "ranks", "steps", "seq", "micro_batch", "proxy_blocks",
//                             "learning_rate", "grad_clip", "seed", "timeout_s"} }
//   }
// Unknown keys are refused (400 naming the key) so a typo never silently runs the defaults.
// Paths are canonicalised through AllowedRoots (403 outside them). The normalised form stores the
// canonical paths; it is what the job store keeps and what ToRunRequest reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_paths.h"
#include "serve/http_errors.h"
#include "agent/orchestrator.h"

namespace onboard::serve {

// Validates the JSON body of POST /v1/jobs; returns the normalised request.
ApiResult<nlohmann::json> ParseJobSubmission(const nlohmann::json& body, const AllowedRoots& roots);

// The "model" / "topology" members alone (POST /v1/plan shares them).
ApiResult<nlohmann::json> ParseModelSource(const nlohmann::json& model, const AllowedRoots& roots);
ApiResult<nlohmann::json> ParseTopologySource(const nlohmann::json& topology, const AllowedRoots& roots);

// Builds the orchestrator request of a normalised job; artifacts go to `out_dir`.
// kBadInput naming the option and value when an option has the wrong type or range.
[[nodiscard]] Expected<agent::RunRequest> ToRunRequest(const nlohmann::json& normalized,
                                                       const std::string& out_dir);

// The normalised request as GET /v1/jobs/{id} shows it: inline ONNX bytes replaced by their size.
nlohmann::json PublicRequestView(const nlohmann::json& normalized);

// Strict RFC 4648 base64 (padding optional, whitespace refused); nullopt when malformed.
std::optional<std::string> DecodeBase64(const std::string& text);

}  // namespace onboard::serve
