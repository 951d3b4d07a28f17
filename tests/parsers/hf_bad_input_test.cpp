// Bad config.json input: every failure is kBadInput with one line naming the file, the JSON path of the
// field and the value; nothing crashes, whatever single field is replaced by whatever value.
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/model_ir.h"
#include "parsers/hf_config.h"

namespace onboard {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kLlama = std::string(ONBOARD_TEST_DATA) + "/hf/llama-3.1-8b.config.json";

void ExpectBad(const std::string& text, const std::vector<std::string>& must_contain) {
  auto ir = ParseHfConfigText(text, "cfg.json");
  ASSERT_FALSE(ir.ok());
  EXPECT_EQ(ir.status().code(), ErrorCode::kBadInput);
  const std::string& msg = ir.status().message();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("cfg.json", 0), 0u) << msg;
  for (const std::string& s : must_contain) EXPECT_NE(msg.find(s), std::string::npos) << msg << " lacks " << s;
}

nlohmann::json Llama() { return nlohmann::json::parse(ReadText(kLlama)); }

TEST(HfBadInput, InvalidJsonNamesPosition) {
  ExpectBad("{\n  \"hidden_size\": 4096,\n  \"vocab_size\": }\n", {"<json>", "invalid JSON", "line 3"});
}

TEST(HfBadInput, TruncatedJson) {
  const std::string text = ReadText(kLlama);
  ExpectBad(text.substr(0, text.size() / 2), {"invalid JSON", "line "});
  ExpectBad(text.substr(0, text.find(",\n", text.size() / 2) + 2), {"invalid JSON", "unexpected end of input"});
}

TEST(HfBadInput, NumberOverflow) {
  ExpectBad("{\"hidden_size\": 1e8001}", {"<json>", "number overflow", "1e8001"});
}

TEST(HfBadInput, NotAnObject) { ExpectBad("[1, 2, 3]", {"<root>", "expected a JSON object"}); }

TEST(HfBadInput, WrongFieldType) {
  auto j = Llama();
  j["hidden_size"] = "4096";
  ExpectBad(j.dump(), {"'hidden_size'", "expected an integer", "\"4096\""});
  j = Llama();
  j["tie_word_embeddings"] = 1;
  ExpectBad(j.dump(), {"'tie_word_embeddings'", "expected true or false"});
  j = Llama();
  j["num_key_value_heads"] = 8.5;
  ExpectBad(j.dump(), {"'num_key_value_heads'", "8.5"});
}

TEST(HfBadInput, NegativeDims) {
  auto j = Llama();
  j["num_attention_heads"] = -32;
  ExpectBad(j.dump(), {"'num_attention_heads'", "out of range", "-32"});
}

TEST(HfBadInput, AbsurdAndOverflowingDims) {
  auto j = Llama();
  j["intermediate_size"] = 3000000000LL;  // > 2^31
  ExpectBad(j.dump(), {"'intermediate_size'", "3000000000"});
  j = Llama();
  j["vocab_size"] = 1LL << 62;
  ExpectBad(j.dump(), {"'vocab_size'"});
  // Each dimension allowed, the product not: 100000 layers of 2^31 x 2^31 matrices.
  j = Llama();
  j["hidden_size"] = 1LL << 31;
  j["intermediate_size"] = 1LL << 31;
  j["num_hidden_layers"] = 100000;
  j["head_dim"] = 128;
  ExpectBad(j.dump(), {"'hidden_size'", "overflows int64"});
}

TEST(HfBadInput, DeeplyNestedValue) {
  std::string text = ReadText(kLlama);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("4096"), 4, deep);  // "hidden_size": 4096
  ExpectBad(text, {"'hidden_size'", "a list of 1"});
}

TEST(HfBadInput, MissingRequiredField) {
  auto j = Llama();
  j.erase("hidden_size");
  ExpectBad(j.dump(), {"'hidden_size'", "required field missing"});
}

TEST(HfBadInput, NestedPathsNamed) {
  auto j = nlohmann::json::parse(ReadText(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json"));
  j["text_config"]["hidden_size"] = -1;
  ExpectBad(j.dump(), {"'text_config.hidden_size'", "-1"});
  j = nlohmann::json::parse(ReadText(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json"));
  j["text_config"]["linear_attn_config"]["kda_layers"][0] = 0;  // lists are 1-indexed
  ExpectBad(j.dump(), {"'text_config.linear_attn_config.kda_layers[0]'", "out of range [1, 93]"});
  j = nlohmann::json::parse(ReadText(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json"));
  j["vision_config"]["depth"] = "27";
  ExpectBad(j.dump(), {"'vision_config.depth'"});
}

TEST(HfBadInput, UnknownModelTypeWarnsWhatWasGuessed) {
  auto j = Llama();
  j["model_type"] = "brand_new_arch";
  auto ir = ParseHfConfigText(j.dump(), "cfg.json");
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  ASSERT_FALSE(ir->warnings.empty());
  EXPECT_NE(ir->warnings[0].find("brand_new_arch"), std::string::npos);
  EXPECT_EQ(ComputeStats(*ir, 4096).total_params, 8030261248);
}

// A config that declares state-space (Mamba) mixers or per-layer block kinds under an unknown
// model_type is refused, not read llama-style: NVIDIA-Nemotron-3-Nano-30B-A3B's config.json (bad/, as
// stored at ai-dynamo/aiconfigurator@095f58a5 model_configs/) read that way was 52 attention + MoE
// layers, 102.3B parameters against the model's 31.6B.
TEST(HfBadInput, HybridBlockPatternsAreRefusedNotReadLlamaStyle) {
  auto ir = ParseHfConfigFile(std::string(ONBOARD_TEST_DATA) + "/hf/bad/nemotron-3-nano-30b-a3b.config.json");
  ASSERT_FALSE(ir.ok());
  EXPECT_EQ(ir.status().code(), ErrorCode::kBadInput);
  for (const char* s :
       {"nemotron-3-nano-30b-a3b.config.json", "'hybrid_override_pattern'", "'nemotron_h'", "MEMEM*E"})
    EXPECT_NE(ir.status().message().find(s), std::string::npos) << s << ": " << ir.status().message();
  // Nemotron 3 Ultra lists layers_block_type instead of num_hidden_layers: the refusal names it, not
  // the missing layer count.
  auto j = Llama();
  j["model_type"] = "nemotron_h";
  j.erase("num_hidden_layers");
  j["layers_block_type"] = {"mamba", "moe", "attention"};
  ExpectBad(j.dump(), {"'layers_block_type'", "not supported"});
  // The same Llama config without those fields is still read (with its warning).
  j = Llama();
  j["model_type"] = "nemotron_h";
  EXPECT_TRUE(ParseHfConfigText(j.dump(), "cfg.json").ok());
}

// Python's json (which writes config.json) emits NaN / Infinity / -Infinity; transformers reads them.
// In a field onboard does not read they are accepted; in one it reads, they are bad input naming it.
TEST(HfBadInput, PythonFloatLiteralsParseAndFailOnlyWhereRead) {
  std::string text = Llama().dump();
  text.insert(text.rfind('}'),
              R"(,"time_step_limit":[0.0, Infinity],"x":-Infinity,"y":NaN,"note":"NaN, Infinity")");
  auto ir = ParseHfConfigText(text, "cfg.json");
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  EXPECT_EQ(ComputeStats(*ir, 4096).total_params, 8030261248);
  std::string bad = Llama().dump();
  const size_t at = bad.find("\"hidden_size\":") + std::string("\"hidden_size\":").size();
  bad.replace(at, bad.find(',', at) - at, "Infinity");
  ExpectBad(bad, {"'hidden_size'", "Infinity"});
  // Not a value position or not a whole token: left as it is (and still invalid JSON).
  for (const char* t : {R"({"model_type": Infinityx})", R"({Infinity: 1})"}) {
    auto r = ParseHfConfigText(t, "cfg.json");
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_NE(r.status().message().find("invalid JSON"), std::string::npos) << r.status().message();
  }
}

TEST(HfBadInput, MissingFileIsNotFound) {
  auto ir = ParseHfConfigFile("/nonexistent/config.json");
  ASSERT_FALSE(ir.ok());
  EXPECT_EQ(ir.status().code(), ErrorCode::kNotFound);
}

// Replace every field (at any depth) of every test config by each hostile value in turn: the parser
// either accepts it (and stats are computable) or returns kBadInput naming that field.
TEST(HfBadInput, EveryFieldEveryHostileValue) {
  const std::string dir = std::string(ONBOARD_TEST_DATA) + "/hf";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 12 && n.compare(n.size() - 12, 12, ".config.json") == 0) files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  ASSERT_GE(files.size(), 9u);
  const std::vector<nlohmann::json> hostile = {-1, 0, int64_t{1} << 40, 1.5, "x", nullptr,
                                               nlohmann::json::array(), nlohmann::json::object(), true};
  int64_t parses = 0;
  for (const std::string& f : files) {
    const nlohmann::json base = nlohmann::json::parse(ReadText(f));
    std::vector<nlohmann::json::json_pointer> ptrs;
    const nlohmann::json flat = base.flatten();
    for (const auto& [k, v] : flat.items()) ptrs.emplace_back(k);
    for (const auto& p : ptrs) {
      std::vector<nlohmann::json> variants;
      for (const auto& h : hostile) {
        variants.push_back(base);
        variants.back()[p] = h;
      }
      // A list one entry short (layer_types / kda_layers shorter than num_hidden_layers).
      if (base[p.parent_pointer()].is_array()) {
        variants.push_back(base);
        variants.back()[p.parent_pointer()].erase(std::stoul(p.back()));
      }
      for (const nlohmann::json& j : variants) {
        auto ir = ParseHfConfigText(j.dump(), "cfg.json");
        ++parses;
        if (ir.ok()) {
          const ModelStats s = ComputeStats(*ir, 4096);
          EXPECT_GE(s.total_params, 0);
          EXPECT_FALSE(SummarizeLayers(*ir).empty() && !ir->layers.empty());
        } else {
          EXPECT_EQ(ir.status().code(), ErrorCode::kBadInput) << f << " " << p.to_string();
          EXPECT_EQ(ir.status().message().find('\n'), std::string::npos);
        }
      }
    }
  }
  EXPECT_GT(parses, 1000);
}

}  // namespace
}  // namespace onboard
