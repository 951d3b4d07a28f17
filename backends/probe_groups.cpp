// ProbeGroups: one rank's rendezvous store and the six process groups of the probe layout
// (probe_worker_state.h has the group legend). Every rank creates them in the same order.
#include "backends/probe_worker_state.h"

namespace onboard::backends {
namespace {

// Data-parallel rank of world rank r (TP innermost), and the TP-rank prefix of its group names.
int64_t D(const ProbeConfig& cfg, int64_t r) { return r / cfg.tp_degree(); }
std::string Tag(const ProbeConfig& cfg, int64_t r) {
  return cfg.tp_degree() > 1 ? "t" + std::to_string(r % cfg.tp_degree()) + "." : "";
}

}  // namespace

ProbeGroups::ProbeGroups(const std::string& master_addr, int64_t master_port, bool serve_store,
                         const ProbeConfig& cfg, int64_t r)
    : store(master_addr, master_port, serve_store, cfg.collective_timeout_s),
      world(store, "world", r, cfg.ranks, cfg.collective_timeout_s, master_addr),
      fsdp(store, Tag(cfg, r) + "fsdp" + std::to_string(D(cfg, r) / cfg.fsdp_degree()),
           D(cfg, r) % cfg.fsdp_degree(), cfg.fsdp_degree(), cfg.collective_timeout_s, master_addr),
      frep(store, Tag(cfg, r) + "fsdp_rep" + std::to_string(D(cfg, r) % cfg.fsdp_degree()),
           D(cfg, r) / cfg.fsdp_degree(), cfg.data_ranks() / cfg.fsdp_degree(), cfg.collective_timeout_s,
           master_addr),
      ep(store, Tag(cfg, r) + "ep" + std::to_string(D(cfg, r) / cfg.ep_degree()), D(cfg, r) % cfg.ep_degree(),
         cfg.ep_degree(), cfg.collective_timeout_s, master_addr),
      erep(store, Tag(cfg, r) + "ep_rep" + std::to_string(D(cfg, r) % cfg.ep_degree()),
           D(cfg, r) / cfg.ep_degree(), cfg.data_ranks() / cfg.ep_degree(), cfg.collective_timeout_s,
           master_addr),
      tp(store, "tp" + std::to_string(r / cfg.tp_degree()), r % cfg.tp_degree(), cfg.tp_degree(),
         cfg.collective_timeout_s, master_addr) {}

}  // namespace onboard::backends
