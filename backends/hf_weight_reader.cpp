// HfWeightReader: checkpoint tensor by name -> torch tensor of the expected shape in the compute
// dtype (see hf_model.h). Units: shapes in elements.
#include <algorithm>
#include <cstdint>

#include "backends/hf_model.h"

namespace onboard {
namespace {

template <typename T>
Status Decode(const WeightRef& w, const WeightRef* scale_inv, torch::Tensor* out) {
  T* dst = out->data_ptr<T>();
  return scale_inv ? DequantFp8Blocks<T>(w, *scale_inv, dst) : DecodePlain<T>(w, dst);
}

}  // namespace

Expected<torch::Tensor> HfWeightReader::Read(const std::string& name, const std::vector<int64_t>& shape) {
  // Step 1: presence and shape (from the header: no bytes touched yet), named with the expected value.
  const TensorInfo* info = ckpt_.inventory().Find(name);
  if (info == nullptr)
    return BadInput(ckpt_.dir(), name, "tensor is missing from the checkpoint (expected shape " + ShapeText(shape) + ")");
  if (info->shape != shape)
    return BadInput(info->file, name + ".shape", "expected " + ShapeText(shape), ShapeText(info->shape));
  used_.push_back(name);
  if (std::find(dtypes_.begin(), dtypes_.end(), info->dtype_name) == dtypes_.end())
    dtypes_.push_back(info->dtype_name);
  const HfTpSplit split = tp_ > 1 ? HfTpSplitOf(name) : HfTpSplit::kWhole;
  if (split != HfTpSplit::kWhole) return ReadTpWindow(*info, split);
  ONBOARD_ASSIGN_OR_RETURN(WeightRef w, ckpt_.Get(name));

  // Step 2: block-fp8 scales beside the weight (DeepSeek: "<name>_scale_inv").
  std::optional<WeightRef> scale;
  const std::string scale_name = name + "_scale_inv";
  if (w.info->dtype_name == "F8_E4M3" && ckpt_.Has(scale_name)) {
    ONBOARD_ASSIGN_OR_RETURN(scale, ckpt_.Get(scale_name));
    used_.push_back(scale_name);
  }

  // Step 3: same dtype and aligned -> a view of the mapping (read-only by contract: weights are never
  // written); otherwise one decoded tensor.
  const bool same = (dtype_ == torch::kFloat && w.info->dtype_name == "F32") ||
                    (dtype_ == torch::kDouble && w.info->dtype_name == "F64");
  const size_t align = dtype_ == torch::kDouble ? 8 : 4;
  if (same && !scale && reinterpret_cast<uintptr_t>(w.bytes.data) % align == 0)
    return torch::from_blob(const_cast<uint8_t*>(w.bytes.data), shape, torch::TensorOptions().dtype(dtype_));
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  const WeightRef* s = scale ? &*scale : nullptr;
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? Decode<double>(w, s, &out) : Decode<float>(w, s, &out));
  return out;
}

Expected<torch::Tensor> HfWeightReader::ReadTpWindow(const TensorInfo& t, HfTpSplit split) {
  // Step 1: this rank's rows (dim 0) or columns (dim 1) of [R, C]; a rank-0-only tensor elsewhere: none.
  if (split == HfTpSplit::kRank0 && tp_rank_ != 0) return torch::Tensor();
  const int64_t rows = t.shape[0], cols = rows == 0 ? 0 : t.numel() / rows;
  const bool by_cols = split == HfTpSplit::kCols;
  const int64_t n = split == HfTpSplit::kRank0 ? 1 : tp_, extent = by_cols ? cols : rows;
  if (extent % n != 0)
    return BadInput(t.file, t.name + ".shape", "must divide by tp=" + std::to_string(tp_),
                    ShapeText(t.shape));
  const int64_t len = extent / n, begin = split == HfTpSplit::kRank0 ? 0 : tp_rank_ * len;
  ONBOARD_ASSIGN_OR_RETURN(WeightWindow w, by_cols ? ckpt_.GetWindow(t.name, 0, rows, begin, len)
                                                   : ckpt_.GetWindow(t.name, begin, len, 0, cols));
  // Step 2: block-fp8 scales (whole: 1/16384 of the weight), then decode the window only.
  std::optional<WeightRef> scale;
  const std::string scale_name = t.name + "_scale_inv";
  if (t.dtype_name == "F8_E4M3" && ckpt_.Has(scale_name)) {
    ONBOARD_ASSIGN_OR_RETURN(scale, ckpt_.Get(scale_name));
    used_.push_back(scale_name);
  }
  std::vector<int64_t> shape = t.shape;
  shape[by_cols ? 1 : 0] = len;
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  const WeightRef* s = scale ? &*scale : nullptr;
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? DecodeWindow<double>(w, s, out.data_ptr<double>())
                                                   : DecodeWindow<float>(w, s, out.data_ptr<float>()));
  return out;
}

Expected<torch::Tensor> HfWeightReader::ReadMxfp4(const std::string& prefix,
                                                  const std::vector<int64_t>& shape) {
  // Step 1: both tensors present, blocks shaped [..., out, in/32, 16] (scales are checked by the decoder).
  const std::string bname = prefix + "_blocks", sname = prefix + "_scales";
  constexpr int64_t kValuesPerBlock = 2 * kMxfp4BlockBytes;
  std::vector<int64_t> want(shape.begin(), shape.end() - 1);
  want.push_back(shape.back() / kValuesPerBlock);
  want.push_back(kMxfp4BlockBytes);
  for (const std::string* n : {&bname, &sname})
    if (!ckpt_.Has(*n))
      return BadInput(ckpt_.dir(), *n,
                      "tensor is missing from the checkpoint (MXFP4 of shape " + ShapeText(shape) + ")");
  ONBOARD_ASSIGN_OR_RETURN(WeightRef b, ckpt_.Get(bname));
  ONBOARD_ASSIGN_OR_RETURN(WeightRef s, ckpt_.Get(sname));
  if (shape.back() % kValuesPerBlock != 0 || b.info->shape != want)
    return BadInput(b.info->file, bname + ".shape", "expected " + ShapeText(want), ShapeText(b.info->shape));
  for (const std::string* n : {&bname, &sname}) used_.push_back(*n);
  if (std::find(dtypes_.begin(), dtypes_.end(), "MXFP4") == dtypes_.end()) dtypes_.push_back("MXFP4");
  // Step 2: decode to the compute dtype.
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? DequantMxfp4<double>(b, s, out.data_ptr<double>())
                                                   : DequantMxfp4<float>(b, s, out.data_ptr<float>()));
  return out;
}

Expected<HfLinear> HfWeightReader::Linear(const std::string& prefix, int64_t out, int64_t in, bool bias) {
  HfLinear l;
  ONBOARD_ASSIGN_OR_RETURN(l.w, Read(prefix + ".weight", {out, in}));
  if (bias) {
    ONBOARD_ASSIGN_OR_RETURN(l.b, Read(prefix + ".bias", {out}));
  }
  return l;
}

Expected<HfMlpWeights> HfWeightReader::Mlp(const std::string& prefix, int64_t hidden, int64_t inter,
                                           const char* gate, const char* up, const char* down) {
  HfMlpWeights m;
  ONBOARD_ASSIGN_OR_RETURN(m.gate, Linear(prefix + "." + gate, inter, hidden, false));
  ONBOARD_ASSIGN_OR_RETURN(m.up, Linear(prefix + "." + up, inter, hidden, false));
  ONBOARD_ASSIGN_OR_RETURN(m.down, Linear(prefix + "." + down, hidden, inter, false));
  return m;
}

}  // namespace onboard
