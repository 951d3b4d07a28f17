// ProbeKernel: which implementation one kernel family (KDA, DSA) of the training probe runs
// (ProbeConfig::kda_kernel / dsa_kernel, backends/probe.h): the generated kernel (codegen/) or the
// reference LibTorch ops. One spelling, one parser, one printer; the probe JSON, the CLI's
// --kda-kernel, the loop's fallback rule and the report all go through them.
#pragma once

#include <string>

#include "core/status.h"

namespace onboard {

enum class ProbeKernel { kGenerated, kTorch };

const char* ProbeKernelName(ProbeKernel k);  // "generated" | "torch"

// `value` (exact spelling, as ProbeKernelName prints it); otherwise kBadInput naming origin, field
// and value: "--kda-kernel: field 'kda_kernel': must be generated or torch (got fast)".
[[nodiscard]] Expected<ProbeKernel> ParseProbeKernel(const std::string& origin, const std::string& field,
                                                     const std::string& value);

}  // namespace onboard
