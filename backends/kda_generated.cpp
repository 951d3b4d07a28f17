// KDA core with the generated CPU kernel as forward and LibTorch-ops recompute as backward
// (kda_generated.h). Shapes: q_raw, k_raw [B,T,H,K]; v [B,T,H,V]; g [B,T,H,K]; beta [B,T,H].
#include "backends/kda_generated.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backends/generated_kernel_load.h"
#include "backends/kda_chunked.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor L2Normalise(const at::Tensor& x) { return x * at::rsqrt(x.pow(2).sum(-1, true) + 1e-6); }

// One loaded library per (H, K, V, chunk) in this process; nullptr + reason when it cannot load.
// perturbed_gate (control perturbed_kda_gate): the kernel is generated with the kOriginal gate form
// on an input that is already the log decay, so it applies -exp(0) * softplus(g) to it: the gate
// activated twice, a wrong gate_form in the kernel spec.
const LoadedKernel& KernelFor(int64_t H, int64_t K, int64_t V, int64_t chunk, bool perturbed_gate) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, LoadedKernel> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(H, K, V, chunk, perturbed_gate);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  codegen::KdaSpec spec;
  spec.num_heads = H;
  spec.num_v_heads = H;
  spec.head_dim = K;
  spec.v_head_dim = V;
  spec.chunk_size = chunk;
  spec.gate_form =
      perturbed_gate ? GateForm::kOriginal : GateForm::kNone;  // kNone: the layer computes the log decay
  spec.normalize_qk = true;           // same L2 normalisation (eps 1e-6) and K^-1/2 as the layer
  LoadedKernel l =
      LoadGeneratedKernel(codegen::GenerateKda(spec, codegen::TargetOptions{}), "onboard_kda_fwd",
                          [](const codegen::CpuKernelLibrary& k) { return k.kda_fwd != nullptr; });
  return cache.emplace(key, std::move(l)).first->second;
}

// Forward: generated kernel. Backward: recompute KdaCoreTorch under autograd.
struct KdaGeneratedFn : public torch::autograd::Function<KdaGeneratedFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& g, const at::Tensor& beta,
                            int64_t chunk, int64_t lib_ptr) {
    ctx->save_for_backward({q, k, v, g, beta});
    ctx->saved_data["chunk"] = chunk;
    auto* lib = reinterpret_cast<codegen::CpuKernelLibrary*>(lib_ptr);
    const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const at::Tensor gc = g.contiguous(), bc = beta.contiguous();
    at::Tensor o = at::empty({v.size(0), v.size(1), v.size(2), v.size(3)}, v.options());
    const at::Tensor a_log = at::zeros({q.size(2)}, q.options());  // read only by the perturbed gate form
    const int rc =
        lib->kda_fwd(qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), gc.data_ptr<float>(),
                     bc.data_ptr<float>(), a_log.data_ptr<float>(), nullptr, nullptr, o.data_ptr<float>(),
                     nullptr, q.size(0), q.size(1), static_cast<int64_t>(at::get_num_threads()));
    ONBOARD_ASSERT(rc == 0, "generated KDA kernel " + lib->name + " returned " + std::to_string(rc));
    return o;
  }

  // One sequence at a time: the chunked recompute's [1,H,N,C,C,K] pairwise-decay tensors and their
  // gradients exist for one sequence (1/B of the bytes: the whole batch's were the largest transient
  // of a full-recompute probe's backward, ~10.7 MiB over ~8 MiB of kept layer at 8 x 128 tokens).
  // Every op of KdaCoreTorch is per sequence: the same maths as the batched recompute, not the same
  // bits (grad norm ~1e-10 relative, bench/README.md), and now the same whatever a rank's batch.
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    std::vector<std::vector<at::Tensor>> parts(saved.size());  // per input: its gradient per sequence
    for (int64_t b = 0; b < saved[0].size(0); ++b) {
      variable_list leaves;
      for (const at::Tensor& t : saved) leaves.push_back(t.detach().narrow(0, b, 1).requires_grad_(true));
      at::Tensor out;
      {
        torch::AutoGradMode on(true);
        out = KdaCoreTorch(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], chunk);
      }
      const variable_list g =
          torch::autograd::grad({out}, leaves, {grad_out[0].narrow(0, b, 1)}, false, false, true);
      for (size_t i = 0; i < g.size(); ++i)
        parts[i].push_back(g[i].defined() ? g[i] : at::zeros_like(leaves[i]));
    }
    variable_list grads;
    for (size_t i = 0; i < saved.size(); ++i) grads.push_back(at::cat(parts[i], 0));
    grads.push_back(at::Tensor());  // chunk
    grads.push_back(at::Tensor());  // lib_ptr
    return grads;
  }
};

KernelCallCounter g_calls;  // ProcessKdaCalls

void LogOnce(const std::string& why) {
  g_calls.SetFallbackReason(why);
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "kda: generated kernel not used, torch ops instead: %s\n", why.c_str());
  });
}

}  // namespace

at::Tensor KdaCoreTorch(const at::Tensor& q_raw, const at::Tensor& k_raw, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& beta, int64_t chunk) {
  const double K = static_cast<double>(q_raw.size(-1));
  return KdaChunked(L2Normalise(q_raw) / std::sqrt(K), L2Normalise(k_raw), v, g, beta, chunk);
}

at::Tensor KdaCore(const at::Tensor& q_raw, const at::Tensor& k_raw, const at::Tensor& v,
                   const at::Tensor& g, const at::Tensor& beta, int64_t chunk, KdaImpl want,
                   std::string* why) {
  std::string reason;
  if (want == KdaImpl::kGenerated) {
    if (!q_raw.device().is_cpu()) {
      reason = "the generated kernel is the CPU one (tensors on " + q_raw.device().str() + ")";
    } else if (q_raw.scalar_type() != at::kFloat || v.scalar_type() != at::kFloat) {
      reason = "the generated CPU kernel is fp32 only (dtype " + std::string(c10::toString(q_raw.scalar_type())) + ")";
    } else {
      const LoadedKernel& l =
          KernelFor(q_raw.size(2), q_raw.size(3), v.size(3), chunk, ProcessKdaGateFault());
      if (l.lib) {
        g_calls.Count(true);
        return KdaGeneratedFn::apply(q_raw, k_raw, v, g, beta, chunk,
                                     reinterpret_cast<int64_t>(l.lib.get()));
      }
      reason = l.why;
    }
    LogOnce(reason);
  }
  if (why != nullptr) *why = reason;
  g_calls.Count(false);
  return KdaCoreTorch(q_raw, k_raw, v, g, beta, chunk);
}

namespace {
std::atomic<KdaImpl> g_process_kda_impl{KdaImpl::kGenerated};
}  // namespace

void SetProcessKdaImpl(KdaImpl impl) { g_process_kda_impl.store(impl); }
KdaImpl ProcessKdaImpl() { return g_process_kda_impl.load(); }

namespace {
std::atomic<bool> g_process_kda_gate_fault{false};
}  // namespace

void SetProcessKdaGateFault(bool on) { g_process_kda_gate_fault.store(on); }
bool ProcessKdaGateFault() { return g_process_kda_gate_fault.load(); }

KernelCallCounts ProcessKdaCalls() { return g_calls.Get(); }

}  // namespace onboard::backends
