// Dequantisers: safetensors element bytes -> float/double (see safetensors_weights.h).
// Layouts (little-endian, row-major):
//   BF16 = upper 16 bits of an IEEE f32; F16 = IEEE binary16;
//   F8_E4M3 (OCP fn): s eeee mmm, bias 7, e=0 subnormal (m/8 * 2^-6), 0x7f/0xff NaN, no infinity;
//   MXFP4 (OCP MX, gpt-oss): e2m1 values {0, .5, 1, 1.5, 2, 3, 4, 6} (bit 3 = sign), two per byte with
//   the low nibble first; one e8m0 scale 2^(s-127) per block of 16 bytes (32 values).
// Units: element counts; B = kFp8BlockSize rows/cols per fp8 scale.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "parsers/safetensors_weights.h"

namespace onboard {
namespace {

Status WrongDType(const WeightRef& w, const std::string& expected) {
  return BadInput(w.info->file, w.info->name + ".dtype", "expected " + expected, w.info->dtype_name);
}

template <typename U>
U LoadLE(const uint8_t* p) {
  U v;
  std::memcpy(&v, p, sizeof(U));  // the mapping may be unaligned; x86/arm64 hosts are little-endian
  return v;
}

// Element `i` of a F32/BF16 scale tensor.
float ScaleAt(const WeightRef& s, int64_t i) {
  if (s.info->storage == SafetensorsDtype::kF32) return LoadLE<float>(s.bytes.data + 4 * i);
  return Bf16ToFloat(LoadLE<uint16_t>(s.bytes.data + 2 * i));
}

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float F16ToFloat(uint16_t v) {
  const int sign = (v >> 15) & 1;
  const int exp = (v >> 10) & 0x1f;
  const int man = v & 0x3ff;
  float mag;
  if (exp == 0) mag = std::ldexp(float(man), -24);                         // subnormal: m * 2^-24
  else if (exp == 31) mag = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else mag = std::ldexp(float(1024 + man), exp - 25);                      // (1 + m/1024) * 2^(e-15)
  return sign ? -mag : mag;
}

float Fp8E4M3ToFloat(uint8_t v) {
  const int sign = v >> 7;
  const int exp = (v >> 3) & 0xf;
  const int man = v & 0x7;
  float mag;
  if (exp == 0xf && man == 0x7) mag = std::numeric_limits<float>::quiet_NaN();
  else if (exp == 0) mag = std::ldexp(float(man), -9);                      // m/8 * 2^-6
  else mag = std::ldexp(float(8 + man), exp - 10);                          // (1 + m/8) * 2^(e-7)
  return sign ? -mag : mag;
}

namespace {

// n elements of dtype `dt` from p -> out; false for a dtype this decoder does not know.
// (F8_E5M2 is not F8_E4M3: it is refused, not decoded with the e4m3 layout.)
template <typename T>
bool DecodeElements(std::optional<SafetensorsDtype> dt, const uint8_t* p, int64_t n, T* out) {
  if (!dt) return false;
  switch (*dt) {
    case SafetensorsDtype::kF32:
      for (int64_t i = 0; i < n; ++i) out[i] = T(LoadLE<float>(p + 4 * i));
      return true;
    case SafetensorsDtype::kF64:
      for (int64_t i = 0; i < n; ++i) out[i] = T(LoadLE<double>(p + 8 * i));
      return true;
    case SafetensorsDtype::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = T(Bf16ToFloat(LoadLE<uint16_t>(p + 2 * i)));
      return true;
    case SafetensorsDtype::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = T(F16ToFloat(LoadLE<uint16_t>(p + 2 * i)));
      return true;
    case SafetensorsDtype::kF8_E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = T(Fp8E4M3ToFloat(p[i]));
      return true;
    default:
      return false;
  }
}

constexpr const char* kPlainDtypes = "F64, F32, BF16, F16 or F8_E4M3";

// scale_inv must be [ceil(R/B), ceil(C/B)] for weight [R, C] (F32/BF16).
Status CheckBlockScales(const TensorInfo& w, const WeightRef& s) {
  if (s.info->storage != SafetensorsDtype::kF32 && s.info->storage != SafetensorsDtype::kBF16)
    return WrongDType(s, "F32 or BF16");
  if (w.shape.size() != 2)
    return BadInput(w.file, w.name + ".shape", "fp8 weight must be 2-D", ShapeText(w.shape));
  const std::vector<int64_t> want = {(w.shape[0] + kFp8BlockSize - 1) / kFp8BlockSize,
                                     (w.shape[1] + kFp8BlockSize - 1) / kFp8BlockSize};
  if (s.info->shape != want)
    return BadInput(s.info->file, s.info->name + ".shape",
                    "expected " + ShapeText(want) + " for weight " + ShapeText(w.shape),
                    ShapeText(s.info->shape));
  return Status::Ok();
}

}  // namespace

template <typename T>
Status DecodePlain(const WeightRef& w, T* out) {
  if (!DecodeElements(w.info->storage, w.bytes.data, w.info->numel(), out))
    return WrongDType(w, kPlainDtypes);
  return Status::Ok();
}

Fp8ScaleRect Fp8ScaleWindow(int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  if (nr <= 0 || nc <= 0) return {r0 / kFp8BlockSize, 0, c0 / kFp8BlockSize, 0};
  const int64_t br0 = r0 / kFp8BlockSize, bc0 = c0 / kFp8BlockSize;
  return {br0, (r0 + nr - 1) / kFp8BlockSize + 1 - br0, bc0, (c0 + nc - 1) / kFp8BlockSize + 1 - bc0};
}

template <typename T>
Status DecodeWindow(const WeightWindow& w, const WeightWindow* s, T* out) {
  const WeightRef whole{w.info, {}};
  if (s && w.info->storage != SafetensorsDtype::kF8_E4M3) return WrongDType(whole, "F8_E4M3");
  if (s) ONBOARD_RETURN_IF_ERROR(CheckBlockScales(*w.info, WeightRef{s->info, {}}));
  if (s) {  // the scale window must cover the weight window's blocks
    const Fp8ScaleRect want = Fp8ScaleWindow(w.r0, w.nr, w.c0, w.nc);
    ONBOARD_ASSERT(s->r0 <= want.r0 && s->r0 + s->nr >= want.r0 + want.nr && s->c0 <= want.c0 &&
                       s->c0 + s->nc >= want.c0 + want.nc,
                   "fp8 scale window does not cover the weight window: " + w.info->name);
  }
  for (int64_t i = 0; i < w.nr; ++i) {
    T* dst = out + i * w.nc;
    if (!DecodeElements(w.info->storage, w.rows[size_t(i)].data, w.nc, dst))
      return WrongDType(whole, kPlainDtypes);
    if (!s) continue;
    const WeightRef srow{s->info, s->rows[size_t((w.r0 + i) / kFp8BlockSize - s->r0)]};
    for (int64_t j = 0; j < w.nc; ++j) dst[j] *= T(ScaleAt(srow, (w.c0 + j) / kFp8BlockSize - s->c0));
  }
  return Status::Ok();
}

template <typename T>
Status DequantFp8Blocks(const WeightRef& w, const WeightRef& s, T* out) {
  if (w.info->storage != SafetensorsDtype::kF8_E4M3) return WrongDType(w, "F8_E4M3");
  // Step 1: shapes: weight [R, C], scale_inv [ceil(R/B), ceil(C/B)].
  ONBOARD_RETURN_IF_ERROR(CheckBlockScales(*w.info, s));
  const int64_t rows = w.info->shape[0], cols = w.info->shape[1];
  const int64_t scale_cols = s.info->shape[1];
  // Step 2: out = fp8 value * its block's scale.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t srow = (r / kFp8BlockSize) * scale_cols;
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = T(Fp8E4M3ToFloat(w.bytes.data[r * cols + c])) * T(ScaleAt(s, srow + c / kFp8BlockSize));
  }
  return Status::Ok();
}

template <typename T>
Status DequantMxfp4(const WeightRef& b, const WeightRef& s, T* out) {
  if (b.info->storage != SafetensorsDtype::kU8) return WrongDType(b, "U8 (packed e2m1 pairs)");
  if (s.info->storage != SafetensorsDtype::kU8) return WrongDType(s, "U8 (e8m0 exponents)");
  // Step 1: shapes: blocks [..., G, 16], scales [..., G].
  const std::vector<int64_t>& bs = b.info->shape;
  if (bs.size() < 2 || bs.back() != kMxfp4BlockBytes)
    return BadInput(b.info->file, b.info->name + ".shape", "expected [..., G, 16]", ShapeText(bs));
  const std::vector<int64_t> want(bs.begin(), bs.end() - 1);
  if (s.info->shape != want)
    return BadInput(s.info->file, s.info->name + ".shape", "expected " + ShapeText(want), ShapeText(s.info->shape));
  // Step 2: per block: 32 values = e2m1 lut * 2^(scale - 127).
  const int64_t blocks = s.info->numel();
  for (int64_t g = 0; g < blocks; ++g) {
    const int exp = int(s.bytes.data[g]) - 127;
    const uint8_t* src = b.bytes.data + g * kMxfp4BlockBytes;
    T* dst = out + g * 2 * kMxfp4BlockBytes;
    for (int64_t j = 0; j < kMxfp4BlockBytes; ++j) {
      const uint8_t lo = src[j] & 0xf, hi = src[j] >> 4;
      dst[2 * j] = T(std::ldexp((lo & 8) ? -kE2M1[lo & 7] : kE2M1[lo & 7], exp));
      dst[2 * j + 1] = T(std::ldexp((hi & 8) ? -kE2M1[hi & 7] : kE2M1[hi & 7], exp));
    }
  }
  return Status::Ok();
}

template Status DecodePlain<float>(const WeightRef&, float*);
template Status DecodePlain<double>(const WeightRef&, double*);
template Status DecodeWindow<float>(const WeightWindow&, const WeightWindow*, float*);
template Status DecodeWindow<double>(const WeightWindow&, const WeightWindow*, double*);
template Status DequantFp8Blocks<float>(const WeightRef&, const WeightRef&, float*);
template Status DequantFp8Blocks<double>(const WeightRef&, const WeightRef&, double*);
template Status DequantMxfp4<float>(const WeightRef&, const WeightRef&, float*);
template Status DequantMxfp4<double>(const WeightRef&, const WeightRef&, double*);

}  // namespace onboard
