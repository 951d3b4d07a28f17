// Generated CPU DSA kernel against the fp64 reference: exact top-k indices and attention output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "validators/reference_dsa.h"

namespace onboard {
namespace {

using codegen::DsaSpec;

struct Case {
  int64_t HQ, HKV, D, DV, HI, DI, topk, block, B, T;
  bool gate, sink;
};

class DsaKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(DsaKernelTest, MatchesReference) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const Case c = GetParam();
  DsaSpec spec;
  spec.num_heads = c.HQ;
  spec.num_kv_heads = c.HKV;
  spec.head_dim = c.D;
  spec.v_head_dim = c.DV;
  spec.index_heads = c.HI;
  spec.index_head_dim = c.DI;
  spec.topk = c.topk;
  spec.block = c.block;
  spec.output_gate = c.gate;
  spec.sink = c.sink;
  if (c.HKV == 1) spec.softmax_scale = 1.0 / std::sqrt(192.0);  // MLA: (nope + rope)^-1/2
  auto gen = codegen::GenerateDsa(spec, {});
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const auto in = validators::RandomDsaInputs(spec, c.B, c.T, 99 + c.T);
  const auto ref = validators::ReferenceDsa(spec, in);
  std::vector<float> o(ref.o.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> idx(ref.indices.size(), -9);
  ASSERT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), c.gate ? in.gate.data() : nullptr,
                            c.sink ? in.sink.data() : nullptr, nullptr, o.data(), idx.data(), c.B, c.T, 2),
            0);
  EXPECT_EQ(idx, ref.indices);
  double num = 0, den = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    ASSERT_TRUE(std::isfinite(o[i])) << "output " << i << " not written";
    num += (o[i] - ref.o[i]) * (o[i] - ref.o[i]);
    den += ref.o[i] * ref.o[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    OddShapes, DsaKernelTest,
    // Specs coincide with the check plan of kernel_check_test's toy model (cache hits).
    ::testing::Values(Case{4, 1, 576, 512, 4, 128, 16, 8, 1, 37, true, false},   // MLA form, T > k
                      Case{4, 2, 100, 100, 4, 64, 16, 8, 2, 1, true, true},       // T = 1
                      Case{4, 2, 64, 64, 4, 64, 24, 8, 1, 150, false, true},       // T > k
                      Case{4, 2, 64, 64, 4, 64, 24, 8, 1, 11, false, true}));      // T < k

// The 4-head, 64-wide DSA layer (top-24 of 8-key blocks) of the index and ABI tests below.
DsaSpec SmallIndexSpec() {
  DsaSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_dim = spec.v_head_dim = 64;
  spec.index_heads = 4;
  spec.index_head_dim = 64;
  spec.topk = 24;
  spec.block = 8;
  return spec;
}

// The indexer's streaming top-k prunes each query's candidates to TOPK whenever a key tile may no
// longer fit (codegen/kernels/dsa_index_cpu.h). With index keys repeating every 5 positions the scores
// take 5 values per query, so nearly every pruning cuts through a tie, which only the index order can
// break: the selections must equal the reference's (score desc, index asc), T = 700 >> the 2*TOPK
// candidates kept, across two batches.
TEST(DsaKernelIndexTest, StreamingTopKBreaksTiesByIndexLikeTheReference) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  DsaSpec spec = SmallIndexSpec();
  auto gen = codegen::GenerateDsa(spec, {});
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const int64_t B = 2, T = 700, DI = spec.index_head_dim;
  auto in = validators::RandomDsaInputs(spec, B, T, 7);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 5; s < T; ++s)
      for (int64_t d = 0; d < DI; ++d)
        in.index_k[(b * T + s) * DI + d] = in.index_k[(b * T + s % 5) * DI + d];
  const std::vector<int32_t> ref = validators::ReferenceDsaIndices(spec, in);
  std::vector<int32_t> idx(ref.size(), -9);
  ASSERT_EQ((*lib)->dsa_index(in.index_q.data(), in.index_k.data(), in.index_w.data(), idx.data(), B, T, 2),
            0);
  EXPECT_EQ(idx, ref);
  std::vector<int32_t> fused(ref.size(), -9);
  std::vector<float> o(static_cast<size_t>(B) * T * spec.num_heads * spec.v_head_dim);
  ASSERT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), nullptr, nullptr, nullptr, o.data(), fused.data(), B, T, 2),
            0);
  EXPECT_EQ(fused, ref);
}

// A null required pointer is refused (2), never dereferenced.
TEST(DsaKernelAbiTest, NullPointersAndBadDimsAreRefused) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  DsaSpec spec = SmallIndexSpec();
  spec.sink = true;
  auto gen = codegen::GenerateDsa(spec, {});
  ASSERT_TRUE(gen.ok());
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const auto in = validators::RandomDsaInputs(spec, 1, 4, 1);
  std::vector<float> o(4 * 4 * 64);
  EXPECT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), nullptr, nullptr, nullptr, o.data(), nullptr, 1, 4, 1),
            2);
  EXPECT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), nullptr, in.sink.data(), nullptr, o.data(), nullptr, 1, 0, 1),
            1);
}

}  // namespace
}  // namespace onboard
