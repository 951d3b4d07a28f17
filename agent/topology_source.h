// Where a topology comes from: the one resolver that `onboard plan`, `onboard run` and the service
// use, so a name means the same thing everywhere.
#pragma once

#include <string>

#include "core/status.h"
#include "core/topology.h"

namespace onboard::agent {

// Topology from inline JSON (first non-space character '{'), a file path, or a name under
// examples/topologies (with or without ".json"). For the CLI, whose user owns the file system.
Expected<Topology> ResolveTopology(const std::string& spec);

// The file of a shipped topology (examples/topologies/<name>[.json]); never a path elsewhere, so a
// name from a network client cannot reach other files. kNotFound naming the shipped names otherwise.
Expected<std::string> ShippedTopologyPath(const std::string& name);

}  // namespace onboard::agent
