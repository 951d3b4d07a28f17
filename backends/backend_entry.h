// The LibTorch backend as a library loaded on first use. Everything in backends/ that needs LibTorch
// (the probe launcher and workers, c10d, the HF forward of `onboard verify`) is built into
// libonboard_backend.so; the `onboard` binary does not link LibTorch, so commands that never train
// (--version, inspect, plan, kernels, the service's plan endpoint) start without loading it.
//
// The commands that do (probe, probe-worker, verify, run, the service's jobs) call the functions of
// namespace onboard::backend below: the same contracts as probe.h / hf_verify.h, reached through
// the library's one exported C symbol, kBackendEntrySymbol, which returns a BackendEntryPoints
// table. Caller and library come from the same build (same compiler, same headers): abi_version
// guards against a stale library from another build.
//
// Where the library is looked for (first that exists): $ONBOARD_BACKEND_LIB (a file path), the
// executable's directory, <exe dir>/../lib, then the build tree it was built in.
#pragma once

#include <string>
#include <vector>

#include "backends/hf_verify.h"
#include "backends/probe.h"
#include "backends/probe_weights.h"
#include "core/status.h"

namespace onboard {

// Bump when a signature below changes.
inline constexpr int kBackendAbiVersion = 3;  // 3: the real-weights probe (probe_weights.h)
inline constexpr const char* kBackendEntrySymbol = "onboard_backend_entry_v1";
inline constexpr const char* kBackendLibraryName = "libonboard_backend.so";

struct BackendEntryPoints {
  int abi_version = 0;
  std::string torch_version;  // LibTorch the library was built against
  Expected<ProbeResult> (*run_probe_spec)(const ProxySpec&, const ProbeConfig&, ProbeObserver*) = nullptr;
  Status (*run_probe_worker)(const ProbeWorkerArgs&) = nullptr;
  Expected<HfVerifyResult> (*run_hf_verify)(const HfVerifyOptions&) = nullptr;
  std::vector<std::string> (*hf_verify_summary)(const HfVerifyResult&) = nullptr;
  Expected<WeightsProbeResult> (*run_weights_probe)(const WeightsProbeOptions&) = nullptr;
  std::string (*format_weights_probe)(const WeightsProbeResult&) = nullptr;
};

// The C symbol the library exports (backends/backend_entry.cpp).
using BackendEntryFn = const BackendEntryPoints* (*)();

// dlopens the library once per process (thread-safe) and returns its table. Errors: kNotFound when
// no library is at any place above; kIo when dlopen/dlsym fails (dlerror's text) or the ABI differs.
[[nodiscard]] Expected<const BackendEntryPoints*> LoadBackend();

namespace backend {

// Same contracts as the functions of the same names in probe.h; a backend that cannot be loaded is
// the error. (`onboard verify` calls the table's run_hf_verify / hf_verify_summary.)
[[nodiscard]] Expected<ProbeResult> RunProbeSpec(const ProxySpec& spec, const ProbeConfig& config,
                                                 ProbeObserver* observer = nullptr);
[[nodiscard]] Status RunProbeWorker(const ProbeWorkerArgs& args);
// hf_verify.h's RunHfVerify (`onboard run`'s weights stage).
[[nodiscard]] Expected<HfVerifyResult> RunHfVerify(const HfVerifyOptions& options);
// probe_weights.h's RunWeightsProbe (`onboard probe --weights`, `onboard run` on a checkpoint).
[[nodiscard]] Expected<WeightsProbeResult> RunWeightsProbe(const WeightsProbeOptions& options);

}  // namespace backend
}  // namespace onboard
