// WriteSafetensorsFile: the inverse of the header reader (tests, examples, tiny checkpoints).
// Layout: u64 LE header length, JSON header padded with spaces to a multiple of 8, data in order.
#include <fstream>

#include <nlohmann/json.hpp>

#include "parsers/safetensors.h"

namespace onboard {

Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorToWrite>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    ONBOARD_ASSIGN_OR_RETURN(const SafetensorsDtype dtype,
                             ParseSafetensorsDtype(path, t.name + ".dtype", t.dtype_name));
    const int elem = SafetensorsDtypeBytes(dtype);
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return BadInput(path, t.name + ".shape", "negative dimension", std::to_string(d));
      numel *= uint64_t(d);
    }
    if (numel * uint64_t(elem) != t.data.size())
      return BadInput(path, t.name + ".data", "size does not match dtype*shape", std::to_string(t.data.size()));
    header[t.name] = {{"dtype", SafetensorsDtypeName(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError(path + ": cannot open for writing");
  uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const auto& t : tensors) out.write(t.data.data(), std::streamsize(t.data.size()));
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace onboard
