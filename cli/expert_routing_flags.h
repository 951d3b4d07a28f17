// `--ep-dispatcher`, `--expert-nodes-per-token`, `--max-route-nodes` (issue 18) of `onboard plan` and
// `onboard run`: the one declaration of the three flags and their copy into the owning request
// (PlanRequest or agent::RunRequest, which name the fields alike). The dispatcher name is parsed by
// ParseEpDispatcher; the ranges are the request's Validate() (CheckExpertRouting), not checked here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "search/plan_request_checks.h"

namespace onboard::cli {

struct ExpertRoutingFlags {
  double expert_nodes_per_token = 0;  // measured nodes a token's experts span (0 = uniform)
  int64_t max_route_nodes = 0;        // node-limited routing M (0 = off)
  std::string ep_dispatcher = "alltoall";
};

inline void AddExpertRoutingFlags(CLI::App& sub, ExpertRoutingFlags* f) {
  sub.add_option("--expert-nodes-per-token", f->expert_nodes_per_token,
                 "measured mean nodes a token's top-k experts span (0 = uniform routing)");
  sub.add_option("--max-route-nodes", f->max_route_nodes,
                 "node-limited routing: experts on at most M nodes (0 = off)");
  sub.add_option("--ep-dispatcher", f->ep_dispatcher,
                 "expert dispatcher of the searched plans: alltoall | deepep | hybridep");
}

// Copies the flags into `req` (PlanRequest or agent::RunRequest); an unknown dispatcher names the flag.
template <typename Request>
[[nodiscard]] Status ApplyExpertRoutingFlags(const ExpertRoutingFlags& f, Request* req) {
  req->expert_nodes_per_token = f.expert_nodes_per_token;
  req->max_route_nodes = f.max_route_nodes;
  ONBOARD_ASSIGN_OR_RETURN(req->ep_dispatcher,
                           ParseEpDispatcher("(command line)", "--ep-dispatcher", f.ep_dispatcher));
  return Status::Ok();
}

}  // namespace onboard::cli
