// libFuzzer target: a whole .safetensors file in memory -> header validation -> inventory sums.
// Accepted inventories must have every byte range inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "parsers/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto inv = onboard::ParseSafetensorsBytes(bytes, "fuzz.safetensors");
  if (!inv.ok()) return 0;
  for (const onboard::TensorInfo& t : inv->tensors) {
    if (t.begin > t.end || t.end > size) std::abort();  // the reader promised in-bounds ranges
    (void)t.numel();
  }
  (void)inv->ParamCount();
  (void)inv->DataBytes();
  return 0;
}
