// Every input a fuzzer once crashed on (parsers/fuzz/regressions/<target>-<what>.<ext>) must now be
// either accepted or rejected as kBadInput, never crash. The file name prefix picks the parser.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "parsers/hf_config.h"
#include "parsers/onnx_model.h"
#include "parsers/safetensors.h"
#include "tests/fuzz_reproducers.h"

namespace onboard {
namespace {

Status RunParser(const std::string& target, const std::string& bytes, const std::string& origin) {
  if (target == "hf_config") return ParseHfConfigText(bytes, origin).status();
  if (target == "safetensors_header") return ParseSafetensorsBytes(bytes, origin).status();
  if (target == "safetensors_index") return ParseSafetensorsIndexText(bytes, origin, "").status();
  if (target == "onnx") return AnalyzeOnnxBytes(bytes, origin).status();
  return Status(ErrorCode::kInternal, "unknown fuzz target prefix '" + target + "'");
}

TEST(FuzzRegressionsDeathTest, EveryReproducerIsAcceptedOrBadInput) {
  int n = 0;
  for (const test::Reproducer& r :
       test::ReadReproducers(std::filesystem::path(ONBOARD_SOURCE_DIR) / "parsers/fuzz/regressions")) {
    // In a child process, so that a reproducer that still crashes fails this test instead of the binary.
    EXPECT_EXIT(
        {
          const Status st = RunParser(r.target, r.bytes, r.name);
          std::exit(st.ok() || st.code() == ErrorCode::kBadInput ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << r.name << " still crashes or is not rejected as bad input";
    ++n;
  }
  EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace onboard
