// INTERNAL to backends/ (includes LibTorch). The LibTorch-version-sensitive memory calls of the
// probe, in one place:
//   - a tracking CPU allocator: c10::SetCPUAllocator installs an allocator over c10::alloc_cpu /
//     free_cpu (what LibTorch's default CPU allocator uses) that counts the bytes of live CPU
//     tensor storages (current and high-water mark). It counts tensor storages only: not
//     Gloo's buffers, not malloc overhead, not the runtime's own memory (that is what RSS
//     adds). Storages allocated before it was installed are freed through their own deleter
//     and never counted.
//   - freeing and refilling a tensor's storage in place (FSDP's reshard-after-forward: autograd's
//     saved views of a gathered buffer stay valid, the bytes go away until the backward re-gather).
//   - an allocation trace (the saved-tensor tally of bench_probe_saved_tensors): while on, each CPU
//     storage allocated on the tracing thread is recorded with the ATen op stack that made it
//     (at::RecordFunction callbacks) and the shape of the first op output on it; what is still
//     alive when the trace stops is what the traced code left alive (for a forward under grad:
//     its output and what autograd saved for backward).
// Units: bytes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace onboard::backends {

// Installs the tracking allocator (idempotent; process-wide, highest priority). Returns false
// when LibTorch kept another allocator (then the counters stay 0).
bool InstallLiveTensorCounter();
int64_t LiveTensorBytes();      // bytes of live CPU tensor storages now
int64_t LiveTensorPeakBytes();  // high-water mark since the last ResetLiveTensorPeak
void ResetLiveTensorPeak();     // peak = live now

// Drops the bytes of t's storage (every tensor viewing it keeps its shape, strides and version;
// reading one before RefillStorage is a bug). No-op for an empty storage.
void FreeStorage(const at::Tensor& t);
// Gives t's freed storage the bytes of `src` (same storage size; src's storage is emptied: it
// must be a fresh buffer nobody else views). Views saved by autograd see the new bytes.
void RefillStorage(const at::Tensor& t, const at::Tensor& src);

// One traced allocation still alive when the trace stopped.
struct TracedAllocation {
  int64_t order = 0;  // allocation order within the trace (0 = first)
  int64_t bytes = 0;  // storage bytes
  std::string ops;    // op stack at allocation, outermost first: "aten::matmul > aten::bmm"
  std::string shape;  // "[8, 2, 128, 128] Float" of the first op output on this storage; "" none
};
// Starts tracing this thread's ops and every counted allocation (needs InstallLiveTensorCounter;
// one trace at a time). Not for the probe's hot path: each op pays a callback and a lock.
void StartAllocationTrace();
// Stops the trace; returns the traced allocations still alive, in allocation order.
std::vector<TracedAllocation> StopAllocationTrace();

}  // namespace onboard::backends
