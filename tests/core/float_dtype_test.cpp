// FloatDtype (core/float_dtype.h): the probe's and verify's own compute dtype has one spelling,
// parsed and printed in one place; an unknown name is one kBadInput line naming origin, field and
// value (exit 2).
#include <gtest/gtest.h>

#include "core/float_dtype.h"

namespace onboard {
namespace {

TEST(FloatDtype, NamesRoundTripWithTheirSizes) {
  for (const char* name : {"fp32", "fp64"}) {
    Expected<FloatDtype> d = ParseFloatDtype("t", "dtype", name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status().message();
    EXPECT_STREQ(FloatDtypeName(*d), name);
  }
  EXPECT_EQ(*ParseFloatDtype("t", "dtype", "fp64"), FloatDtype::kFP64);
  EXPECT_EQ(FloatDtypeBytes(FloatDtype::kFP32), 4.0);
  EXPECT_EQ(FloatDtypeBytes(FloatDtype::kFP64), 8.0);
}

TEST(FloatDtype, UnknownNameIsOneLineNamingOriginFieldAndValue) {
  for (const char* bad : {"fp16", "bf16", "FP32", "float64"}) {
    Expected<FloatDtype> d = ParseFloatDtype("--dtype", "dtype", bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(ExitCodeFor(d.status().code()), 2);
    const std::string m = d.status().message();
    EXPECT_NE(m.find("--dtype"), std::string::npos) << m;
    EXPECT_NE(m.find("(got " + std::string(bad) + ")"), std::string::npos) << m;
    EXPECT_NE(m.find("fp32 or fp64"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace onboard
