// INTERNAL to backends/. One rank of the real-weights probe (probe_weights.h) and the spec file the
// launcher hands it: {"weights_probe": WeightsProbeOptions}. `onboard probe-worker --spec FILE` runs
// this worker when the file holds that key (RunProbeWorker checks first), else the proxy probe's.
#pragma once

#include <string>

#include "backends/probe.h"
#include "backends/probe_weights.h"

namespace onboard::backends {

inline constexpr const char* kWeightsProbeSpecKey = "weights_probe";

std::string WeightsProbeSpecToJson(const WeightsProbeOptions& o);
[[nodiscard]] Status WeightsProbeSpecFromJson(const std::string& text, const std::string& file,
                                              WeightsProbeOptions* o);
// True when the spec file is a real-weights probe's (a file that cannot be read or parsed: false,
// and the proxy worker reports it).
bool IsWeightsProbeSpec(const std::string& spec_file);

// Writes <out_file> = {"rank", "bytes_read", "tensors_used", "dtypes", "targets", "lora_params",
// "frozen_params", "train_loss": [...], "held_out_frozen", "held_out_final", "held_out_windows"};
// rank 0 also writes the PEFT adapter into <out_dir>/adapter.
[[nodiscard]] Status RunWeightsProbeWorker(const ProbeWorkerArgs& a);

}  // namespace onboard::backends
