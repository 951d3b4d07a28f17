// Typed JSON field access with file/field/value errors, shared by the layout readers
// (layout_file.cpp: layouts and published_runs.json; layout_file_measured.cpp and
// layout_file_recipe.cpp: measured_training_runs.json). Internal to search/.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"

namespace onboard::layout {

using nlohmann::json;

// Limits every layout form reads its degrees against (the measured-runs reader too).
inline constexpr int64_t kMaxDegree = int64_t{1} << 20;  // tp, pp, cp, ep, etp, dp, fsdp, micro_batch
inline constexpr int64_t kMaxInterleave = 1024;          // vp / interleave

// Typed field access on one JSON object; `path` prefixes field names in errors.
class Fields {
 public:
  Fields(const json& j, std::string origin, std::string path) : j_(j), origin_(std::move(origin)), path_(std::move(path)) {}

  Status Int(const char* key, int64_t lo, int64_t hi, int64_t* out, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end()) return required ? BadInput(origin_, path_ + key, "missing required integer") : Status::Ok();
    if (!it->is_number_integer() && !it->is_number_unsigned())
      return BadInput(origin_, path_ + key, "must be an integer", it->dump());
    // An unsigned literal above INT64_MAX would wrap to a negative int64: refused, its digits quoted.
    const bool above = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX};
    const int64_t v = above ? 0 : it->get<int64_t>();
    if (above || v < lo || v > hi)
      return BadInput(origin_, path_ + key,
                      "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", it->dump());
    *out = v;
    return Status::Ok();
  }
  Status Num(const char* key, double lo, double hi, double* out, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end()) return required ? BadInput(origin_, path_ + key, "missing required number") : Status::Ok();
    if (!it->is_number()) return BadInput(origin_, path_ + key, "must be a number", it->dump());
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) return BadInput(origin_, path_ + key, "out of range", it->dump());
    *out = v;
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out) const {
    auto it = j_.find(key);
    if (it == j_.end()) return Status::Ok();
    if (!it->is_boolean()) return BadInput(origin_, path_ + key, "must be true or false", it->dump());
    *out = it->get<bool>();
    return Status::Ok();
  }
  Status Str(const char* key, std::string* out, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end()) return required ? BadInput(origin_, path_ + key, "missing required string") : Status::Ok();
    if (!it->is_string()) return BadInput(origin_, path_ + key, "must be a string", it->dump());
    *out = it->get<std::string>();
    return Status::Ok();
  }
  // A precision name (core/precision.h, the one parser) allowed for `use`.
  Status Prec(const char* key, PrecisionUse use, Precision* out) const {
    std::string name;
    ONBOARD_RETURN_IF_ERROR(Str(key, &name));
    if (j_.find(key) == j_.end()) return Status::Ok();
    Expected<Precision> p = ParsePrecision(origin_, path_ + key, name, use);
    if (!p.ok()) return p.status();
    *out = *p;
    return Status::Ok();
  }
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string origin_, path_;
};

// Plan fields shared by every layout form (schema in search/README.md).
// `layout_layers`: decoder layers a pp_layout places (-1 = no pp_layout).
Status ReadPlan(const json& j, const Fields& f, Plan* p, int64_t* layout_layers);
// pp_layout must place exactly the model's decoder layers.
Status CheckLayoutLayers(int64_t layout_layers, const ModelIR& m, const Fields& f);

// Megatron --pipeline-model-parallel-layout ("Et*4|(t*4|)*14tmL": E embedding, t decoder layer,
// m MTP layer, L loss, | chunk boundary, (..)*N and X*N repeats) -> first decoder layer of each of
// the pp*vp chunks, the MTP layer count (m must sit in the last chunk) and the decoder layers (t). `key` names the field.
Status ParsePipelineLayout(const std::string& text, int64_t chunks, const Fields& f, const std::string& key,
                           std::vector<int64_t>* starts, int64_t* mtp_layers,
                           int64_t* decoder_layers);

}  // namespace onboard::layout

namespace onboard {
struct LayoutRun;
// Form (c), measured_training_runs.json (rules in layout_file_measured.cpp and layout_file_recipe.cpp). `doc`
// has a "runs" array.
namespace layout {
Expected<std::vector<LayoutRun>> ParseMeasuredRuns(const json& doc, const std::string& origin);
}  // namespace layout
}  // namespace onboard
