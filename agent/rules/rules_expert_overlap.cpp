// Rule "expert_overlap" (family comm): the probe's expert all-to-all (dispatch + combine) was waited
// on as soon as it was posted, and the time the host blocked on it is a large share of the step ->
// re-probe with the all-to-alls overlapped with the shared expert's compute (ProbeConfig::moe_overlap,
// backends/proxy_moe.cpp Steps 4b / 6b: the shared expert's up- and down-projection run while the
// dispatch and the combine are in flight), so the next round measures how much of the exchange the
// overlap hides. The report's "Expert communication by probe round" shows the exposed and hidden
// all-to-all per round and the last round against the first.
// Needs a probe over >= 2 declared nodes (ProbeConfig::ranks_per_node: the exchange crosses the slow
// tier, where DeepSeek-V3's DualPipe and Megatron's --overlap-moe-expert-parallel-comm hide it; within
// one node the loopback timing says little about the target's NVLink), something to overlap with (a
// shared expert in the proxy) and the plain all-to-all dispatcher (the probe's node-deduplicating
// deepep dispatch runs synchronously, backends/probe_layout_check.h).
// Fires once: with the overlap on it has nothing left to change.
// Units: seconds per step (mean over the steps after the first, max over ranks); share dimensionless.
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {

std::optional<Decision> RuleExpertOverlap(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe || k.moe_overlap) return std::nullopt;
  const ProbeResult& p = *ev.probe;
  // Step 1: a probe whose expert exchange could be overlapped at all.
  if (p.config.moe_overlap || p.config.nodes() < 2 || p.config.ep_degree() < 2 ||
      p.config.ep_dispatcher != "alltoall" || p.spec.num_shared < 1 || p.spec.num_experts < 1)
    return std::nullopt;
  // Step 2: the measured exposed share of the step.
  const CommShareReport c = ProbeCommShare(p, th);
  const MeasuredExpertAllToAll a2a = MeasuredExpertExchange(p);
  if (c.steps == 0 || !(c.step_s > 0)) return std::nullopt;
  const double share = a2a.exposed_s / c.step_s;
  if (!(share > th.expert_a2a_exposed_share)) return std::nullopt;
  // Step 3: the decision.
  Decision d;
  d.round = ev.round;
  d.rule = "expert_overlap";
  d.family = "comm";
  d.observed = {{"a2a_exposed_s", a2a.exposed_s},
                {"a2a_hidden_s", a2a.hidden_s},
                {"step_s", c.step_s},
                {"a2a_exposed_share", share}};
  char thr[96];
  std::snprintf(thr, sizeof(thr), "exposed expert all-to-all / step > %.2f", th.expert_a2a_exposed_share);
  d.threshold = thr;
  d.changed["moe_overlap"] = {false, true};
  k.moe_overlap = true;
  k.reprobe = true;
  char act[240];
  std::snprintf(act, sizeof(act),
                "overlap the expert dispatch / combine with the shared expert's compute (%.1f ms of %.1f ms "
                "per step exposed), re-probe to measure what the overlap hides",
                1e3 * a2a.exposed_s, 1e3 * c.step_s);
  d.action = act;
  return d;
}

}  // namespace onboard::agent
