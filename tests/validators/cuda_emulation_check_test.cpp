// The generated CUDA kernels of the flagship and Kimi-Linear, plus the check variants of the CPU check,
// run under CPU EMULATION of the CUDA programming model (NOT a GPU run) against the fp64 references:
// output (and KDA state) within 1e-5, DSA indices exact, bit-identical in reversed thread/block order,
// DSA in one pass (one launch, no global workspace).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parsers/hf_config.h"
#include "validators/cuda_emulation_check.h"

namespace onboard::validators {
namespace {

void UseTestCache() { setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0); }

// Runs the model's CUDA check plan under emulation; every row must pass. Returns the rows.
std::vector<KernelCheckRow> CheckModel(const std::string& config) {
  UseTestCache();
  auto model = ParseHfConfigFile(std::string(ONBOARD_TEST_DATA) + "/hf/" + config);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  auto rows = CheckModelKernelsEmulated(*model, {});
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  if (!rows.ok()) return {};
  KernelCheckReport report;
  report.rows = *rows;
  std::printf("CUDA kernels of %s under CPU emulation of the CUDA model (not a GPU run), %.1f s:\n%s",
              config.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              FormatKernelTable(report).c_str());
  for (const auto& r : *rows) {
    EXPECT_TRUE(r.pass) << r.kernel << " " << r.shape << " rel " << r.rel_err << " state " << r.state_err
                        << " " << r.note;
  }
  return *rows;
}

int Count(const std::vector<KernelCheckRow>& rows, const std::string& needle) {
  int n = 0;
  for (const auto& r : rows) n += (r.kernel + " " + r.shape + " " + r.note).find(needle) != std::string::npos;
  return n;
}

TEST(CudaEmulationCheckTest, FlagshipKernelsMatchFp64ReferencesUnderCpuEmulation) {
  const auto rows = CheckModel("flagship.config.json");
  // KDA: 3 plan kernels + the first in bf16 + gate "none", 4 lengths each; DSA: 4 plan kernels + the
  // first in bf16 + the 20-heads-per-group one, 3 lengths each plus T = 300 for the 4 small-top-k ones.
  // Plus the model's own KDA and DSA kernels at full size, T = 5, and the fused-prologue check: 2 gate
  // forms x 4 lengths x 2 rows (vs the unfused sequence, vs fp64).
  EXPECT_EQ(rows.size(), 2u + 5u * 4 + 6u * 3 + 4u + 16u) << rows.size();
  EXPECT_EQ(Count(rows, "fused prologue"), 16);
  EXPECT_EQ(Count(rows, " T=5 "), 2);
  EXPECT_EQ(Count(rows, "kda_"), 21 + 16);
  EXPECT_EQ(Count(rows, "_none_"), 4);
  EXPECT_EQ(Count(rows, "dsa_hq40_hkv2_"), 4);
  EXPECT_EQ(Count(rows, "dsa_"), 23);
  EXPECT_EQ(Count(rows, "bf16 "), 7);
  EXPECT_EQ(Count(rows, " ties"), 4);
  // One pass: every DSA forward is one launch with no global score workspace (was up to 1 GiB).
  EXPECT_EQ(Count(rows, "one pass: 1 launch, workspace 0 B;"), 23);
  // The flagship's DSA is MLA-based and gated: its kernels up-project by W_UV (128) before the gate.
  EXPECT_GE(Count(rows, "_up128_gate_"), 2);
  // Not at full size, not in the fused-prologue rows (one pass each).
  EXPECT_EQ(Count(rows, "reversed order bit-identical"), static_cast<int>(rows.size()) - 2 - 16);
}

TEST(CudaEmulationCheckTest, KimiLinearKernelsMatchFp64ReferencesUnderCpuEmulation) {
  const auto rows = CheckModel("kimi-linear-48b-a3b-instruct.config.json");
  EXPECT_GE(Count(rows, "kda_"), 12);
  EXPECT_GE(Count(rows, "_original_"), 4);  // Kimi-Linear's gate or the other-gate variant
  EXPECT_GE(Count(rows, "_bounded_"), 4);
}

// The one-pass CUDA DSA kernel under emulation, and the negative: the same source with the top-k
// tie rule off by one (one tie too many kept at the k-th score, so the compaction's last real key is
// pushed out of the selection) must fail the check on its pure-ties case.
TEST(CudaEmulationCheckTest, OnePassDsaPassesAndABrokenTopkTieRuleFails) {
  UseTestCache();
  codegen::DsaSpec d;
  d.num_heads = 4;
  d.num_kv_heads = 1;
  d.head_dim = 24;
  d.v_head_dim = 16;
  d.v_up_dim = 10;  // absorbed-MLA form: the up-projection, then the gate
  d.index_heads = 2;
  d.index_head_dim = 8;
  d.topk = 8;
  d.block = 8;
  d.output_gate = true;
  d.sink = true;
  CudaEmulationCheckOptions opt;
  opt.long_dsa_case = false;
  auto gen = codegen::GenerateDsa(d, {codegen::KernelTarget::kCuda, 90});
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto good = CheckGeneratedDsaKernelEmulated(d, *gen, opt);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_FALSE(good->empty());
  for (const auto& r : *good) EXPECT_TRUE(r.pass) << r.shape << " " << r.note;
  EXPECT_EQ(Count(*good, "one pass: 1 launch, workspace 0 B;"), static_cast<int>(good->size()));
  codegen::GeneratedKernel broken = *gen;
  const std::string rule = "(is_tie && tie_rank < ties)";
  const size_t at = broken.source.find(rule);
  ASSERT_NE(at, std::string::npos) << "the tie rule moved: update this negative control";
  broken.source.replace(at, rule.size(), "(is_tie && tie_rank <= ties)");
  auto bad = CheckGeneratedDsaKernelEmulated(d, broken, opt);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  int failed = 0;
  for (const auto& r : *bad) failed += !r.pass;
  EXPECT_GE(failed, 1) << "a broken top-k must fail the emulated check";
  EXPECT_GE(Count(*bad, " ties"), 1);
}

// CheckKernels(--target cuda, emulate_cuda): the emulation rows join the report (nvcc hidden here so
// only the emulation runs), and the table says it is emulation.
TEST(CudaEmulationCheckTest, CheckKernelsAddsEmulationRowsForCudaTarget) {
  UseTestCache();
  ModelIR m;
  m.name = "toy-kda";
  LayerSpec kda;
  kda.attn.kind = MixerKind::kKDA;
  kda.attn.num_heads = 2;
  kda.attn.head_dim = 64;
  kda.attn.gate_form = GateForm::kBounded;
  kda.attn.gate_lower_bound = -5;
  kda.attn.chunk_size = 16;
  m.layers = {kda};
  const char* old = std::getenv("ONBOARD_NVCC");
  const std::string saved = old ? old : "";
  setenv("ONBOARD_NVCC", "/nonexistent/nvcc", 1);
  KernelCheckOptions opt;
  opt.target.target = codegen::KernelTarget::kCuda;
  opt.emulate_cuda = true;
  auto report = CheckKernels(m, opt);
  if (old) setenv("ONBOARD_NVCC", saved.c_str(), 1);
  else unsetenv("ONBOARD_NVCC");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string table = FormatKernelTable(*report);
  EXPECT_TRUE(report->all_pass) << table;
  EXPECT_EQ(Count(report->rows, "CPU emulation, not a GPU run"), static_cast<int>(report->rows.size())) << table;
  EXPECT_GE(report->rows.size(), 16u) << table;  // plan kernels + bf16 + gate "none", x 4 lengths
  EXPECT_NE(table.find("[CUDA emulated]"), std::string::npos) << table;
  EXPECT_NE(table.find("not a GPU run"), std::string::npos) << table;
}

}  // namespace
}  // namespace onboard::validators
