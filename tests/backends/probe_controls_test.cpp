// Negative controls of the probe (backends/probe_controls.h): a small RoPE-MLA proxy that learns
// the copy task within seconds converges in the normal run; with no look-back or frozen LoRA
// adapters the same run must fail the learning verdict. The random router does not stop the copy
// (see below); it must fail the lookup task, where the routed experts hold the table.
#include <gtest/gtest.h>

#include <string>

#include "backends/probe_schedule.h"
#include "tests/backends/probe_copy_learner.h"
#include "tests/backends/probe_router_learner.h"

namespace onboard {
namespace {

using testing_probe::TempDir;

// The 2-layer RoPE induction-circuit proxy; its MoE channel gives the router control something to break.
ProxySpec ControlSpec() { return testing_probe::CopyLearnerSpec(); }

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

ProbeResult RunControl(const ProbeConfig& c) { return testing_probe::RunExpectingOk(ControlSpec(), c); }

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
// lookup task on the routed-memory proxy (below) is where the control must fail.
TEST(ProbeControls, RandomRouterDoesNotStopTheCopy) {
  ProbeConfig c = ControlConfig("router", FinetuneMode::kFull);
  c.control = kControlRandomRouter;
  ProbeResult r = RunControl(c);
  EXPECT_EQ(r.convergence, "converged") << FormatProbeResult(r);
}

// The lookup task on the routed-memory proxy with its recipe (backends::RouterControlProbeConfig,
// backends/README.md "Lookup task", seventh design): the consistent router learns the table, random
// routing (every expert would have to hold all of it) must not. Measured once each (1 rank, 1200
// steps, ~15 s CPU): router converged at 95.6% (loss 0.057); random routing not_learned at 77.5%
// (loss 0.560: under the loss bar, 12.5 points under the 90% accuracy bar).
ProbeResult RunRouterLookup(const std::string& name, const std::string& control) {
  ProbeConfig c = backends::RouterControlProbeConfig();
  const ProbeConfig small = testing_probe::SmallConfig(1, TempDir("control-lookup-" + name));
  c.out_dir = small.out_dir;
  c.worker_binary = small.worker_binary;
  c.timeout_s = 300;
  c.control = control;
  return testing_probe::RunExpectingOk(testing_probe::RouterLearnerSpec(), c);
}

TEST(ProbeControls, RouterLearnsTheLookupTable) {
  ProbeResult r = RunRouterLookup("normal", "");
  EXPECT_EQ(r.convergence, "converged") << FormatProbeResult(r);
  EXPECT_EQ(r.skill_metric, "lookup_accuracy");
}

TEST(ProbeControls, RandomRouterIsNotLearnedOnTheLookupTable) {
  ProbeResult r = RunRouterLookup("random", kControlRandomRouter);
  EXPECT_NE(r.convergence, "converged") << FormatProbeResult(r);
  EXPECT_LT(r.skill, r.skill_target) << FormatProbeResult(r);
}

// LoRA: a 200-step base phase on the source task at the full-mode rate 1e-2, then 100 adapter steps
// at the recipe's kLoraLrScale x that rate (probe_schedule.h) reach the bar on the target letters;
// with the adapters frozen the same run stays below it.
ProbeConfig LoraControlConfig(const std::string& name) {
  ProbeConfig c = ControlConfig(name, FinetuneMode::kLoRA);
  c.base_steps = 200;
  c.steps = 100;
  c.lr = 1e-2 * backends::kLoraLrScale;  // the base phase trains at lr / kLoraLrScale = 1e-2
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
