// Kernel loss parity for DSA (issue 12 item 5; validators/loss_parity.h): the probe with the generated
// fused DSA CPU kernel as its MLA layers' forward (ProbeConfig::dsa_kernel generated) and with the
// reference LibTorch ops gives the same loss curve within kLossParityRelTol over 50 fp32 steps; the
// generated kernel with a broken top-k (control perturbed_dsa_topk: half the keys) does not.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/backends/probe_test_util.h"
#include "validators/loss_parity.h"

namespace onboard {
namespace {

using testing_probe::Losses;
using testing_probe::TempDir;

// Two MLA + DSA layers (top-k 6 of up to 16 keys, output gate) with dense MLPs: no router whose
// near-tie decisions could part the curves for reasons that are not the kernel's.
ProxySpec DsaParitySpec() {
  ProxySpec s = testing_probe::SmallSpec();
  s.source_model = "dsa-parity-proxy";
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kDense}, {ProxyMixer::kMLA, ProxyChannel::kDense}};
  s.mla_output_gate = true;
  return s;
}

std::vector<double> DsaCurve(const std::string& name, ProbeKernel kernel, const std::string& control) {
  ProbeConfig c = testing_probe::SmallConfig(1, TempDir("dsa-parity-" + name));
  c.steps = 50;
  c.dsa_kernel = kernel;
  c.control = control;
  Expected<ProbeResult> r = RunProbeSpec(DsaParitySpec(), c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? Losses(*r) : std::vector<double>{};
}

TEST(KernelLossParity, GeneratedDsaMatchesTheReferenceOpsAndABrokenTopkDoesNot) {
  const std::vector<double> ref = DsaCurve("torch", ProbeKernel::kTorch, "");
  const std::vector<double> gen = DsaCurve("generated", ProbeKernel::kGenerated, "");
  const std::vector<double> bad = DsaCurve("perturbed", ProbeKernel::kGenerated, kControlPerturbedDsaTopk);
  Expected<LossParityReport> ok = CheckLossParity(gen, ref);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  Expected<LossParityReport> off = CheckLossParity(bad, ref);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  std::printf("generated DSA: %s\nbroken top-k: %s\n", ok->message.c_str(), off->message.c_str());
  EXPECT_EQ(ok->steps, 50);
  EXPECT_TRUE(ok->pass) << ok->message;
  EXPECT_FALSE(off->pass) << off->message;
}

// The kernel choice is typed (core/probe_kernel.h): an unknown name is refused where it is read,
// naming the field and the value, by the one parser the CLI and the probe JSON share.
TEST(KernelLossParity, DsaKernelChoiceAndItsControlAreValidated) {
  ProbeConfig c = testing_probe::SmallConfig(1, TempDir("dsa-parity-bad"));
  Expected<ProbeKernel> fast = ParseProbeKernel("probe config", "dsa_kernel", "fast");
  ASSERT_FALSE(fast.ok());
  EXPECT_EQ(fast.status().message(),
            "probe config: field 'dsa_kernel': must be generated or torch (got fast)");
  EXPECT_EQ(*ParseProbeKernel("probe config", "dsa_kernel", ProbeKernelName(ProbeKernel::kTorch)),
            ProbeKernel::kTorch);
  c.dsa_kernel = ProbeKernel::kTorch;
  c.control = kControlPerturbedDsaTopk;  // the control needs the generated kernel
  Status st = c.Validate(DsaParitySpec());
  EXPECT_NE(st.message().find("perturbed_dsa_topk"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
