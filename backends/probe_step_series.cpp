// ProbeResult -> observation inputs (see probe_step_series.h).
#include "backends/probe_step_series.h"

namespace onboard {

// Every kind of CollectiveTimes::total(), so comm + compute = the step (compute_s = step_s -
// comm.total()); the TP and PP kinds only where the probe ran them, so a probe without TP/PP
// reports the same kinds as before.
StepTimes ProbeStepTimes(const ProbeResult& p) {
  StepTimes t;
  const bool tp = p.config.tp_degree() > 1, pp = p.config.pp_degree() > 1;
  for (const ProbeStep& st : p.steps) {
    t.step_s.push_back(st.step_s);
    t.compute_s.push_back(st.compute_s);
    t.seconds_by_kind["all_gather"].push_back(st.comm.all_gather_s);
    t.seconds_by_kind["reduce_scatter"].push_back(st.comm.reduce_scatter_s);
    t.seconds_by_kind["all_to_all"].push_back(st.comm.all_to_all_s);
    t.seconds_by_kind["all_reduce"].push_back(st.comm.all_reduce_s);
    if (tp) {
      t.seconds_by_kind["tp_all_reduce"].push_back(st.comm.tp_all_reduce_s);
      t.seconds_by_kind["tp_all_gather"].push_back(st.comm.tp_all_gather_s);
    }
    if (pp) {
      t.seconds_by_kind["pp_send"].push_back(st.comm.pp_send_s);
      t.seconds_by_kind["pp_recv"].push_back(st.comm.pp_recv_s);  // includes waiting for the other stage
    }
  }
  return t;
}

std::vector<double> ProbeLosses(const ProbeResult& p) {
  std::vector<double> losses;
  for (const ProbeStep& st : p.steps) losses.push_back(st.loss);
  return losses;
}

std::vector<double> MeasuredExpertLoad(const ProbeResult& p) {
  std::vector<double> load;
  for (const ProbeStep& st : p.steps)
    for (const auto& layer : st.expert_load) {
      if (load.size() < layer.size()) load.resize(layer.size(), 0.0);
      for (size_t e = 0; e < layer.size(); ++e) load[e] += static_cast<double>(layer[e]);
    }
  return load;
}

}  // namespace onboard
