// libFuzzer target: model.safetensors.index.json text -> inventory -> cross-check against a small IR.
#include <cstddef>
#include <cstdint>
#include <string>

#include "parsers/safetensors.h"

namespace {

onboard::ModelIR SmallLlama() {
  onboard::ModelIR m;
  m.model_type = "llama";
  m.vocab = 64;
  m.hidden = 32;
  for (int i = 0; i < 2; ++i) {
    onboard::LayerSpec l;
    l.index = i;
    l.attn.num_heads = 4;
    l.attn.num_kv_heads = 2;
    l.attn.head_dim = 8;
    l.attn.kind = onboard::MixerKind::kGQA;
    l.mlp.intermediate = 48;
    m.layers.push_back(l);
  }
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (4u << 20)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // No shard directory: fuzzing must not touch the file system.
  auto inv = onboard::ParseSafetensorsIndexText(text, "fuzz.index.json", "");
  if (!inv.ok()) return 0;
  static const onboard::ModelIR ir = SmallLlama();
  onboard::CrossCheckReport r = onboard::CrossCheckInventory(*inv, ir);
  (void)r.Summary();
  return 0;
}
