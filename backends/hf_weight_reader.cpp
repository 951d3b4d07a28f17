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

std::string HfWeightReader::Physical(const std::string& name) const {
  static const std::string kModel = "model.";
  if (root_ == kModel || name.compare(0, kModel.size(), kModel) != 0) return name;
  return root_ + name.substr(kModel.size());
}

std::string HfWeightDtypeName(const HfWeightDtype& d) {
  return d.mxfp4 ? "MXFP4" : SafetensorsDtypeName(d.storage);
}

void HfWeightReader::SawDtype(HfWeightDtype d) {
  if (std::find(dtypes_.begin(), dtypes_.end(), d) == dtypes_.end()) dtypes_.push_back(d);
}

Expected<const TensorInfo*> HfWeightReader::Lookup(const std::string& logical,
                                                   const std::vector<int64_t>& shape) {
  // Presence and shape (from the header: no bytes touched yet), named with the expected value.
  const std::string name = Physical(logical);
  const TensorInfo* info = ckpt_.inventory().Find(name);
  if (info == nullptr)
    return BadInput(ckpt_.dir(), name, "tensor is missing from the checkpoint (expected shape " + ShapeText(shape) + ")");
  if (info->shape != shape)
    return BadInput(info->file, name + ".shape", "expected " + ShapeText(shape), ShapeText(info->shape));
  used_.push_back(name);
  ONBOARD_ASSERT(info->storage.has_value(), "tensor with a shape but no dtype: " + name);
  SawDtype({*info->storage, /*mxfp4=*/false});
  return info;
}

Expected<torch::Tensor> HfWeightReader::Read(const std::string& name, const std::vector<int64_t>& shape) {
  // Step 1: presence and shape; then the window this rank owns (TP rows / columns, FSDP dim-0 chunk).
  ONBOARD_ASSIGN_OR_RETURN(const TensorInfo* info, Lookup(name, shape));
  const HfTpSplit split = tp_ > 1 ? HfTpSplitOf(name, expert_tp_) : HfTpSplit::kWhole;
  const bool expert = HfIsRoutedExpert(name);
  if (split != HfTpSplit::kWhole || fsdp(expert) > 1) return ReadWindow(*info, split, expert);
  ONBOARD_ASSIGN_OR_RETURN(WeightRef w, ckpt_.Get(info->name));

  // Step 2: block-fp8 scales beside the weight (DeepSeek: "<name>_scale_inv").
  std::optional<WeightRef> scale;
  const std::string scale_name = info->name + "_scale_inv";
  if (w.info->storage == SafetensorsDtype::kF8_E4M3 && ckpt_.Has(scale_name)) {
    ONBOARD_ASSIGN_OR_RETURN(scale, ckpt_.Get(scale_name));
    used_.push_back(scale_name);
  }

  // Step 3: same dtype and aligned -> a view of the mapping (read-only by contract: weights are never
  // written); otherwise one decoded tensor.
  const bool same = (dtype_ == torch::kFloat && w.info->storage == SafetensorsDtype::kF32) ||
                    (dtype_ == torch::kDouble && w.info->storage == SafetensorsDtype::kF64);
  const size_t align = dtype_ == torch::kDouble ? 8 : 4;
  if (same && !scale && reinterpret_cast<uintptr_t>(w.bytes.data) % align == 0)
    return torch::from_blob(const_cast<uint8_t*>(w.bytes.data), shape, torch::TensorOptions().dtype(dtype_));
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  const WeightRef* s = scale ? &*scale : nullptr;
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? Decode<double>(w, s, &out) : Decode<float>(w, s, &out));
  return out;
}

Expected<torch::Tensor> HfWeightReader::ReadRows(const std::string& name, const std::vector<int64_t>& shape,
                                                 int64_t r0, int64_t nr) {
  ONBOARD_ASSIGN_OR_RETURN(const TensorInfo* info, Lookup(name, shape));
  const int64_t rows = info->shape.empty() ? 1 : info->shape[0];
  return DecodeRect(*info, r0, nr, 0, rows == 0 ? 0 : info->numel() / rows);
}

Expected<torch::Tensor> HfWeightReader::ReadWindow(const TensorInfo& t, HfTpSplit split, bool expert) {
  // Step 1: the TP window of [R, C]: this rank's rows (dim 0) or columns (dim 1); a rank-0-only
  // tensor elsewhere: none.
  if (split == HfTpSplit::kRank0 && tp_rank_ != 0) return torch::Tensor();
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0], cols = rows == 0 ? 0 : t.numel() / rows;
  int64_t r0 = 0, nr = rows, c0 = 0, nc = cols;
  const bool by_rows = split == HfTpSplit::kRows, by_cols = split == HfTpSplit::kCols;
  if ((by_rows && rows % tp_ != 0) || (by_cols && cols % tp_ != 0))
    return BadInput(t.file, t.name + ".shape", "must divide by tp=" + std::to_string(tp_),
                    ShapeText(t.shape));
  if (by_rows) nr = rows / tp_, r0 = tp_rank_ * nr;
  if (by_cols) nc = cols / tp_, c0 = tp_rank_ * nc;
  // Step 2: FSDP2's dim-0 chunk of what TP leaves.
  const HfRowSpan f = HfFsdpRows(nr, fsdp(expert), fsdp_rank(expert));
  return DecodeRect(t, r0 + f.begin, f.len, c0, nc);
}

Expected<torch::Tensor> HfWeightReader::DecodeRect(const TensorInfo& t, int64_t r0, int64_t nr, int64_t c0,
                                                   int64_t nc) {
  // Step 1: only the window's bytes, and of block-fp8 scales only the blocks the window covers.
  ONBOARD_ASSIGN_OR_RETURN(WeightWindow w, ckpt_.GetWindow(t.name, r0, nr, c0, nc));
  std::optional<WeightWindow> scale;
  const std::string scale_name = t.name + "_scale_inv";
  if (t.storage == SafetensorsDtype::kF8_E4M3 && ckpt_.Has(scale_name)) {
    const TensorInfo* si = ckpt_.inventory().Find(scale_name);
    if (t.shape.size() != 2 || si->shape.size() != 2)  // the decoder names the expected shapes
      return BadInput(si->file, scale_name + ".shape",
                      "block scales of a 2-D fp8 weight " + ShapeText(t.shape), ShapeText(si->shape));
    const Fp8ScaleRect b = Fp8ScaleWindow(r0, nr, c0, nc);
    if (b.r0 + b.nr > si->shape[0] || b.c0 + b.nc > si->shape[1])
      return BadInput(si->file, scale_name + ".shape",
                      "expected " +
                          ShapeText({(t.shape[0] + kFp8BlockSize - 1) / kFp8BlockSize,
                                     (t.shape[1] + kFp8BlockSize - 1) / kFp8BlockSize}) +
                          " for weight " + ShapeText(t.shape),
                      ShapeText(si->shape));
    ONBOARD_ASSIGN_OR_RETURN(scale, ckpt_.GetWindow(scale_name, b.r0, b.nr, b.c0, b.nc));
    used_.push_back(scale_name);
  }
  // Step 2: decode the window: [nr, ...] (rows) or the columns along the one trailing dim wider than 1
  // ([R, nc] of a 2-D weight; [1, 1, nc, 1] of KDA's A_log).
  std::vector<int64_t> shape = t.shape.empty() ? std::vector<int64_t>{1} : t.shape;
  const int64_t cols = shape[0] == 0 ? 0 : t.numel() / shape[0];
  shape[0] = nr;
  if (nc != cols) {
    size_t along = 0, wide = 0;
    for (size_t j = 1; j < shape.size(); ++j)
      if (shape[j] > 1) along = j, ++wide;
    ONBOARD_ASSERT(wide == 1, "a column window needs one trailing dim wider than 1: " + t.name);
    shape[along] = nc;
  }
  if (t.shape.empty()) shape.clear();
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  const WeightWindow* s = scale ? &*scale : nullptr;
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? DecodeWindow<double>(w, s, out.data_ptr<double>())
                                                   : DecodeWindow<float>(w, s, out.data_ptr<float>()));
  return out;
}

Expected<WeightWindow> HfWeightReader::SlabWindow(const TensorInfo& t, int64_t r0, int64_t nr, int64_t dim,
                                                  int64_t d0, int64_t nd) {
  // [E, a_1 .. a_{dim-1}, D, b ...] as rows E * prod(a) x columns D * prod(b): one rectangle.
  ONBOARD_ASSERT(dim >= 1 && size_t(dim) < t.shape.size(), "slab dim outside the tensor: " + t.name);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 1; k < dim; ++k) outer *= t.shape[size_t(k)];
  for (size_t k = size_t(dim) + 1; k < t.shape.size(); ++k) inner *= t.shape[k];
  return ckpt_.GetWindowAs(t.name, t.shape[0] * outer, r0 * outer, nr * outer, d0 * inner, nd * inner);
}

Expected<torch::Tensor> HfWeightReader::ReadSlab(const std::string& name, const std::vector<int64_t>& shape,
                                                 int64_t r0, int64_t nr, int64_t dim, int64_t d0,
                                                 int64_t nd) {
  ONBOARD_ASSIGN_OR_RETURN(const TensorInfo* info, Lookup(name, shape));
  ONBOARD_ASSIGN_OR_RETURN(WeightWindow w, SlabWindow(*info, r0, nr, dim, d0, nd));
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = nr;
  out_shape[size_t(dim)] = nd;
  torch::Tensor out = torch::empty(out_shape, torch::TensorOptions().dtype(dtype_));
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble ? DecodeWindow<double>(w, nullptr, out.data_ptr<double>())
                                                   : DecodeWindow<float>(w, nullptr, out.data_ptr<float>()));
  return out;
}

Expected<torch::Tensor> HfWeightReader::ReadMxfp4(const std::string& prefix,
                                                  const std::vector<int64_t>& shape, int64_t r0, int64_t nr,
                                                  int64_t dim, int64_t d0, int64_t nd) {
  // Step 1: both tensors present, blocks shaped [..., out, in/32, 16] (scales are checked by the decoder).
  const std::string bname = Physical(prefix) + "_blocks", sname = Physical(prefix) + "_scales";
  constexpr int64_t kValuesPerBlock = 2 * kMxfp4BlockBytes;
  std::vector<int64_t> want(shape.begin(), shape.end() - 1);
  want.push_back(shape.back() / kValuesPerBlock);
  want.push_back(kMxfp4BlockBytes);
  for (const std::string* n : {&bname, &sname})
    if (!ckpt_.Has(*n))
      return BadInput(ckpt_.dir(), *n,
                      "tensor is missing from the checkpoint (MXFP4 of shape " + ShapeText(shape) + ")");
  const TensorInfo* bi = ckpt_.inventory().Find(bname);
  if (shape.back() % kValuesPerBlock != 0 || bi->shape != want)
    return BadInput(bi->file, bname + ".shape", "expected " + ShapeText(want), ShapeText(bi->shape));
  const TensorInfo* si = ckpt_.inventory().Find(sname);
  if (si->shape.size() + 1 != want.size())
    return BadInput(si->file, sname + ".shape",
                    "expected " + ShapeText(std::vector<int64_t>(want.begin(), want.end() - 1)),
                    ShapeText(si->shape));
  for (const std::string* n : {&bname, &sname}) used_.push_back(*n);
  SawDtype({SafetensorsDtype::kU8, /*mxfp4=*/true});
  // Step 2: the slab of both: experts [r0, r0 + nr), and out rows (dim 1) or in blocks (dim 2) of the
  // range; in columns split by whole blocks. Gathered into contiguous bytes of the slab's shape.
  const int64_t last = int64_t(shape.size()) - 1;
  if (nr < 0) nr = shape[0] - r0;
  if (nd < 0) d0 = 0, nd = shape[size_t(dim)];
  const bool cols = dim == last;
  ONBOARD_ASSERT(!cols || (d0 % kValuesPerBlock == 0 && nd % kValuesPerBlock == 0),
                 "MXFP4 column slab must cover whole blocks: " + prefix);
  const int64_t b0 = cols ? d0 / kValuesPerBlock : d0, bn = cols ? nd / kValuesPerBlock : nd;
  TensorInfo part[2];
  std::string bytes[2];
  WeightRef ref[2];
  for (int i = 0; i < 2; ++i) {
    const TensorInfo& t = i == 0 ? *bi : *si;
    ONBOARD_ASSIGN_OR_RETURN(WeightWindow w, SlabWindow(t, r0, nr, dim, b0, bn));
    for (const ConstByteSpan& row : w.rows)
      bytes[i].append(reinterpret_cast<const char*>(row.data), row.size);
    part[i] = t;
    part[i].shape[0] = nr;
    part[i].shape[size_t(dim)] = bn;
    ref[i] = {&part[i], ConstByteSpan{reinterpret_cast<const uint8_t*>(bytes[i].data()), bytes[i].size()}};
  }
  // Step 3: decode to the compute dtype.
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = nr;
  out_shape[size_t(dim)] = nd;
  torch::Tensor out = torch::empty(out_shape, torch::TensorOptions().dtype(dtype_));
  ONBOARD_RETURN_IF_ERROR(dtype_ == torch::kDouble
                              ? DequantMxfp4<double>(ref[0], ref[1], out.data_ptr<double>())
                              : DequantMxfp4<float>(ref[0], ref[1], out.data_ptr<float>()));
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
