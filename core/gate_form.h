// The KDA decay gate parameterisation: one enum for the IR, the kernel specs, the generated kernels
// and the references. Dependency-free on purpose: codegen/kernels/*.h include it, and the generator
// embeds it in every generated kernel translation unit (see cmake/embed_files.cmake).
#pragma once

namespace onboard {

// kNone: the gate input is already the log decay (<= 0).
// kOriginal: log decay = -exp(a_log) * softplus(g + dt_bias).
// kBounded: log decay = lower_bound * sigmoid(exp(a_log) * (g + dt_bias)).
enum class GateForm { kNone, kOriginal, kBounded };

}  // namespace onboard
