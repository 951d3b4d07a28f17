// safetensors header reader: 8-byte little-endian length + JSON header, validated byte by byte.
// Units: offsets and sizes in bytes; numel in elements.
#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "parsers/safetensors.h"

namespace onboard {
namespace {

using json = nlohmann::json;

// A JSON value as one short line for error messages.
std::string Show(const json& v) { return v.dump(-1, ' ', true, json::error_handler_t::replace); }

// Step 3: one tensor entry {"dtype", "shape", "data_offsets"}; offsets checked against data_size.
Expected<TensorInfo> ParseEntry(const std::string& origin, const std::string& name, const json& entry,
                                uint64_t data_start, uint64_t data_size) {
  if (!entry.is_object()) return BadInput(origin, name, "tensor entry must be an object", Show(entry));
  auto dt = entry.find("dtype");
  if (dt == entry.end() || !dt->is_string())
    return BadInput(origin, name + ".dtype", "missing or not a string", dt == entry.end() ? "" : Show(*dt));
  ONBOARD_ASSIGN_OR_RETURN(const SafetensorsDtype dtype,
                           ParseSafetensorsDtype(origin, name + ".dtype", dt->get<std::string>()));

  TensorInfo t;
  t.name = name;
  t.storage = dtype;
  t.dtype_name = SafetensorsDtypeName(dtype);
  t.dtype = SafetensorsDtypeIr(dtype);
  t.file = origin;
  t.has_header = true;

  auto sh = entry.find("shape");
  if (sh == entry.end() || !sh->is_array())
    return BadInput(origin, name + ".shape", "missing or not an array", sh == entry.end() ? "" : Show(*sh));
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : *sh) {
    if (!d.is_number_integer())
      return BadInput(origin, name + ".shape", "dimension is not an integer", Show(d));
    if (d.is_number_unsigned() ? d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                               : d.get<int64_t>() < 0)
      return BadInput(origin, name + ".shape", "dimension is negative or exceeds int64", Show(d));
    const uint64_t dim = d.is_number_unsigned() ? d.get<uint64_t>() : uint64_t(d.get<int64_t>());
    t.shape.push_back(static_cast<int64_t>(dim));
    overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
  }
  uint64_t nbytes = 0;
  if (overflow || numel > uint64_t(std::numeric_limits<int64_t>::max()) ||
      __builtin_mul_overflow(numel, uint64_t(SafetensorsDtypeBytes(dtype)), &nbytes))
    return BadInput(origin, name + ".shape", "element count overflows", Show(*sh));

  auto off = entry.find("data_offsets");
  if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return BadInput(origin, name + ".data_offsets", "must be [begin, end] with non-negative integers",
                    off == entry.end() ? "" : Show(*off));
  const uint64_t begin = (*off)[0].get<uint64_t>();
  const uint64_t end = (*off)[1].get<uint64_t>();
  if (begin > end) return BadInput(origin, name + ".data_offsets", "begin > end", Show(*off));
  if (end > data_size)
    return BadInput(origin, name + ".data_offsets",
                    "runs past the end of the data section (" + std::to_string(data_size) + " bytes)", Show(*off));
  if (end - begin != nbytes)
    return BadInput(origin, name + ".data_offsets",
                    "byte length does not match dtype*shape (" + std::to_string(nbytes) + " bytes expected)",
                    Show(*off));
  t.begin = data_start + begin;
  t.end = data_start + end;
  return t;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow when read
  return n;
}

const TensorInfo* TensorInventory::Find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return (it != tensors.end() && it->name == name) ? &*it : nullptr;
}

uint64_t TensorInventory::DataBytes() const {
  uint64_t sum = 0;
  for (const auto& t : tensors)
    if (t.has_header) sum += t.bytes();
  return sum;
}

static bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t TensorInventory::ParamCount() const {
  int64_t sum = 0;
  for (const auto& t : tensors) {
    if (!t.has_header) continue;
    if (EndsWith(t.name, "_scales") && t.storage == SafetensorsDtype::kU8) continue;  // MXFP4 e8m0 scales
    if (EndsWith(t.name, ".weight_scale_inv")) continue;                          // fp8 block scales
    if (EndsWith(t.name, "_blocks") && t.storage == SafetensorsDtype::kU8)
      sum += 2 * t.numel();  // 2 fp4 per byte
    else sum += t.numel();
  }
  return sum;
}

Expected<TensorInventory> ParseSafetensorsPrefix(const uint8_t* data, size_t available, uint64_t file_size,
                                                 const std::string& origin) {
  // Step 1: the 8-byte little-endian header length, capped and checked against the file size.
  if (file_size < 8 || available < 8)
    return BadInput(origin, "header_length", "file is shorter than the 8-byte header length",
                    std::to_string(file_size) + " bytes");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kSafetensorsMaxHeaderBytes)
    return BadInput(origin, "header_length",
                    "exceeds the cap of " + std::to_string(kSafetensorsMaxHeaderBytes) + " bytes", std::to_string(n));
  if (n > file_size - 8)
    return BadInput(origin, "header_length",
                    "header runs past the end of the file (" + std::to_string(file_size) + " bytes)",
                    std::to_string(n));
  if (n > available - 8)
    return BadInput(origin, "header_length", "file was truncated while reading the header", std::to_string(n));

  // Step 2: the JSON header (no exceptions: a parse failure yields a discarded value).
  const char* text = reinterpret_cast<const char*>(data + 8);
  json header = json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return BadInput(origin, "header", "is not valid JSON", std::string(text, std::min<uint64_t>(n, 60)));
  if (!header.is_object()) return BadInput(origin, "header", "must be a JSON object", Show(header));

  TensorInventory inv;
  inv.source = origin;
  inv.shards = {origin};
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = file_size - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return BadInput(origin, "__metadata__", "must be an object of strings", Show(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return BadInput(origin, "__metadata__." + m.key(), "must be a string", Show(*m));
        inv.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    // Step 3: each tensor entry.
    ONBOARD_ASSIGN_OR_RETURN(TensorInfo t, ParseEntry(origin, it.key(), *it, data_start, data_size));
    inv.tensors.push_back(std::move(t));
  }

  // Step 4: byte ranges must not overlap (zero-length tensors may share an offset).
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : inv.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = data_start;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < covered && t->bytes() > 0)
      return BadInput(origin, t->name + ".data_offsets", "overlaps tensor '" + (prev ? prev->name : "") + "'",
                      "[" + std::to_string(t->begin - data_start) + "," + std::to_string(t->end - data_start) + "]");
    if (t->begin > covered)
      inv.warnings.push_back("gap of " + std::to_string(t->begin - covered) + " bytes before '" + t->name + "'");
    if (t->end >= covered) {
      covered = t->end;
      prev = t;
    }
  }

  std::sort(inv.tensors.begin(), inv.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  inv.all_headers = true;
  inv.shards_read = 1;
  return inv;
}

Expected<TensorInventory> ParseSafetensorsBytes(const std::string& bytes, const std::string& origin) {
  return ParseSafetensorsPrefix(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), bytes.size(), origin);
}

Expected<TensorInventory> ReadSafetensorsFile(const std::string& path) {
  // The mapping is lazy: only the pages of the 8-byte length and the header are ever touched.
  ONBOARD_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return ParseSafetensorsPrefix(file.data(), file.size(), file.size(), path);
}

Expected<MappedTensorFile> MappedTensorFile::Open(const std::string& path) {
  MappedTensorFile f;
  ONBOARD_ASSIGN_OR_RETURN(f.file_, MappedFile::Open(path));
  ONBOARD_ASSIGN_OR_RETURN(f.inventory_, ParseSafetensorsPrefix(f.file_.data(), f.file_.size(), f.file_.size(), path));
  return f;
}

Expected<ConstByteSpan> MappedTensorFile::TensorBytes(const std::string& name) const {
  const TensorInfo* t = inventory_.Find(name);
  if (t == nullptr) return NotFound(file_.path() + ": tensor '" + name + "'");
  return file_.Slice(t->begin, t->bytes(), name + ".data_offsets");
}

}  // namespace onboard
