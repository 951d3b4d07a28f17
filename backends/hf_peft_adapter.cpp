// PEFT LoRA adapter writer / reader (see hf_peft_adapter.h).
#include "backends/hf_peft_adapter.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "parsers/json_fields.h"
#include "parsers/mapped_file.h"
#include "parsers/safetensors_weights.h"

namespace onboard {
namespace {

constexpr char kPrefix[] = "base_model.model.";
constexpr char kA[] = ".lora_A.weight";
constexpr char kB[] = ".lora_B.weight";

std::string F32Bytes(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<float>()), size_t(c.numel()) * 4);
}

// Splits "base_model.model.<module>.lora_X.weight" -> module, which ('A' / 'B'); false otherwise.
bool SplitKey(const std::string& key, std::string* module, char* which) {
  const size_t p = sizeof(kPrefix) - 1, s = sizeof(kA) - 1;
  if (key.size() <= p + s || key.compare(0, p, kPrefix) != 0) return false;
  const std::string tail = key.substr(key.size() - s);
  if (tail != kA && tail != kB) return false;
  *module = key.substr(p, key.size() - p - s);
  *which = tail == kA ? 'A' : 'B';
  return true;
}

Expected<torch::Tensor> ReadTensor(const SafetensorsCheckpoint& ck, const std::string& name) {
  ONBOARD_ASSIGN_OR_RETURN(WeightRef w, ck.Get(name));
  torch::Tensor t = torch::empty(w.info->shape, torch::kFloat);
  ONBOARD_RETURN_IF_ERROR(DecodePlain<float>(w, t.data_ptr<float>()));
  return t;
}

}  // namespace

std::vector<std::string> PeftLoraAdapter::TargetModules() const {
  // PEFT matches a target on a module path that is it or ends in "." + it: the path past the layer's
  // "layers.N." names the adapted projections only ("mlp.gate_proj" is not a routed expert's
  // "mlp.experts.E.gate_proj", nor a shared expert's); an adapted routed expert is named with its
  // index ("block_sparse_moe.experts.1.w1", which "...experts.11.w1" does not end in).
  std::set<std::string> out;
  for (const LoraModule& m : modules) {
    if (m.a.size(0) != r) continue;  // a fused parameter's: in target_parameters
    const size_t at = m.module.rfind("layers.");
    const size_t dot = at == std::string::npos ? at : m.module.find('.', at + 7);
    out.insert(dot == std::string::npos ? m.module.substr(m.module.find_last_of('.') + 1)
                                        : m.module.substr(dot + 1));
  }
  return {out.begin(), out.end()};
}

Status WritePeftAdapter(const std::string& dir, const PeftLoraAdapter& a) {
  ::mkdir(dir.c_str(), 0755);
  nlohmann::json cfg = {{"peft_type", "LORA"},
                        {"task_type", "CAUSAL_LM"},
                        {"r", a.r},
                        {"lora_alpha", a.alpha},
                        {"target_modules", a.TargetModules()},
                        {"base_model_name_or_path", a.base_model},
                        {"lora_dropout", 0.0},
                        {"bias", "none"},
                        {"fan_in_fan_out", false},
                        {"inference_mode", true}};
  // Fused parameters (ParamWrapper): lora_dropout 0, fan_in_fan_out false and bias "none" above are
  // what it requires (PEFT lora/layer.py ParamWrapper.__init__ raises otherwise).
  std::set<std::string> params(a.target_parameters.begin(), a.target_parameters.end());
  if (!params.empty()) cfg["target_parameters"] = std::vector<std::string>(params.begin(), params.end());
  std::ofstream out(dir + "/adapter_config.json");
  out << cfg.dump(2) << "\n";
  if (!out) return IoError(dir + "/adapter_config.json: write failed");
  std::vector<TensorToWrite> t;
  for (const LoraModule& m : a.modules) {
    t.push_back({kPrefix + m.module + kA, "F32", m.a.sizes().vec(), F32Bytes(m.a)});
    t.push_back({kPrefix + m.module + kB, "F32", m.b.sizes().vec(), F32Bytes(m.b)});
  }
  return WriteSafetensorsFile(dir + "/adapter_model.safetensors", t, {{"format", "pt"}});
}

Expected<PeftLoraAdapter> ReadPeftAdapter(const std::string& dir) {
  // Step 1: adapter_config.json.
  const std::string cfg_path = dir + "/adapter_config.json";
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadFileCapped(cfg_path, 1u << 20, "(document)"));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return BadInput(cfg_path, "(document)", "is not a JSON object");
  JsonFields f(j, cfg_path);
  PeftLoraAdapter a;
  if (f.StrOr("peft_type", "") != "LORA") return BadInput(cfg_path, "peft_type", "expected LORA", f.StrOr("peft_type", ""));
  a.r = f.Int("r", 1, kMaxDim);
  a.alpha = f.DoubleOr("lora_alpha", double(a.r), 0.0, 1e9);
  a.base_model = f.StrOr("base_model_name_or_path", "");
  if (!f.ok()) return f.status();
  if (j.contains("target_parameters") && j["target_parameters"].is_array())
    for (const nlohmann::json& t : j["target_parameters"])
      if (t.is_string()) a.target_parameters.push_back(t.get<std::string>());
  // Step 2: the A/B pairs, shapes [k r, in] and [out, k r] (k = E of a fused parameter, else 1).
  const std::string st_dir = dir;
  ONBOARD_ASSIGN_OR_RETURN(SafetensorsCheckpoint ck, SafetensorsCheckpoint::Open(st_dir));
  std::map<std::string, LoraModule> mods;
  for (const TensorInfo& t : ck.inventory().tensors) {
    std::string module;
    char which = 0;
    if (!SplitKey(t.name, &module, &which)) return BadInput(t.file, t.name, "not a PEFT LoRA key");
    const int64_t rank_dim = t.shape.size() != 2 ? 0 : which == 'A' ? t.shape[0] : t.shape[1];
    if (rank_dim == 0 || rank_dim % a.r != 0)
      return BadInput(t.file, t.name + ".shape",
                      "expected rank r=" + std::to_string(a.r) + " (or r x experts)", ShapeText(t.shape));
    ONBOARD_ASSIGN_OR_RETURN(torch::Tensor v, ReadTensor(ck, t.name));
    LoraModule& m = mods[module];
    m.module = module;
    (which == 'A' ? m.a : m.b) = v;
  }
  for (auto& [name, m] : mods) {
    if (!m.a.defined() || !m.b.defined())
      return BadInput(dir + "/adapter_model.safetensors", kPrefix + name, "lora_A and lora_B must come in pairs");
    if (m.a.size(0) != m.b.size(1))
      return BadInput(dir + "/adapter_model.safetensors", kPrefix + name + kB,
                      "lora_B's columns must equal lora_A's rows (" + std::to_string(m.a.size(0)) + ")",
                      std::to_string(m.b.size(1)));
    a.modules.push_back(m);
  }
  return a;
}

torch::Tensor MergeLora(const torch::Tensor& w, const LoraModule& m, int64_t r, double alpha) {
  return w + (alpha / double(r)) * torch::matmul(m.b.to(w.scalar_type()), m.a.to(w.scalar_type()));
}

}  // namespace onboard
