// Every input a fuzzer once crashed on (parsers/fuzz/regressions/<target>-<what>.<ext>) must now be
// either accepted or rejected as kBadInput, never crash. The file name prefix picks the parser.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/hf_config.h"
#include "parsers/onnx_model.h"
#include "parsers/safetensors.h"

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
  const std::filesystem::path dir = std::filesystem::path(ONBOARD_SOURCE_DIR) / "parsers/fuzz/regressions";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string target = name.substr(0, name.find('-'));
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    // In a child process, so that a reproducer that still crashes fails this test instead of the binary.
    EXPECT_EXIT(
        {
          const Status st = RunParser(target, bytes, name);
          std::exit(st.ok() || st.code() == ErrorCode::kBadInput ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << name << " still crashes or is not rejected as bad input";
    ++n;
  }
  EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace onboard
