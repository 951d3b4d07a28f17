// The embedded kernel headers: every codegen/kernels header is embedded with the text on disk, and the
// amalgamation inlines project headers once, depth first, without #pragma once.
#include "codegen/kernel_headers.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/status.h"

namespace onboard::codegen {
namespace {

std::string ReadSource(const std::string& rel) {
  std::ifstream f(std::string(ONBOARD_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(KernelHeadersTest, EmbeddedTextIsTheFileOnDisk) {
  const auto& files = EmbeddedKernelHeaders();
  bool kda = false, gate = false;
  for (const auto& [path, text] : files) {
    EXPECT_EQ(text, ReadSource(path)) << path << " is stale: rebuild";
    kda = kda || path == "codegen/kernels/kda_cpu.h";
    gate = gate || path == "core/gate_form.h";
  }
  EXPECT_TRUE(kda);
  EXPECT_TRUE(gate);
}

TEST(KernelHeadersTest, AmalgamationInlinesOnce) {
  const std::string text = AmalgamatedKernelHeader("codegen/kernels/kda_cpu.h");
  EXPECT_EQ(text.find("#pragma once"), std::string::npos);
  EXPECT_EQ(text.find("#include \"codegen/"), std::string::npos);
  EXPECT_NE(text.find("#include <hwy/highway.h>"), std::string::npos);  // system headers stay
  const size_t simd = text.find("// ---- codegen/kernels/cpu_simd.h ----");
  const size_t kda = text.find("struct KdaCpu");
  ASSERT_NE(simd, std::string::npos);
  EXPECT_LT(simd, kda) << "dependencies come first";
  EXPECT_EQ(text.find("// ---- codegen/kernels/cpu_simd.h ----", simd + 1), std::string::npos);
}

TEST(KernelHeadersTest, UnknownHeaderIsABug) {
  EXPECT_THROW(AmalgamatedKernelHeader("codegen/kernels/nope.h"), InvariantError);
}

}  // namespace
}  // namespace onboard::codegen
