// NVFP4 (issue 13): Transformer Engine's NVFP4BlockScaling recipe as a compute precision. Its GEMMs
// run at the device's dense fp4 peak (topology device.tflops_fp4), its quantisation moves its own
// bytes (an amax pass, then one fused row- + column-wise cast: 5.125 B per element), and TE saves a
// 0.5625 B copy of each GEMM input for backward. Each is checked against mxfp8 and bf16 on the same
// plan, and against the inputs that must be refused (no fp4 tensor cores, a negative peak).
#include "core/topology.h"
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

CostContext ContextFor(Precision p, const std::string& hardware) {
  static PlanRequest req;  // MakeCostContext keeps a pointer to it
  req = test::HfRequestOn("llama-3.1-8b", hardware, 8);
  req.compute_dtype = p;
  return MakeCostContext(req);
}

TEST(Nvfp4, GemmsRunAtTheFp4PeakWithTheirOwnQuantisationBytes) {
  const CostContext f4 = ContextFor(Precision::kNVFP4, "GB300");
  const CostContext mx = ContextFor(Precision::kMXFP8, "GB300");
  const CostContext bf = ContextFor(Precision::kBF16, "GB300");
  // GB300 NVL72: 15 PF dense NVFP4 per GPU, 3x its 5 PF fp8 (hardware catalog).
  EXPECT_DOUBLE_EQ(f4.datasheet_peak_flops, 15000e12);
  EXPECT_DOUBLE_EQ(mx.datasheet_peak_flops, 5000e12);
  EXPECT_DOUBLE_EQ(bf.datasheet_peak_flops, 2500e12);
  // amax read 2 B + cast read 2 B + two copies of 0.5 B with an e4m3 scale per 16.
  EXPECT_DOUBLE_EQ(f4.quant_bytes, 5.125);
  EXPECT_DOUBLE_EQ(mx.quant_bytes, 4.0);
  EXPECT_DOUBLE_EQ(bf.quant_bytes, 0.0);
  EXPECT_DOUBLE_EQ(f4.saved_input_bytes, 0.5625);
  EXPECT_DOUBLE_EQ(mx.saved_input_bytes, 1.0);
  EXPECT_DOUBLE_EQ(bf.saved_input_bytes, 0.0);
  EXPECT_TRUE(f4.quantised && mx.quantised && !bf.quantised);
  EXPECT_DOUBLE_EQ(f4.quantised_gemm_eff, f4.k.nvfp4_gemm_eff);
  EXPECT_DOUBLE_EQ(mx.quantised_gemm_eff, mx.k.fp8_gemm_eff);
  EXPECT_DOUBLE_EQ(bf.quantised_gemm_eff, 1.0);
  // Per-expert host ops: amax and the fused cast per quantised input (expert_host_ops.cpp).
  EXPECT_DOUBLE_EQ(f4.expert_ops.fwd, 2 * (1 + 2));
  EXPECT_DOUBLE_EQ(mx.expert_ops.fwd, 2 * (1 + 1));
}

// On the same plan nvfp4 is faster than mxfp8 and keeps fewer activation bytes, but not 3x faster:
// attention cores stay bf16 and the quantisation passes are more bytes than mxfp8's.
TEST(Nvfp4, GemmsSpeedUpButAttentionDoesNotAndSavedInputsShrink) {
  auto estimate = [](Precision p) {
    PlanRequest req = test::HfRequestOn("llama-3.1-8b", "GB300", 8);
    req.seq = 8192;
    req.compute_dtype = p;
    const CostContext c = MakeCostContext(req);
    Plan plan = test::MakePlan({1, 8, 1, 1, 1, 1, 1, false}, req.seq, 1, 16);
    plan.zero_stage = 1;
    plan.compute_dtype = p;
    EXPECT_TRUE(CheckPlanAgainstModel(c, plan).ok()) << CheckPlanAgainstModel(c, plan).ToString();
    return EstimatePlan(c, plan);
  };
  const PlanEstimate f4 = estimate(Precision::kNVFP4), mx = estimate(Precision::kMXFP8),
                     bf = estimate(Precision::kBF16);
  EXPECT_LT(f4.step_s, mx.step_s);
  EXPECT_GT(f4.step_s, mx.step_s / 3);
  EXPECT_LT(f4.memory.activations, mx.memory.activations);
  EXPECT_LT(mx.memory.activations, bf.memory.activations);
  // The estimate says its GEMM share is not calibrated; the calibrated precisions say nothing of it.
  auto uncalibrated = [](const PlanEstimate& e) {
    for (const std::string& n : e.notes)
      if (n.find("not calibrated") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(uncalibrated(f4));
  EXPECT_FALSE(uncalibrated(mx));
  EXPECT_FALSE(uncalibrated(bf));
}

TEST(Nvfp4, IsRefusedOnADeviceWithoutFp4TensorCores) {
  PlanRequest req = test::HfRequestOn("llama-3.1-8b", "H100-80GB", 8);
  req.mode = FinetuneMode::kFull;
  req.compute_dtype = Precision::kMXFP8;
  ASSERT_TRUE(req.Validate().ok()) << req.Validate().ToString();
  req.compute_dtype = Precision::kNVFP4;
  const Status st = req.Validate();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(ExitCodeFor(st.code()), 2);
  EXPECT_NE(st.message().find("device.tflops_fp4"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nvfp4"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  PlanRequest gb = test::HfRequestOn("llama-3.1-8b", "GB200", 8);
  gb.mode = FinetuneMode::kFull;
  gb.compute_dtype = Precision::kNVFP4;
  EXPECT_TRUE(gb.Validate().ok()) << gb.Validate().ToString();
}

TEST(Nvfp4, TopologyFilesCarryTheFp4PeakAndRefuseANegativeOne) {
  const Topology t = test::ShippedTopology("gb300-nvl72-x4");
  EXPECT_DOUBLE_EQ(t.device.tflops_fp4, 15000);
  EXPECT_DOUBLE_EQ(test::ShippedTopology("gb200-nvl72-x4").device.tflops_fp4, 10000);
  EXPECT_DOUBLE_EQ(test::ShippedTopology("b200-32x8").device.tflops_fp4, 9000);
  EXPECT_DOUBLE_EQ(test::ShippedTopology("h200-16x8").device.tflops_fp4, 0);
  // Written back only where the device has it, and read back the same.
  const std::string text = TopologyToJson(t);
  EXPECT_NE(text.find("tflops_fp4"), std::string::npos);
  auto back = ParseTopologyJson(text, "back.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->device.tflops_fp4, 15000);
  EXPECT_EQ(TopologyToJson(test::ShippedTopology("h200-16x8")).find("tflops_fp4"), std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("\"tflops_fp4\": 15000"), 19, "\"tflops_fp4\": -1");
  auto refused = ParseTopologyJson(bad, "bad.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("device.tflops_fp4"), std::string::npos)
      << refused.status().message();
}

// Megatron-Bridge's Llama performance configs turn TP communication overlap off for nvfp4
// (scripts/performance/configs/llama/llama31_llm_pretrain.py @c0b9a0003: "tp_comm_overlap = False if
// precision == 'nvfp4'"); the layout reader keeps it on for the other precisions of the same recipe.
TEST(Nvfp4, LlamaPerfRecipeRunsWithoutTpCommOverlap) {
  auto read = [](const std::string& precision) {
    const std::string text =
        R"({"configs":{"m":{"file":"llama-3.1-405b.config.json"}},"runs":[{"id":"r","model":"m",
        "hardware":"GB300","gpus":256,"tp":4,"pp":8,"vp":4,"cp":1,"ep":1,"dp":8,"global_batch":1536,
        "micro_batch":1,"seq":8192,"precision":")" +
        precision + R"(","recompute":"none","optimizer":"Adam","measured":{"tokens_per_s_per_gpu":1000},
        "recipe":{"common_file":"NVIDIA-NeMo/Megatron-Bridge@c0b9a00031b7:scripts/performance/configs/llama/llama31_llm_pretrain.py"}}]})";
    auto r = ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)[0] : LayoutRun{};
  };
  const LayoutRun f4 = read("nvfp4 (NVFP4BlockScaling)"), mx = read("mxfp8");
  EXPECT_EQ(f4.plan.compute_dtype, Precision::kNVFP4);
  EXPECT_FALSE(f4.plan.tp_comm_overlap);
  EXPECT_TRUE(mx.plan.tp_comm_overlap);
}

}  // namespace
}  // namespace onboard
