// Hugging Face config.json -> ModelIR: file reading, JSON parsing, model_type dispatch (see hf_config.h).
#include "parsers/hf_config.h"

#include <sys/stat.h>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "parsers/hf_families.h"

namespace onboard {
namespace {

const std::map<std::string, HfFamilyReader>& FamilyTable() {
  static const std::map<std::string, HfFamilyReader> table = {
      {"llama", ReadLlamaFamily},           {"mistral", ReadLlamaFamily},
      {"qwen2", ReadLlamaFamily},           {"qwen3", ReadLlamaFamily},
      {"mixtral", ReadMixtral},             {"qwen2_moe", ReadQwenMoE},
      {"qwen3_moe", ReadQwenMoE},           {"qwen3_vl_moe", ReadQwenMoE},
      {"qwen3_vl_moe_text", ReadQwenMoE},   {"qwen3_next", ReadQwen3Next},
      {"glm4_moe", ReadGlm4MoE},            {"glm4v_moe", ReadGlm4MoE},
      {"glm4v_moe_text", ReadGlm4MoE},      {"gpt_oss", ReadGptOss},
      {"minimax", ReadMiniMaxLightning},    {"minimax_m2", ReadMiniMaxM2},
      {"minimax_text_01", ReadMiniMaxLightning}, {"minimax_m1", ReadMiniMaxLightning},
      {"deepseek_v2", ReadDeepSeek},        {"deepseek_v3", ReadDeepSeek},
      {"deepseek_v32", ReadDeepSeek},       {"kimi_k2", ReadDeepSeek},
      {"kimi_linear", ReadKimiLinear},      {"kimi_k3", ReadKimiLinear},
  };
  return table;
}

std::string NameFor(const std::string& origin) {
  std::string p = origin;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string base = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
  if (base == "config.json") {
    const std::string dir = p.substr(0, p.size() - base.size());
    std::string d = dir;
    while (!d.empty() && d.back() == '/') d.pop_back();
    const size_t slash = d.find_last_of('/');
    return d.empty() ? "model" : d.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  for (const char* suffix : {".config.json", ".json"}) {
    const std::string s(suffix);
    if (base.size() > s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0)
      return base.substr(0, base.size() - s.size());
  }
  return base;
}

Expected<ModelIR> ParseHfConfigJson(const nlohmann::json& j, const std::string& origin) {
  JsonFields top(j, origin);
  if (!top.ok()) return top.status();
  ModelIR ir;
  ir.source = origin;
  ir.family = "decoder";
  ir.name = top.StrOr("_name_or_path", "");
  if (ir.name.empty()) ir.name = NameFor(origin);
  const std::vector<std::string> archs = top.StrList("architectures");
  if (!archs.empty()) ir.architecture = archs.front();
  // Step 1: the language-model part and the vision part.
  std::optional<JsonFields> text_sub = top.Sub("text_config");
  JsonFields& text = text_sub ? *text_sub : top;
  HfContext c{top, text, top.Sub("vision_config"), ir};
  if (!top.ok()) return top.status();
  // Step 2: model_type -> reader (top level first, then the text part's).
  ir.model_type = top.StrOr("model_type", "");
  const std::string text_type = text_sub ? text.StrOr("model_type", "") : "";
  const auto& table = FamilyTable();
  auto it = table.find(ir.model_type);
  if (it == table.end() && !text_type.empty()) {
    it = table.find(text_type);
    if (it != table.end()) ir.model_type = text_type;
  }
  const HfFamilyReader reader = it != table.end() ? it->second : HfFamilyReader(ReadGeneric);
  if (ir.model_type.empty()) ir.model_type = text_type;
  if (!top.ok()) return top.status();
  // Step 3: read, then the vision tower, then the size check.
  ONBOARD_RETURN_IF_ERROR(reader(c));
  ONBOARD_RETURN_IF_ERROR(ReadVisionTower(c));
  if (!top.ok()) return top.status();
  if (!ModelSizeFitsInt64(ir))
    return BadInput(origin, text.Path("hidden_size"),
                    "dimensions too large: parameter count overflows int64", std::to_string(ir.hidden));
  return ir;
}

}  // namespace

std::vector<std::string> HfKnownModelTypes() {
  std::vector<std::string> out;
  for (const auto& [k, _] : FamilyTable()) out.push_back(k);
  return out;
}

namespace {

// Python's json module (which writes config.json: PretrainedConfig.to_json_string) emits the float
// literals NaN, Infinity and -Infinity (Nemotron-H: "time_step_limit": [0.0, Infinity]); strict JSON has
// none. Outside strings, in a value position, they become the strings "NaN" / "Infinity" /
// "-Infinity": a field onboard reads then fails as a non-number naming itself, and fields it does not
// read parse as they would in transformers.
std::string QuotePythonFloatLiterals(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  char prev = 0;  // last non-space character outside strings
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false, prev = '"';
      continue;
    }
    if (c == '"') in_string = true;
    const bool value_pos = prev == ':' || prev == '[' || prev == ',';
    bool replaced = false;
    for (const char* lit : {"NaN", "Infinity", "-Infinity"}) {
      const size_t n = std::strlen(lit);
      const char after = i + n < text.size() ? text[i + n] : ' ';
      if (value_pos && text.compare(i, n, lit) == 0 && std::strchr(",]} \t\r\n", after) != nullptr) {
        out += '"' + std::string(lit) + '"';
        i += n - 1;
        prev = '"';
        replaced = true;
        break;
      }
    }
    if (replaced) continue;
    out += c;
    if (!std::isspace(static_cast<unsigned char>(c))) prev = c;
  }
  return out;
}

}  // namespace

Expected<ModelIR> ParseHfConfigText(const std::string& raw, const std::string& origin) {
  const std::string text = QuotePythonFloatLiterals(raw);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 1: syntax error ..."
    std::string msg = e.what();
    const size_t at = msg.find("parse error");
    if (at != std::string::npos) msg = msg.substr(at);
    for (char& ch : msg) if (ch == '\n' || ch == '\r') ch = ' ';
    return BadInput(origin, "<json>", "invalid JSON: " + msg + " (byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range.406 "number overflow parsing '1e8001'": valid syntax, unrepresentable value.
    std::string msg = e.what();
    const size_t close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
    return BadInput(origin, "<json>", "invalid JSON: " + msg);
  }
  return ParseHfConfigJson(j, origin);
}

Expected<ModelIR> ParseHfConfigFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return NotFound(path);
  if (!S_ISREG(st.st_mode)) return BadInput(path, "<file>", "not a regular file");
  if (static_cast<size_t>(st.st_size) > kHfConfigMaxBytes)
    return BadInput(path, "<file>", "config.json too large", std::to_string(st.st_size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseHfConfigText(ss.str(), path);
}

}  // namespace onboard
