// RoPE inverse frequencies and rotation (see hf_rope.h).
// Formulas (modeling_rope_utils.py):
//   default: inv_freq[i] = theta^(-2i/D)
//   linear:  default / factor
//   llama3:  wavelen = 2pi/inv_freq; > orig/low_freq_factor -> inv_freq/factor; < orig/high_freq_factor
//            -> inv_freq; between: (1-s) inv_freq/factor + s inv_freq, s = (orig/wavelen - low)/(high - low)
//   yarn:    ramp over [low, high] = correction range of beta_fast/beta_slow rotations at orig context;
//            inv_freq = interp (1 - e) + extrap e, e = 1 - ramp; attention factor = mscale ratio
#include "backends/hf_rope.h"

#include <cmath>

namespace onboard {
namespace {

constexpr double kPi = 3.14159265358979323846;

double CorrectionDim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * kPi)) / (2 * std::log(base));
}

torch::Tensor YarnInvFreq(const RopeSpec& r, const torch::Tensor& extrap, double* attention_factor) {
  const double d = double(r.dim);
  double low = CorrectionDim(r.beta_fast, d, r.theta, double(r.original_max));
  double high = CorrectionDim(r.beta_slow, d, r.theta, double(r.original_max));
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, d - 1);
  if (low == high) high += 0.001;  // HF: prevent a singular ramp
  const torch::Tensor ramp =
      ((torch::arange(r.dim / 2, torch::kDouble) - low) / (high - low)).clamp(0.0, 1.0);
  const torch::Tensor extrap_factor = 1.0 - ramp;
  const torch::Tensor interp = extrap / r.factor;
  if (r.attention_factor) {
    *attention_factor = *r.attention_factor;
  } else if (r.mscale != 0.0 && r.mscale_all_dim != 0.0) {
    *attention_factor = YarnMscale(r.factor, r.mscale) / YarnMscale(r.factor, r.mscale_all_dim);
  } else {
    *attention_factor = YarnMscale(r.factor, 1.0);
  }
  return interp * (1.0 - extrap_factor) + extrap * extrap_factor;
}

torch::Tensor Llama3InvFreq(const RopeSpec& r, const torch::Tensor& inv) {
  const double orig = double(r.original_max);
  const double low_wavelen = orig / r.low_freq_factor;
  const double high_wavelen = orig / r.high_freq_factor;
  const torch::Tensor wavelen = 2 * kPi / inv;
  const torch::Tensor scaled = torch::where(wavelen > low_wavelen, inv / r.factor, inv);
  const torch::Tensor smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  const torch::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const torch::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

torch::Tensor RopeInvFreq(const RopeSpec& r, double* attention_factor) {
  *attention_factor = 1.0;
  const torch::Tensor exponent = torch::arange(0, r.dim, 2, torch::kDouble) / double(r.dim);
  const torch::Tensor inv = 1.0 / torch::pow(torch::full({}, r.theta, torch::kDouble), exponent);
  switch (r.type) {
    case RopeType::kDefault: return inv;
    case RopeType::kLinear: return inv / r.factor;
    case RopeType::kLlama3: return Llama3InvFreq(r, inv);
    case RopeType::kYarn: return YarnInvFreq(r, inv, attention_factor);
  }
  return inv;
}

RopeTables MakeRopeTables(const RopeSpec& r, int64_t seq, torch::ScalarType dtype) {
  double factor = 1.0;
  const torch::Tensor inv = RopeInvFreq(r, &factor).to(dtype);
  const torch::Tensor pos = torch::arange(seq, torch::TensorOptions().dtype(dtype));
  const torch::Tensor freqs = pos.unsqueeze(1) * inv.unsqueeze(0);  // [S, D/2]
  const torch::Tensor emb = torch::cat({freqs, freqs}, 1);          // [S, D]
  return {emb.cos() * factor, emb.sin() * factor};
}

RopeTables MakeMropeTables(const RopeSpec& r, const HfMrope& m, torch::ScalarType dtype) {
  double factor = 1.0;
  const torch::Tensor inv = RopeInvFreq(r, &factor).to(dtype);  // [D/2]
  std::vector<int64_t> row_of;
  for (int64_t row = 0; row < int64_t(m.section.size()); ++row)
    row_of.insert(row_of.end(), size_t(m.section[size_t(row)]), row);
  ONBOARD_ASSERT(int64_t(row_of.size()) == inv.size(0), "mrope_section must cover the rotary frequencies");
  const torch::Tensor pos =
      m.positions.to(dtype).index_select(0, torch::tensor(row_of, torch::kLong));  // [D/2, S]
  const torch::Tensor freqs = pos.t() * inv.unsqueeze(0);                          // [S, D/2]
  const torch::Tensor emb = torch::cat({freqs, freqs}, 1);
  return {emb.cos() * factor, emb.sin() * factor};
}

torch::Tensor ApplyRope(const torch::Tensor& x_in, const RopeTables& t, bool interleave) {
  const int64_t d = x_in.size(-1);
  torch::Tensor x = x_in;
  if (interleave) x = x.reshape({x.size(0), x.size(1), d / 2, 2}).transpose(2, 3).reshape({x.size(0), x.size(1), d});
  const torch::Tensor x1 = x.narrow(-1, 0, d / 2);
  const torch::Tensor x2 = x.narrow(-1, d / 2, d / 2);
  const torch::Tensor rotated = torch::cat({-x2, x1}, -1);
  const torch::Tensor cos = t.cos.unsqueeze(1), sin = t.sin.unsqueeze(1);  // [S, 1, D]
  return x * cos + rotated * sin;
}

}  // namespace onboard
