// SafetensorsCheckpoint: maps a checkpoint directory's shards (see safetensors_weights.h).
// Units: bytes.
#include "parsers/safetensors_weights.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <iterator>

namespace onboard {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

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
  Touch(name, 0, span.size);
  return WeightRef{t, span};
}

Expected<WeightWindow> SafetensorsCheckpoint::GetWindow(const std::string& name, int64_t r0, int64_t nr,
                                                        int64_t c0, int64_t nc) const {
  const TensorInfo* t = inventory_.Find(name);
  if (t == nullptr) return BadInput(dir_, name, "tensor is missing from the checkpoint");
  return GetWindowAs(name, t->shape.empty() ? 1 : t->shape[0], r0, nr, c0, nc);
}

Expected<WeightWindow> SafetensorsCheckpoint::GetWindowAs(const std::string& name, int64_t view_rows,
                                                          int64_t r0, int64_t nr, int64_t c0,
                                                          int64_t nc) const {
  const TensorInfo* t = inventory_.Find(name);
  if (t == nullptr) return BadInput(dir_, name, "tensor is missing from the checkpoint");
  auto it = shard_of_file_.find(t->file);
  ONBOARD_ASSERT(it != shard_of_file_.end(), "tensor's shard was not mapped: " + t->file);
  ONBOARD_ASSIGN_OR_RETURN(ConstByteSpan span, shards_[it->second]->TensorBytes(name));
  // Step 1: the window inside [R, C]; the element size from the span (the header parser checked it).
  const int64_t rows = view_rows;
  ONBOARD_ASSERT(rows >= 0 && (rows == 0 ? t->numel() == 0 : t->numel() % rows == 0),
                 "view rows must divide the tensor: " + name);
  const int64_t cols = rows == 0 ? 0 : t->numel() / rows;
  if (r0 < 0 || nr < 0 || c0 < 0 || nc < 0 || r0 + nr > rows || c0 + nc > cols)
    return BadInput(t->file, name,
                    "window rows " + std::to_string(r0) + "+" + std::to_string(nr) + ", cols " +
                        std::to_string(c0) + "+" + std::to_string(nc) + " leaves the tensor",
                    ShapeText(t->shape));
  const uint64_t elem = t->numel() == 0 ? 0 : span.size / uint64_t(t->numel());
  // Step 2: one span per row (one for whole rows), each counted as touched.
  WeightWindow w{t, r0, nr, c0, nc, {}};
  for (int64_t r = r0; r < r0 + nr; ++r) {
    const uint64_t begin = (uint64_t(r) * uint64_t(cols) + uint64_t(c0)) * elem, size = uint64_t(nc) * elem;
    w.rows.push_back(ConstByteSpan{span.data + begin, size});
    Touch(name, begin, begin + size);
  }
  return w;
}

void SafetensorsCheckpoint::Touch(const std::string& name, uint64_t begin, uint64_t end) const {
  // Step: add [begin, end) minus what is already there, then merge the overlapping intervals.
  Intervals& iv = (*seen_)[name];
  uint64_t fresh = end - begin;
  auto i = iv.upper_bound(begin);
  if (i != iv.begin() && std::prev(i)->second >= begin) --i;
  while (i != iv.end() && i->first <= end) {
    fresh -= std::min(end, i->second) - std::max(begin, i->first);
    begin = std::min(begin, i->first);
    end = std::max(end, i->second);
    i = iv.erase(i);
  }
  iv[begin] = end;
  *touched_ += fresh;
}

}  // namespace onboard
