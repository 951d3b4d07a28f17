// Device types the layout reader knows by name, from vendor datasheets
// (/work/shared/reference/hardware.md for Ampere/Hopper; NVIDIA's HGX B200/B300 and GB200/GB300 NVL72
// datasheets for Blackwell, per-GPU share of the rack figures; copied facts, not measurements).
// Units: TFLOP/s dense (no sparsity), GiB, GB/s per device each way, microseconds, Gb/s per NIC.
#include <algorithm>
#include <vector>

#include "search/cost_model.h"
#include "search/layout_file.h"

namespace onboard {
namespace {

struct Known {
  const char* name;
  const char* alias;    // the name as measured_training_runs.json writes it ("" = none)
  double bf16, fp8, fp4, hbm_gib, hbm_gbps;  // fp4: dense NVFP4 (0 = none)
  const char* link;
  double link_gbps, link_eff, link_lat_us;
  int64_t domain;       // devices on the scale-up link (0 = every device: supernode)
  int64_t node;         // devices per host / compute tray (a job's share of a domain is a multiple)
  double nic_gbit;      // scale-out NIC per device
  double exp_tps;       // softmax exponentials (SFU MUFU.EX2), 10^12 per second (0 = no figure)
  double host_gbps;     // device <-> host memory, GB/s one way, achieved (0 = no figure)
  double mamf_bf16;     // best measured bf16 matmul, TFLOP/s (MAMF; 0 = no measurement)
};

// NVLink each way = half the bidirectional figure; NVLink achieves ~0.65-0.8 of peak.
// Blackwell (NVLink 5, 1.8 TB/s bidirectional per GPU):
//   B200 (HGX B200): 2.25 PF bf16, 4.5 PF fp8 dense, 180 GB HBM3e at 8 TB/s, 8 per node, CX-7 400 Gb/s.
//   B300 (HGX B300, Blackwell Ultra): 2.25 PF bf16, 4.5 PF fp8 dense, 288 GB HBM3e at 8 TB/s, CX-8 800 Gb/s.
//   GB200 NVL72: 180 PF bf16 / 360 PF fp8 dense per 72 GPUs = 2.5 / 5 PF, 13.4 TB HBM3e / 72 = 186 GB,
//                576 TB/s / 72 = 8 TB/s, 72-GPU NVLink domain (4 per tray), CX-7 400 Gb/s.
//   GB300 NVL72: 2.5 PF bf16, 5 PF fp8 dense per GPU, 288 GB HBM3e at 8 TB/s, 72-GPU domain, CX-8 800 Gb/s.
// Dense NVFP4 (TE NVFP4BlockScaling GEMMs; Hopper and Ampere have none): HGX B200 72 PF per 8 GPUs = 9 PF
//   (144 PF with sparsity); DGX/HGX B300 108 PF per 8 = 13.5 PF (144 PF with sparsity); GB200 NVL72 720 PF
//   per 72 = 10 PF (1,440 PF with sparsity); GB300 NVL72 1,080 PF per 72 = 15 PF, "3x that of FP8 on the
//   same GPUs" (NVIDIA technical blog "3 Ways NVFP4 Accelerates AI Training and Inference"). Ascend's
//   4-bit format is MXFP4 (e8m0 per 32), not NVFP4: 0.
// Softmax exponentials (SFU MUFU.EX2, per GPU): Blackwell 5 and Blackwell Ultra 10.7 TeraExponentials/s
//   (NVIDIA "Inside NVIDIA Blackwell Ultra" technical blog, spec table "Attention acceleration (SFU EX2)";
//   "Making Softmax More Efficient with NVIDIA Blackwell Ultra": SFU throughput doubled, measured exp2
//   4,943 vs 10,024 Gop/s on GB200 vs GB300); Ampere/Hopper: 16 exp2 per clock per SM (CUDA C++
//   Programming Guide, arithmetic instruction throughput, cc 8.0/9.0) x SMs x boost clock: A100 108 x
//   1.41 GHz = 2.4, H100/H800/H200 132 x 1.98 GHz = 4.2. HGX B200 / B300 carry the NVL72 parts' die
//   (same SMs) at the clock their datasheet peaks imply (2.25 vs 2.5 PF bf16): the SFU rate scales the
//   same way, x 2250/2500: B200 5.0 x 0.9 = 4.5, B300 10.7 x 0.9 = 9.63.
// Host link (CPU offloading's activations; stas00/ml-engineering@744d01e network/README.md): x86 hosts
//   attach each GPU by PCIe Gen5 x16, 63 GB/s one way, of which nvbandwidth measured 55 (88%) on 8x H200
//   (H100 / H800 / H200 / B200 / B300: no shipping accelerator attaches at Gen6 as of 2026-07-31); A100
//   Gen4 x16 half of it, 27.5. Grace (GB200 / GB300): NVLink-C2C 450 GB/s one way, ~80% measured one way
//   (DGX Station, one GPU per Grace) = 360, but in NVL72 trays one Grace and its 480 GB of LPDDR5X serve
//   two GPUs (TransformerEngine@d0067d0 docs/.../cpu_offloading.rst: "The GB200 pairs a Grace CPU with
//   480 GB LPDDR5X memory and two Blackwell GPUs"; GB300: 4 GPUs and 2 Grace per compute tray, NVIDIA
//   NVL72 enterprise RA), and every rank offloads at once: the Grace's memory is the bound, STREAM TRIAD
//   288-342 GB/s for a 480 GB Grace (NVIDIA/grace-cpu-benchmarking-guide@3474928 STREAM reference
//   results), midpoint 315 / 2 GPUs = 157 per GPU.
// Maximum achievable matmul (MAMF: the best of a brute-force search over bf16 torch.matmul shapes, mean
//   of 100 iterations; stas00/ml-engineering@744d01e compute/accelerator/README.md, "Maximum Achievable
//   Matmul FLOPS comparison table", measured, not datasheet): A100 SXM 271.2 (86.9% of 312), H100 SXM
//   794.5 (80.3%; "H200 is the same"), B200 1745.0 (77.6%), B300 1769.0 (78.6%), GB200 1822.0 (72.9% of
//   2500). No H800, GB300 or Ascend row: 0. The datasheets put GB200 11% above B200 (2.5 vs 2.25 PF);
//   their maximum SM clocks differ by 4.9% (2062 vs 1965 MHz, same page's clock table, nvidia-smi) and
//   their matmuls by 4.4% (fp8: 3615.6 vs 3432.5, 5.3%): GB200's datasheet peak is not sustained.
const std::vector<Known>& Catalog() {
  static const std::vector<Known> k = {
      {"A100-80GB", "", 312, 0, 0, 80, 2039, "nvlink3", 300, 0.70, 5, 8, 8, 200, 2.4, 27.5, 271.2},
      {"H100-80GB", "H100-80GB-SXM", 989, 1979, 0, 80, 3350, "nvlink4", 450, 0.70, 5, 8, 8, 400, 4.2, 55,
       794.5},
      {"H800-80GB", "H800", 989, 1979, 0, 80, 3350, "nvlink-h800", 200, 0.80, 5, 8, 8, 400, 4.2, 55, 0},
      {"H200-141GB", "", 989, 1979, 0, 140, 4800, "nvlink4", 450, 0.70, 5, 8, 8, 400, 4.2, 55, 794.5},
      {"B200-180GB", "B200", 2250, 4500, 9000, 180, 8000, "nvlink5", 900, 0.75, 5, 8, 8, 400, 4.5, 55,
       1745.0},
      {"B300-288GB", "B300", 2250, 4500, 13500, 288, 8000, "nvlink5", 900, 0.75, 5, 8, 8, 800, 9.63, 55,
       1769.0},
      {"GB200-NVL72", "GB200", 2500, 5000, 10000, 186, 8000, "nvlink5-nvl72", 900, 0.75, 5, 72, 4, 400, 5.0,
       157, 1822.0},
      {"GB300-NVL72", "GB300", 2500, 5000, 15000, 288, 8000, "nvlink5-nvl72", 900, 0.75, 5, 72, 4, 800, 10.7,
       157, 0},
      // Ascend 950DT: 1 PFLOP/s fp8 (announced); bf16 taken as half of fp8. Supernode fabric.
      {"Ascend-950DT", "", 500, 1000, 0, 144, 4000, "ub-mesh", 1000, 0.80, 2.1, 0, 0, 400, 0, 0, 0},
  };
  return k;
}

// The catalog row named `device` (its name or its alias), or null.
const Known* FindKnown(const std::string& device) {
  for (const auto& c : Catalog())
    if (device == c.name || (c.alias[0] != '\0' && device == c.alias)) return &c;
  return nullptr;
}

// The job's share of one scale-up domain: the largest multiple of `node` that divides `devices` and
// fits in `domain` (256 GPUs on NVL72 racks = 4 domains of 64).
int64_t DomainShare(const Known& k, int64_t devices) {
  if (k.domain == 0) return devices;
  if (devices <= k.domain) return devices;
  for (int64_t d = k.domain; d >= k.node; --d)
    if (d % k.node == 0 && devices % d == 0) return d;
  return k.domain;
}

}  // namespace

// NVIDIA devices (the catalog rows on NVLink) run MoE grouped GEMMs under Transformer Engine, one cuBLAS
// GEMM per expert (GroupedLinear -> nvte_multi_tensor_gemm, multi-stream cuBLAS; TE PR #853). Ascend's
// grouped matmul is one launch for all experts (torch_npu npu_grouped_matmul, MindSpeed
// --moe-grouped-gemm). Unknown devices: no figure, not charged.
bool PerExpertGemmLaunches(const std::string& device) {
  const Known* k = FindKnown(device);
  return k != nullptr && std::string(k->link).rfind("nvlink", 0) == 0;
}

double HostLinkBytesPerSecond(const std::string& device) {
  const Known* k = FindKnown(device);
  return k ? k->host_gbps * 1e9 : 0;
}

double MeasuredMatmulFlops(const std::string& device) {
  const Known* k = FindKnown(device);
  return k ? k->mamf_bf16 * 1e12 : 0;
}

double SoftmaxExpsPerSecond(const std::string& device) {
  const Known* k = FindKnown(device);
  return k ? k->exp_tps * 1e12 : 0;
}

Expected<Topology> TopologyForHardware(const std::string& hardware, int64_t devices, double nic_gbit,
                                       const std::string& origin, const std::string& fp) {
  const Known* k = FindKnown(hardware);
  if (!k) {
    std::string names;
    for (const auto& c : Catalog()) names += (names.empty() ? "" : ", ") + std::string(c.name);
    return BadInput(origin, fp + "hardware", "unknown device type (known: " + names + ")", hardware);
  }
  if (devices < 1 || devices > (int64_t{1} << 20))
    return BadInput(origin, fp + "gpus", "must be in [1, 1048576]", std::to_string(devices));
  if (nic_gbit == 0) nic_gbit = k->nic_gbit;
  if (!(nic_gbit > 0 && nic_gbit < 1e6)) return BadInput(origin, fp + "nic_gbit", "must be > 0", std::to_string(nic_gbit));
  Topology t;
  t.name = std::string(k->name) + "-x" + std::to_string(devices);
  t.source = origin;
  t.num_devices = devices;
  t.device = {k->name, k->bf16, k->fp8, 0, k->hbm_gib, k->hbm_gbps, k->fp4};
  const int64_t node = DomainShare(*k, devices);
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
