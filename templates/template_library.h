// Optimisation templates: for each module kind of a model (token mixer, channel mixer, embedding,
// head, vision tower) the kernel to generate and its reference operator (layout and recompute are
// the plan search's, search/; the precisions are the plan's dtype fields, core/plan.h). Templates are data
// (templates/data/*.json, schema in templates/README.md); this header loads them, applies user overrides and
// matches them against a ModelIR.
//
// Where the data comes from (one source of truth: templates/data/*.json):
//   1. an explicit directory (RunRequest::templates_dir / `--templates-dir`),
//   2. $ONBOARD_TEMPLATES_DIR,
//   3. the source tree the binary was built from (templates/data, compiled-in path), if it exists,
//   4. the same files embedded into the binary at build time (cmake/embed_files.cmake).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

struct OptTemplate {
  std::string name;                     // unique key, e.g. "kda-chunked"
  std::string module;                   // mixer | channel | embedding | head | vision_tower
  std::string kind;                     // MixerKindName / ChannelKindName / vision kind; "*" = any
  std::vector<std::string> activations; // channel templates: activations handled (empty = any)
  std::string kernel;                   // kernel to generate ("" = vendor library op, nothing generated)
  std::string reference_op;             // operator used when the kernel is missing or fails its check
  std::string balancing;                // MoE load balancing ("aux_loss_free_bias", "" = none)
  std::string why;                      // one-paragraph rationale shown in reports
  std::string origin;                   // file it came from ("mixers.json", "override:<path>")
};

struct TemplateLibrary {
  std::vector<OptTemplate> templates;
  std::vector<std::string> sources;     // directories / files / "embedded" it was loaded from
  const OptTemplate* Find(const std::string& name) const;
};

// The embedded copies of templates/data/*.json: (file name, text), sorted by name.
const std::vector<std::pair<std::string, std::string>>& EmbeddedTemplateFiles();

// Directory the default library is read from ("" when only the embedded copy is available).
std::string DefaultTemplatesDir();

// Loads every *.json in `dir` ("" = DefaultTemplatesDir(), falling back to the embedded copy).
// Errors name the file, the field and the value.
Expected<TemplateLibrary> LoadTemplateLibrary(const std::string& dir = "");

// Parses template files given as (name, JSON text).
Expected<TemplateLibrary> ParseTemplateFiles(
    const std::vector<std::pair<std::string, std::string>>& files);

// User overrides (`--templates FILE`): {"templates":[...]} entries replace templates of the same
// name (only the fields given) or add new ones; {"disable":["name", ...]} removes templates.
Status ApplyTemplateOverrides(TemplateLibrary& lib, const std::string& path);
Status ApplyTemplateOverridesJson(TemplateLibrary& lib, const std::string& text,
                                  const std::string& origin);

// One module of the model and the template chosen for it (none = unknown, flagged in reports).
struct ModuleMatch {
  std::string module;                   // mixer | channel | embedding | head | vision_tower
  std::string kind;                     // "KDA", "MoE", "moonvit", "*"
  std::string detail;                   // "activation situ, latent 3584", shown next to the kind
  std::vector<int64_t> layers;          // layer indices using it (empty for embedding/head/vision)
  std::optional<OptTemplate> chosen;    // nullopt = no template matched
  std::string unknown_reason;           // why nothing matched (when !chosen)
};

struct TemplateMatch {
  std::vector<ModuleMatch> modules;     // in model order: embedding, vision, mixers, channels, head
  int64_t unknown = 0;                  // modules without a template
};

// Step 1: enumerate the model's modules; Step 2: pick the most specific template for each.
TemplateMatch MatchTemplates(const ModelIR& model, const TemplateLibrary& lib);

// "1-3,5-7,9" from sorted indices (as given: TemplateMatchToJson passes 1-based layer numbers).
std::string LayerRanges(const std::vector<int64_t>& layers);

nlohmann::json TemplateToJson(const OptTemplate& t);
nlohmann::json TemplateMatchToJson(const TemplateMatch& m);

}  // namespace onboard
