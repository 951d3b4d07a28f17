// Communication-computation overlap in the probe (ProbeConfig::moe_overlap, backends/proxy_moe.cpp):
// the EP dispatch and combine all-to-alls are posted asynchronously (Group::AllToAllStart) and the
// shared expert's two halves run while they are in flight. The same 2-rank run with and without it:
//   - the loss curve, grad norms and expert loads are bit-identical (fp32; the same ops in the
//     same order, only the waits move);
//   - the exposed (host-blocked) and hidden (in flight under compute) all-to-all seconds are
//     measured per step: without overlap each exchange is waited as soon as it is posted, so the
//     hidden time is only the gap between posting and waiting; with overlap it covers the shared
//     expert's compute and must exceed that gap's total.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::FirstStepDifference;
using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

struct A2aSeconds {
  double exposed = 0, hidden = 0;
};

A2aSeconds Sum(const ProbeResult& r) {
  A2aSeconds s;
  for (const ProbeStep& st : r.steps) {
    s.exposed += st.comm.all_to_all_s;
    s.hidden += st.comm.all_to_all_hidden_s;
  }
  return s;
}

TEST(ProbeOverlap, TwoRanksOverlapKeepsTheCurveBitExactAndHidesAllToAllUnderTheSharedExpert) {
  const ProxySpec spec = SmallSpec();  // one shared expert per MoE layer: the compute to overlap
  ProbeConfig c = SmallConfig(2, TempDir("overlap-off"));
  c.steps = 4;
  c.micro_batch = 2;
  Expected<ProbeResult> sync = RunProbeSpec(spec, c);
  ASSERT_TRUE(sync.ok()) << sync.status().ToString();
  c.moe_overlap = true;
  c.out_dir = TempDir("overlap-on");
  Expected<ProbeResult> over = RunProbeSpec(spec, c);
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(FirstStepDifference(*over, *sync), "") << "overlap changed the maths";
  const A2aSeconds a = Sum(*sync), b = Sum(*over);
  std::printf(
      "all-to-all over %zu steps: synchronous exposed %.3f ms hidden %.3f ms; overlapped exposed %.3f ms "
      "hidden %.3f ms\n",
      sync->steps.size(), 1e3 * a.exposed, 1e3 * a.hidden, 1e3 * b.exposed, 1e3 * b.hidden);
  EXPECT_GT(a.exposed, 0.0);
  EXPECT_GT(b.exposed, 0.0);  // the backward exchanges and the count exchange stay synchronous
  EXPECT_GT(b.hidden, a.hidden) << "nothing ran under the posted all-to-alls";
  // The probe's report says which mode ran and what was exposed.
  const std::string text = FormatProbeResult(*over);
  EXPECT_NE(text.find("expert all-to-all (overlapped with the shared expert): exposed"), std::string::npos)
      << text;
  EXPECT_NE(FormatProbeResult(*sync).find("expert all-to-all (synchronous): exposed"), std::string::npos);
}

}  // namespace
}  // namespace onboard
