// Checks on a training probe's measurements beyond the loss curve: where the step time goes
// (share of each collective), measured vs predicted peak memory, and expert load balance.
// Plain numbers in (backends/ fills them from its ProbeStep records).
// Units: seconds, bytes, tokens; shares and ratios are dimensionless.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

// ---- Communication share ----
struct CommShareReport {
  double step_s = 0;                          // mean step time over the steps given
  std::map<std::string, double> share;        // collective kind -> mean seconds / mean step time
  double compute_share = 0;                   // 1 - sum of shares
  std::string bottleneck;                     // largest collective kind, "" when none > threshold
  std::string message;                        // "all_to_all 41% of step time: communication-bound"
};
// seconds_by_kind[kind][step]; step_s[step]. `threshold` = share above which a kind is flagged.
// Errors: empty or mismatched lengths, non-positive step time.
Expected<CommShareReport> CheckCommShare(const std::vector<double>& step_s,
                                         const std::map<std::string, std::vector<double>>& seconds_by_kind,
                                         double threshold = 0.3);

// ---- Memory: measured vs predicted ----
struct MemoryReport {
  double measured_bytes = 0;
  double predicted_bytes = 0;
  double ratio = 0;                           // measured / predicted
  bool within = false;                        // ratio in [1/tolerance, tolerance]
  std::string message;
};
// tolerance > 1 (e.g. 2: measured within 2x of predicted either way). Errors: non-positive inputs.
Expected<MemoryReport> CheckMemory(double measured_bytes, double predicted_bytes, double tolerance);

// ---- Expert balance ----
struct ExpertBalanceReport {
  std::vector<double> max_over_mean;          // per MoE layer (1.0 = perfectly even)
  double worst = 0;
  int64_t worst_layer = -1;                   // index into the input vector
  std::vector<int64_t> dead_experts;          // per layer: experts that got no token
  bool balanced = true;                       // worst <= threshold
  std::string message;
};
// tokens[layer][expert]. Errors: empty, ragged or negative counts.
Expected<ExpertBalanceReport> CheckExpertBalance(const std::vector<std::vector<int64_t>>& tokens,
                                                 double threshold = 2.0);

}  // namespace onboard
