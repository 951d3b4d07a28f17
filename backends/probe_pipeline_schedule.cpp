// Pipeline schedules, their consistency check and the chunk split (see probe_pipeline_schedule.h).
#include "backends/probe_pipeline_schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace onboard {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// The k-th forward (or backward) op of a rank in the interleaved order (v = 1: chunk 0, micro-batch k).
PipeOp NthOp(PipeOpKind kind, int64_t p, int64_t v, int64_t k) {
  const int64_t group = k % (p * v);
  int64_t chunk = group / p;
  if (kind == PipeOpKind::kBackward) chunk = v - 1 - chunk;
  const int64_t mb = v == 1 ? k : (k / (p * v)) * p + k % p;
  return {kind, chunk, mb};
}

std::string OpName(const PipeOp& op) {
  return std::string(op.kind == PipeOpKind::kForward ? "F" : "B") + Str(op.chunk) + "." + Str(op.micro_batch);
}

// One message kind on one directed link: (sender rank, receiver rank, 0 = activation / 1 = gradient).
using LinkKey = std::tuple<int64_t, int64_t, int>;
// What travels on a link: (sending model chunk, micro-batch).
using Message = std::pair<int64_t, int64_t>;

struct Machine {
  int64_t p, v, m;
  std::map<LinkKey, std::deque<Message>> links;
  std::set<std::tuple<int64_t, int64_t, int>> done;  // (model chunk, micro-batch, kind)
};

// Step 2 helper: tries to run `op` of `rank`. Returns "" when it ran, "wait" when its message has
// not arrived yet, else the error.
std::string TryRun(Machine& M, int64_t rank, const PipeOp& op) {
  const int64_t q = op.chunk * M.p + rank, last = M.p * M.v - 1, mb = op.micro_batch;
  const std::string where = "rank " + Str(rank) + " op " + OpName(op);
  const bool fwd = op.kind == PipeOpKind::kForward;
  if (M.done.count({q, mb, fwd ? 0 : 1})) return where + ": runs twice";
  if (!fwd && !M.done.count({q, mb, 0})) return where + ": backward before its forward";
  const bool receives = fwd ? q > 0 : q < last;
  if (receives) {
    const int64_t peer_q = fwd ? q - 1 : q + 1;
    auto& fifo = M.links[{peer_q % M.p, rank, fwd ? 0 : 1}];
    if (fifo.empty()) return "wait";
    const Message got = fifo.front();
    if (got != Message{peer_q, mb})
      return where + ": would receive the " + (fwd ? "activation" : "gradient") + " of micro-batch " +
             Str(got.second) + " (model chunk " + Str(got.first) + ") in place of micro-batch " + Str(mb);
    fifo.pop_front();
  }
  M.done.insert({q, mb, fwd ? 0 : 1});
  const bool sends = fwd ? q < last : q > 0;
  if (sends) {
    const int64_t peer_q = fwd ? q + 1 : q - 1;
    M.links[{rank, peer_q % M.p, fwd ? 0 : 1}].push_back({q, mb});
  }
  return "";
}

}  // namespace

std::vector<PipeOp> PipelineSchedule(int64_t p, int64_t v, int64_t m, int64_t rank) {
  ONBOARD_ASSERT(p >= 1 && v >= 1 && m >= 1 && rank >= 0 && rank < p, "pipeline schedule sizes");
  ONBOARD_ASSERT(v == 1 || m % p == 0, "interleaved schedule needs micro-batches % pp == 0");
  const int64_t total = m * v;
  const int64_t warmup = std::min(total, v == 1 ? p - rank - 1 : (p - rank - 1) * 2 + (v - 1) * p);
  std::vector<PipeOp> ops;
  // Step 1: warm-up forwards; Step 2: one forward, one backward; Step 3: cool-down backwards.
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(NthOp(PipeOpKind::kForward, p, v, k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    ops.push_back(NthOp(PipeOpKind::kForward, p, v, warmup + i));
    ops.push_back(NthOp(PipeOpKind::kBackward, p, v, i));
  }
  for (int64_t k = total - warmup; k < total; ++k) ops.push_back(NthOp(PipeOpKind::kBackward, p, v, k));
  return ops;
}

std::string PipeOpsString(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops) s += (s.empty() ? "" : " ") + OpName(op);
  return s;
}

Status CheckPipelineSchedule(int64_t p, int64_t v, int64_t m, const std::vector<std::vector<PipeOp>>& ops) {
  auto bad = [](const std::string& what) {
    return Status(ErrorCode::kInternal, "pipeline schedule: " + what);
  };
  if (static_cast<int64_t>(ops.size()) != p) return bad("needs one op list per rank, got " + Str(ops.size()));
  // Step 1: every rank runs each of its (chunk, micro-batch) forwards and backwards once.
  for (int64_t r = 0; r < p; ++r)
    if (static_cast<int64_t>(ops[r].size()) != 2 * m * v)
      return bad("rank " + Str(r) + " has " + Str(ops[r].size()) + " ops, needs 2*m*v = " + Str(2 * m * v));
  // Step 2: run them; a rank waits while its next receive has not arrived.
  Machine M{p, v, m, {}, {}};
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      while (next[r] < ops[r].size()) {
        const PipeOp& op = ops[r][next[r]];
        if (op.chunk < 0 || op.chunk >= v || op.micro_batch < 0 || op.micro_batch >= m)
          return bad("rank " + Str(r) + " op " + OpName(op) + ": chunk or micro-batch out of range");
        const std::string e = TryRun(M, r, op);
        if (e == "wait") break;
        if (!e.empty()) return bad(e);
        ++next[r];
        progress = true;
      }
    }
  }
  for (int64_t r = 0; r < p; ++r)
    if (next[r] < ops[r].size())
      return bad("deadlock: rank " + Str(r) + " waits forever at op " + OpName(ops[r][next[r]]) + " (op " +
                 Str(next[r]) + ")");
  return Status::Ok();
}

std::vector<int64_t> BalancedStageStarts(int64_t layers, int64_t chunks) {
  ONBOARD_ASSERT(chunks >= 1 && chunks <= layers, "balanced split needs 1 <= chunks <= layers");
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    starts.push_back(at);
    at += layers / chunks + (c < layers % chunks ? 1 : 0);
  }
  return starts;
}

UnitRange ChunkUnits(const std::vector<int64_t>& starts, int64_t layers, int64_t q) {
  const int64_t n = static_cast<int64_t>(starts.size());
  ONBOARD_ASSERT(q >= 0 && q < n, "model chunk out of range");
  UnitRange u;
  u.begin = q == 0 ? 0 : starts[q] + 1;
  u.end = q == n - 1 ? layers + 2 : starts[q + 1] + 1;
  return u;
}

std::vector<std::string> PipelineLayoutProblems(int64_t pp, int64_t interleave, int64_t layers,
                                                int64_t micro_batches, const std::vector<int64_t>& starts) {
  std::vector<std::string> out;
  if (pp < 1) out.push_back("pp=" + Str(pp) + " must be >= 1");
  if (interleave < 1) out.push_back("interleave=" + Str(interleave) + " must be >= 1");
  if (!out.empty()) return out;
  if (interleave > 1 && pp == 1) out.push_back("interleave=" + Str(interleave) + " needs pp > 1");
  const int64_t chunks = pp * interleave;
  if (layers < chunks)
    out.push_back("pp*interleave=" + Str(chunks) + " must be <= the model's layers=" + Str(layers) +
                  " (every model chunk holds at least one layer)");
  if (interleave > 1 && micro_batches % pp != 0)
    out.push_back("interleaved 1F1B needs the micro-batches per data rank (" + Str(micro_batches) +
                  ") to be a multiple of pp=" + Str(pp));
  if (!starts.empty()) {
    bool ok = static_cast<int64_t>(starts.size()) == chunks && starts[0] == 0;
    for (size_t i = 1; ok && i < starts.size(); ++i) ok = starts[i] > starts[i - 1];
    ok = ok && starts.back() < layers;
    if (!ok)
      out.push_back("stage_layer_starts needs pp*interleave=" + Str(chunks) +
                    " ascending first layers, the first 0, all < layers=" + Str(layers) + " (got " +
                    Str(starts.size()) + " entries)");
  }
  return out;
}

}  // namespace onboard
