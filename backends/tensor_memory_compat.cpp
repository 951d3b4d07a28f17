// Tracking CPU allocator and in-place storage free / refill (see tensor_memory_compat.h).
#include "backends/tensor_memory_compat.h"

#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "core/status.h"

namespace onboard::backends {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// Allocation trace (StartAllocationTrace): the live traced storages by data pointer and the op
// stack of the tracing thread (only its thread-local callbacks push and pop).
std::atomic<bool> g_tracing{false};
struct TraceState {
  std::mutex mu;
  int64_t next = 0;
  std::unordered_map<const void*, TracedAllocation> live;
  std::vector<const char*> stack;
  at::CallbackHandle handle = 0;
};
TraceState& Trace() {
  static TraceState* t = new TraceState();  // lives as long as the process
  return *t;
}

void TraceAlloc(const void* data, size_t n) {
  TraceState& t = Trace();
  std::lock_guard<std::mutex> lock(t.mu);
  TracedAllocation a;
  a.order = t.next++;
  a.bytes = static_cast<int64_t>(n);
  for (const char* op : t.stack) a.ops += (a.ops.empty() ? "" : " > ") + std::string(op);
  if (a.ops.empty()) a.ops = "(no op)";
  t.live[data] = std::move(a);
}

void TraceFree(const void* data) {
  TraceState& t = Trace();
  std::lock_guard<std::mutex> lock(t.mu);
  t.live.erase(data);
}

// Each allocation carries its size in a header in front of the data (kHeader keeps the data at
// c10's 64-byte alignment), so the raw deleter can uncount it: raw_allocate works too.
constexpr size_t kHeader = 64;

void RawDelete(void* data) {
  if (data == nullptr) return;
  if (g_tracing.load(std::memory_order_relaxed)) TraceFree(data);
  char* base = static_cast<char*>(data) - kHeader;
  g_live.fetch_sub(*reinterpret_cast<int64_t*>(base));
  c10::free_cpu(base);
}

class CountingAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t n) const override {
    if (n == 0) return {nullptr, nullptr, &RawDelete, at::Device(at::kCPU)};
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<int64_t*>(base) = static_cast<int64_t>(n);
    const int64_t live = g_live.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {}
    void* data = base + kHeader;
    if (g_tracing.load(std::memory_order_relaxed)) TraceAlloc(data, n);
    return {data, data, &RawDelete, at::Device(at::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &RawDelete; }
};

// RecordFunction callbacks of the trace: push the op on start; on end pop it and name the shape
// of each output tensor whose storage was allocated in the trace and has no shape yet.
std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) {
  TraceState& t = Trace();
  std::lock_guard<std::mutex> lock(t.mu);
  t.stack.push_back(fn.name());
  return nullptr;
}

void NameShape(TraceState& t, const at::Tensor& x) {
  if (!x.defined() || !x.has_storage()) return;
  auto it = t.live.find(x.storage().data_ptr().get());
  if (it == t.live.end() || !it->second.shape.empty()) return;
  std::string s = "[";
  for (int64_t i = 0; i < x.dim(); ++i) s += (i ? ", " : "") + std::to_string(x.size(i));
  it->second.shape = s + "] " + std::string(c10::toString(x.scalar_type()));
}

void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  TraceState& t = Trace();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!t.stack.empty()) t.stack.pop_back();
  for (const c10::IValue& v : fn.outputs()) {
    if (v.isTensor()) NameShape(t, v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& x : v.toTensorVector()) NameShape(t, x);
  }
}

}  // namespace

bool InstallLiveTensorCounter() {
  static std::once_flag once;
  static CountingAllocator* counting = nullptr;
  std::call_once(once, [] {
    counting = new CountingAllocator();  // lives as long as the process
    c10::SetCPUAllocator(counting, std::numeric_limits<uint8_t>::max());
  });
  return c10::GetCPUAllocator() == counting;
}

int64_t LiveTensorBytes() { return g_live.load(); }
int64_t LiveTensorPeakBytes() { return g_peak.load(); }
void ResetLiveTensorPeak() { g_peak.store(g_live.load()); }

void FreeStorage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s->nbytes() == 0) return;
  s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
}

void RefillStorage(const at::Tensor& t, const at::Tensor& src) {
  c10::StorageImpl* dst = t.storage().unsafeGetStorageImpl();
  c10::StorageImpl* from = src.storage().unsafeGetStorageImpl();
  ONBOARD_ASSERT(dst->nbytes() == from->nbytes() && t.storage_offset() == src.storage_offset(),
                 "RefillStorage: storages differ (" + std::to_string(dst->nbytes()) + " vs " +
                     std::to_string(from->nbytes()) + " bytes)");
  ONBOARD_ASSERT(dst->data_ptr().get() == nullptr, "RefillStorage: storage was not freed");
  dst->set_data_ptr_noswap(from->set_data_ptr(at::DataPtr(nullptr, from->device())));
}

void StartAllocationTrace() {
  TraceState& t = Trace();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    ONBOARD_ASSERT(!g_tracing.load(), "StartAllocationTrace: a trace is already on");
    t.next = 0;
    t.live.clear();
    t.stack.clear();
  }
  t.handle = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnOpStart, &OnOpEnd)
                                            .needsOutputs(true)
                                            .scopes({at::RecordScope::FUNCTION}));
  g_tracing.store(true);
}

std::vector<TracedAllocation> StopAllocationTrace() {
  TraceState& t = Trace();
  g_tracing.store(false);
  at::removeCallback(t.handle);
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<TracedAllocation> out;
  out.reserve(t.live.size());
  for (auto& kv : t.live) out.push_back(std::move(kv.second));
  t.live.clear();
  std::sort(out.begin(), out.end(),
            [](const TracedAllocation& a, const TracedAllocation& b) { return a.order < b.order; });
  return out;
}

}  // namespace onboard::backends
