// LoadModel: path -> ModelIR by what the path is (see load_model.h).
#include "parsers/load_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "parsers/hf_config.h"
#include "parsers/onnx_model.h"
#include "parsers/safetensors_weights.h"

namespace onboard {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Expected<ModelIR> LoadModel(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return NotFound(path.empty() ? "<empty path>" : path);
  if (S_ISDIR(st.st_mode)) {
    const std::string config = path + (EndsWith(path, "/") ? "" : "/") + "config.json";
    struct stat cs {};
    if (stat(config.c_str(), &cs) != 0)
      return BadInput(path, "config.json", "directory has no config.json");
    return ParseHfConfigFile(config);
  }
  if (EndsWith(path, ".safetensors.index.json") || EndsWith(path, ".safetensors"))
    return BadInput(path, "<path>", "weights alone do not describe a model: pass the directory holding config.json");
  if (EndsWith(path, ".onnx")) return ParseOnnxFile(path);
  if (EndsWith(path, ".json")) return ParseHfConfigFile(path);
  return BadInput(path, "<path>", "expected a model directory, a config.json or an .onnx file");
}

Expected<std::optional<TensorInventory>> LoadInventoryBeside(const std::string& path, std::string* note) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::optional<TensorInventory>();
  const std::string dir = path + (EndsWith(path, "/") ? "" : "/");
  struct stat is {};
  if (stat((dir + "model.safetensors.index.json").c_str(), &is) == 0) {
    ONBOARD_ASSIGN_OR_RETURN(TensorInventory inv, ReadSafetensorsIndex(dir + "model.safetensors.index.json"));
    return std::optional<TensorInventory>(std::move(inv));
  }
  const std::vector<std::string> shards = SafetensorsFilesIn(path);
  if (shards.size() == 1) {
    ONBOARD_ASSIGN_OR_RETURN(TensorInventory inv, ReadSafetensorsFile(dir + shards[0]));
    return std::optional<TensorInventory>(std::move(inv));
  }
  if (shards.size() > 1 && note != nullptr)
    *note = std::to_string(shards.size()) + " .safetensors shards without model.safetensors.index.json: not cross-checked";
  return std::optional<TensorInventory>();
}

}  // namespace onboard
