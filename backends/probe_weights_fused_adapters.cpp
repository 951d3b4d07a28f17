// gpt-oss's routed experts under LoRA, as PEFT adapts them: its experts are fused parameters
// (transformers' GptOssExperts, modeling_gpt_oss.py: gate_up_proj [E, H, 2I] with gate / up interleaved,
// `gate_up[..., ::2]` / `[..., 1::2]`, down_proj [E, I, H], used as x @ W[e]), which PEFT reaches only
// through LoraConfig(target_parameters=[...]): one lora.ParamWrapper per parameter (peft
// src/peft/tuners/lora/layer.py, class ParamWrapper, at 5d602fdbf):
//   _get_in_out_features: a 3D parameter is (num_experts, in, out);
//   update_layer: in / out are swapped unless the experts module has `is_transposed` (GptOssExperts
//     has it: transformers' @use_experts_implementation(is_transposed=True), so no swap here);
//     lora_A = Linear(in, r*E) -> weight [r*E, in], lora_B = Linear(r*E, out) -> weight [out, r*E],
//     scaling alpha / r; A kaiming-uniform (bound 1/sqrt(in)), B zero;
//   get_delta_weight: A.reshape(E, r, in), B.reshape(out, r, E) (the expert index is the LAST factor
//     of B's columns: column j*E + e, but row e*r + j of A), delta = einsum("o r e, e r i -> e i o")
//     x scaling, the parameter's [E, in, out].
// This rank's experts are per-expert [out, in] weights (hf_map_gpt_oss.cpp): gate e = rows 0::2 of
// (B_e A_e) (delta_e transposed), up e = rows 1::2, down e = B_e A_e, B_e = B[:, :, e], A_e = A[e];
// under expert TP its intermediate units [i0, i0 + il) (gate_up columns [2 i0, 2 (i0 + il)), down
// rows). Biases stay frozen (target_parameters adapts the parameter named only).
// The adapters are whole on every rank (not only on an expert's owners): a rank's gradient is zero on
// the experts it does not run, so the world (stage) sum of SumGradients is the whole gradient and the
// clip counts it once, like any replicated adapter.

#include "backends/probe_weights_model.h"
#include "core/lora_targets.h"

namespace onboard::backends {

void AddFusedExpertAdapters(const WeightsProbeOptions& o, RankModel* m, const HfForwardConfig& c, int64_t i,
                            int64_t li) {
  const LayerSpec& spec = c.ir.layers[size_t(i)];
  if (c.layout != HfLayout::kGptOss || spec.channel != ChannelKind::kMoE ||
      !AdaptsRoutedExperts(spec.moe.num_shared))
    return;
  const int64_t E = spec.moe.num_experts, I = spec.moe.expert_intermediate, H = c.ir.hidden, r = o.lora_rank;
  const auto dtype = o.fp64 ? torch::kDouble : torch::kFloat;
  // Step 1: the two parameters in GptOssExperts' registration order. PEFT nests the wrappers in that
  // order (tuners_utils.py _inject_parameters: module.named_parameters(recurse=False)), so
  // gate_up_proj's is the inner one, saved under "experts.base_layer." (its transformers v5 weight
  // conversion says so: transformers_weight_conversion.py, "the gate_up_proj is the innner PEFT
  // ParamWrapper"), down_proj's the outer, under "experts.".
  struct Param {
    FusedParam kind;
    const char* name;
    const char* path;
    int64_t in, out;
  };
  const Param params[] = {{FusedParam::kGateUp, "gate_up_proj", ".base_layer", H, 2 * I},
                          {FusedParam::kDown, "down_proj", "", I, H}};
  const std::string experts = HfLayerPrefix(spec).substr(std::string("model.").size()) + "mlp.experts";
  for (const Param& p : params) {
    // Step 2: A [r*E, in] ~ U(+-1/sqrt(in)) (kaiming_uniform(a=sqrt(5)) of Linear(in, r*E)), B = 0.
    torch::Tensor a = DrawLoraA(o, r * E, p.in);
    if (m == nullptr || li < 0) continue;  // a layer another stage holds: drawn and dropped
    Adapter ad;
    ad.module = c.weights_root + experts + p.path;
    ad.parameter = std::string("mlp.experts.") + p.name;
    ad.fused = p.kind;
    ad.layer = size_t(li);
    ad.a = a.requires_grad_(true);
    ad.b = torch::zeros({p.out, r * E}, dtype).requires_grad_(true);
    // Step 3: the bases (without FSDP: as loaded; under FSDP taken when bound, ApplyFusedAdapter).
    for (HfMlpWeights& x : m->w.layers[size_t(li)].experts.experts) {
      const bool keep = o.fsdp == 1;
      if (p.kind == FusedParam::kGateUp) {
        ad.expert_base.push_back(keep ? x.gate.w : torch::Tensor());
        ad.expert_base.push_back(keep ? x.up.w : torch::Tensor());
      } else {
        ad.expert_base.push_back(keep ? x.down.w : torch::Tensor());
      }
    }
    m->adapters.push_back(std::move(ad));
  }
}

void ApplyFusedAdapter(RankModel& m, Adapter& ad, bool frozen) {
  std::vector<HfMlpWeights>& ex = m.w.layers[ad.layer].experts.experts;
  const bool gate_up = ad.fused == FusedParam::kGateUp;
  const int64_t E = int64_t(ex.size()), r = ad.a.size(0) / E, k = gate_up ? 2 : 1;
  // The weights the adapter sets on expert e: gate e and up e, or down e.
  auto slots = [&](int64_t e) {
    HfMlpWeights& x = ex[size_t(e)];
    return gate_up ? std::vector<torch::Tensor*>{&x.gate.w, &x.up.w} : std::vector<torch::Tensor*>{&x.down.w};
  };
  // Step 1: under FSDP the bases are the experts as bound now (the gathered stack's views).
  if (m.fsdp)
    for (int64_t e = 0; e < E; ++e)
      for (int64_t j = 0; j < k; ++j) ad.expert_base[size_t(k * e + j)] = *slots(e)[size_t(j)];
  // Step 2: PEFT's factors per expert: A_e = A.reshape(E, r, in)[e], B_e = B.reshape(out, r, E)[:, :, e].
  const torch::Tensor a3 = ad.a.view({E, r, ad.a.size(1)});
  const torch::Tensor b3 = ad.b.view({ad.b.size(0), r, E});
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<torch::Tensor*> w = slots(e);
    if (!ex[size_t(e)].down.w.defined()) continue;  // an expert this rank does not hold
    for (int64_t j = 0; j < k; ++j) *w[size_t(j)] = ad.expert_base[size_t(k * e + j)];
    if (frozen) continue;
    // Step 3: this rank's intermediate units [i0, i0 + il) (expert TP), else all I of them.
    const torch::Tensor& base0 = ad.expert_base[size_t(k * e)];
    const int64_t I = gate_up ? ad.b.size(0) / 2 : ad.a.size(1), il = gate_up ? base0.size(0) : base0.size(1);
    const int64_t i0 = il == I ? 0 : m.place.tp_rank * il;
    if (gate_up) {
      // delta_e^T [2 il, H] on gate_up columns [2 i0, 2 (i0 + il)): gate rows 0::2, up rows 1::2.
      const torch::Tensor d = torch::matmul(b3.select(2, e).narrow(0, 2 * i0, 2 * il), a3[e]);
      *w[0] = *w[0] + m.scale * d.slice(0, 0, 2 * il, 2);
      *w[1] = *w[1] + m.scale * d.slice(0, 1, 2 * il, 2);
    } else {
      // delta_e^T [H, il]: down's columns are the units.
      *w[0] = *w[0] + m.scale * torch::matmul(b3.select(2, e), a3[e].narrow(1, i0, il));
    }
  }
}

}  // namespace onboard::backends
