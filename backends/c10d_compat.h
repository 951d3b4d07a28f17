// INTERNAL to backends/ (includes LibTorch; never include from a public header).
// The ONE place that touches c10d: TCPStore rendezvous, process groups (Gloo on CPU, NCCL when
// built with USE_C10D_NCCL), and the four collectives the probe uses, each timed per kind.
// LibTorch 1.13 (here) and 2.x (GPU machine) differ in the process-group base class
// (ProcessGroup vs Backend) and in reduce-scatter support; TORCH_VERSION_* selects.
//
// Reduce-scatter on Gloo: ProcessGroupGloo (1.13 and 2.x) throws "does not support reduce_scatter".
// ReduceScatterSum emulates it with one alltoall_base of equal splits + a local sum over the
// received [size, n] chunks: every rank sends (size-1)/size of its buffer and receives the same,
// exactly the bytes a ring reduce-scatter moves; the sum runs in the canonical pairwise rank
// order of ordered_sum.h (deterministic, layout-independent).
//
// NCCL (ONBOARD_PROBE_BACKEND=nccl in a USE_C10D_NCCL build): results come back on the input's
// device; a CPU input is staged through the rank's GPU (set_device; NCCL has no CPU path) and the
// copies count in the collective's time. CUDA collectives are timed with a device synchronize
// before and after (Work::wait only orders streams). ReduceScatterSum uses NCCL's native
// _reduce_scatter_base there: NCCL's summation order, not the canonical one (not bit-identical
// across layouts); AllReduceSumOrdered keeps the canonical order on every backend.
//
// Units: tensors are rows x features; seconds for timings.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/c10d_store.h"
#include "backends/probe.h"

namespace onboard::backends {

// An all-to-all posted by Group::AllToAllStart (issue 18 overlap). Wait() blocks until the rows
// have arrived and returns them (on the input's device); a second Wait() returns them again. Time
// spent posting and in Wait() is exposed (CollectiveTimes::all_to_all_s); the time the collective
// was in flight between the two, up to its completion, is hidden (all_to_all_hidden_s). Must be
// waited before the group is destroyed. Moves only.
class AllToAllHandle {
 public:
  AllToAllHandle();
  ~AllToAllHandle();
  AllToAllHandle(AllToAllHandle&&) noexcept;
  AllToAllHandle& operator=(AllToAllHandle&&) noexcept;
  at::Tensor Wait();

 private:
  friend class Group;
  struct State;
  std::unique_ptr<State> s_;
};

// A process group over `size` ranks named `name` (ranks that share a name form one group).
// size == 1 groups run no communication.
class Group {
 public:
  Group(Rendezvous& store, const std::string& name, int64_t rank, int64_t size, double timeout_s,
        const std::string& master_addr);
  ~Group();
  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  std::string backend() const;
  // True for NCCL groups: callers should keep their tensors on the rank's CUDA device (CPU
  // tensors still work, staged through the device at the cost of two copies per collective).
  bool needs_cuda_tensors() const;
  // NCCL: this rank's GPU, for staging and Barrier (default: the first CUDA tensor a collective
  // sees, else the current CUDA device). Call it with cuda:r before the first collective when
  // ranks share a machine; ignored for CPU devices and on Gloo.
  void set_device(const at::Device& device);

  // shard [n] -> [size*n], rank r's shard at [r*n, (r+1)*n).
  at::Tensor AllGather(const at::Tensor& shard);
  // full [size*n] -> [n]: sum over ranks of their chunk `rank()` (see header comment).
  at::Tensor ReduceScatterSum(const at::Tensor& full);
  // rows of `in` split by send_rows (one per rank) -> rows received, split by recv_rows.
  at::Tensor AllToAll(const at::Tensor& in, const std::vector<int64_t>& send_rows,
                      const std::vector<int64_t>& recv_rows);
  // The same exchange, posted without waiting (see AllToAllHandle); `in` must not change until
  // Wait() returns. Group size 1: a copy, complete at once.
  AllToAllHandle AllToAllStart(const at::Tensor& in, const std::vector<int64_t>& send_rows,
                               const std::vector<int64_t>& recv_rows);
  // In-place sum over ranks (the backend's order: not bit-reproducible across layouts).
  void AllReduceSum(at::Tensor& t);
  // Sum over ranks in the canonical pairwise rank order (ordered_sum.h): all-gather + local sum,
  // size x the bytes of a ring all-reduce; identical bits on every rank and every layout.
  at::Tensor AllReduceSumOrdered(const at::Tensor& t);
  // Returns once every rank has entered it (host-side on both Gloo and NCCL).
  void Barrier();

  // ---- Point-to-point (pipeline parallelism, backends/probe_pipeline.h) ----
  // Send posts an asynchronous send of `t` to group rank `peer` under `tag` (the tensor is kept
  // until WaitSends); Recv blocks until a tensor of `shape` arrives from `peer` under `tag`.
  // Messages of one (peer, tag) arrive in the order they were sent. Timed as pp_send_s (posting +
  // WaitSends) and pp_recv_s. Group size 1: not allowed (a stage never sends to itself).
  void Send(const at::Tensor& t, int64_t peer, int64_t tag);
  at::Tensor Recv(at::IntArrayRef shape, const at::TensorOptions& options, int64_t peer, int64_t tag);
  void WaitSends();

 private:
  // Every rank's t (flattened, staged to the group's device) as the rows of [size, numel]; untimed.
  at::Tensor GatherRows(const at::Tensor& t);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

// "1.13" / "2.3": the LibTorch the backend was compiled against.
std::string TorchVersionString();
// Backends compiled in: "gloo" or "gloo,nccl".
std::string CompiledBackends();

}  // namespace onboard::backends
