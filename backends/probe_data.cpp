// Probe training data (see probe_data.h).
#include "backends/probe_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "backends/probe_image.h"
#include "backends/probe_lookup.h"

namespace onboard::backends {
namespace {

constexpr int64_t kBos = 10;       // '\n'
constexpr int64_t kFirstSymbol = 'a';

std::mt19937_64 SeqRng(uint64_t seed, int64_t step, int64_t j) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<uint64_t>(step) * 0xC2B2AE3D27D4EB4Full + static_cast<uint64_t>(j) * 0x165667B19E3779F9ull;
  return std::mt19937_64(h);
}

}  // namespace

// Lookup task (probe_lookup.h): triples (a, b, Y[a][b]) after BOS; only the values are counted.
void ProbeData::FillLookup(std::mt19937_64& rng, int64_t T, at::TensorAccessor<int64_t, 1> seq,
                           at::TensorAccessor<float, 1> mask) const {
  const int64_t keys = cfg_.lookup_keys, n = LookupTriples(T);
  std::uniform_int_distribution<int64_t> key(0, keys - 1);
  seq[0] = kBos;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = key(rng), b = key(rng), t = 1 + 3 * i;
    seq[t] = 'A' + a;
    seq[t + 1] = 'a' + b;
    seq[t + 2] = 128 + lookup_[static_cast<size_t>(a * keys + b)];
    mask[t + 1] = 1.0f;  // target of b's position: the value
  }
  for (int64_t t = 3 * n + 1; t <= T; ++t) seq[t] = 'A' + key(rng);  // filler
}

ProbeData::ProbeData(const ProxySpec& spec, const ProbeConfig& config, int64_t symbol_offset,
                     double unshifted_share)
    : cfg_(config), vision_(spec.vision), symbol_offset_(symbol_offset), unshifted_share_(unshifted_share) {
  if (symbol_offset_ != 0) cfg_.seed = cfg_.seed * 31u + static_cast<uint64_t>(symbol_offset_);  // other sequences
  if (cfg_.task == ProbeTask::kText) {
    std::ifstream f(cfg_.text_file, std::ios::binary);
    if (!f) {
      status_ = NotFound("probe text file " + cfg_.text_file);
      return;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    text_ = ss.str();
    Expected<TextSplit> split = SplitText(cfg_.text_file, static_cast<int64_t>(text_.size()), cfg_.seq);
    if (!split.ok())
      status_ = split.status();
    else
      split_ = *split;
  }
  if (cfg_.task == ProbeTask::kLookup) lookup_ = LookupTable(cfg_.lookup_keys, cfg_.lookup_values);
  if (cfg_.task == ProbeTask::kCopy && kFirstSymbol + symbol_offset_ + cfg_.copy_symbols > 256)
    status_ = BadInput("probe", "copy_symbols", "'a' + symbol offset " + std::to_string(symbol_offset_) +
                       " + copy_symbols must stay below 256", std::to_string(cfg_.copy_symbols));
  if (spec.vocab < 256)
    status_ = BadInput("probe", "vocab", "byte-level tasks need vocab >= 256", std::to_string(spec.vocab));
}

int64_t ProbeData::CountedTokensPerStep() const {
  if (cfg_.task == ProbeTask::kLookup) return cfg_.batch * LookupTriples(cfg_.seq);
  if (cfg_.task == ProbeTask::kImage) return cfg_.batch * ImageTokens(vision_);
  return cfg_.batch * (cfg_.task == ProbeTask::kCopy ? CopyHalf(cfg_.seq) : cfg_.seq);
}

Batch ProbeData::Get(int64_t step, int64_t first, int64_t count) const {
  const int64_t T = cfg_.seq, h = CopyHalf(T);
  at::Tensor seqs = at::zeros({count, T + 1}, at::kLong);
  at::Tensor mask = at::zeros({count, T}, at::kFloat);
  auto sa = seqs.accessor<int64_t, 2>();
  auto ma = mask.accessor<float, 2>();
  const bool image = cfg_.task == ProbeTask::kImage;
  at::Tensor images = image ? at::zeros({count, vision_.image, vision_.image, 3}, at::kFloat) : at::Tensor();
  for (int64_t i = 0; i < count; ++i) {
    std::mt19937_64 rng = SeqRng(cfg_.seed, step, first + i);
    if (image) {  // probe_image.h; the no_image control blanks the pixels only
      FillImageSequence(rng, vision_, T, seqs[i].data_ptr<int64_t>(), mask[i].data_ptr<float>(),
                        images[i].data_ptr<float>(), cfg_.control == kControlNoImage);
    } else if (cfg_.task == ProbeTask::kCopy) {
      // h distinct symbols (partial Fisher-Yates over the alphabet): every copied token has one
      // source, so a look-back (induction) head can reach 100% exact match.
      std::vector<int64_t> alphabet(static_cast<size_t>(cfg_.copy_symbols));
      for (int64_t k = 0; k < cfg_.copy_symbols; ++k) alphabet[static_cast<size_t>(k)] = k;
      std::uniform_real_distribution<double> coin(0.0, 1.0);
      const int64_t shift = symbol_offset_;
      sa[i][0] = kBos;
      for (int64_t t = 1; t <= h; ++t) {
        std::uniform_int_distribution<int64_t> pick(t - 1, cfg_.copy_symbols - 1);
        std::swap(alphabet[static_cast<size_t>(t - 1)], alphabet[static_cast<size_t>(pick(rng))]);
        const bool target_letter = shift != 0 && coin(rng) < unshifted_share_;
        sa[i][t] = kFirstSymbol + (target_letter ? 0 : shift) + alphabet[static_cast<size_t>(t - 1)];
      }
      sa[i][h + 1] = kBos;  // the second BOS cues the copy: its look-back match is the first BOS
      for (int64_t t = h + 2; t <= 2 * h + 1; ++t) sa[i][t] = sa[i][t - h - 1];
      std::uniform_int_distribution<int64_t> uni(0, cfg_.copy_symbols - 1);
      for (int64_t t = 2 * h + 2; t <= T; ++t) sa[i][t] = kFirstSymbol + uni(rng);  // even seq: 1 filler
      for (int64_t t = h + 1; t <= 2 * h; ++t) ma[i][t] = 1.0f;  // targets t+1: the copied half
    } else if (cfg_.task == ProbeTask::kLookup) {
      FillLookup(rng, T, sa[i], ma[i]);
    } else {
      std::uniform_int_distribution<int64_t> off(0, split_.train_end - T - 1);  // train split only
      const int64_t o = off(rng);
      for (int64_t t = 0; t <= T; ++t) sa[i][t] = static_cast<unsigned char>(text_[static_cast<size_t>(o + t)]);
      for (int64_t t = 0; t < T; ++t) ma[i][t] = 1.0f;
    }
  }
  const at::ScalarType dt = at::typeMetaToScalarType(at::get_default_dtype());
  return {seqs.narrow(1, 0, T).contiguous(), seqs.narrow(1, 1, T).contiguous(), mask.to(dt),
          image ? images.to(dt) : images};
}

int64_t ProbeData::HeldOutWindows() const {
  if (cfg_.task == ProbeTask::kText) return split_.held_windows;
  return cfg_.task == ProbeTask::kCopy ? kCopyEvalSequences : 0;
}

int64_t ProbeData::HeldOutCountedTokens() const {
  return HeldOutWindows() * (cfg_.task == ProbeTask::kCopy ? CopyHalf(cfg_.seq) : cfg_.seq);
}

Batch ProbeData::GetHeldOut(int64_t first, int64_t count, int64_t end) const {
  const int64_t T = cfg_.seq;
  if (cfg_.task == ProbeTask::kCopy) {  // the evaluation sequences: step kCopyEvalStep, never trained on
    Batch b = Get(kCopyEvalStep, first, count);
    for (int64_t i = std::max<int64_t>(0, end - first); i < count; ++i) b.mask[i].zero_();
    return b;
  }
  at::Tensor seqs = at::zeros({count, T + 1}, at::kLong);
  at::Tensor mask = at::ones({count, T}, at::typeMetaToScalarType(at::get_default_dtype()));
  auto sa = seqs.accessor<int64_t, 2>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t w = first + i < end ? first + i : 0;  // padding rows: window 0's bytes, not counted
    if (first + i >= end) mask[i].zero_();
    const int64_t o = split_.held_begin + w * T;  // window w: bytes [hb + w*T, hb + (w+1)*T]
    for (int64_t t = 0; t <= T; ++t) sa[i][t] = static_cast<unsigned char>(text_[static_cast<size_t>(o + t)]);
  }
  return {seqs.narrow(1, 0, T).contiguous(), seqs.narrow(1, 1, T).contiguous(), mask, at::Tensor()};
}

int64_t LoraSourceSymbolOffset(const ProbeConfig& config) {
  return std::min<int64_t>(config.copy_symbols, 256 - kFirstSymbol - config.copy_symbols);
}

}  // namespace onboard::backends
