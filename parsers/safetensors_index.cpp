// model.safetensors.index.json reader: {"metadata": {"total_size": N}, "weight_map": {tensor: shard}}.
// Works from the index alone (names + shard files); shard headers found beside it fill dtype/shape/bytes.
#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "parsers/safetensors.h"

namespace onboard {
namespace {

using json = nlohmann::json;

// Index files are a few MB at most even for 100k-tensor checkpoints.
constexpr uint64_t kMaxIndexBytes = 256ull * 1000 * 1000;

std::string Show(const json& v) { return v.dump(-1, ' ', true, json::error_handler_t::replace); }

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// Step 1: metadata (total_size may be written as a number or a decimal string).
Status ReadMetadata(const std::string& origin, const json& root, TensorInventory* inv) {
  auto md = root.find("metadata");
  if (md == root.end() || md->is_null()) return Status::Ok();
  if (!md->is_object()) return BadInput(origin, "metadata", "must be an object", Show(*md));
  for (auto it = md->begin(); it != md->end(); ++it)
    inv->metadata[it.key()] = it->is_string() ? it->get<std::string>() : Show(*it);
  auto ts = md->find("total_size");
  if (ts == md->end()) return Status::Ok();
  if (ts->is_number_unsigned() && ts->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())) {
    inv->declared_total_bytes = static_cast<int64_t>(ts->get<uint64_t>());
  } else if (ts->is_number_float() && ts->get<double>() >= 0 && ts->get<double>() < 9.2e18 &&
             ts->get<double>() == double(int64_t(ts->get<double>()))) {
    inv->declared_total_bytes = static_cast<int64_t>(ts->get<double>());
  } else if (ts->is_string() && !ts->get<std::string>().empty() && ts->get<std::string>().size() <= 18 &&
             ts->get<std::string>().find_first_not_of("0123456789") == std::string::npos) {
    inv->declared_total_bytes = std::stoll(ts->get<std::string>());
  } else {
    return BadInput(origin, "metadata.total_size", "must be a non-negative integer", Show(*ts));
  }
  return Status::Ok();
}

}  // namespace

Expected<TensorInventory> ParseSafetensorsIndexText(const std::string& text, const std::string& origin,
                                                    const std::string& shard_dir) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return BadInput(origin, "(document)", "is not valid JSON", text.substr(0, 60));
  if (!root.is_object()) return BadInput(origin, "(document)", "must be a JSON object", Show(root).substr(0, 60));

  TensorInventory inv;
  inv.source = origin;
  ONBOARD_RETURN_IF_ERROR(ReadMetadata(origin, root, &inv));

  // Step 2: weight_map; shard names must be plain file names (no directories, no "..").
  auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object())
    return BadInput(origin, "weight_map", "missing or not an object", wm == root.end() ? "" : Show(*wm));
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return BadInput(origin, "weight_map." + it.key(), "shard must be a string", Show(*it));
    const std::string shard = it->get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == ".." ||
        shard.find('\0') != std::string::npos)
      return BadInput(origin, "weight_map." + it.key(), "shard must be a plain file name", shard);
    TensorInfo t;
    t.name = it.key();
    t.file = shard;
    inv.tensors.push_back(std::move(t));
    shards.insert(shard);
  }
  inv.shards.assign(shards.begin(), shards.end());
  std::sort(inv.tensors.begin(), inv.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });

  // Step 3: shard headers present beside the index fill dtype/shape/byte ranges.
  if (!shard_dir.empty()) {
    for (const std::string& shard : inv.shards) {
      const std::string path = shard_dir + "/" + shard;
      if (!FileExists(path)) continue;
      ONBOARD_ASSIGN_OR_RETURN(TensorInventory header, ReadSafetensorsFile(path));
      ++inv.shards_read;
      int64_t listed = 0;
      for (TensorInfo& t : inv.tensors) {
        if (t.file != shard) continue;
        const TensorInfo* h = header.Find(t.name);
        if (h == nullptr) return BadInput(origin, "weight_map." + t.name, "tensor is not in the shard's header", shard);
        t = *h;
        ++listed;
      }
      if (listed != int64_t(header.tensors.size()))
        inv.warnings.push_back(shard + ": " + std::to_string(int64_t(header.tensors.size()) - listed) +
                               " tensors in the header are not in the index");
      for (auto& w : header.warnings) inv.warnings.push_back(shard + ": " + w);
    }
  }
  inv.all_headers = !inv.tensors.empty() &&
                    std::all_of(inv.tensors.begin(), inv.tensors.end(), [](const TensorInfo& t) { return t.has_header; });
  if (inv.all_headers && inv.declared_total_bytes >= 0 && uint64_t(inv.declared_total_bytes) != inv.DataBytes())
    inv.warnings.push_back("metadata.total_size " + std::to_string(inv.declared_total_bytes) +
                           " differs from the shards' tensor bytes " + std::to_string(inv.DataBytes()));
  return inv;
}

Expected<TensorInventory> ReadSafetensorsIndex(const std::string& index_path) {
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadFileCapped(index_path, kMaxIndexBytes, "(document)"));
  return ParseSafetensorsIndexText(text, index_path, DirName(index_path));
}

}  // namespace onboard
