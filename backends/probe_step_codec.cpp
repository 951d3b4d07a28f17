// ProbeStep <-> JSON (probe_step_codec.h). One table per object (ProbeStep, CollectiveTimes) names
// each key once: the writer writes the table's keys, the reader requires exactly those keys.
// Units: as in probe.h (seconds, bytes, tokens, nats).
#include "backends/probe_step_codec.h"

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace onboard::backends {
namespace {

using nlohmann::json;

// A value as the error shows it: its JSON text (BadInput bounds the length).
std::string Shown(const json& v) { return v.dump(); }

Status ReadCount(const json& v, const std::string& where, const std::string& field, int64_t* out) {
  if (!v.is_number_integer()) return BadInput(where, field, "must be an integer", Shown(v));
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return BadInput(where, field, "is too large for int64", Shown(v));
  if (v.get<int64_t>() < 0) return BadInput(where, field, "must be >= 0", Shown(v));
  *out = v.get<int64_t>();
  return Status::Ok();
}

// nullable: null stands for a non-finite value (NaN on reading).
Status ReadNumber(const json& v, bool nullable, const std::string& where, const std::string& field,
                  double* out) {
  if (nullable && v.is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return Status::Ok();
  }
  if (!v.is_number())
    return BadInput(where, field, nullable ? "must be a number or null" : "must be a number", Shown(v));
  *out = v.get<double>();
  return Status::Ok();
}

json WriteNumber(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

template <typename T>
struct FieldCodec {
  const char* name;
  std::function<json(const T&)> write;
  std::function<Status(const json&, const std::string& where, const std::string& field, T*)> read;
};

template <typename T>
FieldCodec<T> CountField(const char* name, int64_t T::*m) {
  return {name, [m](const T& t) { return json(t.*m); },
          [m](const json& v, const std::string& w, const std::string& f, T* t) {
            return ReadCount(v, w, f, &(t->*m));
          }};
}

template <typename T>
FieldCodec<T> NumberField(const char* name, double T::*m, bool nullable) {
  return {name, [m](const T& t) { return WriteNumber(t.*m); },
          [m, nullable](const json& v, const std::string& w, const std::string& f, T* t) {
            return ReadNumber(v, nullable, w, f, &(t->*m));
          }};
}

template <typename T>
json WriteObject(const std::vector<FieldCodec<T>>& fields, const T& t) {
  json j = json::object();
  for (const FieldCodec<T>& f : fields) j[f.name] = f.write(t);
  return j;
}

// Exactly the table's keys: unknown keys and missing keys are refused, then each value is read.
// `field`: the object's own name ("" for the record itself; "comm" names its keys "comm.KEY").
template <typename T>
Status ReadObject(const std::vector<FieldCodec<T>>& fields, const json& j, const std::string& where,
                  const std::string& field, T* t) {
  if (!j.is_object()) return BadInput(where, field.empty() ? "record" : field, "must be an object", Shown(j));
  auto name = [&](const std::string& key) { return field.empty() ? key : field + "." + key; };
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const FieldCodec<T>& f : fields) known = known || it.key() == f.name;
    if (!known) return BadInput(where, name(it.key()), "unknown key", Shown(it.value()));
  }
  for (const FieldCodec<T>& f : fields) {
    if (!j.contains(f.name)) return BadInput(where, name(f.name), "missing");
    ONBOARD_RETURN_IF_ERROR(f.read(j.at(f.name), where, name(f.name), t));
  }
  return Status::Ok();
}

const std::vector<FieldCodec<CollectiveTimes>>& CommFields() {
  using C = CollectiveTimes;
  static const std::vector<FieldCodec<C>> fields = {
      NumberField("all_gather_s", &C::all_gather_s, false),
      NumberField("reduce_scatter_s", &C::reduce_scatter_s, false),
      NumberField("all_to_all_s", &C::all_to_all_s, false),
      NumberField("all_to_all_hidden_s", &C::all_to_all_hidden_s, false),  // overlap (issue 18)
      NumberField("all_reduce_s", &C::all_reduce_s, false),
      NumberField("tp_all_reduce_s", &C::tp_all_reduce_s, false),  // tensor parallelism (issue 17)
      NumberField("tp_all_gather_s", &C::tp_all_gather_s, false),
      NumberField("tp_reduce_scatter_s", &C::tp_reduce_scatter_s, false),  // sequence parallelism
      NumberField("pp_send_s", &C::pp_send_s, false),                      // pipeline parallelism (issue 17)
      NumberField("pp_recv_s", &C::pp_recv_s, false),
  };
  return fields;
}

Status ReadExpertLoad(const json& v, const std::string& w, const std::string& f, ProbeStep* s) {
  if (!v.is_array()) return BadInput(w, f, "must be an array of rows", Shown(v));
  s->expert_load.assign(v.size(), {});
  for (size_t l = 0; l < v.size(); ++l) {
    const std::string row = f + "[" + std::to_string(l) + "]";
    if (!v[l].is_array()) return BadInput(w, row, "must be an array of token counts", Shown(v[l]));
    s->expert_load[l].assign(v[l].size(), 0);
    for (size_t e = 0; e < v[l].size(); ++e)
      ONBOARD_RETURN_IF_ERROR(
          ReadCount(v[l][e], w, row + "[" + std::to_string(e) + "]", &s->expert_load[l][e]));
  }
  return Status::Ok();
}

Status ReadIndexerKl(const json& v, const std::string& w, const std::string& f, ProbeStep* s) {
  if (!v.is_array()) return BadInput(w, f, "must be an array", Shown(v));
  s->indexer_kl.assign(v.size(), 0.0);
  for (size_t l = 0; l < v.size(); ++l)
    ONBOARD_RETURN_IF_ERROR(ReadNumber(v[l], true, w, f + "[" + std::to_string(l) + "]", &s->indexer_kl[l]));
  return Status::Ok();
}

Status ReadBubbleByRank(const json& v, const std::string& w, const std::string& f, ProbeStep* s) {
  if (!v.is_array()) return BadInput(w, f, "must be an array", Shown(v));
  s->pp_bubble_by_rank.assign(v.size(), 0.0);
  for (size_t r = 0; r < v.size(); ++r)
    ONBOARD_RETURN_IF_ERROR(
        ReadNumber(v[r], false, w, f + "[" + std::to_string(r) + "]", &s->pp_bubble_by_rank[r]));
  return Status::Ok();
}

const std::vector<FieldCodec<ProbeStep>>& StepFields() {
  using S = ProbeStep;
  static const std::vector<FieldCodec<S>> fields = {
      CountField("step", &S::step),
      NumberField("loss", &S::loss, true),
      NumberField("grad_norm", &S::grad_norm, true),
      NumberField("lr", &S::lr, false),
      NumberField("accuracy", &S::accuracy, true),
      NumberField("step_s", &S::step_s, false),
      NumberField("tokens_per_s", &S::tokens_per_s, false),
      NumberField("compute_s", &S::compute_s, false),
      CountField("peak_rss_bytes", &S::peak_rss_bytes),
      CountField("live_peak_bytes", &S::live_peak_bytes),
      {"comm", [](const S& s) { return WriteObject(CommFields(), s.comm); },
       [](const json& v, const std::string& w, const std::string& f, S* s) {
         return ReadObject(CommFields(), v, w, f, &s->comm);
       }},
      {"expert_load", [](const S& s) { return json(s.expert_load); }, ReadExpertLoad},
      {"indexer_kl",
       [](const S& s) {
         json a = json::array();
         for (double v : s.indexer_kl) a.push_back(WriteNumber(v));
         return a;
       },
       ReadIndexerKl},
      NumberField("pp_bubble", &S::pp_bubble, false),  // pipeline parallelism (issue 17)
      {"pp_bubble_by_rank", [](const S& s) { return json(s.pp_bubble_by_rank); }, ReadBubbleByRank},
  };
  return fields;
}

}  // namespace

json ProbeStepToJson(const ProbeStep& step) { return WriteObject(StepFields(), step); }

Expected<ProbeStep> ProbeStepFromJson(const json& j, const std::string& where) {
  ProbeStep s;
  ONBOARD_RETURN_IF_ERROR(ReadObject(StepFields(), j, where, "", &s));
  return s;
}

std::string ProbeStepToLine(const ProbeStep& step) { return ProbeStepToJson(step).dump() + "\n"; }

Expected<ProbeStep> ProbeStepFromLine(const std::string& line, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return BadInput(where, "json", std::string("not a JSON record: ") + e.what(), line);
  }
  return ProbeStepFromJson(j, where);
}

}  // namespace onboard::backends
