// Kernel parameters the generator specialises on, derived from the IR's AttentionSpec and validated
// before anything reaches generated source (identifiers by regex, integers by range).
// Units: dims are element counts; chunk_size and topk are tokens; softmax_scale is dimensionless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard::codegen {

enum class KernelTarget { kCpu, kCuda };
const char* KernelTargetName(KernelTarget t);                       // "cpu" | "cuda"
[[nodiscard]] Expected<KernelTarget> ParseKernelTarget(const std::string& s);  // bad -> kBadInput

// A kernel name: [A-Za-z_][A-Za-z0-9_]{0,95}. Everything else is refused before codegen.
bool IsValidKernelIdentifier(const std::string& s);

// Kimi Delta Attention forward. See codegen/kernel_abi.h for the tensor layout.
struct KdaSpec {
  std::string name;                // kernel identifier ("" = derived from the dims by the generator)
  int64_t num_heads = 0;           // H: q/k heads, 1..1024
  int64_t num_v_heads = 0;         // HV: value heads, HV % H == 0 (grouped values when HV > H)
  int64_t head_dim = 0;            // K: key dim, even, 2..1024
  int64_t v_head_dim = 0;          // V: value dim, even, 2..1024
  int64_t chunk_size = 64;         // C: power of two, 4..128
  GateForm gate_form = GateForm::kBounded;  // kNone: g input is already the log decay
  double gate_lower_bound = -5.0;  // bounded gate only: -5 <= lb < 0
  bool normalize_qk = true;        // L2-normalise q,k inside the kernel (eps 1e-6)
  bool beta_sigmoid = false;       // beta input is a logit; the kernel applies the sigmoid (fused prologue)
  DType dtype = DType::kF32;       // operand type: CPU f32 only; CUDA f32 or bf16 (fp32 accumulate)

  // kBadInput naming `origin`, the field and the value for the first bad parameter.
  [[nodiscard]] Status Validate(const std::string& origin = "kda spec") const;
  std::string DefaultName() const;  // "kda_h4_hv8_k128_v128_c64_bounded_f32"
};

// DeepSeek sparse attention forward: lightning indexer + exact top-k + softmax over selected keys.
struct DsaSpec {
  std::string name;                // kernel identifier ("" = derived)
  int64_t num_heads = 0;           // HQ: query heads, 1..1024
  int64_t num_kv_heads = 1;        // HKV: HQ % HKV == 0 (MLA absorbed form: 1)
  int64_t head_dim = 0;            // D: q/k width, even, 2..1024 (MLA: kv_lora_rank + rope = 576)
  int64_t v_head_dim = 0;          // DV: even, 2..1024 (MLA: kv_lora_rank = 512)
  int64_t v_up_dim = 0;            // VO: per-head value up-projection [DV -> VO] in the kernel (absorbed MLA:
                                   // W_UV, VO = v_head_dim = 128); 0 = none (output width DV). Even, 2..1024
  int64_t index_heads = 0;         // HI: 1..256
  int64_t index_head_dim = 0;      // DI: even, 2..1024
  int64_t topk = 0;                // keys per query, 1..65536
  int64_t block = 64;              // keys per contiguous gather block: power of two, 8..256
  double softmax_scale = 0;        // > 0; 0 = head_dim^-1/2 (resolved by Resolved())
  bool output_gate = false;        // sigmoid(gate) * o per head and channel of the OUTPUT (after v_up)
  bool sink = false;               // learned per-head attention sink in the softmax denominator
  DType dtype = DType::kF32;       // as KdaSpec

  [[nodiscard]] Status Validate(const std::string& origin = "dsa spec") const;
  std::string DefaultName() const;  // "dsa_hq16_hkv1_d576_v512_i32x128_k2048_f32"
  double ResolvedScale() const;     // softmax_scale, or head_dim^-1/2 when 0
};

// From one attention block of the IR. KDA: kind kKDA (heads, v heads, head dims, chunk, gate form,
// lower bound). DSA: kind kDSA; an MLA base becomes the absorbed MQA form (HKV = 1,
// D = kv_lora_rank + qk_rope_head_dim, DV = kv_lora_rank, VO = v_head_dim, scale = (qk_nope + qk_rope)^-1/2);
// a GQA/MHA base keeps its heads and head dims. Other kinds -> kBadInput. `origin` names the file/layer.
[[nodiscard]] Expected<KdaSpec> KdaSpecFromAttention(const AttentionSpec& a, const std::string& origin);
[[nodiscard]] Expected<DsaSpec> DsaSpecFromAttention(const AttentionSpec& a, const std::string& origin);

// The distinct KDA and DSA specs of a model (deduplicated, in layer order).
struct ModelKernelSpecs {
  std::vector<KdaSpec> kda;
  std::vector<DsaSpec> dsa;
};
[[nodiscard]] Expected<ModelKernelSpecs> KernelSpecsForModel(const ModelIR& model);

}  // namespace onboard::codegen
