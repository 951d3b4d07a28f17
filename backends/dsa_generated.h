// INTERNAL to backends/ (includes LibTorch). The DSA core of the proxy's MLA layer (indexer top-k +
// softmax attention over the selected keys + the output gate) with the generated fused CPU kernel
// (codegen/, C ABI `onboard_dsa_fwd`, compiled and dlopened once per process) as its forward. The
// backward recomputes the LibTorch-ops form (backends/proxy_forward.cpp's CoreAttention over the
// kernel's selection, times the sigmoid gate) under autograd, so gradients are the reference ops'.
//
// The kernel runs the proxy's non-absorbed MLA form: per-head keys and values (HKV = heads,
// D = qk_nope + qk_rope, DV = v_head_dim), so its gate acts on the per-head output after the value
// up-projection, as the model computes it (issue 16; the absorbed form does the same with v_up).
//
// Shapes: q, k [B,T,H,D]; v [B,T,H,DV]; gate [B,T,H,DV] pre-sigmoid logits or undefined;
// index_q [B,T,HI,DI]; index_k [B,T,DI]; index_w [B,T,HI] (already scaled); out o [B,T,H,DV] and
// keep [B,T,T] bool (the selected causal keys, as proxy_forward.cpp's keep mask).
// Choice: ProbeConfig::dsa_kernel = torch (default) | generated, set once per worker process with
// SetProcessDsaImpl. A generated request that cannot be served (not CPU, not fp32, TP-split indexer
// heads, a spec the generator refuses, a library that does not load) runs torch ops, with one logged
// line giving the reason.
#pragma once

#include <torch/torch.h>

#include <string>

#include "backends/generated_kernel_load.h"  // KernelCallCounts

namespace onboard::backends {

struct DsaCoreOut {
  at::Tensor o;     // [B,T,H,DV], gated when a gate was given
  at::Tensor keep;  // [B,T,T] bool
};

// The generated kernel's forward; `served` false (and *why set) when it cannot run here: the caller
// then runs the torch ops itself.
DsaCoreOut DsaCoreGenerated(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& gate, const at::Tensor& index_q, const at::Tensor& index_k,
                            const at::Tensor& index_w, int64_t topk, bool* served, std::string* why);

// The implementation of the proxy's DSA layers in this process (default: torch ops); `topk_fault`
// (control perturbed_dsa_topk) builds the kernel with half the top-k.
void SetProcessDsaImpl(bool generated, bool topk_fault = false);
bool ProcessDsaGenerated();
// Logs `why` once per process (stderr): the generated DSA kernel was asked for and not used; it is
// also the fallback reason ProcessDsaCalls reports.
void LogDsaFallbackOnce(const std::string& why);
// One forward of a DSA core (an MLA layer with an indexer) by the generated kernel or the torch ops;
// ProcessDsaCalls: the counts in this process and the last fallback reason ("" = none). The probe
// writes them to each rank's result (issue 12), so a kernel fallback is seen to change what runs.
void RecordDsaCall(bool generated);
KernelCallCounts ProcessDsaCalls();

}  // namespace onboard::backends
