// Names and sizes for the ModelIR enums (see core/model_ir.h).
#include "core/model_ir.h"

#include <algorithm>
#include <cctype>

namespace onboard {

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kFP8: return "fp8";
    case DType::kMXFP4: return "mxfp4";
    case DType::kNVFP4:
      return "nvfp4";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kF64: return "f64";
    case DType::kUnknown: return "unknown";
  }
  return "unknown";
}

// Bytes per element. MXFP4: 4-bit element + one e8m0 scale byte per 32 elements = 0.5 + 1/32.
// NVFP4: 4-bit e2m1 element + one e4m3 scale byte per 16 elements = 0.5 + 1/16 (the per-tensor fp32
// scale is not counted; TransformerEngine recipe NVFP4BlockScaling).
double DTypeBytes(DType d) {
  switch (d) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kFP8: return 1;
    case DType::kMXFP4: return 0.5 + 1.0 / 32.0;
    case DType::kNVFP4:
      return 0.5 + 1.0 / 16.0;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
    case DType::kF64: return 8;
    case DType::kUnknown: return 2;  // treat as 16-bit when asked for a size
  }
  return 2;
}

DType ParseDType(const std::string& s) {
  std::string t;
  for (char c : s) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.rfind("torch.", 0) == 0) t = t.substr(6);
  if (t == "bfloat16" || t == "bf16") return DType::kBF16;
  if (t == "float16" || t == "f16" || t == "fp16" || t == "half") return DType::kF16;
  if (t == "float32" || t == "f32" || t == "fp32" || t == "float") return DType::kF32;
  if (t == "float64" || t == "f64" || t == "fp64" || t == "double") return DType::kF64;
  if (t == "fp8" || t == "f8_e4m3" || t == "f8_e5m2" || t == "float8_e4m3fn" || t == "float8_e5m2" ||
      t == "e4m3" || t == "e5m2" || t == "f8e4m3" || t == "float8")
    return DType::kFP8;
  if (t == "mxfp4") return DType::kMXFP4;
  if (t == "nvfp4") return DType::kNVFP4;
  if (t == "int8" || t == "i8") return DType::kI8;
  if (t == "uint8" || t == "u8") return DType::kU8;
  if (t == "int32" || t == "i32") return DType::kI32;
  if (t == "int64" || t == "i64") return DType::kI64;
  if (t == "bool") return DType::kBool;
  return DType::kUnknown;
}

const char* MixerKindName(MixerKind k) {
  switch (k) {
    case MixerKind::kMHA: return "MHA";
    case MixerKind::kGQA: return "GQA";
    case MixerKind::kMLA: return "MLA";
    case MixerKind::kDSA: return "DSA";
    case MixerKind::kKDA: return "KDA";
    case MixerKind::kGatedDeltaNet: return "GatedDeltaNet";
    case MixerKind::kLinearAttention: return "LinearAttention";
    case MixerKind::kSlidingWindow: return "SlidingWindow";
  }
  return "?";
}

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kSwiGLU: return "swiglu";
    case Activation::kGeGLU: return "geglu";
    case Activation::kGELU: return "gelu";
    case Activation::kSiTU: return "situ";
    case Activation::kReLU2: return "relu2";
    case Activation::kSiLU: return "silu";
    case Activation::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* ChannelKindName(ChannelKind c) { return c == ChannelKind::kMoE ? "MoE" : "MLP"; }

const char* RouterActivationName(RouterActivation r) {
  return r == RouterActivation::kSigmoid ? "sigmoid" : "softmax";
}

const char* GateFormName(GateForm g) {
  switch (g) {
    case GateForm::kNone: return "none";
    case GateForm::kOriginal: return "original";
    case GateForm::kBounded: return "bounded";
  }
  return "none";
}

bool IsSoftmaxAttention(MixerKind k) {
  return k == MixerKind::kMHA || k == MixerKind::kGQA || k == MixerKind::kMLA || k == MixerKind::kDSA ||
         k == MixerKind::kSlidingWindow;
}

}  // namespace onboard
