// SafetensorsCheckpoint: the weights of a checkpoint directory, mapped (never copied) and handed out
// as bounds-checked byte spans; plus the dequantisers that turn those bytes into a compute dtype.
//
// A directory holds either model.safetensors.index.json (+ the shards it names) or exactly one
// *.safetensors file. Every header is read by the untrusted-header parser (safetensors_header.cpp):
// overlapping offsets and a dtype whose byte count disagrees with the shape are refused there. Here:
// an index naming a shard that is not on disk, and a tensor asked for that is not in the checkpoint.
// Errors are kBadInput (exit 2) naming the file, the tensor and the expected vs actual value.
//
// Units: bytes are bytes; element counts are scalars. "Touched" bytes = bytes of the tensors whose
// spans were handed out (the pages a forward reads), against DataBytes() of the whole checkpoint.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "parsers/safetensors.h"

namespace onboard {

// "[a,b,c]" for error messages.
std::string ShapeText(const std::vector<int64_t>& shape);

// One tensor's header facts and its bytes inside the mapping.
struct WeightRef {
  const TensorInfo* info = nullptr;
  ConstByteSpan bytes;
};

// A window of a tensor viewed as [R, C] (R = shape[0], C = the other dims' product; 1-D: C = 1):
// rows [r0, r0 + nr), columns [c0, c0 + nc); `rows[i]` holds the nc elements of row r0 + i only.
struct WeightWindow {
  const TensorInfo* info = nullptr;
  int64_t r0 = 0, nr = 0, c0 = 0, nc = 0;
  std::vector<ConstByteSpan> rows;
};

// The `*.safetensors` file names directly in `dir`, sorted; empty when it has none or cannot be read.
std::vector<std::string> SafetensorsFilesIn(const std::string& dir);

class SafetensorsCheckpoint {
 public:
  // Maps every shard of `dir` (index or single file). kNotFound when the directory has neither.
  [[nodiscard]] static Expected<SafetensorsCheckpoint> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const TensorInventory& inventory() const { return inventory_; }
  bool Has(const std::string& name) const { return inventory_.Find(name) != nullptr; }
  // The tensor's bytes; a name not in the checkpoint is kBadInput naming the directory and tensor.
  [[nodiscard]] Expected<WeightRef> Get(const std::string& name) const;
  // Only the window's bytes (a tensor-parallel rank's rows or columns); kBadInput naming the tensor
  // when the window leaves the tensor.
  [[nodiscard]] Expected<WeightWindow> GetWindow(const std::string& name, int64_t r0, int64_t nr, int64_t c0,
                                                 int64_t nc) const;
  // The same over the tensor viewed row-major as [view_rows, numel / view_rows] (a slab of an N-d
  // tensor: dims before a split dim as rows, the rest as columns); view_rows must divide numel.
  [[nodiscard]] Expected<WeightWindow> GetWindowAs(const std::string& name, int64_t view_rows, int64_t r0,
                                                   int64_t nr, int64_t c0, int64_t nc) const;
  // Distinct bytes handed out by Get / GetWindow so far (a byte handed out twice counts once).
  uint64_t touched_bytes() const { return touched_->load(); }
  uint64_t data_bytes() const { return inventory_.DataBytes(); }

 private:
  std::string dir_;
  TensorInventory inventory_;                                 // sorted by name, every entry has_header
  std::vector<std::unique_ptr<MappedTensorFile>> shards_;     // by shard file name order
  std::map<std::string, size_t> shard_of_file_;               // TensorInfo::file -> shards_ index
  std::shared_ptr<std::atomic<uint64_t>> touched_ = std::make_shared<std::atomic<uint64_t>>(0);
  // Per tensor: the byte intervals [begin, end) handed out, merged (offsets inside the tensor).
  using Intervals = std::map<uint64_t, uint64_t>;
  std::shared_ptr<std::map<std::string, Intervals>> seen_ =
      std::make_shared<std::map<std::string, Intervals>>();
  void Touch(const std::string& name, uint64_t begin, uint64_t end) const;
};

// ---- Dequantisation (safetensors_dequant.cpp) -------------------------------------------------
// Out is a row-major buffer of `T` (float or double) with the tensor's element count (MXFP4: the
// unpacked count). Each returns kBadInput naming the tensor when the dtype or shapes do not fit.

// FP8 E4M3 (OCP "fn": bias 7, no infinities, 0x7f/0xff NaN) and E8M0 (2^(e-127)) element decoders.
float Fp8E4M3ToFloat(uint8_t v);
float Bf16ToFloat(uint16_t v);
float F16ToFloat(uint16_t v);

// F64, F32, BF16, F16, F8_E4M3 (without scales) -> T.
template <typename T>
[[nodiscard]] Status DecodePlain(const WeightRef& w, T* out);
// The window's elements -> out [nr, nc]; with `scale_inv` (F8_E4M3 [R, C] weights) each element times
// its 128x128 block's scale, as DequantFp8Blocks. scale_inv is a window of the scale tensor that covers
// the weight window's blocks (Fp8ScaleWindow's rectangle): a rank reads only its blocks' scales.
template <typename T>
[[nodiscard]] Status DecodeWindow(const WeightWindow& w, const WeightWindow* scale_inv, T* out);
// The block rectangle of scale_inv that weight rows [r0, r0 + nr) x columns [c0, c0 + nc) use:
// rows [r0 / B, ceil((r0 + nr) / B)), columns likewise (empty when nr or nc is 0). Units: blocks.
struct Fp8ScaleRect {
  int64_t r0 = 0, nr = 0, c0 = 0, nc = 0;
};
Fp8ScaleRect Fp8ScaleWindow(int64_t r0, int64_t nr, int64_t c0, int64_t nc);

// DeepSeek block FP8: weight F8_E4M3 [rows, cols], scale_inv F32/BF16 [ceil(rows/B), ceil(cols/B)];
// out[r][c] = fp8(w[r][c]) * scale_inv[r / B][c / B] with B = kFp8BlockSize.
constexpr int64_t kFp8BlockSize = 128;
template <typename T>
[[nodiscard]] Status DequantFp8Blocks(const WeightRef& w, const WeightRef& scale_inv, T* out);

// gpt-oss MXFP4: blocks U8 [..., G, 16] (two e2m1 values per byte, low nibble first), scales U8
// [..., G] (e8m0 exponents, bias 127); out [..., G * 32].
constexpr int64_t kMxfp4BlockBytes = 16;
template <typename T>
[[nodiscard]] Status DequantMxfp4(const WeightRef& blocks, const WeightRef& scales, T* out);

}  // namespace onboard
