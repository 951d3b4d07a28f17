// Hugging Face config.json -> ModelIR.
//
// A table maps model_type to a family reader (hf_families.h); an unknown model_type is read with the
// generic llama-style reader and warnings naming every guess. Multimodal configs: the language model is
// read from `text_config`, the vision tower from `vision_config`.
// Errors (kBadInput, exit 2) name the file, the JSON path of the field and the value; invalid JSON names
// nlohmann's position (line, column). Missing file -> kNotFound.
#pragma once

#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

constexpr size_t kHfConfigMaxBytes = 64u << 20;  // a config.json is a few KiB; refuse anything huge

[[nodiscard]] Expected<ModelIR> ParseHfConfigFile(const std::string& path);
// `origin` names the input in errors and becomes ModelIR::source.
[[nodiscard]] Expected<ModelIR> ParseHfConfigText(const std::string& text, const std::string& origin);

// model_type values with a dedicated reader (sorted).
std::vector<std::string> HfKnownModelTypes();

}  // namespace onboard
