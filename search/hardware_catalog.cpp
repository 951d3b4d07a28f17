// Device types the layout reader knows by name, from vendor datasheets
// (/work/shared/reference/hardware.md; copied facts, not measurements).
// Units: TFLOP/s dense, GiB, GB/s per device each way, microseconds.
#include <vector>

#include "search/layout_file.h"

namespace onboard {
namespace {

struct Known {
  const char* name;
  double bf16, fp8, hbm_gib, hbm_gbps;
  const char* link;
  double link_gbps, link_eff, link_lat_us;
  int64_t node;  // devices on the scale-up link (0 = every device: supernode)
};

// NVLink each way = half the bidirectional figure; NVLink achieves ~0.65-0.8 of peak.
const std::vector<Known>& Catalog() {
  static const std::vector<Known> k = {
      {"A100-80GB", 312, 0, 80, 2039, "nvlink3", 300, 0.70, 5, 8},
      {"H100-80GB", 989, 1979, 80, 3350, "nvlink4", 450, 0.70, 5, 8},
      {"H800-80GB", 989, 1979, 80, 3350, "nvlink-h800", 200, 0.80, 5, 8},
      {"H200-141GB", 989, 1979, 140, 4800, "nvlink4", 450, 0.70, 5, 8},
      // Ascend 950DT: 1 PFLOP/s fp8 (announced); bf16 taken as half of fp8. Supernode fabric.
      {"Ascend-950DT", 500, 1000, 144, 4000, "ub-mesh", 1000, 0.80, 2.1, 0},
  };
  return k;
}

}  // namespace

Expected<Topology> TopologyForHardware(const std::string& hardware, int64_t devices, double nic_gbit,
                                       const std::string& origin, const std::string& fp) {
  const Known* k = nullptr;
  for (const auto& c : Catalog())
    if (hardware == c.name) k = &c;
  if (!k) {
    std::string names;
    for (const auto& c : Catalog()) names += (names.empty() ? "" : ", ") + std::string(c.name);
    return BadInput(origin, fp + "hardware", "unknown device type (known: " + names + ")", hardware);
  }
  if (devices < 1 || devices > (int64_t{1} << 20))
    return BadInput(origin, fp + "gpus", "must be in [1, 1048576]", std::to_string(devices));
  if (!(nic_gbit > 0 && nic_gbit < 1e6)) return BadInput(origin, fp + "nic_gbit", "must be > 0", std::to_string(nic_gbit));
  Topology t;
  t.name = std::string(k->name) + "-x" + std::to_string(devices);
  t.source = origin;
  t.num_devices = devices;
  t.device = {k->name, k->bf16, k->fp8, 0, k->hbm_gib, k->hbm_gbps};
  const int64_t node = k->node == 0 ? devices : k->node;
  if (devices > node && devices % node == 0) {
    t.tiers.push_back({k->link, node, k->link_gbps, k->link_lat_us, k->link_eff});
    t.tiers.push_back({"ib", devices, nic_gbit / 8.0, 10, 0.9});
  } else if (devices <= node) {
    t.tiers.push_back({k->link, devices, k->link_gbps, k->link_lat_us, k->link_eff});
  } else {
    return BadInput(origin, fp + "gpus", "must be a multiple of the " + std::to_string(node) + "-device node",
                    std::to_string(devices));
  }
  ONBOARD_RETURN_IF_ERROR(ValidateTopology(t));
  return t;
}

}  // namespace onboard
