// Kernel loss parity (validators/loss_parity.h, backends/probe_loss_parity.h): the probe with the
// generated KDA kernel and with the reference LibTorch ops gives the same loss curve within
// kLossParityRelTol over 50 fp32 steps; the generated kernel with a perturbed gate (control
// perturbed_kda_gate) does not. DSA's curves: tests/backends/probe_dsa_parity_test.cpp; here its parity
// proxy and configs.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/probe_loss_parity.h"
#include "tests/backends/probe_test_util.h"
#include "validators/loss_parity.h"

namespace onboard {
namespace {

using testing_probe::TempDir;

ProbeConfig ParityConfig(const std::string& name, ProbeKernel kernel, const std::string& control) {
  ProbeConfig c = testing_probe::SmallConfig(1, TempDir("parity-" + name));
  c.steps = 50;
  c.kda_kernel = kernel;
  c.control = control;
  return c;
}

// KDA layers with dense MLPs: no MoE router and no DSA indexer top-k. Their near-tie decisions flip
// on a 1e-7 difference and the curves then part for reasons that are not the kernel's (measured on
// SmallSpec, KDA x3 + MLA/DSA with MoE: 1e-7 through step 18, 3.2e-4 at step 19, 8.6e-3 at most).
ProxySpec ParitySpec() {
  ProxySpec s = testing_probe::SmallSpec();
  s.source_model = "parity-proxy";
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense}, {ProxyMixer::kKDA, ProxyChannel::kDense}};
  return s;
}

// The probe's own loss parity (ProbeConfig::loss_parity_steps, backends/probe_loss_parity.h): the
// recorded run is 2 steps; the parity runs are the 50 compared steps.
ProbeResult ProbeWithParity(const std::string& name, const std::string& control) {
  ProbeConfig c = ParityConfig(name, ProbeKernel::kGenerated, control);
  c.steps = 2;
  c.loss_parity_steps = 50;
  return testing_probe::RunExpectingOk(ParitySpec(), c);
}

// The generated KDA kernel against the reference ops over 50 fp32 steps passes; the perturbed gate
// fails from step 0 on. Both results carry the parity in their JSON and text report, and the calls
// show that the generated run ran the generated kernel and the reference run did not.
TEST(KernelLossParity, GeneratedKdaMatchesTheReferenceOpsAndAPerturbedGateDoesNot) {
  const ProbeResult ok = ProbeWithParity("ok", "");
  const ProbeResult bad = ProbeWithParity("perturbed", kControlPerturbedKdaGate);
  ASSERT_EQ(ok.loss_parity.size(), 1u);
  ASSERT_EQ(bad.loss_parity.size(), 1u);
  const ProbeLossParity& p = ok.loss_parity[0];
  const ProbeLossParity& q = bad.loss_parity[0];
  std::printf("generated: %s\nperturbed gate: %s\n", p.message.c_str(), q.message.c_str());
  EXPECT_EQ(p.steps, 50);
  EXPECT_EQ(p.tolerance, kLossParityRelTol);
  EXPECT_TRUE(p.pass) << p.message;
  EXPECT_FALSE(q.pass) << q.message;
  EXPECT_GE(q.worst_step, 0);
  // What ran: the generated run ran the generated kernel only (its backward is the torch ops,
  // which KdaCoreTorch runs uncounted); the probe itself too.
  EXPECT_GT(p.generated_kernel_calls, 0);
  EXPECT_EQ(p.torch_op_calls, 0);
  EXPECT_GT(ok.kda_calls.generated, 0);
  EXPECT_EQ(ok.kda_calls.torch, 0);
  // The curves are the probe's own: the same parity re-checked from the reported curves.
  Expected<LossParityReport> again = CheckLossParity(p.generated, p.reference);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->max_rel, p.max_rel);
  // JSON and text report.
  const nlohmann::json j = nlohmann::json::parse(ProbeResultToJson(bad));
  ASSERT_EQ(j["loss_parity"].size(), 1u);
  EXPECT_FALSE(j["loss_parity"][0]["pass"].get<bool>());
  EXPECT_EQ(j["loss_parity"][0]["reference_losses"].size(), 50u);
  EXPECT_NE(FormatProbeResult(bad).find("kernel loss parity (kda"), std::string::npos);
  EXPECT_NE(FormatProbeResult(bad).find("FAILED"), std::string::npos);
}

// With the reference ops asked for, the probe runs no generated kernel (what the kernel-fallback
// rule relies on, agent/rules/rules_kernel_fallback.cpp).
TEST(KernelLossParity, TorchKernelRunsNoGeneratedKernel) {
  ProbeConfig c = ParityConfig("torchonly", ProbeKernel::kTorch, "");
  c.steps = 2;
  Expected<ProbeResult> r = RunProbeSpec(ParitySpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kda_calls.generated, 0);
  EXPECT_GT(r->kda_calls.torch, 0);
  EXPECT_TRUE(r->loss_parity.empty());
  c.loss_parity_steps = -1;
  EXPECT_NE(c.Validate(ParitySpec()).message().find("loss_parity_steps"), std::string::npos);
}

// The parity proxy keeps the spec's KDA layers (dims too) on dense MLPs; the parity runs keep the
// controls that concern them (the perturbed gate in the generated run only) and drop the rest.
TEST(KernelLossParity, ParityProxyKeepsTheKdaLayersOnDenseMlps) {
  const ProxySpec ps = backends::LossParitySpec(testing_probe::SmallSpec());  // K K K M, MoE
  ASSERT_EQ(ps.layers.size(), 3u);
  for (const ProxyLayer& l : ps.layers) {
    EXPECT_EQ(l.mixer, ProxyMixer::kKDA);
    EXPECT_EQ(l.channel, ProxyChannel::kDense);
  }
  EXPECT_EQ(ps.kda_head_dim, testing_probe::SmallSpec().kda_head_dim);
  ProxySpec no_kda = testing_probe::SmallSpec();
  no_kda.layers = {{ProxyMixer::kMLA, ProxyChannel::kMoE}};
  EXPECT_TRUE(backends::LossParitySpec(no_kda).layers.empty());
  ProbeConfig c = testing_probe::SmallConfig(4, "");
  c.mode = FinetuneMode::kLoRA;
  c.loss_parity_steps = 7;
  c.control = kControlPerturbedKdaGate;
  const ProbeConfig gen = backends::LossParityConfig(c, ProbeKernel::kGenerated, "g");
  const ProbeConfig ref = backends::LossParityConfig(c, ProbeKernel::kTorch, "t");
  EXPECT_EQ(gen.ranks, 1);
  EXPECT_EQ(gen.mode, FinetuneMode::kFull);
  EXPECT_EQ(gen.steps, 7);
  EXPECT_EQ(gen.loss_parity_steps, 0);  // no parity of the parity
  EXPECT_EQ(gen.control, kControlPerturbedKdaGate);
  EXPECT_EQ(ref.control, "");
  EXPECT_EQ(ref.kda_kernel, ProbeKernel::kTorch);
  EXPECT_TRUE(gen.Validate(ps).ok() && ref.Validate(ps).ok());
  c.control = kControlRandomRouter;  // the parity proxy has no router
  EXPECT_EQ(backends::LossParityConfig(c, ProbeKernel::kGenerated, "g").control, "");
}

TEST(KernelLossParity, BadCurvesAreRefusedWithTheField) {
  EXPECT_EQ(CheckLossParity({1.0}, {}).status().code(), ErrorCode::kBadInput);
  Expected<LossParityReport> n = CheckLossParity({1.0, 2.0}, {1.0});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("generated"), std::string::npos) << n.status().message();
  EXPECT_FALSE(CheckLossParity({NAN}, {1.0}).ok());
  EXPECT_FALSE(CheckLossParity({1.0}, {1.0}, 0.0).ok());
  EXPECT_TRUE(CheckLossParity({1.0005, 2.0}, {1.0, 2.0})->pass);               // 5e-4: inside the bar
  Expected<LossParityReport> out = CheckLossParity({1.0, 2.004}, {1.0, 2.0});  // 2e-3 at step 1
  EXPECT_FALSE(out->pass);
  EXPECT_EQ(out->worst_step, 1);
}

// The DSA parity proxy keeps the spec's MLA layers with an indexer on dense MLPs (none without an
// indexer); its runs set dsa_kernel, and the broken top-k goes with the generated run only. The
// probe runs a family's parity only when it runs that family generated (RunLossParity).
TEST(KernelLossParity, DsaParityProxyKeepsTheMlaDsaLayersOnDenseMlps) {
  const ProxySpec ps = backends::LossParitySpec(testing_probe::SmallSpec(), "dsa");  // K K K M
  ASSERT_EQ(ps.layers.size(), 1u);
  EXPECT_EQ(ps.layers[0].mixer, ProxyMixer::kMLA);
  EXPECT_EQ(ps.layers[0].channel, ProxyChannel::kDense);
  EXPECT_EQ(ps.index_topk, testing_probe::SmallSpec().index_topk);
  ProxySpec dense_mla = testing_probe::SmallSpec();
  dense_mla.index_topk = 0;
  EXPECT_TRUE(backends::LossParitySpec(dense_mla, "dsa").layers.empty());
  ProbeConfig c = testing_probe::SmallConfig(2, "");
  c.loss_parity_steps = 5;
  c.dsa_kernel = ProbeKernel::kGenerated;
  c.control = kControlPerturbedDsaTopk;
  const ProbeConfig gen = backends::LossParityConfig(c, ProbeKernel::kGenerated, "g", "dsa");
  const ProbeConfig ref = backends::LossParityConfig(c, ProbeKernel::kTorch, "t", "dsa");
  EXPECT_EQ(gen.dsa_kernel, ProbeKernel::kGenerated);
  EXPECT_EQ(ref.dsa_kernel, ProbeKernel::kTorch);
  EXPECT_EQ(gen.control, kControlPerturbedDsaTopk);
  EXPECT_EQ(ref.control, "");
  EXPECT_EQ(backends::LossParityConfig(c, ProbeKernel::kGenerated, "g", "kda").control,
            "");  // not KDA's fault
  EXPECT_TRUE(gen.Validate(ps).ok() && ref.Validate(ps).ok());
  // Nothing asked: no run, no entry (dsa_kernel torch and no KDA layer in the spec).
  ProbeConfig off = c;
  off.dsa_kernel = ProbeKernel::kTorch;
  off.control.clear();
  Expected<std::vector<ProbeLossParity>> none = backends::RunLossParity(ps, off, nullptr);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace onboard
