// scripts/gpu-check.sh's path without a GPU: the check cases written by `onboard kernels --target cuda
// --out` (WriteKernelCases) and the CUDA host harnesses (codegen/cuda/{kda,dsa}_harness.cu) compiled with
// the host compiler around the generated kernel under CPU EMULATION of the CUDA model (NOT a GPU run).
// Every case must print "pass"; a harness or case-format mismatch would fail here first.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "validators/cuda_emulation_loader.h"
#include "codegen/kernel_generator.h"
#include "codegen/shell_command.h"
#include "validators/kernel_case_io.h"

namespace onboard::validators {
namespace {

std::string HostCompiler() {
  for (const char* env : {"ONBOARD_CXX", "CXX"}) {
    const char* v = std::getenv(env);
    if (v != nullptr && *v != '\0') return v;
  }
  return "c++";
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Builds the harness of `kernel` for emulation and runs `check` over its case folders.
void RunHarness(const codegen::GeneratedKernel& kernel, const std::string& dir, int want_cases) {
  const std::string tu = dir + "/" + kernel.name + ".emu.cu";
  std::ofstream(tu) << CudaEmulationTranslationUnit(kernel);
  const std::string bin = dir + "/" + kernel.name + ".emu";
  std::string log;
  const std::string cc = codegen::ShellQuote(HostCompiler()) + " -std=c++17 -O1 -w -I" +
                         codegen::ShellQuote(ONBOARD_SOURCE_DIR "/codegen/cuda") + " -DKERNEL_CU='\"" + tu +
                         "\"' -x c++ " + codegen::ShellQuote(ONBOARD_SOURCE_DIR "/codegen/cuda/" + kernel.op +
                                                             "_harness.cu") +
                         " -o " + codegen::ShellQuote(bin);
  ASSERT_EQ(codegen::RunCapture(cc, &log), 0) << cc << "\n" << log;
  log.clear();
  const int rc = codegen::RunCapture(codegen::ShellQuote(bin) + " check " +
                                         codegen::ShellQuote(dir + "/cases/" + kernel.name) + "/*",
                                     &log);
  std::printf("%s", log.c_str());
  EXPECT_EQ(rc, 0) << log;
  EXPECT_EQ(CountOf(log, " pass\n"), want_cases) << log;
  EXPECT_EQ(CountOf(log, "FAIL"), 0) << log;
}

TEST(CudaHarnessEmulationTest, GpuCheckHarnessesPassTheirCasesUnderCpuEmulation) {
  codegen::KdaSpec k;
  k.num_heads = 1;
  k.num_v_heads = 2;
  k.head_dim = k.v_head_dim = 32;
  k.chunk_size = 16;
  k.name = k.DefaultName();
  codegen::DsaSpec d;
  d.num_heads = 4;
  d.num_kv_heads = 2;
  d.head_dim = d.v_head_dim = 32;
  d.index_heads = 2;
  d.index_head_dim = 16;
  d.topk = 8;
  d.block = 8;
  d.output_gate = true;
  d.sink = true;
  d.name = d.DefaultName();
  CheckPlan plan;
  plan.kda = {k};
  plan.dsa = {d};
  const std::string dir = ONBOARD_BINARY_DIR "/cuda-harness-emulation";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteKernelCases(plan, 7, dir + "/cases").ok());
  const codegen::TargetOptions sm90{codegen::KernelTarget::kCuda, 90};
  auto kda = codegen::GenerateKda(k, sm90);
  auto dsa = codegen::GenerateDsa(d, sm90);
  ASSERT_TRUE(kda.ok() && dsa.ok());
  RunHarness(*kda, dir, 3);  // T = 1, C + 3, 3C + 5
  RunHarness(*dsa, dir, 2);  // T = 1, 2k + 7
}

}  // namespace
}  // namespace onboard::validators
