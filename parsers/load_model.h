// LoadModel: read any supported model description into a ModelIR.
//   - a directory            -> its config.json (Hugging Face); see LoadModelDir for safetensors facts
//   - *.onnx                  -> ParseOnnxFile (parsers/onnx_model.h)
//   - *.json (config.json)    -> ParseHfConfigFile (parsers/hf_config.h)
// Errors: kNotFound for a missing path, kBadInput (exit 2) naming file, field and value otherwise.
#pragma once

#include <optional>
#include <string>

#include "core/model_ir.h"
#include "core/status.h"
#include "parsers/safetensors.h"

namespace onboard {

[[nodiscard]] Expected<ModelIR> LoadModel(const std::string& path);

// The tensor inventory stored beside a model directory's config.json: model.safetensors.index.json
// when present, else a single *.safetensors file; nullopt for a file path or a directory without
// either (several shards without an index: nullopt and a note in *note).
[[nodiscard]] Expected<std::optional<TensorInventory>> LoadInventoryBeside(const std::string& path,
                                                                          std::string* note);

}  // namespace onboard
