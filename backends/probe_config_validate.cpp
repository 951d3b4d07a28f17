// ProbeConfig::Validate: the probe configuration checked field by field against its proxy, in
// named steps (layout and optimizer, task, run limits, control, expert placement, nodes and
// dispatch, replicas); the first bad field is the error. No LibTorch here.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "backends/probe.h"
#include "backends/probe_image.h"
#include "backends/probe_layout_check.h"
#include "backends/probe_replicas.h"
#include "backends/probe_schedule.h"

namespace onboard {
namespace {

Status Bad(const std::string& field, const std::string& problem, const std::string& value) {
  return BadInput("probe", field, problem, value);
}

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Step 1: ranks and parallel factors, steps, the pipeline fault, sequence length, LoRA rank and
// the optimizer's numbers.
Status ValidateLayoutAndOptimizer(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.ranks < 1 || c.ranks > 64) return Bad("ranks", "must be in [1, 64]", std::to_string(c.ranks));
  ONBOARD_RETURN_IF_ERROR(ValidateParallelFactors(c, spec));  // tp, pp, fsdp, ep, batch (one error)
  if (c.steps < 1 || c.steps > 100000) return Bad("steps", "must be in [1, 100000]", std::to_string(c.steps));
  if (!c.pp_fault.empty() && c.pp_fault != kPipeFaultSwapBackward)
    return Bad("pp_fault", std::string("must be empty or ") + kPipeFaultSwapBackward, c.pp_fault);
  if (c.pp_degree() > 1 && c.control == kControlRandomRouter)
    return Bad("control", "random_router is not supported with pp > 1", c.control);
  if (c.seq < 4 || c.seq > 8192) return Bad("seq", "must be in [4, 8192]", std::to_string(c.seq));
  if (c.mode == FinetuneMode::kLoRA && (c.lora_rank < 1 || c.lora_rank > backends::kMaxLoraRank))
    return Bad("lora_rank", "must be in [1, " + std::to_string(backends::kMaxLoraRank) + "] in lora mode",
               std::to_string(c.lora_rank));
  if (!(c.lr > 0) || !std::isfinite(c.lr)) return Bad("lr", "must be a finite number > 0", Num(c.lr));
  if (c.warmup < 0) return Bad("warmup", "must be >= 0", std::to_string(c.warmup));
  if (!(c.clip >= 0)) return Bad("clip", "must be >= 0", Num(c.clip));
  if (!(c.weight_decay >= 0)) return Bad("weight_decay", "must be >= 0", Num(c.weight_decay));
  if (!(c.beta1 >= 0 && c.beta1 < 1)) return Bad("beta1", "must be in [0, 1)", Num(c.beta1));
  if (!(c.beta2 >= 0 && c.beta2 < 1)) return Bad("beta2", "must be in [0, 1)", Num(c.beta2));
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1))
    return Bad("min_lr_ratio", "must be in [0, 1]", Num(c.min_lr_ratio));
  return Status::Ok();
}

// Step 2: the copy, lookup and text tasks' own fields.
Status ValidateTaskFields(const ProbeConfig& c) {
  if (c.task == ProbeTask::kCopy && (c.copy_symbols < 2 || c.copy_symbols > 250))
    return Bad("copy_symbols", "must be in [2, 250]", std::to_string(c.copy_symbols));
  if (c.task == ProbeTask::kCopy && c.copy_symbols < (c.seq - 1) / 2)
    return Bad(
        "copy_symbols",
        "must be >= (seq-1)/2 = " + std::to_string((c.seq - 1) / 2) + " (the copied symbols are distinct)",
        std::to_string(c.copy_symbols));
  if (c.task == ProbeTask::kLookup) {  // lookup task (issue 12, backends/probe_lookup.h)
    if (c.lookup_keys < 2 || c.lookup_keys > 26)
      return Bad("lookup_keys", "must be in [2, 26]", std::to_string(c.lookup_keys));
    if (c.lookup_values < 2 || c.lookup_values > 127)
      return Bad("lookup_values", "must be in [2, 127]", std::to_string(c.lookup_values));
    if (c.seq < 3) return Bad("seq", "the lookup task needs seq >= 3 (one triple)", std::to_string(c.seq));
    if (c.mode == FinetuneMode::kLoRA)
      return Bad("task", "lookup runs in mode full only (no LoRA source task)", "lookup");
  }
  if (c.task == ProbeTask::kText && c.text_file.empty())
    return Bad("text_file", "text task needs a file", "");
  return Status::Ok();
}

// The image task's limits (probe_image.h): a tower, full training, one embed unit on one rank of
// a TP/PP group, and room for the placeholders, BOS and the answers.
Status ValidateImageTask(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.task != ProbeTask::kImage) {
    if (c.control == kControlNoImage) return Bad("control", "no_image needs task image", c.control);
    return Status::Ok();
  }
  if (spec.vision.blocks == 0)
    return Bad("task", "image needs a vision tower (the model has no vision_config)", "image");
  if (c.mode == FinetuneMode::kLoRA) return Bad("task", "image runs in mode full only", "image");
  if (c.tp_degree() > 1 || c.pp_degree() > 1)
    return Bad("task", "image runs with tp 1 and pp 1 (the tower is not split)", "image");
  const int64_t m = backends::ImageTokens(spec.vision);
  if (c.seq < 2 * m + 1)
    return Bad("seq",
               "the image task needs seq >= " + std::to_string(2 * m + 1) + " (" + std::to_string(m) +
                   " image tokens, BOS and " + std::to_string(m) + " answers)",
               std::to_string(c.seq));
  return Status::Ok();
}

// Step 3: the run's limits: timeouts, device, threads, the convergence fraction, base steps.
Status ValidateRunLimits(const ProbeConfig& c) {
  if (!(c.timeout_s > 0)) return Bad("timeout", "must be > 0 seconds", Num(c.timeout_s));
  if (!(c.collective_timeout_s > 0))
    return Bad("collective_timeout", "must be > 0 seconds", Num(c.collective_timeout_s));
  if (c.device != "cpu" && c.device != "cuda") return Bad("device", "must be cpu or cuda", c.device);
  if (c.threads_per_rank < 1 || c.threads_per_rank > 64)
    return Bad("threads_per_rank", "must be in [1, 64]", std::to_string(c.threads_per_rank));
  if (!(c.converge_fraction > 0 && c.converge_fraction < 1))
    return Bad("converge_fraction", "must be in (0, 1)", Num(c.converge_fraction));
  if (c.base_steps < -1 || c.base_steps > 100000)
    return Bad("base_steps", "must be -1 (default) or in [0, 100000]", std::to_string(c.base_steps));
  return Status::Ok();
}

// Step 4: the negative control: a known name, and what it needs of the proxy and the config.
Status ValidateControl(const ProbeConfig& c, const ProxySpec& spec) {
  const std::string& control = c.control;
  if (!control.empty() && control != kControlNoLookback && control != kControlRandomRouter &&
      control != kControlFrozenLora && control != kControlPerturbedKdaGate &&
      control != kControlPerturbedDsaTopk && control != kControlNoImage)
    return Bad("control",
               std::string("must be one of ") + kControlNoLookback + ", " + kControlRandomRouter + ", " +
                   kControlFrozenLora + ", " + kControlPerturbedKdaGate + ", " + kControlPerturbedDsaTopk +
                   ", " + kControlNoImage,
               control);
  if (control == kControlPerturbedDsaTopk &&
      (c.dsa_kernel != ProbeKernel::kGenerated ||
       std::none_of(spec.layers.begin(), spec.layers.end(),
                    [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kMLA; }) ||
       spec.index_topk < 2 || spec.index_heads < 1))
    return Bad("control",
               "perturbed_dsa_topk needs an MLA layer with an indexer (top-k >= 2) and dsa_kernel generated",
               control);
  if (control == kControlPerturbedKdaGate &&
      (c.kda_kernel != ProbeKernel::kGenerated ||
       std::none_of(spec.layers.begin(), spec.layers.end(),
                    [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kKDA; })))
    return Bad("control", "perturbed_kda_gate needs a KDA layer and kda_kernel generated", control);
  if (control == kControlFrozenLora && c.mode != FinetuneMode::kLoRA)
    return Bad("control", "frozen_lora needs mode lora", control);
  if (control == kControlRandomRouter &&
      std::none_of(spec.layers.begin(), spec.layers.end(),
                   [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; }))
    return Bad("control", "random_router needs a MoE layer (the proxy has none)", control);
  return Status::Ok();
}

// Step 5 (per-layer placement, issue 18): num_experts x MoE layers entries, layer after layer;
// each layer's block is checked as a placement of its own (the whole config with that block).
Status ValidatePerLayerPlacement(const ProbeConfig& c, const ProxySpec& spec, int64_t moe_layers) {
  if (!c.expert_phy2log.empty())
    return Bad("expert_placement", "a per-layer placement cannot be combined with expert_phy2log",
               "both set");
  ProbeConfig one = c;
  for (int64_t i = 0; i < moe_layers; ++i) {
    one.expert_placement.assign(c.expert_placement.begin() + i * spec.num_experts,
                                c.expert_placement.begin() + (i + 1) * spec.num_experts);
    if (Status st = one.Validate(spec); !st.ok())
      return Bad("expert_placement", "MoE layer " + std::to_string(i) + ": " + st.message(), "per layer");
  }
  return Status::Ok();
}

// Step 5: one placement for every MoE layer: an EP rank per expert, num_experts/ep on each.
Status ValidateExpertPlacement(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.expert_placement.empty()) return Status::Ok();
  const int64_t e = c.ep_degree();
  if (static_cast<int64_t>(c.expert_placement.size()) != spec.num_experts)
    return Bad("expert_placement", "needs one EP rank per expert (" + std::to_string(spec.num_experts) + ")",
               std::to_string(c.expert_placement.size()));
  std::vector<int64_t> per_rank(static_cast<size_t>(e), 0);
  for (size_t i = 0; i < c.expert_placement.size(); ++i) {
    int64_t r = c.expert_placement[i];
    if (r < 0 || r >= e)
      return Bad("expert_placement",
                 "expert " + std::to_string(i) + " placed on rank outside [0, ep=" + std::to_string(e) + ")",
                 std::to_string(r));
    per_rank[static_cast<size_t>(r)] += 1;
  }
  for (int64_t r = 0; r < e; ++r)
    if (per_rank[static_cast<size_t>(r)] != spec.num_experts / e)
      return Bad("expert_placement",
                 "EP rank " + std::to_string(r) + " holds " +
                     std::to_string(per_rank[static_cast<size_t>(r)]) +
                     " experts; every rank must hold num_experts/ep=" + std::to_string(spec.num_experts / e),
                 std::to_string(per_rank[static_cast<size_t>(r)]));
  return Status::Ok();
}

// Step 6: ranks per node and node-limited routing (the EP dispatcher is checked after these).
Status ValidateNodes(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.ranks_per_node < 0 || (c.ranks_per_node > 0 && c.ranks % c.ranks_per_node != 0))
    return Bad("ranks_per_node", "must be 0 (one node) or divide ranks=" + std::to_string(c.ranks),
               std::to_string(c.ranks_per_node));
  if (c.max_route_nodes < 0 || c.max_route_nodes > c.nodes())
    return Bad("max_route_nodes", "must be 0 (off) or in [1, nodes=" + std::to_string(c.nodes()) + "]",
               std::to_string(c.max_route_nodes));
  if (c.max_route_nodes > 0 && c.max_route_nodes * (spec.num_experts / c.nodes()) < spec.top_k)
    return Bad("max_route_nodes",
               "its nodes hold fewer than top_k=" + std::to_string(spec.top_k) + " experts",
               std::to_string(c.max_route_nodes));
  return Status::Ok();
}

// Step 7: redundant experts (probe_replicas.h): a valid phy2log, EP over all data ranks.
Status ValidateReplicas(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.expert_phy2log.empty()) return Status::Ok();
  Expected<ReplicaMap> m = BuildReplicaMap(c.expert_phy2log, spec.num_experts, c.ep_degree());
  if (!m.ok()) return m.status();
  // TP: each TP rank's EP group holds every slot and computes the routed experts alike
  // (probe_tp.h), so the replicas' gradient exchange runs inside each EP group unchanged.
  if (c.ep_degree() != c.data_ranks())
    return Bad("expert_phy2log", "needs one EP group over all data ranks (ep = ranks / (tp * pp))",
               "ep=" + std::to_string(c.ep_degree()) + " data ranks=" + std::to_string(c.data_ranks()));
  return Status::Ok();
}

}  // namespace

Status ProbeConfig::Validate(const ProxySpec& spec) const {
  // Step 1: layout and optimizer.
  ONBOARD_RETURN_IF_ERROR(ValidateLayoutAndOptimizer(*this, spec));
  // Step 2: the task (image: the tower and room for its tokens), then the recompute policies.
  ONBOARD_RETURN_IF_ERROR(ValidateTaskFields(*this));
  ONBOARD_RETURN_IF_ERROR(ValidateImageTask(*this, spec));
  ONBOARD_RETURN_IF_ERROR(ValidateRecompute(*this));
  // Step 3: the run's limits.
  ONBOARD_RETURN_IF_ERROR(ValidateRunLimits(*this));
  // Step 4: the negative control; kernel loss parity (issue 12).
  ONBOARD_RETURN_IF_ERROR(ValidateControl(*this, spec));
  if (loss_parity_steps < 0 || loss_parity_steps > 100000)
    return Bad("loss_parity_steps", "must be in [0, 100000] (0 = off)", std::to_string(loss_parity_steps));
  // Step 5: expert placement; a per-layer one is checked block by block, each with the rest of
  // this config, and nothing after.
  const auto moe_layers = std::count_if(spec.layers.begin(), spec.layers.end(),
                                        [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; });
  if (moe_layers > 1 && static_cast<int64_t>(expert_placement.size()) == spec.num_experts * moe_layers)
    return ValidatePerLayerPlacement(*this, spec, moe_layers);
  ONBOARD_RETURN_IF_ERROR(ValidateExpertPlacement(*this, spec));
  // Step 6: nodes, node-limited routing and the EP dispatcher.
  ONBOARD_RETURN_IF_ERROR(ValidateNodes(*this, spec));
  ONBOARD_RETURN_IF_ERROR(ValidateEpDispatcher(*this));
  // Step 7: redundant experts; the fault rank, the observation thresholds and the proxy itself.
  ONBOARD_RETURN_IF_ERROR(ValidateReplicas(*this, spec));
  if (die_rank >= ranks) return Bad("die_rank", "must be < ranks", std::to_string(die_rank));
  ONBOARD_RETURN_IF_ERROR(thresholds.Validate());
  return spec.Validate();
}

}  // namespace onboard
