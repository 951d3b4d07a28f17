// libFuzzer target: ONNX bytes -> protobuf -> structure recovery -> ComputeStats.
// Input is capped (protobuf allocates in proportion to the input; declared dims are checked by the
// reader before any multiplication).
#include <cstddef>
#include <cstdint>
#include <string>

#include "parsers/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (2u << 20)) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto info = onboard::AnalyzeOnnxBytes(bytes, "fuzz.onnx");
  if (info.ok()) {
    onboard::ModelStats s = onboard::ComputeStats(info->ir, 256);
    (void)s;
  }
  return 0;
}
