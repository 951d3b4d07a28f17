// The one table of plan precisions: spelling, element type and uses (see precision.h).
#include "core/precision.h"

namespace onboard {
namespace {

struct PrecisionRow {
  Precision p;
  const char* name;
  DType element;
  bool frozen_base, compute, optimizer_state, grads;  // allowed for each PrecisionUse
};

constexpr PrecisionRow kPrecisions[] = {
    {Precision::kFP32, "fp32", DType::kF32, false, false, true, true},
    {Precision::kBF16, "bf16", DType::kBF16, true, true, true, true},
    {Precision::kFP16, "fp16", DType::kF16, false, true, false, false},
    {Precision::kFP8, "fp8", DType::kFP8, true, true, false, false},
    {Precision::kMXFP8, "mxfp8", DType::kFP8, false, true, false, false},
    {Precision::kMXFP4, "mxfp4", DType::kMXFP4, true, false, false, false},
    {Precision::kNVFP4, "nvfp4", DType::kNVFP4, false, true, false, false},
};

const PrecisionRow& Row(Precision p) {
  for (const PrecisionRow& r : kPrecisions)
    if (r.p == p) return r;
  ONBOARD_ASSERT(false, "Precision " + std::to_string(static_cast<int>(p)) + " has no row in kPrecisions");
  return kPrecisions[0];
}

bool Allowed(const PrecisionRow& r, PrecisionUse use) {
  switch (use) {
    case PrecisionUse::kFrozenBase:
      return r.frozen_base;
    case PrecisionUse::kCompute:
      return r.compute;
    case PrecisionUse::kOptimizerState:
      return r.optimizer_state;
    case PrecisionUse::kGrads:
      return r.grads;
  }
  return false;
}

std::string AllowedList(PrecisionUse use) {
  std::string out;
  for (const PrecisionRow& r : kPrecisions)
    if (Allowed(r, use)) out += (out.empty() ? "" : " | ") + std::string(r.name);
  return out;
}

}  // namespace

const char* PrecisionName(Precision p) { return Row(p).name; }

DType PrecisionElement(Precision p) { return Row(p).element; }

bool QuantisedGemmInputs(Precision p) {
  const PrecisionRow& r = Row(p);
  return r.compute && (r.element == DType::kFP8 || r.element == DType::kNVFP4);
}

Expected<Precision> ParsePrecision(const std::string& origin, const std::string& field,
                                   const std::string& value, PrecisionUse use) {
  for (const PrecisionRow& r : kPrecisions)
    if (value == r.name && Allowed(r, use)) return r.p;
  return BadInput(origin, field, "must be " + AllowedList(use), value);
}

Status CheckPrecisionUse(const std::string& origin, const std::string& field, Precision p, PrecisionUse use) {
  if (Allowed(Row(p), use)) return Status::Ok();
  return BadInput(origin, field, "must be " + AllowedList(use), PrecisionName(p));
}

}  // namespace onboard
