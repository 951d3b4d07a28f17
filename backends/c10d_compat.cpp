// c10d wrapper: the only translation unit that names c10d types (see c10d_compat.h).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include "backends/c10d_compat.h"
#include "backends/ordered_sum.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/cuda.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <thread>

namespace onboard::backends {
namespace {

// 1.13: collectives live on c10d::ProcessGroup; 2.x: on c10d::Backend (ProcessGroupGloo/NCCL
// derive from it and keep the same method names).
#if TORCH_VERSION_MAJOR >= 2
using PgBase = c10d::Backend;
#else
using PgBase = c10d::ProcessGroup;
#endif

std::chrono::milliseconds Ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
}

// CUDA collectives (NCCL) are asynchronous on the host: Work::wait() only makes the current CUDA
// stream wait for the NCCL stream. To time a collective, and to make Barrier a host barrier, the
// tensor's device is synchronized before the clock starts and after wait(). No-op on CPU tensors
// (Gloo's wait() blocks the host until the data is there).
void SyncIfCuda(const at::Tensor& t) {
  if (t.is_cuda()) torch::cuda::synchronize(t.device().index());
}

// Work::wait (1.13 and 2.x) throws on failure/timeout and returns false when the work was aborted.
// Gloo (CPU): the work's tensors (inputs, outputs, the future's value) are released on the caller's
// thread, at a point fixed by the program. wait() returns once the worker thread has marked the
// work complete, but that thread still holds the work (ProcessGroupGloo::runLoop:
// workInProgress_[i], reset only after it re-takes the queue lock). If the caller dropped its
// tensors first, the worker would free them some microseconds later, while the caller already
// allocates the next ones: the live-tensor peak (tensor_memory_compat.h) would then depend on
// thread timing (a flaky ProbeRecompute ordering, issue 17). So wait until the caller holds the
// last reference (bounded: 10 s, then go on). NCCL keeps works for its watchdog: not waited.
void Wait(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& t) {
  if (!work->wait()) throw std::runtime_error("c10d collective was aborted");
  SyncIfCuda(t);
  if (t.is_cuda()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

// Adds the wall time of a scope to one CommClock() field; `t` (the collective's input) first
// drains pending device work so that compute is not billed to the collective.
class Timed {
 public:
  Timed(double* field, const at::Tensor& t) : field_(field) {
    SyncIfCuda(t);
    t0_ = std::chrono::steady_clock::now();
  }
  ~Timed() {
    *field_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double* field_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

CollectiveTimes& CommClock() {
  static CollectiveTimes times;
  return times;
}

struct StoreHandle {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

Rendezvous::Rendezvous(const std::string& host, int64_t port, bool is_server, double timeout_s)
    : store_(std::make_unique<StoreHandle>()) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = is_server;
  opts.waitWorkers = false;
  opts.timeout = Ms(timeout_s);
  store_->store = c10::make_intrusive<c10d::TCPStore>(host, opts);
}
Rendezvous::~Rendezvous() = default;

int64_t Rendezvous::port() const { return store_->store->getPort(); }

void Rendezvous::Set(const std::string& key, const std::string& value) {
  store_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string Rendezvous::Get(const std::string& key) {
  std::vector<uint8_t> v = store_->store->get(key);
  return std::string(v.begin(), v.end());
}

struct Group::Impl {
  c10::intrusive_ptr<PgBase> pg;
  std::string backend = "local";
  bool cuda = false;  // NCCL: collectives run on CUDA tensors
  // NCCL: this rank's GPU (set_device, else the first CUDA tensor a collective saw, else the
  // current CUDA device). NCCL binds a communicator to one GPU per rank: staging or a barrier
  // tensor on another GPU would pair two ranks on one device.
  std::optional<at::Device> device;
  // Point-to-point sends in flight (work, staged tensor), waited by WaitSends.
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>> sends;

  at::Device CudaDevice() const { return device.value_or(at::Device(at::kCUDA)); }
  // NCCL has no CPU path: a CPU tensor is staged through the rank's GPU (copy in, collective,
  // copy out, all inside the collective's time); CUDA tensors and Gloo pass through.
  at::Tensor Stage(const at::Tensor& t) {
    if (!cuda) return t;
    if (t.is_cuda()) {
      if (!device) device = t.device();
      return t;
    }
    return t.to(CudaDevice());
  }
};

Group::Group(Rendezvous& store, const std::string& name, int64_t rank, int64_t size,
             double timeout_s, const std::string& master_addr)
    : impl_(std::make_unique<Impl>()), rank_(rank), size_(size) {
  if (size == 1) return;
  auto prefix = c10::make_intrusive<c10d::PrefixStore>(name, store.handle()->store);
#ifdef USE_C10D_NCCL
  const char* want = std::getenv("ONBOARD_PROBE_BACKEND");
  if (want != nullptr && std::string(want) == "nccl") {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = Ms(timeout_s);
    // 2.x: ProcessGroupNCCL(c10::intrusive_ptr<Store>, int rank, int size, intrusive_ptr<Options>)
    // (1.13: const intrusive_ptr<Store>&); Options::create(bool high_priority = false), `timeout`
    // inherited from Backend::Options (1.13: ProcessGroup::Options).
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefix, rank, size, opts);
    impl_->backend = "nccl";
    impl_->cuda = true;
    return;
  }
#endif
  auto opts = c10d::ProcessGroupGloo::Options::create(Ms(timeout_s));
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (master_addr == "127.0.0.1" || master_addr == "localhost") {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = 1;
  impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefix, rank, size, opts);
  impl_->backend = "gloo";
}
Group::~Group() = default;

std::string Group::backend() const { return impl_->backend; }
bool Group::needs_cuda_tensors() const { return impl_->cuda; }
void Group::set_device(const at::Device& device) {
  if (device.is_cuda()) impl_->device = device;
}

at::Tensor Group::GatherRows(const at::Tensor& t) {
  at::Tensor in = impl_->Stage(t.contiguous().view({-1}));
  // Gloo (1.13) lacks _allgather_base: the list form writes into the rows of one output.
  at::Tensor out = at::empty({size_, in.numel()}, in.options());
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int64_t r = 0; r < size_; ++r) outs[0].push_back(out[r]);
  std::vector<at::Tensor> ins{in};
  Wait(impl_->pg->allgather(outs, ins), out);
  return out;
}

at::Tensor Group::AllGather(const at::Tensor& shard) {
  if (size_ == 1) return shard.contiguous().clone();
  Timed t(&CommClock().all_gather_s, shard);
  return GatherRows(shard).view({-1}).to(shard.device());
}

at::Tensor Group::ReduceScatterSum(const at::Tensor& full) {
  ONBOARD_ASSERT(full.numel() % size_ == 0, "reduce-scatter input not divisible by group size");
  if (size_ == 1) return full.contiguous().clone();
  Timed t(&CommClock().reduce_scatter_s, full);
  at::Tensor in = impl_->Stage(full.contiguous());
  const int64_t n = in.numel() / size_;
#ifdef USE_C10D_NCCL
  if (impl_->backend == "nccl") {
    // NCCL's own reduction order: fast, but not bit-identical across layouts (header comment).
    at::Tensor out = at::empty({n}, in.options());
    Wait(impl_->pg->_reduce_scatter_base(out, in), out);
    return out.to(full.device());
  }
#endif
  // Gloo: alltoall of equal chunks, then sum the `size` received chunks of my shard in the
  // canonical pairwise order over ranks (ordered_sum.h): layout-independent bits.
  at::Tensor recv = at::empty_like(in);
  std::vector<int64_t> equal;  // empty split lists = equal splits
  Wait(impl_->pg->alltoall_base(recv, in, equal, equal), recv);
  return TreeSumRows(recv.view({size_, n})).to(full.device());
}

// ---- Asynchronous all-to-all (issue 18 overlap) ----
// Clocks: posted = the post returned; completed = the work's future callback (Gloo runs it on its
// worker thread before wait() can return; 0 = not seen, then the wait's entry bounds it).
struct AllToAllHandle::State {
  c10::intrusive_ptr<c10d::Work> work;  // null: nothing in flight (size-1 group, or waited)
  at::Tensor out;                       // the staged receive buffer, then the result
  at::Device device = at::kCPU;         // the input's device
  std::chrono::steady_clock::time_point posted;
  std::shared_ptr<std::atomic<int64_t>> completed_ns = std::make_shared<std::atomic<int64_t>>(0);
};

AllToAllHandle::AllToAllHandle() = default;
AllToAllHandle::~AllToAllHandle() = default;
AllToAllHandle::AllToAllHandle(AllToAllHandle&&) noexcept = default;
AllToAllHandle& AllToAllHandle::operator=(AllToAllHandle&&) noexcept = default;

at::Tensor AllToAllHandle::Wait() {
  ONBOARD_ASSERT(s_ != nullptr, "AllToAllHandle::Wait on a handle that was never posted");
  if (!s_->work) return s_->out;
  const auto entered = std::chrono::steady_clock::now();
  {
    Timed t(&CommClock().all_to_all_s, s_->out);
    backends::Wait(s_->work, s_->out);  // the file's c10d wait (throws on failure / abort)
  }
  const int64_t done = s_->completed_ns->load();
  const auto completed =
      done > 0 ? std::chrono::steady_clock::time_point(std::chrono::nanoseconds(done)) : entered;
  const double hidden = std::chrono::duration<double>(std::min(completed, entered) - s_->posted).count();
  CommClock().all_to_all_hidden_s += std::max(0.0, hidden);
  s_->work.reset();
  s_->out = s_->out.to(s_->device);
  return s_->out;
}

AllToAllHandle Group::AllToAllStart(const at::Tensor& in, const std::vector<int64_t>& send_rows,
                                    const std::vector<int64_t>& recv_rows) {
  ONBOARD_ASSERT(static_cast<int64_t>(send_rows.size()) == size_ &&
                     static_cast<int64_t>(recv_rows.size()) == size_,
                 "all-to-all split lists must have one entry per rank");
  AllToAllHandle h;
  h.s_ = std::make_unique<AllToAllHandle::State>();
  h.s_->device = in.device();
  if (size_ == 1) {
    h.s_->out = in.contiguous().clone();
    return h;
  }
  int64_t total = 0;
  for (int64_t r : recv_rows) total += r;
  std::vector<int64_t> out_shape = in.sizes().vec();
  out_shape[0] = total;
  Timed t(&CommClock().all_to_all_s, in);
  at::Tensor src = impl_->Stage(in.contiguous());
  h.s_->out = at::empty(out_shape, src.options());
  std::vector<int64_t> s = send_rows, r = recv_rows;
  h.s_->work = impl_->pg->alltoall_base(h.s_->out, src, r, s);
  try {  // completion time, where the backend's work has a future (Gloo and NCCL do)
    auto done = h.s_->completed_ns;
    h.s_->work->getFuture()->addCallback([done](c10::ivalue::Future&) {
      done->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
    });
  } catch (const std::exception&) {
    // no future: the wait's entry bounds the hidden time (AllToAllHandle::Wait)
  }
  h.s_->posted = std::chrono::steady_clock::now();
  return h;
}

at::Tensor Group::AllToAll(const at::Tensor& in, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows) {
  return AllToAllStart(in, send_rows, recv_rows).Wait();
}

at::Tensor Group::AllReduceSumOrdered(const at::Tensor& t) {
  if (size_ == 1) return t;
  at::Tensor all;
  {
    Timed timer(&CommClock().all_reduce_s, t);  // counted as an all-reduce: what it replaces
    all = GatherRows(t);
  }
  return TreeSumRows(all).view(t.sizes()).to(t.device());
}

void Group::AllReduceSum(at::Tensor& t) {
  if (size_ == 1) return;
  Timed timer(&CommClock().all_reduce_s, t);
  std::vector<at::Tensor> v{impl_->Stage(t)};
  Wait(impl_->pg->allreduce(v), v[0]);
  if (!v[0].is_same(t)) t.copy_(v[0]);  // staged CPU tensor: copy the sum back in place
}

void Group::Barrier() {
  if (size_ == 1) return;
  // NCCL: a tensor on the rank's GPU; AllReduceSum synchronizes that device after
  // wait(), so every rank's host has passed the all-reduce when Barrier returns (like Gloo's).
  at::Tensor t = at::zeros({1}, at::TensorOptions().device(impl_->cuda ? impl_->CudaDevice()
                                                                       : at::Device(at::kCPU)));
  AllReduceSum(t);
}

void Group::Send(const at::Tensor& t, int64_t peer, int64_t tag) {
  ONBOARD_ASSERT(size_ > 1 && peer >= 0 && peer < size_ && peer != rank_, "point-to-point peer out of range");
  Timed timer(&CommClock().pp_send_s, t);
  std::vector<at::Tensor> v{impl_->Stage(t.contiguous())};
  impl_->sends.emplace_back(impl_->pg->send(v, static_cast<int>(peer), static_cast<int>(tag)), v[0]);
}

at::Tensor Group::Recv(at::IntArrayRef shape, const at::TensorOptions& options, int64_t peer, int64_t tag) {
  ONBOARD_ASSERT(size_ > 1 && peer >= 0 && peer < size_ && peer != rank_, "point-to-point peer out of range");
  at::Tensor out = at::empty(shape, options);
  Timed timer(&CommClock().pp_recv_s, out);
  std::vector<at::Tensor> v{impl_->Stage(out)};
  Wait(impl_->pg->recv(v, static_cast<int>(peer), static_cast<int>(tag)), v[0]);
  if (!v[0].is_same(out)) out.copy_(v[0]);
  return out;
}

void Group::WaitSends() {
  if (impl_->sends.empty()) return;
  Timed timer(&CommClock().pp_send_s, impl_->sends.back().second);
  for (auto& [work, t] : impl_->sends) Wait(work, t);
  impl_->sends.clear();
}

std::string TorchVersionString() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
}

std::string CompiledBackends() {
#ifdef USE_C10D_NCCL
  return "gloo,nccl";
#else
  return "gloo";
#endif
}

}  // namespace onboard::backends
