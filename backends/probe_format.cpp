// FormatProbeResult: the `onboard probe` text report (loss curve table, time split, expert load,
// cost-model prediction beside the measurement with the ratio, validator verdicts).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "backends/probe.h"
#include "core/load_balance.h"

namespace onboard {
namespace {

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

double LayerMaxOverMean(const std::vector<int64_t>& tokens) {
  return MaxOverMean(std::vector<double>(tokens.begin(), tokens.end()));
}

// Tensor parallelism: the layout and the TP group's collective time per step (steady state:
// steps after the first; max over ranks), only when tp > 1.
void FormatTpComm(const ProbeResult& r, std::ostringstream& os) {
  if (r.config.tp_degree() <= 1) return;
  double ar = 0, ag = 0, step = 0;
  int64_t n = 0;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i, ++n) {
    ar += r.steps[i].comm.tp_all_reduce_s;
    ag += r.steps[i].comm.tp_all_gather_s;
    step += r.steps[i].step_s;
  }
  if (n == 0) return;
  const double k = 1e3 / static_cast<double>(n);
  os << "tensor parallelism: tp=" << r.config.tp_degree() << " x " << r.config.data_ranks()
     << " data-parallel ranks; TP all-reduce " << F("%.2f", ar * k) << " ms, TP all-gather "
     << F("%.2f", ag * k) << " ms per step (" << F("%.1f", step > 0 ? 100 * (ar + ag) / step : 0.0)
     << "% of the step)\n";
}

// EP all-to-all exposed (host blocked) and hidden (in flight under the shared expert's compute,
// ProbeConfig::moe_overlap), per step after the first, max over ranks (issue 18).
void FormatExpertOverlap(const ProbeResult& r, std::ostringstream& os) {
  const MeasuredExpertAllToAll m = MeasuredExpertExchange(r);
  if (m.exposed_s + m.hidden_s <= 0) return;
  os << "expert all-to-all (" << (r.config.moe_overlap ? "overlapped with the shared expert" : "synchronous")
     << "): exposed " << F("%.2f", m.exposed_s * 1e3) << " ms, hidden " << F("%.2f", m.hidden_s * 1e3)
     << " ms per step (backward exchanges stay synchronous: exposed)\n";
}

// Per collective kind and the live-tensor memory, measured beside the cost / memory model.
void FormatComparisons(const ProbeResult& r, std::ostringstream& os) {
  const ProbePrediction& p = r.prediction;
  os << "\nper collective (ms per step; measured: mean of the steps after the first, max over ranks):\n";
  os << "  kind         cost-model term   measured  predicted   ratio\n";
  for (const CollectiveComparison& c : p.collectives) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-12s %-16s %9.3f %10.3f", c.kind.c_str(), c.term.c_str(),
                  c.measured_s * 1e3, c.predicted_s * 1e3);
    os << line << (c.ratio > 0 ? F("  %6.2fx", c.ratio) : std::string("       -")) << "\n";
  }
  const MemoryComparison& m = p.memory;
  const double mib = 1.0 / 1048576.0;
  os << "\nlive-tensor peak per rank (MiB, tracking allocator; recompute ";
  std::string rc;
  for (const auto& [kind, pol] : r.config.recompute)
    rc += (rc.empty() ? "" : ",") + kind + "=" + RecomputeName(pol);
  os << (rc.empty() ? "full (default)" : rc) << "):";
  for (size_t k = 0; k < r.rank_live_peak_bytes.size(); ++k)
    os << F(" r%.0f ", static_cast<double>(k))
       << F("%.2f", static_cast<double>(r.rank_live_peak_bytes[k]) * mib);
  os << "\n  memory model (" << m.dtype_note << "):\n";
  os << "    weights " << F("%.2f", m.weights * mib) << ", grads " << F("%.2f", m.grads * mib)
     << ", optimizer " << F("%.2f", m.optimizer * mib) << ", activations " << F("%.2f", m.activations * mib)
     << ", a2a buffers " << F("%.2f", m.a2a_buffers * mib) << ", workspace " << F("%.2f", m.workspace * mib)
     << " = " << F("%.2f", m.predicted * mib) << " MiB predicted; " << F("%.2f", m.measured * mib)
     << " MiB measured" << (m.ratio > 0 ? F(" (ratio %.3f)", m.ratio) : std::string()) << "\n";
}

}  // namespace

MeasuredExpertAllToAll MeasuredExpertExchange(const ProbeResult& r) {
  MeasuredExpertAllToAll m;
  int64_t n = 0;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i, ++n) {
    m.exposed_s += r.steps[i].comm.all_to_all_s;
    m.hidden_s += r.steps[i].comm.all_to_all_hidden_s;
  }
  if (n > 0) {
    m.exposed_s /= static_cast<double>(n);
    m.hidden_s /= static_cast<double>(n);
  }
  return m;
}

double MeasuredPpBubble(const ProbeResult& r) {
  double bubble = 0;
  int64_t n = 0;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i, ++n) bubble += r.steps[i].pp_bubble;
  return n > 0 ? bubble / static_cast<double>(n) : 0.0;
}

namespace {

// Pipeline parallelism (issue 17): layout, measured bubble (mean over steps after the first, per
// rank and max) beside the cost model's, and the point-to-point times.
void FormatPipeline(const ProbeResult& r, std::ostringstream& os) {
  const ProbeConfig& c = r.config;
  if (c.pp_degree() <= 1) return;
  std::vector<double> by_rank;
  double send = 0, recv = 0;
  int64_t n = 0;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i, ++n) {
    const ProbeStep& s = r.steps[i];
    send += s.comm.pp_send_s;
    recv += s.comm.pp_recv_s;
    by_rank.resize(std::max(by_rank.size(), s.pp_bubble_by_rank.size()), 0.0);
    for (size_t k = 0; k < s.pp_bubble_by_rank.size(); ++k) by_rank[k] += s.pp_bubble_by_rank[k];
  }
  if (n == 0) return;
  const double dn = static_cast<double>(n), bubble = MeasuredPpBubble(r) * dn;
  os << "\npipeline: pp=" << c.pp_degree() << " x interleave=" << c.interleave << ", "
     << (c.interleave > 1 ? "interleaved 1F1B" : "1F1B") << ", " << c.micro_steps() << " micro-batches, "
     << c.data_ranks() << " data ranks" << (c.tp_degree() > 1 ? " x tp=" + std::to_string(c.tp_degree()) : "")
     << " per stage\n";
  os << "  bubble (idle share of the pipeline span, max over ranks)" << F(" %6.1f%%", 100 * bubble / dn)
     << "   cost model" << F(" %6.1f%%", 100 * r.prediction.pp_bubble)
     << (r.prediction.pp_bubble > 0 ? F("  %5.2fx", bubble / dn / r.prediction.pp_bubble)
                                    : std::string("     -"))
     << "\n  bubble by rank:";
  for (double b : by_rank) os << F(" %.1f%%", 100 * b / dn);
  os << "\n  send" << F(" %.2f ms", 1e3 * send / dn) << ", recv" << F(" %.2f ms", 1e3 * recv / dn)
     << " per step (max over ranks; recv includes waiting for the other stage)\n";
}

// What the KDA layers ran, and the kernel loss parity (issue 12).
void FormatKernels(const ProbeResult& r, std::ostringstream& os) {
  if (r.kda_calls.generated + r.kda_calls.torch > 0)
    os << "\nKDA forward (kda_kernel " << ProbeKernelName(r.config.kda_kernel)
       << "): " << r.kda_calls.generated << " generated-kernel calls, " << r.kda_calls.torch
       << " torch-op calls (rank 0)"
       << (r.kda_calls.fallback_reason.empty() ? "" : "; fallback: " + r.kda_calls.fallback_reason) << "\n";
  for (const ProbeLossParity& p : r.loss_parity)
    os << "kernel loss parity (" << p.kernel << ", proxy " << p.proxy << ", " << p.steps
       << " steps): " << (p.pass ? "ok" : "FAILED") << F(", max relative difference %.3g", p.max_rel)
       << " at step " << p.worst_step << F(" (tolerance %.3g)", p.tolerance) << "\n";
}

// The run's identity and the task: layout, backend, proxy shape, the task's floor, its baselines
// and the skill reached.
void FormatHeader(const ProbeResult& r, std::ostringstream& os) {
  const ProbeConfig& c = r.config;
  os << "probe of " << r.spec.source_model << ": " << c.ranks << " ranks (fsdp=" << c.fsdp_degree()
     << ", ep=" << c.ep_degree() << ", " << (c.mode == FinetuneMode::kLoRA ? "lora r=" + std::to_string(c.lora_rank) : std::string("full"))
     << "), backend " << r.backend << ", LibTorch " << r.torch_version << "\n";
  os << "proxy: " << r.spec.num_layers() << " layers " << r.spec.PatternString() << "; hidden "
     << r.spec.hidden << ", " << r.spec.num_experts << " experts top-" << r.spec.top_k << ", "
     << r.spec.num_shared << " shared, latent " << r.spec.latent_dim << "; params " << r.params.total
     << " (experts " << r.params.expert << ", trainable " << r.params.trainable << ")\n";
  for (const std::string& n : r.spec.notes) os << "  note: " << n << "\n";
  os << "task: " << r.task_floor << "\n";
  if (c.task == ProbeTask::kText) {  // the held-out split's bar (backends/probe_text_split.h)
    os << "baselines (held-out split, never trained on): unigram " << F("%.4g", r.baseline_nats)
       << " nats, bigram " << F("%.4g", r.bigram_nats) << " nats; converged needs held-out loss < "
       << F("%.4g", r.loss_target) << " nats\n";
    const double train = r.steps.empty() ? std::nan("") : r.steps.back().loss;
    os << "skill: " << r.skill_metric << " " << F("%.4g", r.held_out_loss) << " nats (last train loss "
       << F("%.4g", train) << " nats)\n";
  } else {
    os << "baselines: no-learning " << F("%.4g", r.baseline_nats) << " nats, floor "
       << F("%.4g", r.floor_nats) << " nats; converged needs final loss <= " << F("%.4g", r.loss_target)
       << " nats";
    os << " and " << r.skill_metric << " >= " << F("%.0f", 100 * r.skill_target) << "%\n";
    if (std::isfinite(r.held_out_accuracy))  // copy: the final weights on sequences never trained on
      os << "skill: " << r.skill_metric << " " << F("%.2f", 100 * r.skill) << "% held out (final weights, "
         << r.held_out_tokens << " tokens never trained on; last steps "
         << F("%.1f", 100 * r.last_steps_accuracy) << "%), held-out loss " << F("%.4g", r.final_loss)
         << " nats\n";
    else
      os << "skill: " << r.skill_metric << " " << F("%.1f", 100 * r.skill)
         << "% (mean of the last steps), final loss " << F("%.4g", r.final_loss) << " nats\n";
  }
}

// The batch and schedule line, then one table row per step.
void FormatStepTable(const ProbeResult& r, std::ostringstream& os) {
  const ProbeConfig& c = r.config;
  os << "batch " << c.batch << " x seq " << c.seq << " (micro-batch " << c.micro_batch_size() << " x "
     << c.micro_steps() << " micro-steps per rank), lr " << c.lr << " (warm-up " << c.warmup
     << ", cosine), clip " << c.clip << ", seed " << c.seed << "\n\n";
  os << " step      loss    acc  grad_norm        lr   step_ms  tok/s    ag_ms   rs_ms  a2a_ms   ar_ms  rss_MiB  idx_kl  load max/mean\n";
  for (const ProbeStep& s : r.steps) {
    std::string bal;
    for (const auto& l : s.expert_load) bal += (bal.empty() ? "" : ",") + F("%.2f", LayerMaxOverMean(l));
    os << F("%5.0f", static_cast<double>(s.step)) << F(" %9.4f", s.loss) << F(" %6.3f", s.accuracy)
       << F(" %10.4g", s.grad_norm)
       << F(" %9.3g", s.lr) << F(" %9.1f", s.step_s * 1e3) << F(" %6.0f", s.tokens_per_s)
       << F(" %8.2f", s.comm.all_gather_s * 1e3) << F(" %7.2f", s.comm.reduce_scatter_s * 1e3)
       << F(" %7.2f", s.comm.all_to_all_s * 1e3) << F(" %7.2f", s.comm.all_reduce_s * 1e3)
       << F(" %8.1f", static_cast<double>(s.peak_rss_bytes) / 1048576.0);
    double kl = 0;
    for (double v : s.indexer_kl) kl += v;
    os << (s.indexer_kl.empty() ? std::string("       -") : F(" %7.3f", kl)) << "  " << bal << "\n";
  }
}

// Measured vs predicted (steady state: steps after the first): step time, communication time and
// memory beside the cost model, with its notes.
void FormatMeasuredVsPredicted(const ProbeResult& r, std::ostringstream& os) {
  double step_s = 0, comm_s = 0;
  int64_t n = 0, peak = 0;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i) {
    step_s += r.steps[i].step_s;
    comm_s += r.steps[i].comm.total();
    ++n;
  }
  for (const ProbeStep& s : r.steps) peak = std::max(peak, s.peak_rss_bytes);
  if (n > 0) { step_s /= static_cast<double>(n); comm_s /= static_cast<double>(n); }
  os << "\nmeasured vs cost model (" << (r.prediction.available ? r.prediction.topology : "unavailable") << "):\n";
  os << "                     measured   predicted   ratio\n";
  auto row = [&](const char* name, double m, double p, double scale, const char* unit) {
    os << "  " << name << F(" %10.2f", m * scale) << F(" %10.2f", p * scale) << " " << unit
       << (p > 0 ? F("  %5.2fx", m / p) : std::string("     -")) << "\n";
  };
  row("step time (ms)  ", step_s, r.prediction.step_s, 1e3, "");
  row("comm time (ms)  ", comm_s, r.prediction.comm_s, 1e3, "");
  row("memory (MiB)    ", static_cast<double>(peak - r.baseline_rss_bytes), r.prediction.memory_bytes,
      1.0 / 1048576.0, "");
  os << "  (memory measured = peak RSS high-water mark (getrusage) minus RSS before the model was built: "
     << F("%.1f", static_cast<double>(r.baseline_rss_bytes) / 1048576.0) << " MiB of LibTorch runtime)\n";
  for (const std::string& note : r.prediction.notes) os << "  note: " << note << "\n";
}

}  // namespace

std::string FormatProbeResult(const ProbeResult& r) {
  std::ostringstream os;
  // Step 1: what ran, and the task's bar.
  FormatHeader(r, os);
  // Step 2: the per-step table.
  FormatStepTable(r, os);
  // Step 3: the layouts' own communication (tensor parallelism, issue 17; expert overlap, issue 18).
  FormatTpComm(r, os);
  FormatExpertOverlap(r, os);
  // Step 4: measured vs predicted, per collective kind and memory term, the pipeline.
  FormatMeasuredVsPredicted(r, os);
  FormatComparisons(r, os);
  FormatPipeline(r, os);
  // Step 5: co-activation, kernels, the verdict and its checks.
  os << FormatCoactivation(r.coactivation);
  FormatKernels(r, os);
  os << "\nverdict: " << r.convergence << "\n";
  for (const std::string& line : r.checks) os << "  " << line << "\n";
  os << "logs and per-rank JSON: " << r.out_dir << F(" (wall %.1f s)", r.wall_s) << "\n";
  return os.str();
}

}  // namespace onboard
