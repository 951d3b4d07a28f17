// ProbeResult -> the plain series the probe observations read (validators/probe_observations.h):
// step times by collective kind, losses, expert loads. Torch-free: the probe's report
// (probe_report.cpp) and the loop's rules (agent/rules/) convert with these, so both observe the
// same numbers. Units: seconds, nats, tokens.
#pragma once

#include <vector>

#include "backends/probe.h"
#include "validators/probe_observations.h"

namespace onboard {

// Every step (ObserveCommShare itself leaves out the warm-up step); kinds all_gather,
// reduce_scatter, all_to_all, all_reduce, and with tp > 1 tp_all_reduce, tp_all_gather, with
// pp > 1 pp_send, pp_recv: every collective the step time holds (CollectiveTimes::total()).
StepTimes ProbeStepTimes(const ProbeResult& p);
std::vector<double> ProbeLosses(const ProbeResult& p);
// Tokens per expert summed over MoE layers and steps: load[e] (empty for a dense proxy).
std::vector<double> MeasuredExpertLoad(const ProbeResult& p);

}  // namespace onboard
