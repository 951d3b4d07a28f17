// Where a topology comes from: the one resolver that `onboard plan`, `onboard run` and the service
// use, so a name means the same thing everywhere.
#pragma once

#include <string>

#include "core/status.h"
#include "core/topology.h"

namespace onboard::agent {

// Topology from inline JSON (first non-space character '{'), a file path, or a name under
// examples/topologies (with or without ".json").
Expected<Topology> ResolveTopology(const std::string& spec);

}  // namespace onboard::agent
