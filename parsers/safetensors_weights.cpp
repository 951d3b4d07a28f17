// SafetensorsCheckpoint: maps a checkpoint directory's shards (see safetensors_weights.h).
// Units: bytes.
#include "parsers/safetensors_weights.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

namespace onboard {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> SafetensorsFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (EndsWith(n, ".safetensors")) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

Expected<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir_in) {
  SafetensorsCheckpoint c;
  c.dir_ = dir_in;
  while (c.dir_.size() > 1 && c.dir_.back() == '/') c.dir_.pop_back();
  const std::string index = c.dir_ + "/model.safetensors.index.json";

  // Step 1: the shard list, from the index or the one .safetensors file.
  std::vector<std::string> files;
  const bool indexed = IsFile(index);
  TensorInventory inv;
  if (indexed) {
    // Shards present have their headers read and compared with the index here.
    ONBOARD_ASSIGN_OR_RETURN(inv, ReadSafetensorsIndex(index));
    for (const std::string& shard : inv.shards)
      if (!IsFile(c.dir_ + "/" + shard))
        return BadInput(index, "weight_map", "names a shard that is not in the directory", shard);
    files = inv.shards;
  } else {
    files = SafetensorsFilesIn(c.dir_);
    if (files.empty()) return NotFound(c.dir_ + ": no model.safetensors.index.json and no *.safetensors file");
    if (files.size() > 1)
      return BadInput(c.dir_, "model.safetensors.index.json",
                      "several .safetensors files but no index naming which tensor lives where",
                      std::to_string(files.size()) + " files");
  }

  // Step 2: map each shard (its header is parsed as untrusted input) and merge the inventories.
  c.inventory_.source = indexed ? index : c.dir_ + "/" + files[0];
  for (const std::string& f : files) {
    ONBOARD_ASSIGN_OR_RETURN(MappedTensorFile mapped, MappedTensorFile::Open(c.dir_ + "/" + f));
    c.shard_of_file_[mapped.inventory().source] = c.shards_.size();
    for (const TensorInfo& t : mapped.inventory().tensors) c.inventory_.tensors.push_back(t);
    for (const std::string& w : mapped.inventory().warnings) c.inventory_.warnings.push_back(f + ": " + w);
    c.inventory_.shards.push_back(f);
    c.shards_.push_back(std::make_unique<MappedTensorFile>(std::move(mapped)));
  }
  std::sort(c.inventory_.tensors.begin(), c.inventory_.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < c.inventory_.tensors.size(); ++i)
    if (c.inventory_.tensors[i].name == c.inventory_.tensors[i - 1].name)
      return BadInput(c.inventory_.tensors[i].file, c.inventory_.tensors[i].name,
                      "tensor also appears in another shard", c.inventory_.tensors[i - 1].file);

  // Step 3: with an index, the shards hold exactly the tensors it lists (each was found in its shard).
  if (indexed) {
    if (inv.tensors.size() != c.inventory_.tensors.size())
      return BadInput(index, "weight_map", "lists a different number of tensors than the shards hold",
                      std::to_string(inv.tensors.size()) + " listed vs " +
                          std::to_string(c.inventory_.tensors.size()) + " in shards");
  }
  c.inventory_.all_headers = true;
  c.inventory_.shards_read = int64_t(files.size());
  return c;
}

Expected<WeightRef> SafetensorsCheckpoint::Get(const std::string& name) const {
  const TensorInfo* t = inventory_.Find(name);
  if (t == nullptr) return BadInput(dir_, name, "tensor is missing from the checkpoint");
  auto it = shard_of_file_.find(t->file);
  ONBOARD_ASSERT(it != shard_of_file_.end(), "tensor's shard was not mapped: " + t->file);
  ONBOARD_ASSIGN_OR_RETURN(ConstByteSpan span, shards_[it->second]->TensorBytes(name));
  if (!(*seen_)[name]) {
    (*seen_)[name] = true;
    *touched_ += span.size;
  }
  return WeightRef{t, span};
}

}  // namespace onboard
