// libFuzzer target: Hugging Face config.json text -> ModelIR -> ComputeStats.
// Any accepted config must give an IR whose statistics compute without tripping an invariant.
#include <cstddef>
#include <cstdint>
#include <string>

#include "parsers/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;  // config.json files are KiB; bigger inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto ir = onboard::ParseHfConfigText(text, "fuzz.config.json");
  if (ir.ok()) {
    onboard::ModelStats s = onboard::ComputeStats(*ir, 4096);
    (void)s;
    (void)onboard::SummarizeLayers(*ir);
  }
  return 0;
}
