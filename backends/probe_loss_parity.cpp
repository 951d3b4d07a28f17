// Kernel loss parity in the probe (see probe_loss_parity.h).
#include "backends/probe_loss_parity.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

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

// What the generated run's `kernel` layers ran: KDA from the result; DSA from rank 0's result file
// (its "dsa_calls", written by the worker). An unreadable file reads as no generated call.
KdaCalls CallsOfRun(const ProbeResult& r, const std::string& kernel) {
  if (kernel != "dsa") return r.kda_calls;
  KdaCalls c;
  std::ifstream in(r.out_dir + "/rank0.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("dsa_calls") || !j["dsa_calls"].is_object()) {
    c.fallback_reason = "no dsa_calls in " + r.out_dir + "/rank0.json";
    return c;
  }
  const nlohmann::json& d = j["dsa_calls"];
  c.generated = d.value("generated", int64_t{0});
  c.torch = d.value("torch", int64_t{0});
  c.fallback_reason = d.value("fallback_reason", std::string());
  return c;
}

// The layers of a kernel family: KDA mixers, or MLA mixers with a DSA indexer.
bool InFamily(const ProxySpec& spec, const ProxyLayer& l, const std::string& kernel) {
  if (kernel == "dsa") return l.mixer == ProxyMixer::kMLA && spec.index_topk > 0 && spec.index_heads > 0;
  return l.mixer == ProxyMixer::kKDA;
}

}  // namespace

ProxySpec LossParitySpec(const ProxySpec& spec, const std::string& kernel) {
  ProxySpec p = spec;
  p.source_model = spec.source_model + " (loss parity: " + (kernel == "dsa" ? "MLA+DSA" : "KDA") +
                   " layers on dense MLPs)";
  p.layers.clear();
  for (const ProxyLayer& l : spec.layers)
    if (InFamily(spec, l, kernel)) p.layers.push_back({l.mixer, ProxyChannel::kDense});
  return p;
}

ProbeConfig LossParityConfig(const ProbeConfig& probe, ProbeKernel impl, const std::string& out_dir,
                             const std::string& kernel) {
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
  const bool generated = impl == ProbeKernel::kGenerated;
  if (kernel == "dsa") {
    c.dsa_kernel = impl;
    if (probe.control == kControlPerturbedDsaTopk && generated) c.control = probe.control;
  } else {
    c.kda_kernel = impl;
    if (probe.control == kControlPerturbedKdaGate && generated) c.control = probe.control;
  }
  if (probe.control == kControlNoLookback) c.control = probe.control;
  return c;
}

Expected<std::optional<ProbeLossParity>> RunKernelLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                             const std::string& kernel,
                                                             ProbeObserver* observer) {
  const ProxySpec ps = LossParitySpec(spec, kernel);
  if (config.loss_parity_steps <= 0 || ps.layers.empty()) return std::optional<ProbeLossParity>();
  // Step 1: the two runs, in folders of their own beside the probe's logs.
  CancelOnly cancel(observer);
  const std::string dir =
      config.out_dir.empty() ? std::string() : config.out_dir + "/loss_parity_" + kernel + "_";
  Expected<ProbeResult> gen = RunProbeSpec(
      ps, LossParityConfig(config, ProbeKernel::kGenerated, dir.empty() ? "" : dir + "generated", kernel),
      &cancel);
  if (!gen.ok()) return Status(gen.status().code(), "loss parity, generated run: " + gen.status().message());
  Expected<ProbeResult> ref = RunProbeSpec(
      ps, LossParityConfig(config, ProbeKernel::kTorch, dir.empty() ? "" : dir + "torch", kernel), &cancel);
  if (!ref.ok()) return Status(ref.status().code(), "loss parity, reference run: " + ref.status().message());
  // Step 2: the comparison (a NaN or a curve cut short by one is a failed parity).
  const KdaCalls calls = CallsOfRun(*gen, kernel);
  ProbeLossParity p;
  p.kernel = kernel;
  p.proxy = ps.PatternString();
  p.tolerance = kLossParityRelTol;
  p.generated = Losses(*gen);
  p.reference = Losses(*ref);
  p.generated_kernel_calls = calls.generated;
  p.torch_op_calls = calls.torch;
  Expected<LossParityReport> cmp = CheckLossParity(p.generated, p.reference, p.tolerance);
  if (cmp.ok()) {
    p.pass = cmp->pass;
    p.steps = cmp->steps;
    p.max_rel = cmp->max_rel;
    p.worst_step = cmp->worst_step;
    p.message = kernel + " " + cmp->message;
  } else {
    p.pass = false;
    p.steps = static_cast<int64_t>(p.reference.size());
    p.message = kernel + " loss parity FAILED: " + cmp.status().message();
  }
  // Step 3: a generated run that never ran the generated kernel compared torch with torch.
  if (p.generated_kernel_calls == 0)
    p.message += "; the generated run ran the torch ops only (" +
                 (calls.fallback_reason.empty() ? std::string("no reason recorded") : calls.fallback_reason) +
                 "): nothing generated was compared";
  return std::optional<ProbeLossParity>(std::move(p));
}

Expected<std::vector<ProbeLossParity>> RunLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                     ProbeObserver* observer) {
  std::vector<ProbeLossParity> all;
  for (const auto& [kernel, impl] : {std::pair<std::string, ProbeKernel>{"kda", config.kda_kernel},
                                     std::pair<std::string, ProbeKernel>{"dsa", config.dsa_kernel}}) {
    if (impl != ProbeKernel::kGenerated) continue;
    Expected<std::optional<ProbeLossParity>> p = RunKernelLossParity(spec, config, kernel, observer);
    if (!p.ok()) return p.status();
    if (p->has_value()) all.push_back(std::move(**p));
  }
  return all;
}

}  // namespace onboard::backends
