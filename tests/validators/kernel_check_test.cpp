// CheckKernels end to end on a toy model with one KDA and one DSA (gated MLA) block: every row passes,
// the table names each kernel; a kernel checked against the wrong reference fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/cuda_compiler.h"
#include "validators/kernel_check.h"
#include "validators/reference_kda.h"

namespace onboard::validators {
namespace {

ModelIR ToyModel() {
  ModelIR m;
  m.name = "toy";
  LayerSpec kda;
  kda.index = 0;
  kda.attn.kind = MixerKind::kKDA;
  kda.attn.num_heads = 4;
  kda.attn.head_dim = 128;
  kda.attn.gate_form = GateForm::kBounded;
  kda.attn.gate_lower_bound = -5;
  kda.attn.chunk_size = 64;
  LayerSpec dsa;
  dsa.index = 1;
  dsa.attn.kind = MixerKind::kDSA;
  dsa.attn.dsa_base = MixerKind::kMLA;
  dsa.attn.num_heads = 8;
  dsa.attn.kv_lora_rank = 512;
  dsa.attn.qk_rope_head_dim = 64;
  dsa.attn.qk_nope_head_dim = 128;
  dsa.attn.index_heads = 8;
  dsa.attn.index_head_dim = 128;
  dsa.attn.index_topk = 2048;
  dsa.attn.output_gate = true;
  m.layers = {kda, dsa};
  return m;
}

void UseTestCache() { setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0); }

TEST(KernelCheckTest, PlanScalesModelAndAddsOddShapes) {
  auto plan = KernelCheckPlan(ToyModel());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->kda.size(), 3u);
  EXPECT_EQ(plan->kda[0].num_heads, 2);
  EXPECT_EQ(plan->kda[0].head_dim, 128);
  EXPECT_EQ(plan->kda[1].head_dim, 64);
  EXPECT_EQ(plan->kda[2].head_dim, 100);
  EXPECT_GT(plan->kda[2].num_v_heads, plan->kda[2].num_heads);  // grouped values
  ASSERT_EQ(plan->dsa.size(), 4u);
  EXPECT_EQ(plan->dsa[0].topk, 2048);
  EXPECT_EQ(plan->dsa[0].head_dim, 576);
  EXPECT_EQ(plan->dsa[1].topk, 16);
}

TEST(KernelCheckTest, AllKernelsOfToyModelPass) {
  UseTestCache();
  KernelCheckOptions opt;
  opt.num_threads = 2;
  auto report = CheckKernels(ToyModel(), opt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string table = FormatKernelTable(*report);
  std::printf("%s", table.c_str());
  EXPECT_TRUE(report->all_pass) << table;
  // 3 KDA kernels x 4 lengths x 2 references + 4 DSA kernels x 3 lengths + the fused prologue of both
  // gate forms x 4 lengths x (vs unfused, vs fp64).
  EXPECT_EQ(report->rows.size(), 3u * 4 * 2 + 4u * 3 + 2u * 4 * 2) << table;
  EXPECT_NE(table.find("unfused prologue"), std::string::npos) << table;
  EXPECT_NE(table.find("kda_h2_hv2_k128_v128_c64_bounded"), std::string::npos) << table;
  EXPECT_NE(table.find("T=1 "), std::string::npos) << table;
  for (const auto& r : report->rows) {
    EXPECT_TRUE(r.pass) << r.kernel << " " << r.shape << " " << r.rel_err;
    EXPECT_TRUE(r.nonfinite_match);
  }
}

TEST(KernelCheckTest, ModelWithoutKdaOrDsaSaysSo) {
  ModelIR m;
  LayerSpec l;
  l.attn.kind = MixerKind::kGQA;
  m.layers.push_back(l);
  auto report = CheckKernels(m, {});
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->rows.empty());
  ASSERT_EQ(report->notes.size(), 1u);
}

// The check is able to fail: a kernel without q/k normalisation against the normalising reference.
TEST(KernelCheckTest, WrongKernelIsCaught) {
  UseTestCache();
  codegen::KdaSpec spec;
  spec.num_heads = spec.num_v_heads = 2;
  spec.head_dim = spec.v_head_dim = 64;
  spec.chunk_size = 16;
  codegen::KdaSpec raw = spec;
  raw.normalize_qk = false;
  auto gen = codegen::GenerateKda(raw, {});
  ASSERT_TRUE(gen.ok());
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const KdaInputs in = RandomKdaInputs(spec, 1, 20, false, 5);
  const auto ref = ReferenceKda<double>(spec, in);
  std::vector<float> o(ref.o.size());
  ASSERT_EQ((*lib)->kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                            in.a_log.data(), in.dt_bias.data(), nullptr, o.data(), nullptr, 1, 20, 1),
            0);
  double num = 0, den = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    num += (o[i] - ref.o[i]) * (o[i] - ref.o[i]);
    den += ref.o[i] * ref.o[i];
  }
  EXPECT_GT(std::sqrt(num / den), 1e-2);
}

TEST(KernelCheckTest, CudaTargetCompilesAndSaysNumericsNeedGpu) {
  UseTestCache();
  KernelCheckOptions opt;
  opt.target.target = codegen::KernelTarget::kCuda;
  opt.out_dir = ONBOARD_BINARY_DIR "/kernel-cache/check-cuda-out";
  ModelIR m = ToyModel();
  m.layers.pop_back();  // KDA only: keeps nvcc time small
  auto report = CheckKernels(m, opt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string table = FormatKernelTable(*report);
  EXPECT_NE(table.find("numerics need a GPU"), std::string::npos) << table;
  if (codegen::FindNvcc()) {
    EXPECT_TRUE(report->all_pass) << table;
    EXPECT_EQ(report->rows.size(), report->kernels.size());
  }
}

}  // namespace
}  // namespace onboard::validators
