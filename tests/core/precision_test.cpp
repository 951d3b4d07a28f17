// Precision (core/precision.h): one spelling per precision, parsed and printed in one place; mxfp8
// is its own value (not fp8); an unknown or misused name is one kBadInput line naming origin,
// field and value (exit 2).
#include <gtest/gtest.h>

#include "core/plan.h"
#include "core/precision.h"

namespace onboard {
namespace {

TEST(Precision, EveryAllowedNameRoundTripsAndMxfp8IsNotFp8) {
  const struct {
    const char* name;
    PrecisionUse use;
    Precision want;
  } cases[] = {
      {"bf16", PrecisionUse::kFrozenBase, Precision::kBF16},
      {"fp8", PrecisionUse::kFrozenBase, Precision::kFP8},
      {"mxfp4", PrecisionUse::kFrozenBase, Precision::kMXFP4},
      {"bf16", PrecisionUse::kCompute, Precision::kBF16},
      {"fp16", PrecisionUse::kCompute, Precision::kFP16},
      {"fp8", PrecisionUse::kCompute, Precision::kFP8},
      {"mxfp8", PrecisionUse::kCompute, Precision::kMXFP8},
      {"nvfp4", PrecisionUse::kCompute, Precision::kNVFP4},
      {"fp32", PrecisionUse::kOptimizerState, Precision::kFP32},
      {"bf16", PrecisionUse::kOptimizerState, Precision::kBF16},
      {"fp32", PrecisionUse::kGrads, Precision::kFP32},
      {"bf16", PrecisionUse::kGrads, Precision::kBF16},
  };
  for (const auto& c : cases) {
    Expected<Precision> p = ParsePrecision("test", "f", c.name, c.use);
    ASSERT_TRUE(p.ok()) << c.name << ": " << p.status().message();
    EXPECT_EQ(*p, c.want) << c.name;
    EXPECT_STREQ(PrecisionName(*p), c.name);
  }
  // mxfp8 keeps its own value and name; only its element type is FP8.
  EXPECT_NE(*ParsePrecision("t", "f", "mxfp8", PrecisionUse::kCompute), Precision::kFP8);
  EXPECT_EQ(PrecisionElement(Precision::kMXFP8), DType::kFP8);
  EXPECT_EQ(PrecisionElement(Precision::kMXFP4), DType::kMXFP4);
  // nvfp4: e2m1 elements with one e4m3 scale per 16 (0.5625 B), not MXFP4's e8m0 per 32 (0.53125 B).
  EXPECT_EQ(DTypeBytes(PrecisionElement(Precision::kNVFP4)), 0.5625);
  EXPECT_EQ(DTypeBytes(PrecisionElement(Precision::kMXFP4)), 0.53125);
  EXPECT_EQ(DTypeBytes(PrecisionElement(Precision::kBF16)), 2.0);
}

TEST(Precision, UnknownOrMisusedNameIsOneLineNamingOriginFieldAndValue) {
  Expected<Precision> p =
      ParsePrecision("plan.json", "best.plan.compute_dtype", "fp7", PrecisionUse::kCompute);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(ExitCodeFor(p.status().code()), 2);
  const std::string m = p.status().message();
  EXPECT_NE(m.find("plan.json"), std::string::npos) << m;
  EXPECT_NE(m.find("best.plan.compute_dtype"), std::string::npos) << m;
  EXPECT_NE(m.find("fp7"), std::string::npos) << m;
  EXPECT_NE(m.find("bf16 | fp16 | fp8 | mxfp8 | nvfp4"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  // Names are exact spellings; each use refuses the precisions it cannot take.
  EXPECT_FALSE(ParsePrecision("t", "f", "BF16", PrecisionUse::kCompute).ok());
  EXPECT_FALSE(ParsePrecision("t", "f", "mxfp4", PrecisionUse::kCompute).ok());
  EXPECT_FALSE(ParsePrecision("t", "f", "nvfp4", PrecisionUse::kFrozenBase).ok());
  EXPECT_FALSE(ParsePrecision("t", "f", "mxfp8", PrecisionUse::kFrozenBase).ok());
  EXPECT_FALSE(ParsePrecision("t", "f", "fp16", PrecisionUse::kOptimizerState).ok());
  EXPECT_FALSE(ParsePrecision("t", "f", "fp8", PrecisionUse::kGrads).ok());
  EXPECT_FALSE(CheckPrecisionUse("t", "f", Precision::kMXFP4, PrecisionUse::kCompute).ok());
}

TEST(Precision, ValidatePlanRefusesAPrecisionInTheWrongField) {
  Plan p;
  ASSERT_TRUE(ValidatePlan(p, 1, 0, 8, 4).ok());
  p.compute_dtype = Precision::kMXFP4;
  Status st = ValidatePlan(p, 1, 0, 8, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("compute_dtype"), std::string::npos) << st.message();
  p.compute_dtype = Precision::kMXFP8;
  EXPECT_TRUE(ValidatePlan(p, 1, 0, 8, 4).ok());
  p.optimizer_dtype = Precision::kFP8;
  EXPECT_FALSE(ValidatePlan(p, 1, 0, 8, 4).ok());
  // bf16 master parameters: FSDP2's shards (zero 3) only; Megatron's optimizers keep an fp32 master.
  p.optimizer_dtype = Precision::kBF16;
  p.param_dtype = Precision::kBF16;
  EXPECT_TRUE(ValidatePlan(p, 1, 0, 8, 4).ok());
  p.zero_stage = 1;
  st = ValidatePlan(p, 1, 0, 8, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("param_dtype=bf16 needs zero_stage=3"), std::string::npos) << st.message();
  p.zero_stage = 3;
  p.param_dtype = Precision::kFP8;
  EXPECT_FALSE(ValidatePlan(p, 1, 0, 8, 4).ok());
}

// Which compute precisions put a quantise step before their GEMMs: derived from the table's element
// types, so a new row answers for itself (mxfp4 is a frozen-base format, not a compute one).
TEST(Precision, QuantisedGemmInputsAreTheScaled8And4BitComputeRecipes) {
  EXPECT_TRUE(QuantisedGemmInputs(Precision::kFP8));
  EXPECT_TRUE(QuantisedGemmInputs(Precision::kMXFP8));
  EXPECT_TRUE(QuantisedGemmInputs(Precision::kNVFP4));
  EXPECT_FALSE(QuantisedGemmInputs(Precision::kBF16));
  EXPECT_FALSE(QuantisedGemmInputs(Precision::kFP16));
  EXPECT_FALSE(QuantisedGemmInputs(Precision::kFP32));
  EXPECT_FALSE(QuantisedGemmInputs(Precision::kMXFP4));
}

}  // namespace
}  // namespace onboard
