// ProbeGroups: one rank's rendezvous store and the five process groups of the probe layout
// (probe_worker_state.h has the group legend). Every rank creates them in the same order.
#include "backends/probe_worker_state.h"

namespace onboard::backends {

ProbeGroups::ProbeGroups(const std::string& master_addr, int64_t master_port, bool serve_store,
                         const ProbeConfig& cfg, int64_t r)
    : store(master_addr, master_port, serve_store, cfg.collective_timeout_s),
      world(store, "world", r, cfg.ranks, cfg.collective_timeout_s, master_addr),
      fsdp(store, "fsdp" + std::to_string(r / cfg.fsdp_degree()), r % cfg.fsdp_degree(), cfg.fsdp_degree(),
           cfg.collective_timeout_s, master_addr),
      frep(store, "fsdp_rep" + std::to_string(r % cfg.fsdp_degree()), r / cfg.fsdp_degree(),
           cfg.ranks / cfg.fsdp_degree(), cfg.collective_timeout_s, master_addr),
      ep(store, "ep" + std::to_string(r / cfg.ep_degree()), r % cfg.ep_degree(), cfg.ep_degree(),
         cfg.collective_timeout_s, master_addr),
      erep(store, "ep_rep" + std::to_string(r % cfg.ep_degree()), r / cfg.ep_degree(),
           cfg.ranks / cfg.ep_degree(), cfg.collective_timeout_s, master_addr) {}

}  // namespace onboard::backends
