// gpt-oss's fused routed experts under the real-weights probe's LoRA (backends/
// probe_weights_fused_adapters.cpp): trained as PEFT's lora.ParamWrapper (target_parameters) trains
// them, written under the keys and shapes PEFT saves, and checked against PEFT's delta written out
// here from its source (peft src/peft/tuners/lora/layer.py ParamWrapper.get_delta_weight, 5d602fdbf):
// the file's A / B merged into the checkpoint by that einsum give the trained model's held-out loss.
// Layouts (tp 2, ep 2, fsdp 2, ep 2 x fsdp 2) train the one-rank adapters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_weights.h"
#include "parsers/safetensors_weights.h"
#include "tests/backends/hf_test_checkpoint.h"
#include "tests/backends/hf_test_families.h"
#include "tests/backends/probe_weights_layout_helpers.h"

namespace onboard {
namespace weights_fused {  // a unity batch shares the anonymous namespace with other test files
namespace {

using hftest::Launch;
using hftest::LayoutOptions;
using hftest::Worst;
using hftest::Write;

constexpr int64_t kE = 4, kH = 32, kI = 64, kR = 4;  // MakeGptOss's experts and hidden; I != H on purpose

// Dense gpt-oss (gate_up_proj [E, H, 2I], down_proj [E, I, H]) with a 256-byte vocabulary.
hftest::Checkpoint GptOssDense() {
  hftest::Checkpoint c = hftest::MakeGptOss(/*mxfp4=*/false, kI);
  c.config["vocab_size"] = 256;
  c.Add("model.embed_tokens.weight", {256, kH}, 1.0);
  c.Linear("lm_head", 256, kH);
  return c;
}

WeightsProbeOptions Fp64(const std::string& ckpt, int64_t ranks) {
  WeightsProbeOptions o = LayoutOptions(ckpt, ranks, 8);
  o.fp64 = true;
  o.lora_rank = kR;
  return o;
}

// How the test reads the fused factors: PEFT's (the expert index the last factor of B's columns,
// the delta added to gate_up_proj's interleaved columns as they are) or a negative control.
enum class Reading { kPeft, kExpertFirstInB, kGateUpConcatenated, kExpertsLeftOut };

double At(const torch::Tensor& t, int64_t i, int64_t j) { return t[i][j].item<double>(); }

// PEFT's delta of one fused parameter [E, in, out] (get_delta_weight, no swap: GptOssExperts has
// is_transposed): A.reshape(E, r, in), B.reshape(out, r, E), einsum("o r e, e r i -> e i o") x alpha/r,
// added to the checkpoint's tensor (the gate_up columns moved under kGateUpConcatenated).
void AddFusedDelta(hftest::Tensor* w, const LoraModule& m, double scale, Reading how) {
  const torch::Tensor a = m.a.to(torch::kDouble), b = m.b.to(torch::kDouble);
  const int64_t in = a.size(1), out = b.size(0);
  ASSERT_EQ(w->shape, (std::vector<int64_t>{kE, in, out}));
  const auto A = a.accessor<double, 2>();
  const auto B = b.accessor<double, 2>();
  for (int64_t e = 0; e < kE; ++e)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double d = 0;
        for (int64_t j = 0; j < kR; ++j)
          d += B[o][how == Reading::kExpertFirstInB ? e * kR + j : j * kE + e] * A[e * kR + j][i];
        // Concatenated: column o < I is gate o (interleaved column 2o), o >= I up o - I (2(o - I) + 1).
        const int64_t col = how != Reading::kGateUpConcatenated || out != 2 * kI ? o
                            : o < kI                                             ? 2 * o
                                                                                 : 2 * (o - kI) + 1;
        w->v[size_t((e * in + i) * out + col)] += scale * d;
      }
}

// The checkpoint with the PEFT file merged (attention: W + alpha/r B A; experts: AddFusedDelta),
// stored F32.
std::string Merged(hftest::Checkpoint c, const PeftLoraAdapter& pa, Reading how) {
  c.dtype = "F32";
  const double scale = pa.alpha / double(pa.r);
  for (const LoraModule& m : pa.modules) {
    const std::string experts = ".mlp.experts";
    const size_t at = m.module.find(experts);
    if (at == std::string::npos) {  // a projection: W [out, in] + scale B A
      hftest::Tensor& w = c.tensors.at(m.module + ".weight");
      const torch::Tensor d = torch::matmul(m.b.to(torch::kDouble), m.a.to(torch::kDouble));
      for (int64_t o = 0; o < d.size(0); ++o)
        for (int64_t i = 0; i < d.size(1); ++i) w.v[size_t(o * d.size(1) + i)] += scale * At(d, o, i);
      continue;
    }
    if (how == Reading::kExpertsLeftOut) continue;
    // The inner wrapper (".base_layer") is gate_up_proj's, the outer down_proj's.
    const bool inner = m.module.size() > at + experts.size();
    const std::string param =
        m.module.substr(0, at + experts.size()) + (inner ? ".gate_up_proj" : ".down_proj");
    AddFusedDelta(&c.tensors.at(param), m, scale, how);
  }
  return Write(c);
}

TEST(ProbeWeightsFused, GptOssTrainsItsFusedExpertsAndSavesThemAsPeftTargetParameters) {
  // 1 rank, fp64, 8 steps: 2 layers x (q/k/v/o + gate_up_proj + down_proj) = 12 adapters.
  const hftest::Checkpoint ck = GptOssDense();
  const WeightsProbeResult r = Launch(Fp64(Write(ck), 1));
  EXPECT_EQ(r.caveat, "");
  EXPECT_LT(r.train_loss.back(), r.train_loss.front() - 0.05);
  EXPECT_GT(hftest::Rel(r.held_out_final, r.held_out_frozen), hftest::kLayoutWrongAtLeast);
  // Step 1: the file's keys and shapes, as PEFT saves LoraConfig(target_parameters=["mlp.experts.
  // gate_up_proj", "mlp.experts.down_proj"]) on GptOssExperts: A [r*E, in], B [out, r*E] with (in, out)
  // = (H, 2I) for gate_up_proj (the inner wrapper: "experts.base_layer."), (I, H) for down_proj.
  std::map<std::string, std::vector<int64_t>> want;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "base_model.model.model.layers." + std::to_string(l) + ".";
    want[p + "mlp.experts.base_layer.lora_A.weight"] = {16, 32};
    want[p + "mlp.experts.base_layer.lora_B.weight"] = {128, 16};
    want[p + "mlp.experts.lora_A.weight"] = {16, 64};
    want[p + "mlp.experts.lora_B.weight"] = {32, 16};
    // Attention (H = 32, 4 heads and 2 KV heads of 8): A [r, 32], B [out, r].
    using P = std::pair<const char*, int64_t>;
    for (const auto& [a, out] : {P{"q_proj", 32}, P{"k_proj", 16}, P{"v_proj", 16}, P{"o_proj", 32}}) {
      want[p + "self_attn." + a + ".lora_A.weight"] = {4, 32};
      want[p + "self_attn." + a + ".lora_B.weight"] = {out, 4};
    }
  }
  Expected<SafetensorsCheckpoint> st = SafetensorsCheckpoint::Open(r.adapter_dir);
  ASSERT_TRUE(st.ok()) << st.status().message();
  std::map<std::string, std::vector<int64_t>> got;
  for (const TensorInfo& t : st->inventory().tensors) got[t.name] = t.shape;
  EXPECT_EQ(got, want);
  Expected<PeftLoraAdapter> pa = ReadPeftAdapter(r.adapter_dir);
  ASSERT_TRUE(pa.ok()) << pa.status().message();
  EXPECT_EQ(pa->target_parameters,
            (std::vector<std::string>{"mlp.experts.down_proj", "mlp.experts.gate_up_proj"}));
  EXPECT_EQ(pa->TargetModules(), (std::vector<std::string>{"self_attn.k_proj", "self_attn.o_proj",
                                                           "self_attn.q_proj", "self_attn.v_proj"}));
  // Step 2: trained: every B, and every expert's columns of a fused B (j*E + e), off zero.
  for (const LoraModule& m : pa->modules) {
    EXPECT_GT(m.b.abs().max().item<double>(), 0.0) << m.module;
    if (m.a.size(0) == kR * kE) {
      for (int64_t e = 0; e < kE; ++e)
        EXPECT_GT(
            m.b.index({torch::indexing::Slice(), torch::arange(kR) * kE + e}).abs().max().item<double>(), 0.0)
            << m.module << " expert " << e;
    }
  }
  // Step 3: PEFT's delta merged into the checkpoint gives the trained model: its frozen held-out
  // loss is the run's final one (F32 storage of the merged weights and of the file: 1e-5). The
  // negative controls read the factors wrongly and must miss by far.
  WeightsProbeOptions check = Fp64(Merged(ck, *pa, Reading::kPeft), 1);
  check.steps = 1;
  const double peft = Launch(check).held_out_frozen;
  std::printf("trained held-out %.9g; PEFT-merged checkpoint %.9g (relative %.3g)\n", r.held_out_final, peft,
              hftest::Rel(peft, r.held_out_final));
  EXPECT_LT(hftest::Rel(peft, r.held_out_final), hftest::kLayoutTol);
  for (const auto& [how, name] : {std::pair{Reading::kExpertFirstInB, "B's expert index first"},
                                  std::pair{Reading::kGateUpConcatenated, "gate/up concatenated"},
                                  std::pair{Reading::kExpertsLeftOut, "experts left out"}}) {
    check.checkpoint = Merged(ck, *pa, how);
    const double wrong = Launch(check).held_out_frozen;
    std::printf("control %s: %.9g (relative %.3g)\n", name, wrong, hftest::Rel(wrong, r.held_out_final));
    EXPECT_GT(hftest::Rel(wrong, r.held_out_final), 100 * hftest::kLayoutTol) << name;
  }
}

TEST(ProbeWeightsFused, LayoutsTrainTheOneRankFusedExpertAdapters) {
  // fp64, 8 steps, against 1 rank: the curve, both held-out losses, the file's every A / B. tp 2: each
  // expert's intermediate units split (gate_up columns [2 i0, 2 (i0 + I/2))), the adapters whole; ep 2:
  // each rank runs 2 experts (zero gradient on the others'), the world sum; fsdp 2: the experts
  // gathered as stacks, the deltas added to the bound views; ep 2 x fsdp 2; pp 2: a layer per stage,
  // rank 0 merging the stages' files (target_parameters with them); tp 2 x ep 2 on 4 ranks.
  const std::string ckpt = Write(GptOssDense());
  const WeightsProbeResult r1 = Launch(Fp64(ckpt, 1));
  Expected<PeftLoraAdapter> a1 = ReadPeftAdapter(r1.adapter_dir);
  ASSERT_TRUE(a1.ok()) << a1.status().message();
  using L = hftest::ProbeLayout;
  for (const L& l : {L{"tp2", 2, 2, 1, 1, 1}, L{"ep2", 2, 1, 2, 1, 1}, L{"fsdp2", 2, 1, 1, 2, 1},
                     L{"ep2 x fsdp2", 2, 1, 2, 2, 1}, L{"pp2", 2, 1, 1, 1, 2}, L{"tp2 x ep2", 4, 2, 2, 1, 1}})
    EXPECT_EQ(hftest::ExpectLayoutMatchesOneRank(ckpt, l, "gpt_oss", r1, *a1).caveat, "") << l.name;
}

}  // namespace
}  // namespace weights_fused
}  // namespace onboard
