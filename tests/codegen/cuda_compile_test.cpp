// Every generated CUDA source compiles with nvcc (-cubin) for sm_90 and sm_80. No GPU needed.
#include <gtest/gtest.h>

#include <future>

#include "codegen/cuda_compiler.h"
#include "codegen/kernel_generator.h"

namespace onboard::codegen {
namespace {

std::vector<GeneratedKernel> AllCudaKernels() {
  std::vector<GeneratedKernel> out;
  auto add = [&](Expected<GeneratedKernel> g) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    out.push_back(std::move(*g));
  };
  TargetOptions sm90{KernelTarget::kCuda, 90}, sm80{KernelTarget::kCuda, 80};
  KdaSpec k;
  k.num_heads = 96;
  k.num_v_heads = 96;
  k.head_dim = 128;
  k.v_head_dim = 128;
  k.chunk_size = 64;
  k.dtype = DType::kBF16;
  add(GenerateKda(k, sm90));
  KdaSpec odd = k;  // grouped values, head dim 100, original gate, fp32
  odd.num_heads = 2;
  odd.num_v_heads = 4;
  odd.head_dim = odd.v_head_dim = 100;
  odd.chunk_size = 16;
  odd.gate_form = GateForm::kOriginal;
  odd.dtype = DType::kF32;
  add(GenerateKda(odd, sm80));
  DsaSpec d;
  d.num_heads = 96;
  d.head_dim = 576;
  d.v_head_dim = 512;
  d.index_heads = 32;
  d.index_head_dim = 128;
  d.topk = 2048;
  d.output_gate = true;
  d.dtype = DType::kBF16;
  add(GenerateDsa(d, sm90));
  DsaSpec g = d;  // GQA, sink, odd dims, fp32
  g.num_heads = 4;
  g.num_kv_heads = 2;
  g.head_dim = g.v_head_dim = 100;
  g.index_heads = 4;
  g.index_head_dim = 64;
  g.topk = 16;
  g.block = 8;
  g.sink = true;
  g.dtype = DType::kF32;
  add(GenerateDsa(g, sm80));
  return out;
}

TEST(CudaCompileTest, EveryGeneratedSourceCompiles) {
  if (!FindNvcc()) GTEST_SKIP() << "nvcc not found (PATH, ONBOARD_NVCC, /usr/local/cuda/bin): CUDA compile not checked";
  const auto kernels = AllCudaKernels();
  ASSERT_EQ(kernels.size(), 4u);
  const std::string dir = ONBOARD_BINARY_DIR "/kernel-cache/cuda-test";
  // Two at a time (the machine has two cores).
  std::vector<std::future<Expected<CudaBuildResult>>> jobs;
  for (const auto& k : kernels) {
    jobs.push_back(std::async(std::launch::async, [&k, &dir] { return CompileCuda(k, dir, false); }));
    if (jobs.size() == 2) {
      for (auto& j : jobs) {
        auto r = j.get();
        EXPECT_TRUE(r.ok()) << r.status().message();
      }
      jobs.clear();
    }
  }
  for (auto& j : jobs) {
    auto r = j.get();
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
}

}  // namespace
}  // namespace onboard::codegen
