// The OpenAPI 3.0 document served at GET /openapi.json: every endpoint of `onboard serve`, its
// parameters, request bodies, responses and schemas, with bearer-token security on all but /healthz.
// Success responses (2xx) are described in the text; every error status list is generated from
// the routes' declarations (ApiRoutes), so the document cannot list less or more than they do.
// tests/serve/http_openapi_test.cpp checks that every route the server registers is described and
// that every $ref resolves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "serve/api_routes.h"

namespace onboard::serve {

nlohmann::json OpenApiDocument();

// Every route ApiServer registers with the statuses it answers (serve/api_routes.h RouteDecl),
// including those ApiServer adds itself (401 when authenticated, 413 on POST).
const std::vector<RouteDecl>& ApiRoutes();

}  // namespace onboard::serve
