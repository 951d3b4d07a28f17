// Tracking CPU allocator and in-place storage free / refill (see tensor_memory_compat.h).
#include "backends/tensor_memory_compat.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <limits>
#include <mutex>

#include "core/status.h"

namespace onboard::backends {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// Each allocation carries its size in a header in front of the data (kHeader keeps the data at
// c10's 64-byte alignment), so the raw deleter can uncount it: raw_allocate works too.
constexpr size_t kHeader = 64;

void RawDelete(void* data) {
  if (data == nullptr) return;
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
    return {data, data, &RawDelete, at::Device(at::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &RawDelete; }
};

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

}  // namespace onboard::backends
