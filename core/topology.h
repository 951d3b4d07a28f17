// Cluster topology: devices and communication tiers from fast to slow.
// Units: TFLOP/s (1e12 FLOP/s), GiB (2^30 bytes) for HBM capacity, GB/s (1e9 bytes/s) for
// bandwidths (per device, each direction), microseconds for latency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

struct DeviceType {
  std::string name;             // "H200-141GB"
  double tflops_bf16 = 0;       // dense peak, TFLOP/s
  double tflops_fp8 = 0;        // dense peak, TFLOP/s (0 = not supported)
  double tflops_fp32 = 0;       // dense peak for fp32 matmul, TFLOP/s (0 = use bf16/2)
  double hbm_gib = 0;           // device memory, GiB
  double hbm_gbps = 0;          // memory bandwidth, GB/s
  double tflops_fp4 = 0;        // dense NVFP4 peak, TFLOP/s (0 = not supported)
};

struct CommTier {
  std::string name;             // "nvlink", "ib", "hccs", "loopback"
  int64_t group_size = 0;       // devices sharing this tier (cumulative: tier i spans group_size devices)
  double bw_gbps = 0;           // per-device bandwidth each way, GB/s
  double latency_us = 0;        // per-message latency, microseconds
  double efficiency = 1.0;      // achievable fraction of bw for large messages (0, 1]
};

struct Topology {
  std::string name;
  int64_t num_devices = 0;
  DeviceType device;
  std::vector<CommTier> tiers;  // fast to slow; tiers.back().group_size == num_devices
  std::string source;           // file it was read from
};

// Checks every field; the message names the file, the field and the value.
Status ValidateTopology(const Topology& t);

// Reads a topology JSON file (schema in examples/topologies/README.md).
Expected<Topology> LoadTopologyFile(const std::string& path);
// Parses topology JSON text; `origin` names it in errors.
Expected<Topology> ParseTopologyJson(const std::string& text, const std::string& origin);
std::string TopologyToJson(const Topology& t);

// Index of the slowest tier a group of `group_size` consecutive ranks must cross.
size_t TierForGroup(const Topology& t, int64_t group_size);

// "This machine" topology for a tiny proxy model (added by search/): `ranks` processes sharing
// one host, each with `matmul_gflops` measured GEMM GFLOP/s (1e9 FLOP/s), `mem_gib` GiB and a
// loopback tier of `loopback_gbps` GB/s per rank each way with `latency_us` microseconds.
Topology LocalhostTopology(int64_t ranks, double matmul_gflops, double loopback_gbps,
                           double latency_us, double mem_gib);

// Index of the slowest tier a group of `group_size` ranks with stride `stride` (ranks r, r+stride,
// ...) must cross: the group spans group_size*stride consecutive ranks when stride > 1.
size_t TierForStridedGroup(const Topology& t, int64_t group_size, int64_t stride);

}  // namespace onboard
