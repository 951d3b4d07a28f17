// Negative controls of the probe (backends/probe_controls.h): a small RoPE-MLA proxy that learns
// the copy task within seconds converges in the normal run; with no look-back or frozen LoRA
// adapters the same run must fail the learning verdict. The random router does not (see below).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::TempDir;

// Two softmax-attention layers with rotary positions (a 2-layer induction circuit), the second
// with a MoE channel so the router control has something to break.
ProxySpec ControlSpec() {
  ProxySpec s = testing_probe::SmallSpec();
  s.source_model = "control-proxy";
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kDense}, {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.rope = true;
  s.index_topk = 0;
  s.index_heads = 0;
  s.index_head_dim = 0;
  s.mla_heads = 4;
  return s;
}

ProbeConfig ControlConfig(const std::string& name, FinetuneMode mode) {
  ProbeConfig c = testing_probe::SmallConfig(1, TempDir("control-" + name));
  c.mode = mode;
  c.steps = 200;
  c.seq = 16;
  c.batch = 32;
  c.lr = 1e-2;
  c.warmup = 10;
  c.timeout_s = 120;
  return c;
}

ProbeResult RunControl(const ProbeConfig& c) {
  Expected<ProbeResult> r = RunProbeSpec(ControlSpec(), c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ProbeResult{};
}

TEST(ProbeControls, NormalRunConverges) {
  ProbeResult r = RunControl(ControlConfig("normal", FinetuneMode::kFull));
  EXPECT_EQ(r.convergence, "converged") << FormatProbeResult(r);
}

TEST(ProbeControls, NoLookbackIsNotLearned) {
  ProbeConfig c = ControlConfig("nolookback", FinetuneMode::kFull);
  c.control = kControlNoLookback;
  ProbeResult r = RunControl(c);
  EXPECT_NE(r.convergence, "converged") << FormatProbeResult(r);
  EXPECT_LT(r.skill, 0.2);  // a frequency model: ~1/32 exact match
}

// Measured: random routing does NOT fail the copy verdict (100% accuracy): the copy is done by
// attention, the experts are not needed, so the copy task cannot detect a broken router. This
// pins that finding; it fails if the control breaks the model instead of only the routing. The
// lookup task (backends/probe_lookup.h), which needs the experts, does not fail it either: random
// routing only slows it (backends/README.md "Lookup task").
TEST(ProbeControls, RandomRouterDoesNotStopTheCopy) {
  ProbeConfig c = ControlConfig("router", FinetuneMode::kFull);
  c.control = kControlRandomRouter;
  ProbeResult r = RunControl(c);
  EXPECT_EQ(r.convergence, "converged") << FormatProbeResult(r);
}

// ---- The random router on a task that needs routed experts (issue 12) ----
// Why the lookup task on the flagship-shaped proxy could not fail the random router: with a random
// routing each step, every expert sees a random share of all cells and learns the whole table, and
// the shared expert, the dense MLP and the MLA output gate (a bilinear gate(b) x value(a) term)
// hold a 16x16 table on their own. What a consistent router gives is a partition: each expert holds
// only the cells routed to it, so the routed layer holds E experts' worth of cells; with a fresh
// random top-1 choice per token per step, a token meets a uniformly random expert, so >= 90%
// accuracy needs every expert to hold (nearly) every cell: one expert's worth.
// The routed-memory proxy is built from that: one rotary MLA layer (it moves a to b's position)
// without the output gate, one MoE channel of 16 experts at the hidden width, top-1 (no
// renormalisation: the sigmoid score scales the expert, so the router trains), no shared expert,
// no dense MLP; aux-loss-free bias balancing spreads the cells over the experts. The table is the
// largest the task has, 26 x 26 = 676 cells of 16 values (676 x 4 = 2704 bits): one expert
// (3 x 32 x 8 = 768 parameters) cannot hold it at the ~2 bits per parameter that trained networks
// store at most; 16 experts (12288 parameters) can. An additive model of a and b (what is left
// without the experts) cannot represent a random table. Steps, lr, seq and batch are the full-mode
// recipe's (DefaultProbeConfig), not chosen for this test.
ProxySpec RoutedMemorySpec() {
  ProxySpec s = ControlSpec();
  s.source_model = "routed-memory-proxy";
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.mla_output_gate = false;
  s.num_experts = 16;
  s.top_k = 1;
  s.renormalize = false;
  s.num_shared = 0;
  s.latent_dim = 0;
  s.expert_inter = 8;
  s.balance_bias = true;
  return s;
}

ProbeResult RunRoutedLookup(const std::string& name, const std::string& control) {
  ProbeConfig c = DefaultProbeConfig(FinetuneMode::kFull);
  const ProbeConfig small = testing_probe::SmallConfig(1, TempDir("routed-" + name));
  c.ranks = 1;
  c.out_dir = small.out_dir;
  c.worker_binary = small.worker_binary;
  c.timeout_s = 120;
  c.task = ProbeTask::kLookup;
  c.lookup_keys = 26;
  c.lookup_values = 16;
  c.control = control;
  Expected<ProbeResult> r = RunProbeSpec(RoutedMemorySpec(), c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ProbeResult{};
}

TEST(ProbeControls, RoutedLookupIsLearnedWithTheRouter) {
  ProbeResult r = RunRoutedLookup("router", "");
  std::printf("routed lookup, router: %s, accuracy %.3f, final loss %.3f (baseline %.3f)\n",
              r.convergence.c_str(), r.skill, r.final_loss, r.baseline_nats);
  EXPECT_EQ(r.convergence, "converged") << FormatProbeResult(r);
}

TEST(ProbeControls, RandomRouterFailsTheRoutedLookup) {
  ProbeResult r = RunRoutedLookup("random", kControlRandomRouter);
  std::printf("routed lookup, random router: %s, accuracy %.3f, final loss %.3f (baseline %.3f)\n",
              r.convergence.c_str(), r.skill, r.final_loss, r.baseline_nats);
  EXPECT_NE(r.convergence, "converged") << FormatProbeResult(r);
  EXPECT_LT(r.skill, r.skill_target);
}

// LoRA: a 200-step base phase on the source task (about 50% copy accuracy there), then 100 adapter
// steps at 3e-2 reach 100% on the target letters (measured, load ~19); with the adapters frozen
// the same run stays below the bar.
ProbeConfig LoraControlConfig(const std::string& name) {
  ProbeConfig c = ControlConfig(name, FinetuneMode::kLoRA);
  c.base_steps = 200;
  c.steps = 100;
  c.lr = 3e-2;
  return c;
}

TEST(ProbeControls, LoraConverges) {
  ProbeResult adapted = RunControl(LoraControlConfig("lora"));
  EXPECT_EQ(adapted.convergence, "converged") << FormatProbeResult(adapted);
}

TEST(ProbeControls, FrozenLoraIsNotLearned) {
  ProbeConfig c = LoraControlConfig("frozen");
  c.control = kControlFrozenLora;
  ProbeResult frozen = RunControl(c);
  EXPECT_NE(frozen.convergence, "converged") << FormatProbeResult(frozen);
  EXPECT_LT(frozen.skill, frozen.skill_target);
  for (const ProbeStep& s : frozen.steps) EXPECT_EQ(s.lr, 0.0);
}

TEST(ProbeControls, UnknownControlIsRefusedWithItsName) {
  ProbeConfig c = ControlConfig("bad", FinetuneMode::kFull);
  c.control = "no_router";
  Status st = c.Validate(ControlSpec());
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("no_router"), std::string::npos) << st.message();
  c.control = kControlFrozenLora;  // full mode has no adapters
  st = c.Validate(ControlSpec());
  EXPECT_NE(st.message().find("needs mode lora"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
