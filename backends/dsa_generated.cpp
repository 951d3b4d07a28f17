// DSA core with the generated fused CPU kernel as forward and LibTorch-ops recompute as backward
// (dsa_generated.h). Shapes: q, k [B,T,H,D]; v, gate [B,T,H,DV]; index_q [B,T,HI,DI]; index_k [B,T,DI];
// index_w [B,T,HI]; selection [B,T,TOPK] int32 (-1 padded) -> keep [B,T,T].
#include "backends/dsa_generated.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backends/generated_kernel_load.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Step 1: one library per (H, D, DV, HI, DI, topk, gated) in this process.
const LoadedKernel& KernelFor(int64_t H, int64_t D, int64_t DV, int64_t HI, int64_t DI, int64_t topk,
                              bool gated) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>, LoadedKernel> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(H, D, DV, HI, DI, topk, gated);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  codegen::DsaSpec spec;
  spec.num_heads = H;
  spec.num_kv_heads = H;  // non-absorbed: per-head keys and values
  spec.head_dim = D;
  spec.v_head_dim = DV;
  spec.index_heads = HI;
  spec.index_head_dim = DI;
  spec.topk = topk;
  spec.block = 64;
  spec.softmax_scale = 1.0 / std::sqrt(static_cast<double>(D));  // CoreAttention's scale
  spec.output_gate = gated;
  LoadedKernel l =
      LoadGeneratedKernel(codegen::GenerateDsa(spec, codegen::TargetOptions{}), "onboard_dsa_fwd",
                          [](const codegen::CpuKernelLibrary& k) { return k.dsa_fwd != nullptr; });
  return cache.emplace(key, std::move(l)).first->second;
}

// [B,T,TOPK] int32 selection (-1 padded) -> keep [B,T,T] bool. A padding entry goes to an extra
// column T that is cut off: written to column 0 instead, its `false` could overwrite a selected key 0
// (scatter's order among equal indices is unspecified), and query 0, whose only key is 0, would keep
// nothing (a row of -inf: NaN in the backward's softmax).
at::Tensor KeepFromSelection(const at::Tensor& sel, int64_t T) {
  const at::Tensor cols = at::where(sel.ge(0), sel.to(at::kLong), at::full_like(sel, T, at::kLong));
  return at::zeros({sel.size(0), T, T + 1}, sel.options().dtype(at::kBool))
      .scatter(-1, cols, true)
      .narrow(-1, 0, T)
      .contiguous();
}

// The reference ops the backward differentiates: softmax(q k^T / sqrt(D)) over keep, times v, gated.
at::Tensor TorchCore(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& gate,
                     const at::Tensor& keep) {
  at::Tensor s =
      at::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-1, -2)) / std::sqrt(double(q.size(-1)));
  s = s.masked_fill(keep.logical_not().unsqueeze(1), -INFINITY);
  at::Tensor o = at::matmul(at::softmax(s, -1), v.transpose(1, 2)).transpose(1, 2);
  return gate.defined() ? o * at::sigmoid(gate) : o;
}

// Step 2: forward = the kernel (its selection saved as keep); backward = TorchCore under autograd.
struct DsaGeneratedFn : public torch::autograd::Function<DsaGeneratedFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& gate, const at::Tensor& iq,
                               const at::Tensor& ik, const at::Tensor& iw, int64_t topk, int64_t lib_ptr) {
    auto* lib = reinterpret_cast<codegen::CpuKernelLibrary*>(lib_ptr);
    const int64_t B = q.size(0), T = q.size(1);
    const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const at::Tensor iqc = iq.contiguous(), ikc = ik.contiguous(), iwc = iw.contiguous();
    const at::Tensor gc = gate.defined() ? gate.contiguous() : at::Tensor();
    at::Tensor o = at::empty({B, T, q.size(2), v.size(3)}, v.options());
    at::Tensor sel = at::empty({B, T, topk}, q.options().dtype(at::kInt));
    const int rc =
        lib->dsa_fwd(qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), iqc.data_ptr<float>(),
                     ikc.data_ptr<float>(), iwc.data_ptr<float>(),
                     gc.defined() ? gc.data_ptr<float>() : nullptr, nullptr, nullptr, o.data_ptr<float>(),
                     sel.data_ptr<int32_t>(), B, T, static_cast<int64_t>(at::get_num_threads()));
    ONBOARD_ASSERT(rc == 0, "generated DSA kernel " + lib->name + " returned " + std::to_string(rc));
    const at::Tensor keep = KeepFromSelection(sel, T);
    ctx->save_for_backward({q, k, v, gate.defined() ? gate : at::Tensor(), keep});
    ctx->mark_non_differentiable({keep});
    return {o, keep};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    variable_list saved = ctx->get_saved_variables();
    const bool gated = saved[3].defined();
    variable_list leaves;
    for (int i = 0; i < (gated ? 4 : 3); ++i) leaves.push_back(saved[i].detach().requires_grad_(true));
    at::Tensor out;
    {
      torch::AutoGradMode on(true);
      out = TorchCore(leaves[0], leaves[1], leaves[2], gated ? leaves[3] : at::Tensor(), saved[4]);
    }
    variable_list g = torch::autograd::grad({out}, leaves, {grad_out[0]}, false, false, true);
    for (size_t i = 0; i < g.size(); ++i)
      if (!g[i].defined()) g[i] = at::zeros_like(saved[i]);
    if (!gated) g.push_back(at::Tensor());
    for (int i = 0; i < 5; ++i) g.push_back(at::Tensor());  // iq, ik, iw (detached), topk, lib_ptr
    return g;
  }
};

std::atomic<bool> g_generated{false};
std::atomic<bool> g_topk_fault{false};  // control perturbed_dsa_topk
KernelCallCounter g_calls;              // RecordDsaCall, ProcessDsaCalls

}  // namespace

DsaCoreOut DsaCoreGenerated(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& gate, const at::Tensor& index_q, const at::Tensor& index_k,
                            const at::Tensor& index_w, int64_t topk, bool* served, std::string* why) {
  *served = false;
  if (!q.device().is_cpu()) {
    *why = "the generated DSA kernel is the CPU one (tensors on " + q.device().str() + ")";
    return {};
  }
  if (q.scalar_type() != at::kFloat) {
    *why = "the generated DSA CPU kernel is fp32 only (dtype " + std::string(c10::toString(q.scalar_type())) +
           ")";
    return {};
  }
  // perturbed_dsa_topk: the kernel keeps only half the keys it should (the selection it returns, and the
  // backward's keep, follow it).
  const int64_t kernel_topk = g_topk_fault.load() ? std::max<int64_t>(1, topk / 2) : topk;
  const LoadedKernel& l = KernelFor(q.size(2), q.size(3), v.size(3), index_q.size(2), index_q.size(3),
                                    kernel_topk, gate.defined());
  if (!l.lib) {
    *why = l.why;
    return {};
  }
  variable_list r = DsaGeneratedFn::apply(q, k, v, gate, index_q.detach(), index_k.detach(), index_w.detach(),
                                          kernel_topk, reinterpret_cast<int64_t>(l.lib.get()));
  *served = true;
  return {r[0], r[1]};
}

void SetProcessDsaImpl(bool generated, bool topk_fault) {
  g_generated.store(generated);
  g_topk_fault.store(topk_fault);
}
bool ProcessDsaGenerated() { return g_generated.load(); }

void LogDsaFallbackOnce(const std::string& why) {
  g_calls.SetFallbackReason(why);
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "dsa: generated kernel not used, torch ops instead: %s\n", why.c_str());
  });
}

void RecordDsaCall(bool generated) { g_calls.Count(generated); }

KernelCallCounts ProcessDsaCalls() { return g_calls.Get(); }

}  // namespace onboard::backends
