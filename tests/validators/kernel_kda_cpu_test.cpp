// Generated CPU KDA kernel against the fp64 recurrence (odd shapes, both gate forms, grouped values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "validators/reference_kda.h"

namespace onboard {
namespace {

using codegen::KdaSpec;

void UseTestCache() { setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0); }

double RelErr(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Case {
  int64_t H, HV, K, V, C, B, T;
  GateForm gate;
  bool state;
};

class KdaKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(KdaKernelTest, MatchesRecurrence) {
  UseTestCache();
  const Case c = GetParam();
  KdaSpec spec;
  spec.num_heads = c.H;
  spec.num_v_heads = c.HV;
  spec.head_dim = c.K;
  spec.v_head_dim = c.V;
  spec.chunk_size = c.C;
  spec.gate_form = c.gate;
  auto gen = codegen::GenerateKda(spec, {});
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto in = validators::RandomKdaInputs(spec, c.B, c.T, c.state, 7 + c.T);
  auto ref = validators::ReferenceKda<double>(spec, in);
  std::vector<float> o(ref.o.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> st(ref.final_state.size(), std::numeric_limits<float>::quiet_NaN());
  int rc = (*lib)->kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                           in.a_log.data(), in.dt_bias.data(),
                           c.state ? in.initial_state.data() : nullptr, o.data(), st.data(), c.B,
                           c.T, 2);
  ASSERT_EQ(rc, 0);
  EXPECT_LT(RelErr(o, ref.o), 1e-5);
  EXPECT_LT(RelErr(st, ref.final_state), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    OddShapes, KdaKernelTest,
    // The first three coincide with the check plan of kernel_check_test's toy model (cache hits).
    ::testing::Values(Case{2, 2, 64, 64, 16, 1, 1, GateForm::kBounded, false},
                      Case{1, 2, 100, 100, 32, 1, 33, GateForm::kOriginal, true},
                      Case{2, 2, 128, 128, 64, 2, 100, GateForm::kBounded, true},
                      Case{2, 2, 64, 32, 32, 1, 200, GateForm::kNone, true}));

}  // namespace
}  // namespace onboard
