// safetensors: header reader, index reader, tensor inventory, mmap tensor access, and the
// cross-check of an inventory against the ModelIR built from config.json.
//
// File layout (https://github.com/huggingface/safetensors):
//   [0, 8)            u64 little-endian N = header length in bytes
//   [8, 8 + N)        UTF-8 JSON: {"__metadata__": {str: str}, "<tensor>": {"dtype": "BF16",
//                     "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//   [8 + N, EOF)      data; data_offsets are relative to 8 + N.
// Every byte is untrusted: errors are kBadInput naming file, field ("<tensor>.data_offsets") and value.
// Units: byte offsets/sizes in bytes; element counts in scalars.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"
#include "parsers/mapped_file.h"
#include "parsers/safetensors_dtype.h"

namespace onboard {

// Header larger than this is refused (the format's reference implementation uses 100 MB).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100ull * 1000 * 1000;

struct TensorInfo {
  std::string name;                 // "model.layers.0.self_attn.q_proj.weight"
  std::optional<SafetensorsDtype> storage;  // the header's dtype; nullopt when !has_header (compare this)
  std::string dtype_name;         // SafetensorsDtypeName(*storage): "BF16", "U8", "F8_E4M3"; "" when unknown
  DType dtype = DType::kUnknown;  // SafetensorsDtypeIr(*storage) (U8 -> kU8, F8_* -> kFP8, ...)
  std::vector<int64_t> shape;       // empty for a scalar
  uint64_t begin = 0;               // absolute byte offset in `file` (already includes 8 + N)
  uint64_t end = 0;                 // absolute, exclusive
  std::string file;                 // shard path (as found beside the index) or the file read
  bool has_header = false;          // dtype/shape/bytes known (false: name + shard from an index only)

  int64_t numel() const;            // product of shape (1 for a scalar)
  uint64_t bytes() const { return end - begin; }
};

struct TensorInventory {
  std::string source;                          // file or index path it was read from
  std::vector<TensorInfo> tensors;             // sorted by name
  std::vector<std::string> shards;             // distinct shard file names (index) or {source}
  std::map<std::string, std::string> metadata; // "__metadata__" of a file; index "metadata" as strings
  int64_t declared_total_bytes = -1;           // index metadata.total_size, -1 when absent
  int64_t shards_read = 0;                     // shard headers found beside the index and read
  bool all_headers = false;                    // every tensor has_header
  std::vector<std::string> warnings;           // non-fatal findings (gaps, total_size mismatch)

  const TensorInfo* Find(const std::string& name) const;  // nullptr when absent
  uint64_t DataBytes() const;        // sum of bytes() over tensors with headers
  // Parameters as ModelIR counts them: numel, except MXFP4 "*_blocks" (U8, 2 values per byte) count
  // 2 * numel, and quantisation scales ("*_scales" U8, fp8 "*.weight_scale_inv") count 0. Only tensors
  // with headers contribute.
  int64_t ParamCount() const;
};

// Reads one .safetensors file's header (not its data). Missing file -> kNotFound.
[[nodiscard]] Expected<TensorInventory> ReadSafetensorsFile(const std::string& path);

// Parses the header from the first `available` bytes of a file of `file_size` bytes (available must
// cover 8 + header length when the file is well formed; less is reported as truncation).
[[nodiscard]] Expected<TensorInventory> ParseSafetensorsPrefix(const uint8_t* data, size_t available,
                                                               uint64_t file_size, const std::string& origin);

// Parses a whole safetensors file held in memory (the fuzz entry; `origin` names it in errors).
[[nodiscard]] Expected<TensorInventory> ParseSafetensorsBytes(const std::string& bytes,
                                                              const std::string& origin);

// Reads model.safetensors.index.json. Works from the index alone (names + shard files); for each
// shard present beside the index, its header is read and fills dtype/shape/byte range (a tensor the
// shard header does not list, or lists differently, is kBadInput).
[[nodiscard]] Expected<TensorInventory> ReadSafetensorsIndex(const std::string& index_path);

// Parses index JSON text; shard headers are looked up in `shard_dir` unless it is empty.
[[nodiscard]] Expected<TensorInventory> ParseSafetensorsIndexText(const std::string& text,
                                                                  const std::string& origin,
                                                                  const std::string& shard_dir);

// One tensor the IR implies, in HF naming (safetensors_expected_names.cpp).
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;   // empty when the family's layout is not pinned down
  int64_t params = 0;           // parameters this tensor carries (MXFP4 blocks unpacked, scales 0)
};

// The HF tensor names (and shapes) a ModelIR implies: llama/mistral/qwen2/qwen3 dense, mixtral,
// qwen2_moe/qwen3_moe, deepseek_v2/v3 (MLA + MoE), gpt_oss (MXFP4 experts). Unknown model_type ->
// llama naming with a warning in `warnings`.
constexpr int64_t kMaxExpectedTensors = 4000000;  // DeepSeek-V3 has ~92k; more means a hostile config
std::vector<ExpectedTensor> ExpectedTensorNames(const ModelIR& model, std::vector<std::string>* warnings);

struct CrossCheckReport {
  int64_t expected_tensors = 0;
  int64_t inventory_tensors = 0;
  std::vector<std::string> missing;      // expected by the IR, absent from the inventory (sorted)
  std::vector<std::string> extra;        // in the inventory, not expected (sorted)
  std::vector<std::string> shape_mismatch;  // "name: expected [a,b] got [c,d]"
  bool shapes_known = false;             // inventory had headers for every tensor
  int64_t ir_params = 0;                 // ComputeStats(model).total_params
  int64_t expected_params = 0;           // sum over ExpectedTensorNames params
  int64_t inventory_params = 0;          // TensorInventory::ParamCount() (0 when !shapes_known)
  int64_t param_diff = 0;                // inventory_params - ir_params (0 when !shapes_known)
  bool agree = false;                    // no missing, no extra, no shape mismatch, param_diff == 0
  std::vector<std::string> warnings;

  std::string Summary() const;           // one line: "687 tensors, 0 missing, 0 extra, params ..."
};

CrossCheckReport CrossCheckInventory(const TensorInventory& inventory, const ModelIR& model);

// A mapped .safetensors file: header parsed, data mapped read-only, tensors handed out as spans.
class MappedTensorFile {
 public:
  [[nodiscard]] static Expected<MappedTensorFile> Open(const std::string& path);

  const TensorInventory& inventory() const { return inventory_; }
  // The tensor's bytes, bounds-checked against the mapping. Unknown name -> kNotFound.
  [[nodiscard]] Expected<ConstByteSpan> TensorBytes(const std::string& name) const;

 private:
  MappedFile file_;
  TensorInventory inventory_;
};

// Writes a .safetensors file (used by tests and examples): tensors laid out in the given order.
struct TensorToWrite {
  std::string name;
  std::string dtype_name;  // "F32", "BF16", ... (ParseSafetensorsDtype's spelling)
  std::vector<int64_t> shape;
  std::string data;             // raw bytes; size must equal numel * element size
};
[[nodiscard]] Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorToWrite>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

}  // namespace onboard
