// The one JSON form of a ProbeStep (backends/probe.h), strict both ways. Every writer and reader of
// step records uses it: the worker's per-rank records (rank<r>.json "steps" and "base_phase.steps"),
// rank 0's live stream steps.jsonl (one record per line, probe_step_tail.h), and the merged steps
// of `onboard probe --json`. Torch-free.
//
// Record (every key required, no other key allowed):
//   step            integer >= 0
//   loss            number | null (null = not finite), nats per counted token
//   grad_norm       number | null (null = not finite)
//   lr              number
//   accuracy        number | null (null = not recorded / not finite), fraction in [0, 1]
//   step_s          number, seconds
//   tokens_per_s    number, global tokens / step_s
//   compute_s       number, seconds (step_s - comm total)
//   peak_rss_bytes  integer >= 0, bytes
//   comm            {all_gather_s, reduce_scatter_s, all_to_all_s, all_to_all_hidden_s, all_reduce_s,
//                   tp_all_reduce_s, tp_all_gather_s, pp_send_s, pp_recv_s}: numbers, seconds
//   expert_load     [[integer >= 0, ...], ...]: tokens per expert, one row per MoE layer
//   indexer_kl      [number | null, ...]: nats per counted token, one per MLA layer with an indexer
// A refusal is kBadInput "<where>: field '<field>': <problem> (got <value>)", where = file[:line]
// or file + the record's place ("rank1.json steps[3]").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backends/probe.h"
#include "core/status.h"

namespace onboard::backends {

nlohmann::json ProbeStepToJson(const ProbeStep& step);
Expected<ProbeStep> ProbeStepFromJson(const nlohmann::json& j, const std::string& where);

// One steps.jsonl line: the record on one line, ending in '\n'.
std::string ProbeStepToLine(const ProbeStep& step);
// `line` without its '\n'; text that is not JSON is refused like a bad field (field "json").
Expected<ProbeStep> ProbeStepFromLine(const std::string& line, const std::string& where);

}  // namespace onboard::backends
