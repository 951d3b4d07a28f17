// Negative controls of the probe (see probe_controls.h).
#include "backends/probe_controls.h"

namespace onboard::backends {

void ApplyControl(const ProbeConfig& c, int64_t phase_salt, int64_t step, int64_t micro_batch,
                  UnitInputs* inputs, MoeRouting* routing) {
  inputs->self_only = c.control == kControlNoLookback;
  routing->random_route_seed = 0;
  if (c.control == kControlRandomRouter) {
    // Seeded by (seed, phase, step, micro-batch): the same draw in the forward and in FSDP's
    // backward recomputation of a unit; never 0 (0 = off).
    uint64_t h = c.seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(phase_salt) * 0xD6E8FEB86659FD93ull;
    h ^= static_cast<uint64_t>(step) * 0xC2B2AE3D27D4EB4Full +
         static_cast<uint64_t>(micro_batch) * 0x165667B19E3779F9ull;
    routing->random_route_seed = h | 1u;
  }
}

}  // namespace onboard::backends
