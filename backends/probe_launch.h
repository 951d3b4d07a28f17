// INTERNAL to backends/. Starting a probe's ranks (probe_launcher.cpp), shared by the proxy probe
// (RunProbeSpec) and the real-weights probe (probe_weights.cpp): the launcher hosts the TCPStore,
// fork/execs `<worker> probe-worker --spec FILE --rank r ...` (or one srun step), watches them and
// returns once every rank exited 0 (each wrote <out_dir>/rank<r>.json). A rank that exits 2 (it
// refused its input) is kBadInput with the last line of its log; another failure, a hang past
// cfg.timeout_s or a cancel ends the probe as in probe.h.
// Read from cfg: ranks, out_dir, worker_binary, launcher, timeout_s, collective_timeout_s.
#pragma once

#include <string>

#include "backends/probe.h"

namespace onboard::backends {

// cfg->out_dir, created (or a fresh temp dir when empty).
[[nodiscard]] Status PrepareProbeOutDir(ProbeConfig* cfg);
[[nodiscard]] Status LaunchProbeRanks(const ProbeConfig& cfg, const std::string& spec_file,
                                      ProbeObserver* observer);

}  // namespace onboard::backends
