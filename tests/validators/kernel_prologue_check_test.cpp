// The fused KDA prologue (gate, q/k L2 norm, beta sigmoid in the kernel) against the unfused sequence,
// on CPU and under CPU emulation of the CUDA kernels; and a kernel that skips the sigmoid fails.
#include "validators/kernel_prologue_check.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace onboard {
namespace {

using codegen::KdaSpec;

KdaSpec Fused(GateForm gate) {
  KdaSpec s;
  s.num_heads = 1;
  s.num_v_heads = 2;
  s.head_dim = s.v_head_dim = 48;
  s.chunk_size = 16;
  s.gate_form = gate;
  s.gate_lower_bound = -5;
  s.beta_sigmoid = true;
  return s;
}

void ExpectAllPass(const std::vector<validators::KernelCheckRow>& rows) {
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows) {
    EXPECT_TRUE(r.pass) << r.kernel << " " << r.shape << " vs " << r.against << ": " << r.rel_err << " / "
                        << r.state_err;
  }
}

TEST(KernelPrologueCheckTest, CpuBothGateForms) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const auto run = validators::CpuKdaRunner(2);
  for (GateForm g : {GateForm::kOriginal, GateForm::kBounded}) {
    auto rows = validators::CheckKdaPrologueFusion(Fused(g), validators::KdaCheckLengths(16), 11, run);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ExpectAllPass(*rows);
  }
}

TEST(KernelPrologueCheckTest, KernelThatSkipsTheSigmoidFails) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const auto cpu = validators::CpuKdaRunner(2);
  // A broken fused kernel: generated without the in-kernel sigmoid, fed the logits.
  validators::KdaRunner broken = [&](const KdaSpec& s, const validators::KdaInputs& in) {
    KdaSpec b = s;
    b.beta_sigmoid = false;
    return cpu(b, in);
  };
  auto rows = validators::CheckKdaPrologueFusion(Fused(GateForm::kBounded), {37}, 3, broken);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  for (const auto& r : *rows) EXPECT_FALSE(r.pass) << r.against;
}

// Each in-kernel step switches on its own (the kernel spec's normalize_qk and beta_sigmoid, with the
// gate): the fused kernel with only that subset still matches the unfused sequence of the same subset.
// Negative: a kernel generated without the q/k norm while the spec asks for it fails. (Two new kernels
// to build; the negative reuses the first, the unfused one is CpuBothGateForms'.)
TEST(KernelPrologueCheckTest, EachStepSwitchesOnItsOwn) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const auto cpu = validators::CpuKdaRunner(2);
  for (const auto& [qk, beta] : {std::pair{false, true}, std::pair{true, false}}) {
    KdaSpec s = Fused(GateForm::kOriginal);
    s.normalize_qk = qk;
    s.beta_sigmoid = beta;
    auto rows = validators::CheckKdaPrologueFusion(s, {19}, 5, cpu);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ExpectAllPass(*rows);
  }
  validators::KdaRunner no_norm = [&](const KdaSpec& s, const validators::KdaInputs& in) {
    KdaSpec b = s;
    b.normalize_qk = false;
    return cpu(b, in);
  };
  auto rows = validators::CheckKdaPrologueFusion(Fused(GateForm::kOriginal), {19}, 5, no_norm);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  for (const auto& r : *rows) EXPECT_FALSE(r.pass) << r.against;
}

TEST(KernelPrologueCheckTest, NothingToFuseIsBadInput) {
  auto rows = validators::CheckKdaPrologueFusion(Fused(GateForm::kNone), {5}, 1, validators::CpuKdaRunner(1));
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), ErrorCode::kBadInput);
}

TEST(KernelPrologueCheckTest, CudaEmulatedBothGateForms) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const auto run = validators::EmulatedCudaKdaRunner(90);
  for (GateForm g : {GateForm::kOriginal, GateForm::kBounded}) {
    auto rows = validators::CheckKdaPrologueFusion(Fused(g), {1, 21}, 13, run, " [CUDA emulated]");
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ExpectAllPass(*rows);
  }
}

}  // namespace
}  // namespace onboard
