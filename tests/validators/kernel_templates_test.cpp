// The kernel templates of codegen/kernels/ called directly (the build's default instantiation, compiled
// for the build's baseline vector target), against the fp64 references; NaN-poisoned outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "codegen/kernels/default_instances.h"
#include "validators/kernel_check.h"
#include "validators/reference_dsa.h"
#include "validators/reference_kda.h"

namespace onboard {
namespace {

using kernels::DefaultDsa;
using kernels::DefaultKda;

codegen::KdaSpec DefaultKdaSpec() {
  codegen::KdaSpec s;
  s.num_heads = s.num_v_heads = 4;
  s.head_dim = s.v_head_dim = 128;
  s.chunk_size = 64;
  s.gate_form = GateForm::kBounded;
  s.gate_lower_bound = -5;
  return s;
}

// A configuration that differs from the default only in skipping the q/k norm: against the spec that
// normalises, it must fail (the check can fail).
struct NoNormConfig : kernels::DefaultKdaConfig {
  static constexpr bool kNormalizeQk = false;
};

template <class Kernel>
double KdaError(const codegen::KdaSpec& spec, int64_t T) {
  const validators::KdaInputs in = validators::RandomKdaInputs(spec, 1, T, true, 7 + T);
  const auto ref = validators::ReferenceKda<double>(spec, in);
  std::vector<float> o(ref.o.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> st(ref.final_state.size(), std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(Kernel::Forward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.a_log.data(),
                            in.dt_bias.data(), in.initial_state.data(), o.data(), st.data(), 1, T, 2),
            0);
  const auto eo = validators::CompareKernelOutput(o, ref.o);
  const auto es = validators::CompareKernelOutput(st, ref.final_state);
  EXPECT_TRUE(eo.nonfinite_match && es.nonfinite_match) << "output left unwritten (NaN poison)";
  return std::max(eo.rel, es.rel);
}

TEST(KernelTemplatesTest, DefaultKdaMatchesRecurrence) {
  std::printf("default instantiation built for %s\n", kernels::DefaultInstancesSimdTarget());
  for (int64_t T : {1, 37, 133}) EXPECT_LT(KdaError<DefaultKda>(DefaultKdaSpec(), T), 1e-5) << "T=" << T;
}

TEST(KernelTemplatesTest, WrongConfigFails) {
  EXPECT_GT(KdaError<kernels::KdaCpu<NoNormConfig>>(DefaultKdaSpec(), 37), 1e-2);
}

TEST(KernelTemplatesTest, DefaultKdaRejectsBadArguments) {
  float x = 0;
  EXPECT_EQ(DefaultKda::Forward(&x, &x, &x, &x, &x, &x, nullptr, nullptr, &x, nullptr, 1, 0, 1), 1);
  EXPECT_EQ(DefaultKda::Forward(&x, &x, &x, &x, &x, nullptr, nullptr, nullptr, &x, nullptr, 1, 1, 1), 2);
}

TEST(KernelTemplatesTest, DefaultDsaFusedAndSplitMatchReference) {
  codegen::DsaSpec s;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.head_dim = s.v_head_dim = 128;
  s.index_heads = 4;
  s.index_head_dim = 64;
  s.topk = 64;
  const int64_t T = 150;
  const auto in = validators::RandomDsaInputs(s, 1, T, 5);
  const auto ref = validators::ReferenceDsa(s, in);
  std::vector<float> o(ref.o.size(), std::numeric_limits<float>::quiet_NaN()), o2 = o;
  std::vector<int32_t> idx(ref.indices.size(), -9), idx2 = idx;
  // Fused: index and attention per query block.
  ASSERT_EQ(DefaultDsa::Forward(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                                in.index_w.data(), nullptr, nullptr, nullptr, o.data(), idx.data(), 1, T, 2),
            0);
  EXPECT_EQ(idx, ref.indices);
  const auto e = validators::CompareKernelOutput(o, ref.o);
  EXPECT_TRUE(e.nonfinite_match);
  EXPECT_LT(e.rel, 1e-5);
  // Split: the two entry points give the same bits.
  ASSERT_EQ(DefaultDsa::Index(in.index_q.data(), in.index_k.data(), in.index_w.data(), idx2.data(), 1, T, 2), 0);
  ASSERT_EQ(DefaultDsa::Attend(in.q.data(), in.k.data(), in.v.data(), nullptr, nullptr, nullptr, idx2.data(),
                               o2.data(), 1, T, 2),
            0);
  EXPECT_EQ(idx2, idx);
  EXPECT_EQ(0, std::memcmp(o.data(), o2.data(), o.size() * sizeof(float)));
  // Without an index output the fused forward keeps the selection in a block buffer: same output.
  std::vector<float> o3(o.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(DefaultDsa::Forward(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                                in.index_w.data(), nullptr, nullptr, nullptr, o3.data(), nullptr, 1, T, 2),
            0);
  EXPECT_EQ(0, std::memcmp(o.data(), o3.data(), o.size() * sizeof(float)));
}

}  // namespace
}  // namespace onboard
