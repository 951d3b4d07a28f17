// The one spelling and parser of ProbeKernel (see probe_kernel.h).
#include "core/probe_kernel.h"

namespace onboard {

const char* ProbeKernelName(ProbeKernel k) { return k == ProbeKernel::kTorch ? "torch" : "generated"; }

Expected<ProbeKernel> ParseProbeKernel(const std::string& origin, const std::string& field,
                                       const std::string& value) {
  for (ProbeKernel k : {ProbeKernel::kGenerated, ProbeKernel::kTorch})
    if (value == ProbeKernelName(k)) return k;
  return BadInput(origin, field, "must be generated or torch", value);
}

}  // namespace onboard
