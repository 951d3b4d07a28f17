// Tracking CPU allocator and in-place storage free / refill (see tensor_memory_compat.h).
#include "backends/tensor_memory_compat.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <limits>
#include <mutex>

#include "core/status.h"

namespace onboard::backends {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// One allocation: the inner allocator's DataPtr and its size, freed together.
struct Counted {
  at::DataPtr inner;
  int64_t bytes = 0;
};

void DeleteCounted(void* ctx) {
  auto* c = static_cast<Counted*>(ctx);
  g_live.fetch_sub(c->bytes);
  delete c;
}

class CountingAllocator final : public at::Allocator {
 public:
  explicit CountingAllocator(at::Allocator* inner) : inner_(inner) {}
  at::DataPtr allocate(size_t n) const override {
    at::DataPtr p = inner_->allocate(n);
    void* data = p.get();
    const at::Device dev = p.device();
    auto* c = new Counted{std::move(p), static_cast<int64_t>(n)};
    const int64_t live = g_live.fetch_add(c->bytes) + c->bytes;
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    return {data, c, &DeleteCounted, dev};
  }
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }  // contexts differ from data

 private:
  at::Allocator* inner_;
};

}  // namespace

bool InstallLiveTensorCounter() {
  static std::once_flag once;
  static CountingAllocator* counting = nullptr;
  std::call_once(once, [] {
    counting = new CountingAllocator(c10::GetCPUAllocator());  // lives as long as the process
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
