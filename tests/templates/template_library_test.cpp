// Template library: data files load (from disk and embedded, identically), every module kind of
// core/model_ir.h has a template, unknown modules are flagged, overrides apply and are validated.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "parsers/load_model.h"
#include "templates/template_library.h"

namespace onboard {
namespace {

namespace fs = std::filesystem;

const std::string kDataDir = std::string(ONBOARD_SOURCE_DIR) + "/templates/data";

TemplateLibrary Lib() {
  auto lib = LoadTemplateLibrary(kDataDir);
  EXPECT_TRUE(lib.ok()) << lib.status().ToString();
  return *lib;
}

ModelIR OneLayerModel(MixerKind mixer, ChannelKind channel, Activation act) {
  ModelIR m;
  m.name = "synthetic";
  m.vocab = 1000;
  m.hidden = 64;
  LayerSpec l;
  l.attn.kind = mixer;
  l.attn.num_heads = 4;
  l.channel = channel;
  l.mlp.act = act;
  l.moe.act = act;
  l.moe.num_experts = 8;
  l.moe.top_k = 2;
  m.layers.push_back(l);
  return m;
}

TEST(TemplateLibrary, EmbeddedCopyEqualsTheDataFiles) {
  TemplateLibrary disk = Lib();
  auto embedded = ParseTemplateFiles(EmbeddedTemplateFiles());
  ASSERT_TRUE(embedded.ok()) << embedded.status().ToString();
  ASSERT_EQ(disk.templates.size(), embedded->templates.size());
  for (size_t i = 0; i < disk.templates.size(); ++i) {
    EXPECT_EQ(TemplateToJson(disk.templates[i]), TemplateToJson(embedded->templates[i])) << disk.templates[i].name;
  }
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(kDataDir)) files += e.path().extension() == ".json";
  EXPECT_EQ(files, EmbeddedTemplateFiles().size());
}

TEST(TemplateLibrary, EveryMixerAndChannelKindHasATemplate) {
  TemplateLibrary lib = Lib();
  const MixerKind mixers[] = {MixerKind::kMHA, MixerKind::kGQA, MixerKind::kMLA, MixerKind::kDSA,
                              MixerKind::kKDA, MixerKind::kGatedDeltaNet, MixerKind::kLinearAttention,
                              MixerKind::kSlidingWindow};
  for (MixerKind mk : mixers)
    for (ChannelKind ck : {ChannelKind::kDenseMLP, ChannelKind::kMoE}) {
      ModelIR m = OneLayerModel(mk, ck, Activation::kSwiGLU);
      m.vision = VisionTower{"moonvit", 2, 32, 64, 2, 14, 3, 1, 2, 64, 0};
      TemplateMatch match = MatchTemplates(m, lib);
      EXPECT_EQ(match.unknown, 0) << MixerKindName(mk) << " " << ChannelKindName(ck);
      ASSERT_EQ(match.modules.size(), 5u);  // embedding, vision, mixer, channel, head
      EXPECT_EQ(match.modules[0].module, "embedding");
      EXPECT_EQ(match.modules[1].module, "vision_tower");
      EXPECT_EQ(match.modules[2].kind, MixerKindName(mk));
      EXPECT_EQ(match.modules[2].chosen->kind, MixerKindName(mk));  // the exact template, not a wildcard
      EXPECT_EQ(match.modules[4].module, "head");
    }
}

TEST(TemplateLibrary, KernelsFollowTheModuleKind) {
  TemplateMatch m = MatchTemplates(OneLayerModel(MixerKind::kKDA, ChannelKind::kMoE, Activation::kSiTU), Lib());
  EXPECT_EQ(m.modules[1].chosen->kernel, "kda_chunked");
  EXPECT_EQ(m.modules[2].chosen->kernel, "grouped_gemm");
  EXPECT_EQ(m.modules[2].chosen->reference_op, "moe_loop_reference");
  TemplateMatch d = MatchTemplates(OneLayerModel(MixerKind::kGQA, ChannelKind::kDenseMLP, Activation::kSwiGLU), Lib());
  EXPECT_EQ(d.modules[2].chosen->kernel, "");  // the vendor library's GEMMs
}

// Layout and recompute are the plan search's: a template that sets them is refused, naming the key.
TEST(TemplateOverrides, LayoutKeysAreRefusedWithTheirOwner) {
  TemplateLibrary lib = Lib();
  for (const char* key : {"parallel", "parallel_over", "recompute"}) {
    std::string text = std::string(R"({"templates":[{"name":"kda-chunked",")") + key + R"(":"full"}]})";
    Status st = ApplyTemplateOverridesJson(lib, text, "over.json");
    ASSERT_FALSE(st.ok()) << key;
    EXPECT_NE(st.message().find(std::string("field '") + key + "'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("plan search"), std::string::npos) << st.message();
  }
}

// A template's precision map fed nothing (the precisions are the plan's dtype fields): the key is
// refused, in the library's files as in overrides, naming the owner.
TEST(TemplateOverrides, PrecisionIsRefusedWithItsOwner) {
  const std::string where = "over.json template 'kda-chunked'";
  const std::string msg =
      where +
      ": field 'precision': is not a template field: the precisions are the plan's dtype "
      "fields (compute_dtype, grad_dtype, optimizer_dtype, base_dtype); a template chooses kernel "
      "and reference_op (got {\"compute\":\"bf16\"})";
  TemplateLibrary lib = Lib();
  Status st = ApplyTemplateOverridesJson(
      lib, R"({"templates":[{"name":"kda-chunked","precision":{"compute":"bf16"}}]})", "over.json");
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_EQ(st.message(), msg);
  Expected<TemplateLibrary> file = ParseTemplateFiles(
      {{"over.json",
        R"({"templates":[{"name":"kda-chunked","module":"mixer","kind":"KDA","reference_op":"r",)"
        R"("precision":{"compute":"bf16"}}]})"}});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(), msg);
  for (const OptTemplate& t : Lib().templates)
    EXPECT_FALSE(TemplateToJson(t).contains("precision")) << t.name;
}

TEST(TemplateLibrary, UnknownActivationIsFlaggedNotDropped) {
  ModelIR m = OneLayerModel(MixerKind::kMHA, ChannelKind::kDenseMLP, Activation::kUnknown);
  TemplateMatch match = MatchTemplates(m, Lib());
  EXPECT_EQ(match.unknown, 1);
  ASSERT_EQ(match.modules.size(), 4u);
  const ModuleMatch& ch = match.modules[2];
  EXPECT_EQ(ch.module, "channel");
  EXPECT_FALSE(ch.chosen.has_value());
  EXPECT_NE(ch.unknown_reason.find("unknown"), std::string::npos) << ch.unknown_reason;
  nlohmann::json j = TemplateMatchToJson(match);
  EXPECT_TRUE(j["modules"][2]["template"].is_null());
  EXPECT_EQ(j["unknown"], 1);
}

TEST(TemplateLibrary, LayersAreGroupedByKind) {
  auto model = LoadModel(std::string(ONBOARD_TEST_DATA) + "/agent/tiny_kimi.config.json");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  TemplateMatch match = MatchTemplates(*model, Lib());
  EXPECT_EQ(match.unknown, 0);
  std::map<std::string, std::string> layers;
  for (const auto& m : match.modules) layers[m.module + ":" + m.kind] += LayerRanges(m.layers);
  EXPECT_EQ(layers["mixer:KDA"], "0-2,4-6");
  EXPECT_EQ(layers["channel:MLP"], "0");
  EXPECT_EQ(layers["channel:MoE"], "1-7");
  EXPECT_TRUE(layers.count("vision_tower:moonvit"));
}

TEST(TemplateLibrary, RealConfigsHaveNoUnknownModules) {
  TemplateLibrary lib = Lib();
  int loaded = 0;
  for (const auto& e : fs::directory_iterator(std::string(ONBOARD_TEST_DATA) + "/hf")) {
    if (e.path().string().find(".config.json") == std::string::npos) continue;
    auto model = LoadModel(e.path().string());
    if (!model.ok()) continue;  // parser coverage is tested in tests/parsers
    ++loaded;
    TemplateMatch match = MatchTemplates(*model, lib);
    EXPECT_EQ(match.unknown, 0) << e.path().filename() << ": " << TemplateMatchToJson(match).dump();
  }
  EXPECT_GE(loaded, 8);  // Llama, Mixtral, Qwen3, DeepSeek-V3, Kimi-Linear, Qwen3-Next, gpt-oss, GLM-4.5V, flagship
}

TEST(TemplateOverrides, ReplaceAddAndDisable) {
  TemplateLibrary lib = Lib();
  size_t n = lib.templates.size();
  ASSERT_TRUE(ApplyTemplateOverridesJson(lib, R"({"templates":[{"name":"kda-chunked","reference_op":"kda_chunked_torch"},
      {"name":"my-mla","module":"mixer","kind":"MLA","kernel":"my_mla","reference_op":"mla_reference"}]})", "over.json").ok());
  EXPECT_EQ(lib.templates.size(), n + 1);
  EXPECT_EQ(lib.Find("kda-chunked")->reference_op, "kda_chunked_torch");
  EXPECT_EQ(lib.Find("kda-chunked")->kernel, "kda_chunked");  // untouched fields kept
  ModelIR m = OneLayerModel(MixerKind::kMLA, ChannelKind::kDenseMLP, Activation::kSwiGLU);
  EXPECT_EQ(MatchTemplates(m, lib).modules[1].chosen->name, "my-mla");  // user template wins
  ASSERT_TRUE(ApplyTemplateOverridesJson(lib, R"({"disable":["my-mla","mla-latent"]})", "off.json").ok());
  TemplateMatch match = MatchTemplates(m, lib);
  EXPECT_EQ(match.unknown, 1);
  EXPECT_FALSE(match.modules[1].chosen.has_value());
}

TEST(TemplateOverrides, BadOverridesNameFileFieldAndValue) {
  TemplateLibrary lib = Lib();
  Status s = ApplyTemplateOverridesJson(lib, R"({"templates":[{"name":"x","module":"ZZ","kind":"KDA",
      "reference_op":"r"}]})", "bad.json");
  EXPECT_EQ(s.code(), ErrorCode::kBadInput);
  EXPECT_NE(s.message().find("bad.json"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("module"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ZZ"), std::string::npos) << s.message();
  EXPECT_EQ(ApplyTemplateOverridesJson(lib, R"({"disable":["nope"]})", "b.json").code(), ErrorCode::kBadInput);
  EXPECT_EQ(ApplyTemplateOverridesJson(lib, "{not json", "b.json").code(), ErrorCode::kBadInput);
  EXPECT_EQ(ApplyTemplateOverridesJson(lib, R"({"tempaltes":[]})", "b.json").code(), ErrorCode::kBadInput);
  EXPECT_EQ(ApplyTemplateOverrides(lib, "/nonexistent/over.json").code(), ErrorCode::kNotFound);
}

TEST(TemplateLibrary, DirectoryResolution) {
  std::string dir = (fs::temp_directory_path() / ("onboard_tpl_dir_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  std::ofstream(dir + "/only.json") << R"({"templates":[{"name":"any-mixer","module":"mixer","kind":"*",
      "reference_op":"r"}]})";
  ::setenv("ONBOARD_TEMPLATES_DIR", dir.c_str(), 1);
  EXPECT_EQ(DefaultTemplatesDir(), dir);
  auto lib = LoadTemplateLibrary();
  ::unsetenv("ONBOARD_TEMPLATES_DIR");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  ASSERT_EQ(lib->templates.size(), 1u);
  TemplateMatch m = MatchTemplates(OneLayerModel(MixerKind::kKDA, ChannelKind::kMoE, Activation::kSiTU), *lib);
  EXPECT_EQ(m.modules[1].chosen->name, "any-mixer");  // wildcard kind
  EXPECT_EQ(m.unknown, 3);                             // embedding, channel, head have none here
  EXPECT_EQ(LoadTemplateLibrary("/nonexistent/dir").status().code(), ErrorCode::kBadInput);
  std::ofstream(dir + "/dup.json") << R"({"templates":[{"name":"any-mixer","module":"mixer","kind":"KDA",
      "reference_op":"r"}]})";
  EXPECT_EQ(LoadTemplateLibrary(dir).status().code(), ErrorCode::kBadInput);
  fs::remove_all(dir);
}

TEST(TemplateLibrary, LayerRanges) {
  EXPECT_EQ(LayerRanges({0, 1, 2, 4, 6, 7}), "0-2,4,6-7");
  EXPECT_EQ(LayerRanges({}), "");
  EXPECT_EQ(LayerRanges({5}), "5");
}

}  // namespace
}  // namespace onboard
