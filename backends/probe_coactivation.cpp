// Co-activation recorder, merge over ranks, JSON and text (see probe_coactivation.h).
//   Step 1 (routing, per token): distinct EP ranks / nodes of its top-k, remote nodes among them,
//          and each unordered pair of distinct experts it chose.
//   Step 2 (dispatch): rows per destination from the all-to-all's split sizes; cross-node ones (or
//          the node-deduplicated dispatch's slow-tier rows, as it counted them).
//   Step 3 (merge): sums over ranks; pairs sorted most frequent first.
// Shapes: E experts, k top-k, pair table dense E*E per layer (proxy E is small), kept sparse in
// the merged result. Units: tokens, rows, bytes.
#include "backends/probe_coactivation.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace onboard {
namespace {

using nlohmann::json;

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

void SortPairs(std::vector<ExpertPairCount>* p) {
  std::sort(p->begin(), p->end(), [](const ExpertPairCount& x, const ExpertPairCount& y) {
    if (x.tokens != y.tokens) return x.tokens > y.tokens;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
}

json LayerJson(const ProbeCoactivationLayer& l, size_t max_pairs) {
  json pairs = json::array();
  for (size_t i = 0; i < l.pairs.size() && i < max_pairs; ++i)
    pairs.push_back({l.pairs[i].a, l.pairs[i].b, l.pairs[i].tokens});
  return {{"layer", l.layer},
          {"tokens", l.tokens},
          {"pairs", pairs},
          {"ranks_hist", l.ranks_hist},
          {"nodes_hist", l.nodes_hist},
          {"remote_node_copies", l.remote_node_copies},
          {"rows", l.rows},
          {"cross_node_rows", l.cross_node_rows},
          {"row_bytes", l.row_bytes},
          {"rank_rows", l.rank_rows}};
}

Status LayerFromJson(const json& j, const std::string& where, ProbeCoactivationLayer* l) {
  try {
    l->layer = j.at("layer").get<int64_t>();
    l->tokens = j.at("tokens").get<int64_t>();
    l->ranks_hist = j.at("ranks_hist").get<std::vector<int64_t>>();
    l->nodes_hist = j.at("nodes_hist").get<std::vector<int64_t>>();
    l->remote_node_copies = j.at("remote_node_copies").get<int64_t>();
    l->rows = j.at("rows").get<int64_t>();
    l->cross_node_rows = j.at("cross_node_rows").get<int64_t>();
    l->row_bytes = j.at("row_bytes").get<int64_t>();
    l->rank_rows = j.value("rank_rows", std::vector<int64_t>{});
    l->pairs.clear();
    for (const json& p : j.at("pairs"))
      l->pairs.push_back({p.at(0).get<int64_t>(), p.at(1).get<int64_t>(), p.at(2).get<int64_t>()});
  } catch (const std::exception& e) {
    return BadInput(where, "coactivation", e.what());
  }
  return Status::Ok();
}

double Mean(const std::vector<int64_t>& hist) {
  double n = 0, s = 0;
  for (size_t c = 0; c < hist.size(); ++c)
    n += static_cast<double>(hist[c]), s += static_cast<double>(c * hist[c]);
  return n > 0 ? s / n : 0;
}

}  // namespace

ProbeTierTraffic LayerTraffic(const ProbeCoactivationLayer& l) {
  ProbeTierTraffic t;
  const double n = static_cast<double>(std::max<int64_t>(1, l.tokens));
  t.ranks_per_token = Mean(l.ranks_hist);
  t.nodes_per_token = Mean(l.nodes_hist);
  t.cross_node_rows_per_token = static_cast<double>(l.cross_node_rows) / n;
  t.cross_node_copies_per_token = static_cast<double>(l.remote_node_copies) / n;
  // dispatch + combine: every cross-node row goes out and its result comes back
  t.slow_tier_bytes_per_token = 2.0 * static_cast<double>(l.cross_node_rows * l.row_bytes) / n;
  int64_t max_rows = 0, sum_rows = 0;
  for (int64_t r : l.rank_rows) max_rows = std::max(max_rows, r), sum_rows += r;
  if (sum_rows > 0)
    t.rank_max_over_mean = static_cast<double>(max_rows) * static_cast<double>(l.rank_rows.size()) /
                           static_cast<double>(sum_rows);
  return t;
}

ProbeTierTraffic TotalTraffic(const ProbeCoactivation& c) {
  ProbeTierTraffic t;
  for (const ProbeCoactivationLayer& l : c.layers) {
    const ProbeTierTraffic x = LayerTraffic(l);
    t.ranks_per_token += x.ranks_per_token / static_cast<double>(c.layers.size());
    t.nodes_per_token += x.nodes_per_token / static_cast<double>(c.layers.size());
    t.cross_node_rows_per_token += x.cross_node_rows_per_token;
    t.cross_node_copies_per_token += x.cross_node_copies_per_token;
    t.slow_tier_bytes_per_token += x.slow_tier_bytes_per_token;
    t.rank_max_over_mean = std::max(t.rank_max_over_mean, x.rank_max_over_mean);
  }
  return t;
}

std::vector<std::vector<double>> SummedPairCounts(const ProbeCoactivation& c, int64_t experts) {
  std::vector<std::vector<double>> w(static_cast<size_t>(experts),
                                     std::vector<double>(static_cast<size_t>(experts), 0));
  for (const ProbeCoactivationLayer& l : c.layers)
    for (const ExpertPairCount& p : l.pairs) {
      ONBOARD_ASSERT(p.a >= 0 && p.b < experts && p.a < p.b, "pair outside [0, experts)");
      w[static_cast<size_t>(p.a)][static_cast<size_t>(p.b)] += static_cast<double>(p.tokens);
      w[static_cast<size_t>(p.b)][static_cast<size_t>(p.a)] += static_cast<double>(p.tokens);
    }
  return w;
}

void CoactivationRecorder::Configure(int64_t experts, int64_t top_k, std::vector<int64_t> ep_rank_node,
                                     int64_t my_node) {
  experts_ = experts, top_k_ = top_k, ep_rank_node_ = std::move(ep_rank_node), my_node_ = my_node;
  Clear();
}

int64_t CoactivationRecorder::NodeOf(int64_t ep_rank) const {
  ONBOARD_ASSERT(ep_rank >= 0 && ep_rank < static_cast<int64_t>(ep_rank_node_.size()),
                 "EP rank outside group");
  return ep_rank_node_[static_cast<size_t>(ep_rank)];
}

size_t CoactivationRecorder::Slot(int64_t layer) {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].layer == layer) return i;
  ProbeCoactivationLayer l;
  l.layer = layer;
  l.ranks_hist.assign(static_cast<size_t>(top_k_ + 1), 0);
  l.nodes_hist.assign(static_cast<size_t>(top_k_ + 1), 0);
  layers_.push_back(l);
  pairs_.emplace_back(static_cast<size_t>(experts_ * experts_), 0);
  return layers_.size() - 1;
}

void CoactivationRecorder::RecordRouting(int64_t layer, const int64_t* top, int64_t tokens, int64_t k,
                                         const std::vector<int64_t>& placement) {
  ONBOARD_ASSERT(k == top_k_, "recorder configured for another top-k");
  const size_t s = Slot(layer);
  ProbeCoactivationLayer& l = layers_[s];
  std::vector<int64_t>& pairs = pairs_[s];
  const int64_t my_node = my_node_;
  std::vector<int64_t> ranks, nodes;
  // Step 1: per token.
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t* e = top + t * k;
    ranks.clear();
    nodes.clear();
    for (int64_t i = 0; i < k; ++i) {
      ONBOARD_ASSERT(e[i] >= 0 && e[i] < experts_, "routed expert outside [0, experts)");
      const int64_t r = placement[static_cast<size_t>(e[i])];
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
      const int64_t n = NodeOf(r);
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
      for (int64_t j = i + 1; j < k; ++j)
        if (e[i] != e[j])
          ++pairs[static_cast<size_t>(std::min(e[i], e[j]) * experts_ + std::max(e[i], e[j]))];
    }
    ++l.ranks_hist[ranks.size()];
    ++l.nodes_hist[nodes.size()];
    l.remote_node_copies += static_cast<int64_t>(nodes.size()) -
                            (std::find(nodes.begin(), nodes.end(), my_node) != nodes.end() ? 1 : 0);
  }
  l.tokens += tokens;
}

void CoactivationRecorder::RecordDispatch(int64_t layer, const std::vector<int64_t>& send_rows,
                                          int64_t row_bytes, int64_t cross_node_rows) {
  // Step 2: the all-to-all's split sizes.
  ProbeCoactivationLayer& l = layers_[Slot(layer)];
  const int64_t my_node = my_node_;
  l.rank_rows.resize(send_rows.size(), 0);
  for (size_t j = 0; j < send_rows.size(); ++j) {
    l.rank_rows[j] += send_rows[j];
    l.rows += send_rows[j];
    if (cross_node_rows < 0 && NodeOf(static_cast<int64_t>(j)) != my_node) l.cross_node_rows += send_rows[j];
  }
  if (cross_node_rows >= 0) l.cross_node_rows += cross_node_rows;  // node-dedup: rows actually sent
  l.row_bytes = row_bytes;
}

json CoactivationRecorder::ToJson() const {
  json layers = json::array();
  for (size_t s = 0; s < layers_.size(); ++s) {
    ProbeCoactivationLayer l = layers_[s];
    for (int64_t a = 0; a < experts_; ++a)
      for (int64_t b = a + 1; b < experts_; ++b)
        if (const int64_t c = pairs_[s][static_cast<size_t>(a * experts_ + b)]; c > 0)
          l.pairs.push_back({a, b, c});
    SortPairs(&l.pairs);
    layers.push_back(LayerJson(l, l.pairs.size()));
  }
  return {{"top_k", top_k_}, {"layers", layers}};
}

Status MergeCoactivation(const std::vector<json>& per_rank, const std::vector<std::string>& where,
                         int64_t ranks_per_node, int64_t nodes, ProbeCoactivation* out) {
  // Step 3: sums over ranks, layer by model layer index: under pipeline parallelism each stage's
  // ranks hold (and report) only their own MoE layers; the merged layers come out in layer order.
  *out = ProbeCoactivation{};
  out->ranks_per_node = ranks_per_node;
  out->nodes = nodes;
  std::map<int64_t, ProbeCoactivationLayer> merged;
  std::map<int64_t, std::map<std::pair<int64_t, int64_t>, int64_t>> pairs;
  for (size_t k = 0; k < per_rank.size(); ++k) {
    const json& j = per_rank[k];
    if (j.is_null()) continue;  // a worker without a recorder (no MoE layer)
    if (!j.contains("layers") || !j.at("layers").is_array())
      return BadInput(where[k], "coactivation.layers", "missing or not an array");
    out->top_k = j.value("top_k", int64_t{0});
    const json& ls = j.at("layers");
    for (size_t i = 0; i < ls.size(); ++i) {
      ProbeCoactivationLayer l;
      ONBOARD_RETURN_IF_ERROR(LayerFromJson(ls[i], where[k], &l));
      for (const ExpertPairCount& p : l.pairs) pairs[l.layer][{p.a, p.b}] += p.tokens;
      auto [it, first] = merged.try_emplace(l.layer, l);
      if (first) continue;
      ProbeCoactivationLayer& m = it->second;
      if (l.ranks_hist.size() != m.ranks_hist.size() || l.nodes_hist.size() != m.nodes_hist.size() ||
          l.rank_rows.size() != m.rank_rows.size())
        return BadInput(where[k], "coactivation.layers[" + std::to_string(i) + "]",
                        "histogram length differs from another rank's for this layer",
                        std::to_string(l.layer));
      m.tokens += l.tokens, m.remote_node_copies += l.remote_node_copies;
      m.rows += l.rows, m.cross_node_rows += l.cross_node_rows;
      for (size_t c = 0; c < m.ranks_hist.size(); ++c) m.ranks_hist[c] += l.ranks_hist[c];
      for (size_t c = 0; c < m.nodes_hist.size(); ++c) m.nodes_hist[c] += l.nodes_hist[c];
      for (size_t c = 0; c < m.rank_rows.size(); ++c) m.rank_rows[c] += l.rank_rows[c];
    }
  }
  for (auto& [layer, l] : merged) {
    l.pairs.clear();
    for (const auto& [ab, c] : pairs[layer]) l.pairs.push_back({ab.first, ab.second, c});
    SortPairs(&l.pairs);
    out->layers.push_back(std::move(l));
  }
  return Status::Ok();
}

json CoactivationToJson(const ProbeCoactivation& c) {
  json layers = json::array();
  for (const ProbeCoactivationLayer& l : c.layers) {
    json j = LayerJson(l, kReportedPairs);
    const ProbeTierTraffic t = LayerTraffic(l);
    j["ranks_per_token"] = t.ranks_per_token;
    j["nodes_per_token"] = t.nodes_per_token;
    j["cross_node_rows_per_token"] = t.cross_node_rows_per_token;
    j["cross_node_copies_per_token"] = t.cross_node_copies_per_token;
    j["slow_tier_bytes_per_token"] = t.slow_tier_bytes_per_token;
    j["rank_max_over_mean"] = t.rank_max_over_mean;
    j["distinct_pairs"] = l.pairs.size();
    layers.push_back(j);
  }
  const ProbeTierTraffic t = TotalTraffic(c);
  return {{"ranks_per_node", c.ranks_per_node},
          {"nodes", c.nodes},
          {"top_k", c.top_k},
          {"layers", layers},
          {"total",
           {{"ranks_per_token", t.ranks_per_token},
            {"nodes_per_token", t.nodes_per_token},
            {"cross_node_rows_per_token", t.cross_node_rows_per_token},
            {"cross_node_copies_per_token", t.cross_node_copies_per_token},
            {"slow_tier_bytes_per_token", t.slow_tier_bytes_per_token},
            {"rank_max_over_mean", t.rank_max_over_mean}}}};
}

std::string FormatCoactivation(const ProbeCoactivation& c) {
  if (c.empty()) return "";
  std::ostringstream os;
  os << "\nexpert co-activation and tier traffic (" << c.nodes << " node(s) x "
     << (c.ranks_per_node > 0 ? std::to_string(c.ranks_per_node) : std::string("all")) << " ranks, top-"
     << c.top_k << ", recorded steps; per routed token):\n";
  os << "  layer   tokens  ranks/tok  nodes/tok  xnode_rows  xnode_copies  slow_B/tok  top pairs "
        "(i-j:tokens)\n";
  for (const ProbeCoactivationLayer& l : c.layers) {
    const ProbeTierTraffic t = LayerTraffic(l);
    std::string top;
    for (size_t i = 0; i < l.pairs.size() && i < 4; ++i)
      top += (i ? " " : "") + std::to_string(l.pairs[i].a) + "-" + std::to_string(l.pairs[i].b) + ":" +
             std::to_string(l.pairs[i].tokens);
    os << F("  %5.0f", static_cast<double>(l.layer)) << F(" %8.0f", static_cast<double>(l.tokens))
       << F(" %10.3f", t.ranks_per_token) << F(" %10.3f", t.nodes_per_token)
       << F(" %11.3f", t.cross_node_rows_per_token) << F(" %13.3f", t.cross_node_copies_per_token)
       << F(" %11.1f", t.slow_tier_bytes_per_token) << "  " << top << "\n";
  }
  const ProbeTierTraffic t = TotalTraffic(c);
  os << "  all MoE layers: nodes/token " << F("%.3f", t.nodes_per_token) << ", cross-node rows/token "
     << F("%.3f", t.cross_node_rows_per_token) << ", node-deduplicated copies/token "
     << F("%.3f", t.cross_node_copies_per_token) << ", slow-tier bytes/token "
     << F("%.1f", t.slow_tier_bytes_per_token)
     << " (dispatch + combine, measured split sizes), rows per EP rank "
     << "max/mean " << F("%.3f", t.rank_max_over_mean) << " (worst layer)\n";
  return os.str();
}

}  // namespace onboard
