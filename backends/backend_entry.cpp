// The one exported symbol of libonboard_backend.so: the table of LibTorch entry points that the
// `onboard` binary calls through backends/backend_entry.h (built only into that library).
#include "backends/backend_entry.h"

#include <torch/version.h>

namespace {

const onboard::BackendEntryPoints& Table() {
  static const onboard::BackendEntryPoints table = [] {
    onboard::BackendEntryPoints t;
    t.abi_version = onboard::kBackendAbiVersion;
    t.torch_version = TORCH_VERSION;
    t.run_probe_spec = &onboard::RunProbeSpec;
    t.run_probe_worker = &onboard::RunProbeWorker;
    t.run_hf_verify = &onboard::RunHfVerify;
    t.hf_verify_summary = &onboard::HfVerifySummary;
    t.run_weights_probe = &onboard::RunWeightsProbe;
    t.format_weights_probe = &onboard::FormatWeightsProbe;
    return t;
  }();
  return table;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const onboard::BackendEntryPoints*
onboard_backend_entry_v1() {
  return &Table();
}
