// Validation and IR -> spec derivation for the generated kernels.
#include "codegen/kernel_spec.h"

#include <cmath>
#include <regex>
#include <sstream>

namespace onboard::codegen {
namespace {

bool IsPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

Status CheckRange(const std::string& origin, const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return BadInput(origin, field,
                    "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                    std::to_string(v));
  }
  return Status::Ok();
}

Status CheckEvenDim(const std::string& origin, const char* field, int64_t v) {
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, field, v, 2, 1024));
  if (v % 2 != 0) return BadInput(origin, field, "head dims must be even", std::to_string(v));
  return Status::Ok();
}

Status CheckName(const std::string& origin, const std::string& name) {
  if (!name.empty() && !IsValidKernelIdentifier(name)) {
    return BadInput(origin, "name", "must match [A-Za-z_][A-Za-z0-9_]{0,95}", name);
  }
  return Status::Ok();
}

}  // namespace

const char* KernelTargetName(KernelTarget t) { return t == KernelTarget::kCuda ? "cuda" : "cpu"; }

Expected<KernelTarget> ParseKernelTarget(const std::string& s) {
  if (s == "cpu") return KernelTarget::kCpu;
  if (s == "cuda") return KernelTarget::kCuda;
  return BadInput("command line", "--target", "must be cpu or cuda", s);
}

bool IsValidKernelIdentifier(const std::string& s) {
  static const std::regex kIdent("[A-Za-z_][A-Za-z0-9_]{0,95}");
  return std::regex_match(s, kIdent);
}

Status KdaSpec::Validate(const std::string& origin) const {
  ONBOARD_RETURN_IF_ERROR(CheckName(origin, name));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "num_heads", num_heads, 1, 1024));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "num_v_heads", num_v_heads, 1, 4096));
  if (num_v_heads % num_heads != 0) {
    return BadInput(origin, "num_v_heads",
                    "must be a multiple of num_heads=" + std::to_string(num_heads),
                    std::to_string(num_v_heads));
  }
  ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "head_dim", head_dim));
  ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "v_head_dim", v_head_dim));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "chunk_size", chunk_size, 4, 128));
  if (!IsPowerOfTwo(chunk_size)) {
    return BadInput(origin, "chunk_size", "must be a power of two (16, 32, 64)",
                    std::to_string(chunk_size));
  }
  if (gate_form == GateForm::kBounded &&
      !(std::isfinite(gate_lower_bound) && gate_lower_bound >= -5.0 && gate_lower_bound < 0.0)) {
    std::ostringstream v;
    v << gate_lower_bound;
    return BadInput(origin, "gate_lower_bound", "bounded gate needs -5 <= lower_bound < 0", v.str());
  }
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return BadInput(origin, "dtype", "kernels take f32 or bf16 operands", DTypeName(dtype));
  }
  return Status::Ok();
}

std::string KdaSpec::DefaultName() const {
  std::ostringstream os;
  os << "kda_h" << num_heads << "_hv" << num_v_heads << "_k" << head_dim << "_v" << v_head_dim << "_c"
     << chunk_size << "_" << GateFormName(gate_form);
  if (gate_form == GateForm::kBounded) {
    os << "_lb" << static_cast<int64_t>(std::llround(-gate_lower_bound * 1000));
  }
  if (!normalize_qk) os << "_raw";
  if (beta_sigmoid) os << "_bsig";
  os << "_" << (dtype == DType::kBF16 ? "bf16" : "f32");
  return os.str();
}

Status DsaSpec::Validate(const std::string& origin) const {
  ONBOARD_RETURN_IF_ERROR(CheckName(origin, name));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "num_heads", num_heads, 1, 1024));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "num_kv_heads", num_kv_heads, 1, 1024));
  if (num_heads % num_kv_heads != 0) {
    return BadInput(origin, "num_kv_heads",
                    "must divide num_heads=" + std::to_string(num_heads),
                    std::to_string(num_kv_heads));
  }
  ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "head_dim", head_dim));
  ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "v_head_dim", v_head_dim));
  if (v_up_dim != 0) ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "v_up_dim", v_up_dim));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "index_heads", index_heads, 1, 256));
  ONBOARD_RETURN_IF_ERROR(CheckEvenDim(origin, "index_head_dim", index_head_dim));
  if (topk <= 0) return BadInput(origin, "topk", "must be > 0", std::to_string(topk));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "topk", topk, 1, 65536));
  ONBOARD_RETURN_IF_ERROR(CheckRange(origin, "block", block, 8, 256));
  if (!IsPowerOfTwo(block)) {
    return BadInput(origin, "block", "must be a power of two", std::to_string(block));
  }
  if (!(std::isfinite(softmax_scale) && softmax_scale >= 0.0 && softmax_scale <= 16.0)) {
    std::ostringstream v;
    v << softmax_scale;
    return BadInput(origin, "softmax_scale", "must be in [0, 16] (0 = head_dim^-1/2)", v.str());
  }
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return BadInput(origin, "dtype", "kernels take f32 or bf16 operands", DTypeName(dtype));
  }
  return Status::Ok();
}

std::string DsaSpec::DefaultName() const {
  std::ostringstream os;
  os << "dsa_hq" << num_heads << "_hkv" << num_kv_heads << "_d" << head_dim << "_v" << v_head_dim
     << "_i" << index_heads << "x" << index_head_dim << "_k" << topk << "_b" << block;
  if (v_up_dim > 0) os << "_up" << v_up_dim;
  if (output_gate) os << "_gate";
  if (sink) os << "_sink";
  os << "_" << (dtype == DType::kBF16 ? "bf16" : "f32");
  return os.str();
}

double DsaSpec::ResolvedScale() const {
  return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

Expected<KdaSpec> KdaSpecFromAttention(const AttentionSpec& a, const std::string& origin) {
  if (a.kind != MixerKind::kKDA) {
    return BadInput(origin, "kind", "a KDA kernel needs a KDA attention block", MixerKindName(a.kind));
  }
  KdaSpec s;
  s.num_heads = a.num_heads;
  s.num_v_heads = a.num_v_heads > 0 ? a.num_v_heads : a.num_heads;
  s.head_dim = a.head_dim;
  s.v_head_dim = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  s.chunk_size = a.chunk_size > 0 ? a.chunk_size : 64;
  s.gate_form = a.gate_form == GateForm::kNone ? GateForm::kOriginal : a.gate_form;
  if (s.gate_form == GateForm::kBounded) s.gate_lower_bound = a.gate_lower_bound;
  ONBOARD_RETURN_IF_ERROR(s.Validate(origin));
  return s;
}

Expected<DsaSpec> DsaSpecFromAttention(const AttentionSpec& a, const std::string& origin) {
  if (a.kind != MixerKind::kDSA) {
    return BadInput(origin, "kind", "a DSA kernel needs a DSA attention block", MixerKindName(a.kind));
  }
  DsaSpec s;
  s.num_heads = a.num_heads;
  if (a.dsa_base == MixerKind::kMLA) {
    // Absorbed MLA: one latent KV (kv_lora_rank + rope) shared by all heads; values = the latent, the
    // kernel up-projects each head's latent output by W_UV (v_up_dim = v_head_dim), so its output, and
    // the output gate on it, are the model's per-head attention output (HF DeepSeek semantics).
    s.num_kv_heads = 1;
    s.head_dim = a.kv_lora_rank + a.qk_rope_head_dim;
    s.v_head_dim = a.kv_lora_rank;
    s.v_up_dim = a.v_head_dim;
    const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (qk > 0) s.softmax_scale = 1.0 / std::sqrt(static_cast<double>(qk));
  } else {
    s.num_kv_heads = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
    s.head_dim = a.head_dim;
    s.v_head_dim = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  }
  s.index_heads = a.index_heads;
  s.index_head_dim = a.index_head_dim;
  s.topk = a.index_topk;
  s.output_gate = a.output_gate;
  s.sink = a.sinks;
  ONBOARD_RETURN_IF_ERROR(s.Validate(origin));
  return s;
}

Expected<ModelKernelSpecs> KernelSpecsForModel(const ModelIR& model) {
  ModelKernelSpecs out;
  const std::string file = model.source.empty() ? model.name : model.source;
  for (const LayerSpec& layer : model.layers) {
    const std::string origin = file + " layer " + std::to_string(layer.index);
    if (layer.attn.kind == MixerKind::kKDA) {
      ONBOARD_ASSIGN_OR_RETURN(KdaSpec s, KdaSpecFromAttention(layer.attn, origin));
      s.name = s.DefaultName();
      bool seen = false;
      for (const auto& k : out.kda) seen = seen || k.name == s.name;
      if (!seen) out.kda.push_back(s);
    } else if (layer.attn.kind == MixerKind::kDSA) {
      ONBOARD_ASSIGN_OR_RETURN(DsaSpec s, DsaSpecFromAttention(layer.attn, origin));
      s.name = s.DefaultName();
      bool seen = false;
      for (const auto& d : out.dsa) seen = seen || d.name == s.name;
      if (!seen) out.dsa.push_back(s);
    }
  }
  return out;
}

}  // namespace onboard::codegen
