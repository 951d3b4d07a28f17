// Loading template data files and user overrides (see template_library.h, templates/README.md).
#include "templates/template_library.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace onboard {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::set<std::string> kModules = {"mixer", "channel", "embedding", "head", "vision_tower"};
// Keys templates no longer carry (nothing read them), each with the owner of what it claimed to set;
// a template chooses the kernel and its reference op.
const std::map<std::string, std::string> kRemovedKeys = {
    {"parallel", "the plan search chooses parallelism and recompute per block kind (onboard plan)"},
    {"parallel_over", "the plan search chooses parallelism and recompute per block kind (onboard plan)"},
    {"recompute", "the plan search chooses parallelism and recompute per block kind (onboard plan)"},
    {"precision",
     "the precisions are the plan's dtype fields (compute_dtype, grad_dtype, optimizer_dtype, "
     "base_dtype)"},
};

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open template file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads one string field; `required` fields must be present and non-empty.
Status GetString(const json& j, const std::string& origin, const std::string& field, bool required,
                 std::string& out) {
  if (!j.contains(field)) {
    if (required) return BadInput(origin, field, "missing");
    return Status::Ok();
  }
  if (!j[field].is_string()) return BadInput(origin, field, "must be a string", j[field].dump());
  out = j[field].get<std::string>();
  return Status::Ok();
}

// Fills `t` from `j`. When `partial` (an override of an existing template) nothing is required.
Status FillTemplate(const json& j, const std::string& origin, bool partial, OptTemplate& t) {
  if (!j.is_object()) return BadInput(origin, "templates[]", "each entry must be an object", j.dump());
  std::string where = origin + " template '" + j.value("name", std::string("?")) + "'";
  ONBOARD_RETURN_IF_ERROR(GetString(j, origin, "name", true, t.name));
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "module", !partial, t.module));
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "kind", !partial, t.kind));
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "kernel", false, t.kernel));
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "reference_op", !partial, t.reference_op));
  for (const auto& [key, owner] : kRemovedKeys)
    if (j.contains(key))
      return BadInput(where, key,
                      "is not a template field: " + owner + "; a template chooses kernel and reference_op",
                      j[key].dump());
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "balancing", false, t.balancing));
  ONBOARD_RETURN_IF_ERROR(GetString(j, where, "why", false, t.why));
  if (j.contains("activations")) {
    if (!j["activations"].is_array()) return BadInput(where, "activations", "must be an array", j["activations"].dump());
    t.activations.clear();
    for (const auto& a : j["activations"]) {
      if (!a.is_string()) return BadInput(where, "activations[]", "must be a string", a.dump());
      t.activations.push_back(a.get<std::string>());
    }
  }
  if (!kModules.count(t.module))
    return BadInput(where, "module", "must be mixer|channel|embedding|head|vision_tower", t.module);
  if (t.kind.empty()) return BadInput(where, "kind", "must not be empty", "\"\"");
  return Status::Ok();
}

Status ParseOneFile(const std::string& name, const std::string& text, TemplateLibrary& lib) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadInput(name, "(file)", "not valid JSON");
  if (!j.is_object() || !j.contains("templates") || !j["templates"].is_array())
    return BadInput(name, "templates", "must be an array of template objects");
  for (const auto& e : j["templates"]) {
    OptTemplate t;
    t.origin = fs::path(name).filename().string();
    ONBOARD_RETURN_IF_ERROR(FillTemplate(e, name, /*partial=*/false, t));
    if (lib.Find(t.name)) return BadInput(name, "templates[].name", "duplicate template name", t.name);
    lib.templates.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

const OptTemplate* TemplateLibrary::Find(const std::string& name) const {
  for (const auto& t : templates)
    if (t.name == name) return &t;
  return nullptr;
}

std::string DefaultTemplatesDir() {
  if (const char* env = std::getenv("ONBOARD_TEMPLATES_DIR"); env && *env) return env;
#ifdef ONBOARD_TEMPLATES_SOURCE_DIR
  std::error_code ec;
  if (fs::is_directory(ONBOARD_TEMPLATES_SOURCE_DIR, ec)) return ONBOARD_TEMPLATES_SOURCE_DIR;
#endif
  return "";
}

Expected<TemplateLibrary> ParseTemplateFiles(
    const std::vector<std::pair<std::string, std::string>>& files) {
  TemplateLibrary lib;
  for (const auto& [name, text] : files) ONBOARD_RETURN_IF_ERROR(ParseOneFile(name, text, lib));
  return lib;
}

Expected<TemplateLibrary> LoadTemplateLibrary(const std::string& dir_in) {
  std::string dir = dir_in.empty() ? DefaultTemplatesDir() : dir_in;
  if (dir.empty()) {
    ONBOARD_ASSIGN_OR_RETURN(TemplateLibrary lib, ParseTemplateFiles(EmbeddedTemplateFiles()));
    lib.sources = {"embedded"};
    return lib;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return BadInput(dir, "templates_dir", "not a directory", dir);
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) return BadInput(dir, "templates_dir", "holds no *.json template files", dir);
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& p : paths) {
    ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadText(p));
    files.emplace_back(p, std::move(text));
  }
  ONBOARD_ASSIGN_OR_RETURN(TemplateLibrary lib, ParseTemplateFiles(files));
  lib.sources = {dir};
  return lib;
}

Status ApplyTemplateOverridesJson(TemplateLibrary& lib, const std::string& text,
                                  const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadInput(origin, "(file)", "not valid JSON");
  if (!j.is_object()) return BadInput(origin, "(file)", "must be a JSON object", j.dump().substr(0, 40));
  for (const auto& [key, _] : j.items())
    if (key != "templates" && key != "disable" && key.rfind("_", 0) != 0)
      return BadInput(origin, key, "unknown key (expected templates | disable)", key);
  if (j.contains("disable")) {
    if (!j["disable"].is_array()) return BadInput(origin, "disable", "must be an array of names", j["disable"].dump());
    for (const auto& n : j["disable"]) {
      if (!n.is_string() || !lib.Find(n.get<std::string>()))
        return BadInput(origin, "disable[]", "no template with this name", n.dump());
      std::string name = n.get<std::string>();
      lib.templates.erase(std::remove_if(lib.templates.begin(), lib.templates.end(),
                                         [&](const OptTemplate& t) { return t.name == name; }),
                          lib.templates.end());
    }
  }
  if (j.contains("templates")) {
    if (!j["templates"].is_array()) return BadInput(origin, "templates", "must be an array", j["templates"].dump());
    for (const auto& e : j["templates"]) {
      std::string name = e.is_object() ? e.value("name", std::string()) : std::string();
      const OptTemplate* existing = lib.Find(name);
      OptTemplate t = existing ? *existing : OptTemplate{};
      t.origin = "override:" + origin;
      ONBOARD_RETURN_IF_ERROR(FillTemplate(e, origin, /*partial=*/existing != nullptr, t));
      if (existing) {
        for (auto& old : lib.templates)
          if (old.name == name) old = t;
      } else {
        lib.templates.push_back(std::move(t));
      }
    }
  }
  lib.sources.push_back("override:" + origin);
  return Status::Ok();
}

Status ApplyTemplateOverrides(TemplateLibrary& lib, const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  return ApplyTemplateOverridesJson(lib, text, path);
}

nlohmann::json TemplateToJson(const OptTemplate& t) {
  json j = {{"name", t.name},
            {"module", t.module},
            {"kind", t.kind},
            {"kernel", t.kernel},
            {"reference_op", t.reference_op},
            {"origin", t.origin}};
  if (!t.activations.empty()) j["activations"] = t.activations;
  if (!t.balancing.empty()) j["balancing"] = t.balancing;
  if (!t.why.empty()) j["why"] = t.why;
  return j;
}

}  // namespace onboard
