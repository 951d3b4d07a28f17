// ProbeKernel (core/probe_kernel.h): one spelling, one parser, one printer for the probe's
// kda_kernel / dsa_kernel choice; an unknown name is one line naming origin, field and value (exit 2).
#include <gtest/gtest.h>

#include <string>

#include "core/probe_kernel.h"

namespace onboard {
namespace {

TEST(ProbeKernel, NamesRoundTrip) {
  for (ProbeKernel k : {ProbeKernel::kGenerated, ProbeKernel::kTorch}) {
    Expected<ProbeKernel> p = ParseProbeKernel("t", "kda_kernel", ProbeKernelName(k));
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(*p, k);
  }
  EXPECT_STREQ(ProbeKernelName(ProbeKernel::kGenerated), "generated");
  EXPECT_STREQ(ProbeKernelName(ProbeKernel::kTorch), "torch");
}

TEST(ProbeKernel, UnknownNameIsOneLineNamingOriginFieldAndValue) {
  for (const char* bad : {"fast", "Torch", "generated "}) {
    Expected<ProbeKernel> p = ParseProbeKernel("--kda-kernel", "kda_kernel", bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(ExitCodeFor(p.status().code()), 2);
    EXPECT_EQ(p.status().message(),
              "--kda-kernel: field 'kda_kernel': must be generated or torch (got " + std::string(bad) + ")");
  }
}

}  // namespace
}  // namespace onboard
