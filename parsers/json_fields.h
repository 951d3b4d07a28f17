// JsonFields: typed, range-checked reading of one JSON object (a config.json or a nested part of it).
//
// Every read names the JSON path ("text_config.hidden_size") in its error. The first error is kept
// (sticky, shared by nested readers) and later reads return their defaults, so a reader reads all the
// fields it needs in a straight line and checks status() once:
//
//   JsonFields f(json, "config.json");
//   int64_t h = f.Int("hidden_size", 1, kMaxDim);                 // required
//   int64_t e = f.IntOr({"num_experts", "n_routed_experts"}, 0, 0, kMaxDim);  // first spelling found
//   if (!f.ok()) return f.status();
//
// JSON null counts as absent (HF writes "q_lora_rank": null). Integers written as 4096.0 are accepted;
// 4096.5, "4096", true are wrong types.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

constexpr int64_t kMaxDim = int64_t{1} << 31;  // any single dimension above this is absurd

class JsonFields {
 public:
  // `j` must outlive this reader. `file` names the input in errors; `prefix` is the JSON path of `j`.
  JsonFields(const nlohmann::json& j, std::string file, std::string prefix = "");

  bool ok() const { return status_->ok(); }
  const Status& status() const { return *status_; }
  const std::string& file() const { return file_; }
  std::string Path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  bool Has(const std::string& key) const;  // present and not null
  // First of `keys` present (not null), or "" when none.
  std::string FirstPresent(std::initializer_list<const char*> keys) const;

  // Integers in [min, max]. Int() requires the field; IntOr() takes the first spelling present.
  int64_t Int(const std::string& key, int64_t min, int64_t max);
  int64_t IntOr(std::initializer_list<const char*> keys, int64_t dflt, int64_t min, int64_t max);
  std::optional<int64_t> OptInt(std::initializer_list<const char*> keys, int64_t min, int64_t max);
  double DoubleOr(const std::string& key, double dflt, double min, double max);
  bool BoolOr(const std::string& key, bool dflt);
  std::string StrOr(const std::string& key, const std::string& dflt);
  // Lists of integers (each in [min, max]) or strings; absent -> empty.
  std::vector<int64_t> IntList(const std::string& key, int64_t min, int64_t max);
  std::vector<std::string> StrList(const std::string& key);

  // Nested object reader (sharing this reader's error); absent -> nullopt. Wrong type -> error.
  std::optional<JsonFields> Sub(const std::string& key);

  // Records an error for `key` (first error wins).
  void Fail(const std::string& key, const std::string& problem, const std::string& value);
  const nlohmann::json& json() const { return *j_; }

 private:
  const nlohmann::json* Get(const std::string& key) const;  // nullptr when absent or null
  bool ToInt(const nlohmann::json& v, const std::string& path, int64_t min, int64_t max, int64_t* out);

  const nlohmann::json* j_;
  std::string file_;
  std::string prefix_;
  std::shared_ptr<Status> status_;
};

// Short printable form of a JSON value for error messages.
std::string JsonValueText(const nlohmann::json& v);

}  // namespace onboard
