// The OpenAPI 3 document served at GET /openapi.json, one entry per route.
#include "serve/http_openapi.h"

#include <algorithm>

#include "core/plan.h"
#include "core/status.h"

namespace onboard::serve {

namespace {

// Kept as JSON text so it reads like the document clients download.
const char* const kOpenApi = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "onboard service",
    "version": "1",
    "description": "Runs onboarding jobs (parse -> plan -> kernels -> probe -> validate -> report) for new large models and serves their events and reports. Every error body is {\"error\": {\"code\", \"message\"}}."
  },
  "servers": [{"url": "http://127.0.0.1:8080"}],
  "security": [{"bearer": []}],
  "paths": {
    "/healthz": {
      "get": {
        "summary": "Liveness and queue depth (no authentication, no store access)",
        "security": [],
        "responses": {
          "200": {"description": "Server is up", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
        }
      }
    },
    "/openapi.json": {
      "get": {
        "summary": "This document",
        "responses": {
          "200": {"description": "OpenAPI 3 document", "content": {"application/json": {"schema": {"type": "object"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"}
        }
      }
    },
    "/v1/jobs": {
      "post": {
        "summary": "Submit an onboarding job",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobSubmission"}}}},
        "responses": {
          "202": {"description": "Queued", "headers": {"Location": {"schema": {"type": "string"}}},
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "403": {"$ref": "#/components/responses/Forbidden"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "413": {"$ref": "#/components/responses/PayloadTooLarge"},
          "429": {"$ref": "#/components/responses/TooManyRequests"},
          "503": {"$ref": "#/components/responses/Unavailable"}
        }
      },
      "get": {
        "summary": "List jobs, newest first",
        "parameters": [
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}},
          {"name": "before", "in": "query", "description": "next_cursor of the previous page", "schema": {"type": "integer", "minimum": 0}},
          {"name": "state", "in": "query", "schema": {"$ref": "#/components/schemas/JobState"}}
        ],
        "responses": {
          "200": {"description": "One page", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobList"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "401": {"$ref": "#/components/responses/Unauthorized"}
        }
      }
    },
    "/v1/jobs/{id}": {
      "get": {
        "summary": "One job",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "200": {"description": "The job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"}
        }
      }
    },
    "/v1/jobs/{id}/events": {
      "get": {
        "summary": "Server-sent events: stored events after Last-Event-ID, then live ones until the job ends",
        "parameters": [
          {"$ref": "#/components/parameters/JobId"},
          {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer", "minimum": 0}},
          {"name": "after", "in": "query", "description": "same as Last-Event-ID", "schema": {"type": "integer", "minimum": 0}}
        ],
        "responses": {
          "200": {"description": "text/event-stream; each frame has id (seq), event (type) and data (an Event); the stream ends with `event: end`",
                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"}
        }
      }
    },
    "/v1/jobs/{id}/report.json": {
      "get": {
        "summary": "Report of a succeeded job (JSON)",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "200": {"description": "report.json", "content": {"application/json": {"schema": {"type": "object"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"}
        }
      }
    },
    "/v1/jobs/{id}/report.md": {
      "get": {
        "summary": "Report of a succeeded job (Markdown)",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "200": {"description": "report.md", "content": {"text/markdown": {"schema": {"type": "string"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"}
        }
      }
    },
    "/v1/jobs/{id}/report.html": {
      "get": {
        "summary": "Report of a succeeded job (self-contained HTML)",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "200": {"description": "report.html", "content": {"text/html": {"schema": {"type": "string"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"}
        }
      }
    },
    "/v1/jobs/{id}/cancel": {
      "post": {
        "summary": "Cancel a queued or running job",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "202": {"description": "Cancelled (queued) or cancellation requested (running)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"}
        }
      }
    },
    "/v1/jobs/{id}/retry": {
      "post": {
        "summary": "Queue a failed, cancelled or interrupted job again (same id; events continue)",
        "parameters": [{"$ref": "#/components/parameters/JobId"}],
        "responses": {
          "202": {"description": "Queued again", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"},
          "429": {"$ref": "#/components/responses/TooManyRequests"},
          "503": {"$ref": "#/components/responses/Unavailable"}
        }
      }
    },
    "/v1/plan": {
      "post": {
        "summary": "Synchronous layout search (SearchPlans) for a model on a topology",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlanRequest"}}}},
        "responses": {
          "200": {"description": "Search result (feasible may be false: best is then the closest candidate)", "content": {"application/json": {"schema": {"type": "object"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "401": {"$ref": "#/components/responses/Unauthorized"},
          "403": {"$ref": "#/components/responses/Forbidden"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "413": {"$ref": "#/components/responses/PayloadTooLarge"}
        }
      }
    }
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "parameters": {
      "JobId": {"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^j-[0-9a-f]{16}$"}}
    },
    "responses": {
      "BadRequest": {"description": "Malformed body, unknown key or bad option", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "Unauthorized": {"description": "Missing or wrong bearer token", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "Forbidden": {"description": "Path outside the allowed roots ('..', symlink escape)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "NotFound": {"description": "No such job, report or file", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "Conflict": {"description": "The job's state does not allow this", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "UnsupportedMediaType": {"description": "The body is not Content-Type application/json", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "PayloadTooLarge": {"description": "Body larger than --max-body", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "TooManyRequests": {"description": "The job queue is full (queue_full), or this client has --max-client-connections connections open (too_many_connections); see Retry-After", "headers": {"Retry-After": {"schema": {"type": "integer"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "Unavailable": {"description": "The server is shutting down", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    },
    "schemas": {
      "Error": {
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message"],
                                 "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}
      },
      "Health": {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["ok", "stopping"]}, "queued": {"type": "integer"},
                       "running": {"type": "integer"}, "capacity": {"type": "integer"}, "workers": {"type": "integer"}}
      },
      "JobState": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]},
      "ModelSource": {
        "oneOf": [
          {"type": "string", "description": "path under an allowed root"},
          {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}, "name": {"type": "string"}}, "additionalProperties": false},
          {"type": "object", "required": ["config"], "properties": {"config": {"type": "object"}, "name": {"type": "string"}}, "additionalProperties": false},
          {"type": "object", "required": ["onnx_base64"], "properties": {"onnx_base64": {"type": "string", "format": "byte"}, "name": {"type": "string"}}, "additionalProperties": false}
        ]
      },
      "TopologySource": {
        "oneOf": [
          {"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]*$", "description": "name under examples/topologies"},
          {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}, "additionalProperties": false},
          {"type": "object", "description": "inline topology (examples/topologies/README.md)", "required": ["name", "num_devices"]}
        ]
      },
      "RunOptions": {
        "type": "object", "additionalProperties": false,
        "properties": {
          "mode": {"type": "string", "enum": ["lora", "full"]}, "lora_rank": {"type": "integer"},
          "seq": {"type": "integer"}, "global_batch": {"type": "integer"}, "base_dtype": {"type": "string"},
          "compute_dtype": {"type": "string"},
          "bf16_layers_first": {"type": "integer", "description": "with a quantised compute_dtype: first N decoder layers in bf16 GEMMs"},
          "bf16_layers_last": {"type": "integer", "description": "with a quantised compute_dtype: last N decoder layers in bf16 GEMMs"},
          "max_rounds": {"type": "integer"}, "generate_kernels": {"type": "boolean"}, "threads": {"type": "integer"},
          "expert_nodes_per_token": {"type": "number", "description": "measured mean nodes a token's top-k experts span: 0 (not given) or [1, top_k]"},
          "max_route_nodes": {"type": "integer", "description": "node-limited routing: experts on at most M nodes (0 = off)"},
          "ep_dispatcher": {"type": "string", "description": "expert dispatcher of the searched plans (enum: BuildDocument, from core/plan.h EpDispatcherName)"},
          "probe": {"type": "object", "additionalProperties": false, "properties": {
            "enabled": {"type": "boolean"}, "ranks": {"type": "integer"}, "ranks_per_node": {"type": "integer"},
            "steps": {"type": "integer"},
            "seq": {"type": "integer"}, "micro_batch": {"type": "integer"}, "proxy_blocks": {"type": "integer"},
            "learning_rate": {"type": "number"}, "grad_clip": {"type": "number"}, "seed": {"type": "integer"},
            "timeout_s": {"type": "number"}}}
        }
      },
      "JobSubmission": {
        "type": "object", "required": ["model", "topology"], "additionalProperties": false,
        "properties": {"model": {"$ref": "#/components/schemas/ModelSource"},
                       "topology": {"$ref": "#/components/schemas/TopologySource"},
                       "options": {"$ref": "#/components/schemas/RunOptions"}}
      },
      "PlanRequest": {
        "type": "object", "required": ["model", "topology"], "additionalProperties": false,
        "properties": {"model": {"$ref": "#/components/schemas/ModelSource"},
                       "topology": {"$ref": "#/components/schemas/TopologySource"},
                       "options": {"type": "object", "properties": {
                         "mode": {"type": "string", "enum": ["lora", "full"]}, "lora_rank": {"type": "integer"},
                         "seq": {"type": "integer"}, "global_batch": {"type": "integer"},
                         "base_dtype": {"type": "string"}, "compute_dtype": {"type": "string"},
                         "bf16_layers_first": {"type": "integer"}, "bf16_layers_last": {"type": "integer"},
                         "top_n": {"type": "integer"},
                         "expert_nodes_per_token": {"type": "number", "description": "measured mean nodes a token's top-k experts span: 0 (not given) or [1, top_k]"},
                         "max_route_nodes": {"type": "integer", "description": "node-limited routing: experts on at most M nodes (0 = off)"},
                         "ep_dispatcher": {"type": "string", "description": "expert dispatcher of the searched plans (enum: BuildDocument, from core/plan.h EpDispatcherName)"}}}}
      },
      "Job": {
        "type": "object",
        "properties": {
          "id": {"type": "string"}, "state": {"$ref": "#/components/schemas/JobState"},
          "created_ms": {"type": "integer"}, "started_ms": {"type": "integer"}, "finished_ms": {"type": "integer"},
          "attempts": {"type": "integer"}, "last_event_seq": {"type": "integer"},
          "request": {"type": "object"}, "result": {"type": "object", "nullable": true},
          "error": {"type": "object", "nullable": true, "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
          "reports": {"type": "object", "additionalProperties": {"type": "string"}, "description": "format -> URL"},
          "links": {"type": "object", "additionalProperties": {"type": "string"}}
        }
      },
      "JobList": {
        "type": "object",
        "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
                       "next_cursor": {"type": "integer", "nullable": true}, "total": {"type": "integer"}}
      },
      "Event": {
        "type": "object",
        "properties": {"seq": {"type": "integer"}, "type": {"type": "string"}, "ts_ms": {"type": "integer"}, "data": {}}
      }
    }
  }
})json";

}  // namespace

namespace {

// components/responses entry for each error status a route may declare.
std::string ResponseNameFor(int status) {
  switch (status) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 409: return "Conflict";
    case 413: return "PayloadTooLarge";
    case 415: return "UnsupportedMediaType";
    case 429:
      return "TooManyRequests";
    case 503: return "Unavailable";
  }
  ONBOARD_ASSERT(false, "no OpenAPI response for status " + std::to_string(status));
  return "";
}

nlohmann::json BuildDocument() {
  nlohmann::json doc = nlohmann::json::parse(kOpenApi);
  // The dispatcher names from their one home (what ParseEpDispatcher accepts; the test checks it).
  nlohmann::json& schemas = doc["components"]["schemas"];
  for (nlohmann::json* disp :
       {&schemas["PlanRequest"]["properties"]["options"]["properties"]["ep_dispatcher"],
        &schemas["RunOptions"]["properties"]["ep_dispatcher"]})
    for (EpDispatcher d : {EpDispatcher::kAllToAll, EpDispatcher::kDeepEP, EpDispatcher::kHybridEP})
      (*disp)["enum"].push_back(EpDispatcherName(d));
  for (const RouteDecl& r : ApiRoutes()) {
    nlohmann::json& responses = doc["paths"][r.path][r.method]["responses"];
    nlohmann::json out = nlohmann::json::object();
    for (int status : r.statuses) {
      const std::string key = std::to_string(status);
      if (status < 300) {
        ONBOARD_ASSERT(responses.contains(key), r.method + " " + r.path + ": no description for " + key);
        out[key] = responses[key];
      } else {
        out[key] = {{"$ref", "#/components/responses/" + ResponseNameFor(status)}};
      }
    }
    responses = std::move(out);
  }
  return doc;
}

}  // namespace

nlohmann::json OpenApiDocument() {
  static const nlohmann::json kDoc = BuildDocument();
  return kDoc;
}

const std::vector<RouteDecl>& ApiRoutes() {
  static const std::vector<RouteDecl> kRoutes = [] {
    std::vector<RouteDecl> all = {{"get", "/healthz", {200}}, {"get", "/openapi.json", {200}}};
    for (const auto* group : {&JobRouteDecls(), &PlanRouteDecls()}) all.insert(all.end(), group->begin(), group->end());
    // What ApiServer answers itself: 401 (authentication) on all but /healthz, 413 (body) on POST,
    // 429 (connections per client) on all.
    for (RouteDecl& r : all) {
      if (r.path != "/healthz") r.statuses.push_back(401);
      if (r.method == "post") r.statuses.push_back(413);
      if (std::find(r.statuses.begin(), r.statuses.end(), 429) == r.statuses.end()) r.statuses.push_back(429);
      std::sort(r.statuses.begin(), r.statuses.end());
    }
    return all;
  }();
  return kRoutes;
}

}  // namespace onboard::serve
