// Probe ranks through Slurm (`onboard probe --launcher slurm`): one `srun` job step of N tasks,
// task i running `<onboard> probe-worker --rank $SLURM_PROCID ...` with the launcher's TCPStore
// as rendezvous. Inside an allocation (salloc / sbatch) srun starts a step in it; outside, srun
// asks for its own allocation. Torch-free (called from backends/probe_launcher.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace onboard::backends {

struct SrunLaunch {
  std::string worker;        // `onboard` binary, the same path on every node
  std::string spec_file;     // probe_spec.json (on a filesystem every node sees)
  std::string out_dir;       // rank<r>.log / rank<r>.json / srun.log land here
  std::string steps_file;    // rank 0's steps.jsonl (ProbeWorkerArgs::steps_file); empty = none
  std::string master_addr;   // where the ranks reach the launcher's TCPStore
  int64_t master_port = 0;
  int64_t ranks = 1;
  double timeout_s = 300;    // whole step; srun is stopped (and with it every task) past it
  std::function<bool()> cancelled;  // polled while waiting; true -> the step is stopped (may be empty)
  double cancel_grace_s = 2;        // seconds between SIGTERM and SIGKILL to srun, on cancel or timeout
  // Called every 20 ms while srun runs (the launcher follows steps_file for ProbeObserver::OnStep).
  // A non-OK status stops the step like a cancel and is returned. May be empty.
  std::function<Status()> poll;
};

// The address ranks use to reach this process: $ONBOARD_PROBE_MASTER_ADDR, else this host's name.
std::string SrunMasterAddr();

// Runs the step and waits for it. Errors: srun not installed (kNotFound); a task failed or the
// step timed out (kNetwork: names the rank with no result, srun's last line and the rank's log);
// cancelled (kInternal, "cancelled: ..."): srun got SIGTERM (it signals and ends its tasks), then
// SIGKILL after cancel_grace_s; or whatever `poll` returned when it stopped the step.
Status RunRanksWithSrun(const SrunLaunch& launch);

}  // namespace onboard::backends
