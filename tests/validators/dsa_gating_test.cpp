// DSA gating agreement (issue 16 item 3): a gated MLA-based DSA layer computes, per head h (HF
// DeepSeek semantics, the non-absorbed form of backends/hf_attention.cpp and backends/proxy_forward.cpp),
//   k_h[s] = [W_UK[h] c_s, kr_s], v_h[s] = W_UV[h] c_s, o_h = softmax_S(q_h . k_h) v_h,
//   out_h  = sigmoid(gate_h) * o_h           (gate [T,H,dv]: AFTER the value up-projection)
// The generated kernel runs the absorbed form (one latent KV of width r + dr shared by the heads,
// q_abs_h = [W_UK[h]^T q_nope_h, q_rope_h]) and must give the same out_h: it up-projects each head's
// latent output by W_UV (spec v_up_dim) and gates that. The old kernel gated the r-wide latent before
// the projection; a sigmoid does not commute with it, which the negative control shows.
// Shapes: c [T,r], kr [T,dr], q [T,H,dn+dr], W_UK [H,dn,r], W_UV [H,dv,r], gate [T,H,dv].
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "validators/cuda_emulation_loader.h"
#include "validators/kernel_check.h"
#include "validators/reference_dsa.h"

namespace onboard {
namespace {

using codegen::DsaSpec;
using validators::DsaInputs;

constexpr int64_t H = 3, R = 16, DR = 8, DN = 6, DVH = 10, T = 23;

// The model's tensors (random), as the HF layer holds them.
struct MlaLayer {
  std::vector<float> c, kr, q, w_uk, w_uv, gate;
};

MlaLayer RandomLayer(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, int64_t size, float sd) {
    x.resize(size);
    for (float& e : x) e = sd * n(rng);
  };
  MlaLayer m;
  fill(m.c, T * R, 1.0f);
  fill(m.kr, T * DR, 1.0f);
  fill(m.q, T * H * (DN + DR), 1.0f);
  fill(m.w_uk, H * DN * R, 1.0f / std::sqrt(float(R)));
  fill(m.w_uv, H * DVH * R, 1.0f / std::sqrt(float(R)));
  fill(m.gate, T * H * DVH, 1.5f);
  return m;
}

// The kernel spec the model's layer gets (codegen::DsaSpecFromAttention), top-k 5 of up to 23 keys.
DsaSpec SpecOfLayer() {
  AttentionSpec a;
  a.kind = MixerKind::kDSA;
  a.dsa_base = MixerKind::kMLA;
  a.num_heads = H;
  a.num_kv_heads = H;
  a.kv_lora_rank = R;
  a.qk_rope_head_dim = DR;
  a.qk_nope_head_dim = DN;
  a.v_head_dim = DVH;
  a.index_heads = 2;
  a.index_head_dim = 8;
  a.index_topk = 5;
  a.output_gate = true;
  Expected<DsaSpec> s = codegen::DsaSpecFromAttention(a, "gating test");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  DsaSpec spec = s.ok() ? *s : DsaSpec{};
  spec.block = 8;
  return spec;
}

// HF semantics, fp64, plain loops, over the selection `sel` [T,TOPK] (-1 padded): [T,H,dv].
std::vector<double> HfGatedMla(const MlaLayer& m, const std::vector<int32_t>& sel, int64_t topk) {
  std::vector<double> out(T * H * DVH, 0.0);
  const double scale = 1.0 / std::sqrt(double(DN + DR));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> logit, v_rows;
      for (int64_t i = 0; i < topk && sel[t * topk + i] >= 0; ++i) {
        const int64_t s = sel[t * topk + i];
        double dot = 0;
        for (int64_t d = 0; d < DN; ++d) {  // q_nope . (W_UK[h] c_s)
          double k = 0;
          for (int64_t c = 0; c < R; ++c) k += double(m.w_uk[(h * DN + d) * R + c]) * m.c[s * R + c];
          dot += double(m.q[(t * H + h) * (DN + DR) + d]) * k;
        }
        for (int64_t d = 0; d < DR; ++d)
          dot += double(m.q[(t * H + h) * (DN + DR) + DN + d]) * m.kr[s * DR + d];
        logit.push_back(dot * scale);
        for (int64_t e = 0; e < DVH; ++e) {  // v_h[s] = W_UV[h] c_s
          double v = 0;
          for (int64_t c = 0; c < R; ++c) v += double(m.w_uv[(h * DVH + e) * R + c]) * m.c[s * R + c];
          v_rows.push_back(v);
        }
      }
      double mx = -INFINITY, den = 0;
      for (double l : logit) mx = std::max(mx, l);
      for (double& l : logit) den += (l = std::exp(l - mx));
      double* o = &out[(t * H + h) * DVH];
      for (size_t i = 0; i < logit.size(); ++i)
        for (int64_t e = 0; e < DVH; ++e) o[e] += logit[i] / den * v_rows[i * DVH + e];
      for (int64_t e = 0; e < DVH; ++e) o[e] /= 1.0 + std::exp(-double(m.gate[(t * H + h) * DVH + e]));
    }
  }
  return out;
}

// The absorbed kernel inputs of the layer: q_abs, k = [c, kr], v = c, v_up[h][c][e] = W_UV[h][e][c].
DsaInputs AbsorbedInputs(const DsaSpec& spec, const MlaLayer& m, uint64_t seed) {
  DsaInputs in = validators::RandomDsaInputs(spec, 1, T, seed);  // the indexer's inputs
  in.q.assign(T * H * (R + DR), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float* qa = &in.q[(t * H + h) * (R + DR)];
      const float* qm = &m.q[(t * H + h) * (DN + DR)];
      for (int64_t c = 0; c < R; ++c)
        for (int64_t d = 0; d < DN; ++d) qa[c] += qm[d] * m.w_uk[(h * DN + d) * R + c];
      for (int64_t d = 0; d < DR; ++d) qa[R + d] = qm[DN + d];
    }
  in.k.resize(T * (R + DR));
  for (int64_t s = 0; s < T; ++s) {
    std::copy_n(&m.c[s * R], R, &in.k[s * (R + DR)]);
    std::copy_n(&m.kr[s * DR], DR, &in.k[s * (R + DR) + R]);
  }
  in.v = m.c;
  in.v_up.resize(H * R * DVH);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < R; ++c)
      for (int64_t e = 0; e < DVH; ++e) in.v_up[(h * R + c) * DVH + e] = m.w_uv[(h * DVH + e) * R + c];
  in.gate = m.gate;
  return in;
}

TEST(DsaGating, KernelGatesThePerHeadOutputAfterTheValueUpProjectionAsTheModelDoes) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  const DsaSpec spec = SpecOfLayer();
  // Step 1: the spec of a gated MLA layer up-projects in the kernel (the old spec had no v_up_dim and
  // wanted an r-wide gate, which the model does not have).
  ASSERT_EQ(spec.v_up_dim, DVH);
  ASSERT_EQ(spec.v_head_dim, R);
  ASSERT_TRUE(spec.output_gate);
  const MlaLayer m = RandomLayer(7);
  const DsaInputs in = AbsorbedInputs(spec, m, 8);
  const std::vector<int32_t> sel = validators::ReferenceDsaIndices(spec, in);
  const std::vector<double> hf = HfGatedMla(m, sel, spec.topk);
  // Step 2: the generated CPU kernel against the HF-semantics reference, NaN-poisoned output.
  auto gen = codegen::GenerateDsa(spec, {});
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  std::vector<float> o(hf.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> idx(sel.size(), -9);
  ASSERT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), in.gate.data(), nullptr, in.v_up.data(), o.data(), idx.data(),
                            1, T, 2),
            0);
  EXPECT_EQ(idx, sel);
  const auto cpu = validators::CompareKernelOutput(o, hf);
  EXPECT_TRUE(cpu.nonfinite_match);
  EXPECT_LT(cpu.rel, 1e-5) << "CPU kernel vs HF-semantics gated MLA";
  // Step 3: the CUDA kernel under CPU emulation (not a GPU run), same inputs.
  auto cu = codegen::GenerateDsa(spec, {codegen::KernelTarget::kCuda, 90});
  ASSERT_TRUE(cu.ok()) << cu.status().ToString();
  auto emu = validators::LoadEmulatedCudaKernel(*cu);
  ASSERT_TRUE(emu.ok()) << emu.status().ToString();
  std::vector<float> oc(hf.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(emu->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                         in.index_w.data(), in.gate.data(), nullptr, in.v_up.data(), oc.data(), nullptr,
                         nullptr, 1, T, nullptr),
            0)
      << emu->message();
  const auto cuda = validators::CompareKernelOutput(oc, hf);
  EXPECT_TRUE(cuda.nonfinite_match);
  EXPECT_LT(cuda.rel, 1e-5) << "CUDA kernel (emulated) vs HF-semantics gated MLA";
  // Step 4 (negative control): the old order, the latent gated before the projection, with the model's
  // gate carried into the latent (W_UV^T g, the only r-wide gate the model's tensors give), then
  // up-projected: far from the model.
  DsaSpec old = spec;
  old.v_up_dim = 0;
  DsaInputs lat_in = in;
  lat_in.gate.assign(T * H * R, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < R; ++c)
        for (int64_t e = 0; e < DVH; ++e)
          lat_in.gate[(t * H + h) * R + c] += m.w_uv[(h * DVH + e) * R + c] * m.gate[(t * H + h) * DVH + e];
  const std::vector<double> lat = validators::ReferenceDsaAttention(old, lat_in, sel);  // [T,H,r] gated
  std::vector<float> old_out(hf.size(), 0.0f);
  for (int64_t th = 0; th < T * H; ++th)
    for (int64_t e = 0; e < DVH; ++e) {
      double acc = 0;
      for (int64_t c = 0; c < R; ++c) acc += lat[th * R + c] * in.v_up[((th % H) * R + c) * DVH + e];
      old_out[th * DVH + e] = static_cast<float>(acc);
    }
  const auto bad = validators::CompareKernelOutput(old_out, hf);
  std::printf("gated MLA vs HF semantics: CPU %.3g, CUDA emulated %.3g; latent-gated (old) %.3g\n", cpu.rel,
              cuda.rel, bad.rel);
  EXPECT_GT(bad.rel, 1e-2) << "the old latent gating must not pass the check";
}

// v_up_dim is validated like the other dims, and a kernel with v_up refuses a null v_up (2).
TEST(DsaGating, UpProjectionIsValidatedAndRequired) {
  setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0);
  DsaSpec s = SpecOfLayer();
  s.v_up_dim = 7;
  const Status st = s.Validate();
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("v_up_dim"), std::string::npos) << st.message();
  s = SpecOfLayer();
  auto gen = codegen::GenerateDsa(s, {});
  ASSERT_TRUE(gen.ok());
  auto lib = codegen::LoadCpuKernel(*gen);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const MlaLayer m = RandomLayer(1);
  const DsaInputs in = AbsorbedInputs(s, m, 2);
  std::vector<float> o(T * H * DVH);
  EXPECT_EQ((*lib)->dsa_fwd(in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(),
                            in.index_w.data(), in.gate.data(), nullptr, nullptr, o.data(), nullptr, 1, T, 1),
            2);
}

}  // namespace
}  // namespace onboard
