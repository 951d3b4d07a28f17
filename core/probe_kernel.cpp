// The one spelling and parser of ProbeKernel (see probe_kernel.h).
#include "core/probe_kernel.h"

#include "core/enum_names.h"

namespace onboard {

const char* ProbeKernelName(ProbeKernel k) { return k == ProbeKernel::kTorch ? "torch" : "generated"; }

Expected<ProbeKernel> ParseProbeKernel(const std::string& origin, const std::string& field,
                                       const std::string& value) {
  return ParseByName(origin, field, value, {ProbeKernel::kGenerated, ProbeKernel::kTorch}, ProbeKernelName);
}

}  // namespace onboard
