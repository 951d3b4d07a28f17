// The OpenAPI 3.0 document served at GET /openapi.json: every endpoint of `onboard serve`, its
// parameters, request bodies, responses and schemas, with bearer-token security on all but /healthz.
// tests/serve/http_openapi_test.cpp checks that every route the server registers is described and
// that every $ref resolves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace onboard::serve {

nlohmann::json OpenApiDocument();

// (method, OpenAPI path) of every route ApiServer registers, e.g. {"get", "/v1/jobs/{id}"}.
const std::vector<std::pair<std::string, std::string>>& ApiRoutes();

}  // namespace onboard::serve
