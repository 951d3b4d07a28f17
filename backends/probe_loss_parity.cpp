// Kernel loss parity in the probe (see probe_loss_parity.h).
#include "backends/probe_loss_parity.h"

#include <algorithm>

#include "validators/loss_parity.h"

namespace onboard::backends {
namespace {

// Forwards only the caller's cancellation to the parity runs (their steps are not the probe's).
class CancelOnly : public ProbeObserver {
 public:
  explicit CancelOnly(ProbeObserver* outer) : outer_(outer) {}
  bool cancelled() const override { return outer_ != nullptr && outer_->cancelled(); }

 private:
  ProbeObserver* outer_;
};

std::vector<double> Losses(const ProbeResult& r) {
  std::vector<double> l;
  for (const ProbeStep& s : r.steps) l.push_back(s.loss);
  return l;
}

}  // namespace

ProxySpec LossParitySpec(const ProxySpec& spec) {
  ProxySpec p = spec;
  p.source_model = spec.source_model + " (loss parity: KDA layers on dense MLPs)";
  p.layers.clear();
  for (const ProxyLayer& l : spec.layers)
    if (l.mixer == ProxyMixer::kKDA) p.layers.push_back({ProxyMixer::kKDA, ProxyChannel::kDense});
  return p;
}

ProbeConfig LossParityConfig(const ProbeConfig& probe, const std::string& kernel,
                             const std::string& out_dir) {
  // Step 1: the full-mode recipe on one rank, with the probe's data and numerics.
  ProbeConfig c = DefaultProbeConfig(FinetuneMode::kFull);
  c.steps = probe.loss_parity_steps;
  c.warmup = std::min<int64_t>(c.warmup, std::max<int64_t>(1, c.steps / 4));
  c.seed = probe.seed;
  c.seq = probe.seq;
  c.batch = probe.batch;
  c.task = probe.task;
  c.copy_symbols = probe.copy_symbols;
  c.text_file = probe.text_file;
  c.lookup_keys = probe.lookup_keys;
  c.lookup_values = probe.lookup_values;
  c.dtype = probe.dtype;
  c.timeout_s = probe.timeout_s;
  c.collective_timeout_s = probe.collective_timeout_s;
  c.worker_binary = probe.worker_binary;
  c.threads_per_rank = probe.threads_per_rank;
  c.thresholds = probe.thresholds;
  c.out_dir = out_dir;
  // Step 2: the kernel, and the controls that concern the parity proxy's parts.
  c.kda_kernel = kernel;
  if (probe.control == kControlNoLookback) c.control = probe.control;
  if (probe.control == kControlPerturbedKdaGate && kernel == "generated") c.control = probe.control;
  return c;
}

Expected<std::optional<ProbeLossParity>> RunKdaLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                          ProbeObserver* observer) {
  const ProxySpec ps = LossParitySpec(spec);
  if (config.loss_parity_steps <= 0 || ps.layers.empty()) return std::optional<ProbeLossParity>();
  // Step 1: the two runs, in folders of their own beside the probe's logs.
  CancelOnly cancel(observer);
  const std::string dir = config.out_dir.empty() ? std::string() : config.out_dir + "/loss_parity_";
  Expected<ProbeResult> gen =
      RunProbeSpec(ps, LossParityConfig(config, "generated", dir.empty() ? "" : dir + "generated"), &cancel);
  if (!gen.ok()) return Status(gen.status().code(), "loss parity, generated run: " + gen.status().message());
  Expected<ProbeResult> ref =
      RunProbeSpec(ps, LossParityConfig(config, "torch", dir.empty() ? "" : dir + "torch"), &cancel);
  if (!ref.ok()) return Status(ref.status().code(), "loss parity, reference run: " + ref.status().message());
  // Step 2: the comparison (a NaN or a curve cut short by one is a failed parity).
  ProbeLossParity p;
  p.kernel = "kda";
  p.proxy = ps.PatternString();
  p.tolerance = kLossParityRelTol;
  p.generated = Losses(*gen);
  p.reference = Losses(*ref);
  p.generated_kernel_calls = gen->kda_calls.generated;
  p.torch_op_calls = gen->kda_calls.torch;
  Expected<LossParityReport> cmp = CheckLossParity(p.generated, p.reference, p.tolerance);
  if (cmp.ok()) {
    p.pass = cmp->pass;
    p.steps = cmp->steps;
    p.max_rel = cmp->max_rel;
    p.worst_step = cmp->worst_step;
    p.message = "kda " + cmp->message;
  } else {
    p.pass = false;
    p.steps = static_cast<int64_t>(p.reference.size());
    p.message = "kda loss parity FAILED: " + cmp.status().message();
  }
  // Step 3: a generated run that never ran the generated kernel compared torch with torch.
  if (p.generated_kernel_calls == 0)
    p.message += "; the generated run ran the torch ops only (" +
                 (gen->kda_calls.fallback_reason.empty() ? std::string("no reason recorded")
                                                         : gen->kda_calls.fallback_reason) +
                 "): nothing generated was compared";
  return std::optional<ProbeLossParity>(std::move(p));
}

}  // namespace onboard::backends
