// Hand-written KDA reference: the token-by-token gated delta rule, plain and obviously right.
// Layouts as codegen/kernel_abi.h: q,k [B,T,H,K]; v [B,T,HV,V]; g [B,T,HV,K] (gate input);
// beta [B,T,HV]; a_log [HV]; dt_bias [HV,K]; initial_state [B,HV,K,V]; o [B,T,HV,V].
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_spec.h"

namespace onboard::validators {

// Inputs of one KDA call (fp32, as the kernel gets them). Empty dt_bias / initial_state = zeros.
struct KdaInputs {
  int64_t batch = 0;
  int64_t seq = 0;
  std::vector<float> q, k, v, g, beta, a_log, dt_bias, initial_state;
};

template <typename Real>
struct KdaResult {
  std::vector<Real> o;            // [B,T,HV,V]
  std::vector<Real> final_state;  // [B,HV,K,V]
};

// Log decay for one channel: original -exp(a_log)*softplus(x + b); bounded lb*sigmoid(exp(a_log)*(x + b));
// none: x itself.
template <typename Real>
Real KdaLogDecay(GateForm form, double lower_bound, Real a_log, Real dt_bias, Real g_in);

// The recurrence in precision Real (double = the gold reference, float = the fp32 recurrence).
template <typename Real>
KdaResult<Real> ReferenceKda(const codegen::KdaSpec& spec, const KdaInputs& in);

// Random inputs for a check: q,k,v ~ N(0,1), g_raw ~ N(0,1), beta ~ U(0.05,0.95), a_log ~ U(-1,0.5),
// dt_bias ~ N(0,0.5), initial_state ~ N(0,0.3) when with_state.
KdaInputs RandomKdaInputs(const codegen::KdaSpec& spec, int64_t batch, int64_t seq, bool with_state,
                          uint64_t seed);

}  // namespace onboard::validators
