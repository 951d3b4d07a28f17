// ProbeGroups: one rank's rendezvous store and the process groups of the probe layout
// (probe_worker_state.h has the group legend; ProbeConfig's rank order: pp outermost, data ranks,
// tp innermost). Every rank creates them in the same order.
#include <algorithm>

#include "backends/probe_worker_state.h"

namespace onboard::backends {
namespace {

// Data rank of world rank r, and the prefix of its data-parallel group names: its stage (pp > 1)
// and its TP rank (tp > 1), so the groups of different (stage, TP rank) never share a name.
int64_t D(const ProbeConfig& cfg, int64_t r) { return cfg.data_rank_of(r); }
std::string Tag(const ProbeConfig& cfg, int64_t r) {
  std::string tag;
  if (cfg.pp_degree() > 1) tag += "s" + std::to_string(cfg.stage_of(r)) + ".";
  if (cfg.tp_degree() > 1) tag += "t" + std::to_string(cfg.tp_rank_of(r)) + ".";
  return tag;
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
      tp(store, "tp" + std::to_string(r / cfg.tp_degree()), cfg.tp_rank_of(r), cfg.tp_degree(),
         cfg.collective_timeout_s, master_addr) {
  AddNodeDedupGroups(master_addr, cfg, r);
  AddPipelineLinks(master_addr, cfg, r);
}

// ep_dispatcher deepep: EP rank j = n*L + l (node index n, local index l; ValidateEpDispatcher
// checks that nodes hold L consecutive EP ranks each). Every rank creates inter, then intra.
void ProbeGroups::AddNodeDedupGroups(const std::string& master_addr, const ProbeConfig& cfg, int64_t r) {
  if (cfg.ep_dispatcher != "deepep") return;
  const std::vector<int64_t> nodes = cfg.ep_group_nodes(r);
  const int64_t j = ep.rank(), L = std::count(nodes.begin(), nodes.end(), nodes[static_cast<size_t>(j)]);
  const int64_t N = ep.size() / L, n = j / L, l = j % L;
  const std::string g = Tag(cfg, r) + "ep" + std::to_string(D(cfg, r) / cfg.ep_degree());
  ep_inter = std::make_unique<Group>(store, g + "_x" + std::to_string(l), n, N, cfg.collective_timeout_s,
                                     master_addr);
  ep_intra = std::make_unique<Group>(store, g + "_n" + std::to_string(n), l, L, cfg.collective_timeout_s,
                                     master_addr);
}

// Pair groups "pp<k>_<i>" of the ranks k = r % stage_ranks() (same data rank and TP rank on every
// stage): pair i = {stage i, stage i+1}, the wrap pair pp-1 = {stage pp-1, stage 0} (interleaved
// schedules with pp > 2; pp == 2: pair 0 serves both ways). Every rank creates its pairs in
// ascending pair index, so no two ranks wait on each other's rendezvous in opposite orders.
void ProbeGroups::AddPipelineLinks(const std::string& master_addr, const ProbeConfig& cfg, int64_t r) {
  const int64_t pp = cfg.pp_degree(), s = cfg.stage_of(r), k = r % cfg.stage_ranks();
  if (pp <= 1) return;
  const bool wrap = cfg.interleave > 1 && pp > 2;
  auto make = [&](int64_t pair, int64_t my_rank) {
    pp_links.push_back(std::make_unique<Group>(store, "pp" + std::to_string(k) + "_" + std::to_string(pair),
                                               my_rank, 2, cfg.collective_timeout_s, master_addr));
    return pp_links.back().get();
  };
  // ascending pair index: [s-1] (s > 0), [s] (s < pp-1), then the wrap pair pp-1
  if (s > 0) pp_prev = make(s - 1, 1);
  if (s < pp - 1) pp_next = make(s, 0);
  if (wrap && s == 0) pp_prev = make(pp - 1, 1);
  if (wrap && s == pp - 1) pp_next = make(pp - 1, 0);
  if (pp == 2 && cfg.interleave > 1) {  // the one pair carries both directions
    if (s == 0) pp_prev = pp_next;
    if (s == 1) pp_next = pp_prev;
  }
}

}  // namespace onboard::backends
