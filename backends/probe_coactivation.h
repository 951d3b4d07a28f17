// Expert co-activation and tier traffic as the probe measured them (issue 18 item 1), torch-free:
// per MoE layer, over the recorded steps of one probe,
//   - pairs: how many tokens chose both experts i and j (every co-selected pair seen, kept sparse:
//     a pair no token chose is absent; reports list the most frequent first);
//   - per token, how many distinct EP ranks and nodes hold its top-k experts (histograms);
//   - the slow tier (between nodes) as the probe's dispatch used it: rows sent to a rank on another
//     node (the all-to-all's actual split sizes), and the node-deduplicated copies a DeepEP-style
//     dispatch would send instead (one copy per remote node holding >= 1 of the token's experts).
// Nodes: the probe is told which ranks share a node (ProbeConfig::ranks_per_node, consecutive
// global ranks; 0 = all ranks on one node). A token's source node is its rank's node.
// Units: tokens, rows (one (token, expert) pair = one row of d activations), bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

struct ExpertPairCount {
  int64_t a = 0, b = 0;  // expert ids, a < b
  int64_t tokens = 0;    // tokens whose top-k holds both
};

struct ProbeCoactivationLayer {
  int64_t layer = -1;                  // model layer index (a MoE layer)
  int64_t tokens = 0;                  // routed tokens
  std::vector<ExpertPairCount> pairs;  // most frequent first (ties: lower ids first)
  std::vector<int64_t> ranks_hist;     // [c] tokens whose top-k sit on c distinct EP ranks, c = 0..top_k
  std::vector<int64_t> nodes_hist;     // [c] the same over nodes
  int64_t remote_node_copies = 0;      // sum over tokens: remote nodes holding >= 1 of its experts
  int64_t rows = 0;                    // dispatched (token, expert) rows, every destination
  int64_t cross_node_rows = 0;         // of those, rows sent to a rank on another node
  int64_t row_bytes = 0;               // bytes of one dispatched row (width * element size)
  std::vector<int64_t> rank_rows;      // [ep] rows dispatched to each EP rank (its load), all sources
};

// Per-token means of one layer, or over all MoE layers (each layer's tokens weigh alike).
struct ProbeTierTraffic {
  double ranks_per_token = 0;              // distinct EP ranks holding a token's top-k
  double nodes_per_token = 0;              // distinct nodes holding them
  double cross_node_rows_per_token = 0;    // rows the probe's all-to-all sent across nodes
  double cross_node_copies_per_token = 0;  // node-deduplicated copies (DeepEP dispatch)
  double slow_tier_bytes_per_token = 0;    // measured rows: dispatch + combine, bytes
  double rank_max_over_mean = 0;           // rows per EP rank: max / mean (all layers: worst layer)
};

struct ProbeCoactivation {
  int64_t ranks_per_node = 0;  // as declared to the probe (0 = one node)
  int64_t nodes = 1;
  int64_t top_k = 0;
  std::vector<ProbeCoactivationLayer> layers;  // MoE layers in order
  bool empty() const { return layers.empty(); }
};

ProbeTierTraffic LayerTraffic(const ProbeCoactivationLayer& l);
ProbeTierTraffic TotalTraffic(const ProbeCoactivation& c);  // summed over layers, per token per layer

// Pair counts summed over the MoE layers: dense [E][E], symmetric, zero diagonal.
std::vector<std::vector<double>> SummedPairCounts(const ProbeCoactivation& c, int64_t experts);

// One rank's recorder (held by the worker, fed by MoeForward's routing and dispatch steps).
class CoactivationRecorder {
 public:
  // ep_rank_node[j]: node of EP rank j of this rank's group; my_node: this rank's node.
  void Configure(int64_t experts, int64_t top_k, std::vector<int64_t> ep_rank_node, int64_t my_node);
  // top: [tokens, k] expert ids (row-major); placement: expert -> EP rank.
  void RecordRouting(int64_t layer, const int64_t* top, int64_t tokens, int64_t k,
                     const std::vector<int64_t>& placement);
  // send_rows[j]: rows this rank's dispatch sends to EP rank j; row_bytes: bytes per row.
  // cross_node_rows >= 0: the rows the dispatch actually sent across nodes (node-deduplicated
  // dispatch, probe_node_dedup.h) instead of send_rows' rows to other nodes' ranks.
  void RecordDispatch(int64_t layer, const std::vector<int64_t>& send_rows, int64_t row_bytes,
                      int64_t cross_node_rows = -1);
  void Clear() {
    layers_.clear();
    pairs_.clear();
  }
  nlohmann::json ToJson() const;  // every pair seen (the merge needs them all)

 private:
  int64_t experts_ = 0, top_k_ = 0, my_node_ = 0;
  std::vector<int64_t> ep_rank_node_;
  std::vector<ProbeCoactivationLayer> layers_;  // by first appearance
  std::vector<std::vector<int64_t>> pairs_;     // per layer entry: dense E*E upper triangle
  size_t Slot(int64_t layer);
  int64_t NodeOf(int64_t ep_rank) const;
};

// Sums the ranks' recorder JSON (one object per rank, as ToJson wrote it) into `out`; ranks that
// disagree on layers or histogram length are kBadInput naming `where[k]`, the field and the value.
Status MergeCoactivation(const std::vector<nlohmann::json>& per_rank, const std::vector<std::string>& where,
                         int64_t ranks_per_node, int64_t nodes, ProbeCoactivation* out);

// Result JSON (pairs: the kReportedPairs most frequent per layer) and the text report section.
inline constexpr size_t kReportedPairs = 16;
nlohmann::json CoactivationToJson(const ProbeCoactivation& c);
std::string FormatCoactivation(const ProbeCoactivation& c);

}  // namespace onboard
