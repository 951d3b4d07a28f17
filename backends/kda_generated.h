// INTERNAL to backends/ (includes LibTorch). The KDA core of the proxy's KDA layer with a choice of
// forward: the generated CPU kernel (codegen/, C ABI `onboard_kda_fwd`, compiled and dlopened once
// per process) or the chunked LibTorch ops of kda_chunked.h. Either way the backward recomputes
// the LibTorch-ops form under autograd (custom autograd function), so gradients are identical.
//
// Shapes: q_raw, k_raw [B, T, H, K] BEFORE L2 normalisation (the op normalises them, eps 1e-6, and
// scales q by K^-1/2); v [B, T, H, V]; g [B, T, H, K] log decay <= 0; beta [B, T, H]. Out [B, T, H, V].
//
// Choice: ProbeConfig::kda_kernel = generated | torch (`onboard probe --kda-kernel`), set once per
// worker process with SetProcessKdaImpl. Default generated; falls back to torch ops, with one
// logged line giving the reason, when the dtype is not fp32, the kernel spec is invalid for the
// proxy dims (e.g. chunk not a power of two) or the kernel does not compile/load.
#pragma once

#include <torch/torch.h>

#include <string>

#include "backends/generated_kernel_load.h"  // KernelCallCounts
#include "core/probe_kernel.h"

namespace onboard::backends {

// The KDA implementation of a process: ProbeConfig::kda_kernel itself (one enum, core/probe_kernel.h).
using KdaImpl = ProbeKernel;

// Normalise + chunked KDA (the LibTorch-ops form: what the backward always differentiates).
at::Tensor KdaCoreTorch(const at::Tensor& q_raw, const at::Tensor& k_raw, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& beta, int64_t chunk);

// The same with the implementation `want`; a generated request that cannot be served runs torch
// ops (reason in *why when non-null, and logged once per process to stderr).
at::Tensor KdaCore(const at::Tensor& q_raw, const at::Tensor& k_raw, const at::Tensor& v,
                   const at::Tensor& g, const at::Tensor& beta, int64_t chunk, KdaImpl want,
                   std::string* why = nullptr);

// The implementation the proxy's KDA layers use in this process (default kGenerated); the probe
// worker sets it from its ProbeConfig before building the model.
void SetProcessKdaImpl(KdaImpl impl);
KdaImpl ProcessKdaImpl();
// Negative control perturbed_kda_gate (probe_controls.h): the generated kernel's gate is wrong (its
// forward only; the backward still differentiates the LibTorch-ops form). Set by the probe worker.
void SetProcessKdaGateFault(bool on);
bool ProcessKdaGateFault();
// Forward calls of KdaCore in this process by the implementation that really ran, and why a
// generated request last ran the torch ops ("" = never): the probe reports them (issue 12), so a
// kernel fallback is seen to change what runs.
KernelCallCounts ProcessKdaCalls();

}  // namespace onboard::backends
