// Generates and loads one codegen/ CPU kernel for the probe's generated-kernel paths
// (kda_generated.cpp, dsa_generated.cpp), or says why it cannot: one shape of that code for both.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "core/status.h"

namespace onboard::backends {

// Forward calls of one generated-kernel path in this process by the implementation that really ran,
// and why a generated request last ran the torch ops ("" = never): the probe writes them to each
// rank's result (kda_calls, dsa_calls; issue 12), so a kernel fallback is seen to change what runs.
struct KernelCallCounts {
  int64_t generated = 0;
  int64_t torch = 0;
  std::string fallback_reason;
};

// The thread-safe counters behind KernelCallCounts, one per generated-kernel path (a process global).
class KernelCallCounter {
 public:
  void Count(bool generated) { ++(generated ? generated_ : torch_); }
  void SetFallbackReason(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = why;
  }
  KernelCallCounts Get() const {
    KernelCallCounts c;
    c.generated = generated_.load();
    c.torch = torch_.load();
    std::lock_guard<std::mutex> lock(mu_);
    c.fallback_reason = reason_;
    return c;
  }

 private:
  std::atomic<int64_t> generated_{0}, torch_{0};
  mutable std::mutex mu_;
  std::string reason_;  // guarded by mu_
};

// A loaded kernel library, or the reason there is none (the caller falls back to LibTorch ops).
struct LoadedKernel {
  std::shared_ptr<codegen::CpuKernelLibrary> lib;
  std::string why;
};

// `gen` from codegen::GenerateKda/GenerateDsa; `exports_op` says whether the library has the entry
// point the caller needs, named `op` in the reason when it does not.
template <typename HasOp>
LoadedKernel LoadGeneratedKernel(const Expected<codegen::GeneratedKernel>& gen, const char* op,
                                 HasOp exports_op) {
  LoadedKernel l;
  if (!gen.ok()) {
    l.why = gen.status().message();
    return l;
  }
  Expected<std::shared_ptr<codegen::CpuKernelLibrary>> lib = codegen::LoadCpuKernel(*gen);
  if (!lib.ok())
    l.why = lib.status().message();
  else if (!exports_op(**lib))
    l.why = std::string("library exports no ") + op;
  else
    l.lib = *lib;
  return l;
}

}  // namespace onboard::backends
