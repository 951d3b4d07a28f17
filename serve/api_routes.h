// Route handlers of the HTTP API, grouped by resource. ApiServer (serve/http_server.h) installs them
// after authentication and error handling are in place; see http_openapi.cpp for the contract.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "serve/api_paths.h"
#include "serve/http_limits.h"
#include "serve/http_sse.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/job_store_notify.h"

namespace onboard::serve {

struct ApiContext {
  JobStore& store;
  JobQueue& queue;
  JobNotifier& notifier;
  const AllowedRoots& roots;
  SseOptions sse;
  int workers = 1;
  int plan_threads = 2;          // search threads for POST /v1/plan
  size_t max_body = 16u << 20;   // bytes; POST bodies over it are 413 (serve/http_limits.h)
};

// A route's contract: method, OpenAPI path and every status its handler answers, declared beside
// the handler. ApiServer adds 401 to every route but /healthz and 413 to every POST, so they are not
// repeated here. GET /openapi.json lists exactly these (http_openapi.cpp), so it cannot drift.
struct RouteDecl {
  std::string method;  // "get" | "post"
  std::string path;    // OpenAPI form, e.g. "/v1/jobs/{id}"
  std::vector<int> statuses;
};
const std::vector<RouteDecl>& JobRouteDecls();   // api_jobs.cpp
const std::vector<RouteDecl>& PlanRouteDecls();  // api_plan.cpp

// /v1/jobs, /v1/jobs/{id}, .../events, .../report.{json,md,html}, .../cancel, .../retry (api_jobs.cpp).
void RegisterJobRoutes(httplib::Server& server, ApiContext& ctx);
// /v1/plan (api_plan.cpp).
void RegisterPlanRoute(httplib::Server& server, ApiContext& ctx);

// The JSON view of a job (GET /v1/jobs/{id}, list entries, 202 bodies).
nlohmann::json JobToJson(const JobRecord& job);

}  // namespace onboard::serve
