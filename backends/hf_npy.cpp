// .npy writer and untrusted reader (see hf_npy.h). Units: bytes.
#include "backends/hf_npy.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "parsers/mapped_file.h"

namespace onboard {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint64_t kMaxHeaderBytes = 1u << 20;  // real headers are < 200 bytes

// The value text after `'key':` in the header dict, up to the next top-level ',' or '}'.
std::string DictValue(const std::string& h, const std::string& key) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t i = h.find(':', k);
  if (i == std::string::npos) return "";
  ++i;
  int depth = 0;
  size_t j = i;
  for (; j < h.size(); ++j) {
    if (h[j] == '(') ++depth;
    else if (h[j] == ')') --depth;
    else if (depth == 0 && (h[j] == ',' || h[j] == '}')) break;
  }
  std::string v = h.substr(i, j - i);
  const size_t a = v.find_first_not_of(' '), b = v.find_last_not_of(' ');
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

Expected<std::vector<int64_t>> ParseShape(const std::string& path, const std::string& v) {
  if (v.size() < 2 || v.front() != '(' || v.back() != ')') return BadInput(path, "shape", "must be a tuple", v);
  std::vector<int64_t> shape;
  int64_t cur = -1;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    const char ch = v[i];
    if (ch >= '0' && ch <= '9') {
      if (cur > (int64_t{1} << 40)) return BadInput(path, "shape", "dimension too large", v);
      cur = (cur < 0 ? 0 : cur * 10) + (ch - '0');
    } else if (ch == ',') {
      if (cur < 0) return BadInput(path, "shape", "empty dimension", v);
      shape.push_back(cur);
      cur = -1;
    } else if (ch != ' ') {
      return BadInput(path, "shape", "unexpected character", v);
    }
  }
  if (cur >= 0) shape.push_back(cur);
  return shape;
}

}  // namespace

Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    n *= shape[i];
  }
  if (shape.size() == 1) dims += ",";  // a 1-tuple is "(n,)"
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError(path + ": cannot open for writing");
  out.write(kMagic, kMagicLen);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char le[2] = {char(len & 0xff), char(len >> 8)};
  out.write(le, 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(n * 4));
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

Expected<NpyArray> ReadNpy(const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  // Step 1: magic, version, header length (bounded by the file).
  if (f.size() < kMagicLen + 4 || std::memcmp(f.data(), kMagic, kMagicLen) != 0)
    return BadInput(path, "magic", "not a .npy file", std::to_string(f.size()) + " bytes");
  const uint8_t major = f.data()[6];
  if (major < 1 || major > 3) return BadInput(path, "version", "unsupported", std::to_string(major));
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (f.size() < kMagicLen + 2 + len_bytes) return BadInput(path, "header_len", "file truncated");
  uint64_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i) hlen |= uint64_t(f.data()[8 + i]) << (8 * i);
  const uint64_t start = kMagicLen + 2 + len_bytes;
  if (hlen > kMaxHeaderBytes || hlen > f.size() - start)
    return BadInput(path, "header_len", "runs past the end of the file", std::to_string(hlen));
  const std::string h(reinterpret_cast<const char*>(f.data() + start), hlen);
  // Step 2: the dict fields.
  const std::string descr = DictValue(h, "descr");
  if (descr != "'<f4'" && descr != "'<f8'") return BadInput(path, "descr", "expected '<f4' or '<f8'", descr);
  if (DictValue(h, "fortran_order") != "False")
    return BadInput(path, "fortran_order", "expected False", DictValue(h, "fortran_order"));
  NpyArray a;
  ONBOARD_ASSIGN_OR_RETURN(a.shape, ParseShape(path, DictValue(h, "shape")));
  // Step 3: element count against the bytes present.
  const uint64_t esize = descr == "'<f4'" ? 4 : 8;
  uint64_t n = 1;
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return BadInput(path, "shape", "element count overflows");
  const uint64_t data_at = start + hlen;
  if (n > (f.size() - data_at) / esize || n * esize != f.size() - data_at)
    return BadInput(path, "shape", "data bytes do not match the shape (" + std::to_string(f.size() - data_at) + " bytes)",
                    DictValue(h, "shape"));
  a.data.resize(n);
  const uint8_t* p = f.data() + data_at;
  for (uint64_t i = 0; i < n; ++i) {
    if (esize == 4) {
      std::memcpy(&a.data[i], p + 4 * i, 4);
    } else {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      a.data[i] = float(d);
    }
  }
  return a;
}

}  // namespace onboard
