// ProbeResult -> observation inputs (see probe_step_series.h).
#include "backends/probe_step_series.h"

namespace onboard {

StepTimes ProbeStepTimes(const ProbeResult& p) {
  StepTimes t;
  for (const ProbeStep& st : p.steps) {
    t.step_s.push_back(st.step_s);
    t.compute_s.push_back(st.compute_s);
    t.seconds_by_kind["all_gather"].push_back(st.comm.all_gather_s);
    t.seconds_by_kind["reduce_scatter"].push_back(st.comm.reduce_scatter_s);
    t.seconds_by_kind["all_to_all"].push_back(st.comm.all_to_all_s);
    t.seconds_by_kind["all_reduce"].push_back(st.comm.all_reduce_s);
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
