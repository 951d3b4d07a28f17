// Typed, range-checked JSON field reading (see json_fields.h).
#include "parsers/json_fields.h"

#include <cmath>

namespace onboard {

std::string JsonValueText(const nlohmann::json& v) {
  // Containers are summarised, never dumped: a hostile value may nest millions deep.
  if (v.is_array()) return "a list of " + std::to_string(v.size());
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " fields";
  std::string s = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

JsonFields::JsonFields(const nlohmann::json& j, std::string file, std::string prefix)
    : j_(&j), file_(std::move(file)), prefix_(std::move(prefix)), status_(std::make_shared<Status>()) {
  if (!j.is_object()) Fail("", "expected a JSON object", JsonValueText(j));
}

void JsonFields::Fail(const std::string& key, const std::string& problem, const std::string& value) {
  if (!status_->ok()) return;
  const std::string field = key.empty() ? (prefix_.empty() ? "<root>" : prefix_) : Path(key);
  *status_ = BadInput(file_, field, problem, value);
}

const nlohmann::json* JsonFields::Get(const std::string& key) const {
  if (!j_->is_object()) return nullptr;
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(const std::string& key) const { return Get(key) != nullptr; }

std::string JsonFields::FirstPresent(std::initializer_list<const char*> keys) const {
  for (const char* k : keys)
    if (Has(k)) return k;
  return "";
}

bool JsonFields::ToInt(const nlohmann::json& v, const std::string& path, int64_t min, int64_t max,
                       int64_t* out) {
  int64_t x = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail(path, "integer out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]",
           JsonValueText(v));
      return false;
    }
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) {
      Fail(path, "expected an integer", JsonValueText(v));
      return false;
    }
    x = static_cast<int64_t>(d);
  } else {
    Fail(path, "expected an integer", JsonValueText(v));
    return false;
  }
  if (x < min || x > max) {
    Fail(path, "integer out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]",
         JsonValueText(v));
    return false;
  }
  *out = x;
  return true;
}

int64_t JsonFields::Int(const std::string& key, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) {
    Fail(key, "required field missing", "");
    return min;
  }
  int64_t x = min;
  return ToInt(*v, key, min, max, &x) ? x : min;
}

std::optional<int64_t> JsonFields::OptInt(std::initializer_list<const char*> keys, int64_t min, int64_t max) {
  for (const char* k : keys) {
    const nlohmann::json* v = Get(k);
    if (v == nullptr) continue;
    int64_t x = 0;
    if (ToInt(*v, k, min, max, &x)) return x;
    return std::nullopt;
  }
  return std::nullopt;
}

int64_t JsonFields::IntOr(std::initializer_list<const char*> keys, int64_t dflt, int64_t min, int64_t max) {
  return OptInt(keys, min, max).value_or(dflt);
}

double JsonFields::DoubleOr(const std::string& key, double dflt, double min, double max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return dflt;
  if (!v->is_number()) {
    Fail(key, "expected a number", JsonValueText(*v));
    return dflt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    Fail(key, "number out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]",
         JsonValueText(*v));
    return dflt;
  }
  return d;
}

bool JsonFields::BoolOr(const std::string& key, bool dflt) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return dflt;
  if (!v->is_boolean()) {
    Fail(key, "expected true or false", JsonValueText(*v));
    return dflt;
  }
  return v->get<bool>();
}

std::string JsonFields::StrOr(const std::string& key, const std::string& dflt) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return dflt;
  if (!v->is_string()) {
    Fail(key, "expected a string", JsonValueText(*v));
    return dflt;
  }
  return v->get<std::string>();
}

std::vector<int64_t> JsonFields::IntList(const std::string& key, int64_t min, int64_t max) {
  std::vector<int64_t> out;
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return out;
  if (!v->is_array()) {
    Fail(key, "expected a list of integers", JsonValueText(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    int64_t x = 0;
    if (!ToInt((*v)[i], key + "[" + std::to_string(i) + "]", min, max, &x)) return {};
    out.push_back(x);
  }
  return out;
}

std::vector<std::string> JsonFields::StrList(const std::string& key) {
  std::vector<std::string> out;
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return out;
  if (!v->is_array()) {
    Fail(key, "expected a list of strings", JsonValueText(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      Fail(key + "[" + std::to_string(i) + "]", "expected a string", JsonValueText((*v)[i]));
      return {};
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<JsonFields> JsonFields::Sub(const std::string& key) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) {
    Fail(key, "expected a JSON object", JsonValueText(*v));
    return std::nullopt;
  }
  JsonFields sub(*v, file_, Path(key));
  sub.status_ = status_;
  return sub;
}

}  // namespace onboard
