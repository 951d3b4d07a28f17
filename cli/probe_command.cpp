// `onboard probe MODEL --ranks N [--tp T [--sequence-parallel] [--etp T]] [--pp P [--interleave V]]
//  [--ep E --fsdp F]
//  [--recompute KIND=none|selective|full,...]
//  [--steps S] [--mode lora|full] [--json] [--out DIR]`, or `onboard probe MODEL --plan plan.json
//  --ranks N` (the plan scaled down by ApplyPlanToProbe, agent/plan_to_probe.h):
// trains a scaled-down proxy of MODEL (same block pattern: KDA/MLA+DSA, latent MoE, shared experts)
// across N local processes with FSDP + expert parallelism over c10d (Gloo on CPU), and reports the
// loss curve, time per collective, expert load, peak memory and the cost model's prediction.
// Exit codes: 0 converged, 7 (check failed) diverged / NaN / not converged, 2 bad input,
// 5 a rank died or hung (the message names the rank).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "agent/plan_file.h"
#include "agent/plan_to_probe.h"
#include "backends/backend_entry.h"
#include "cli/command_registry.h"
#include "cli/layer_range_flag.h"
#include "core/float_dtype.h"
#include "core/lora_targets.h"
#include "core/probe_task.h"
#include "parsers/load_model.h"

namespace onboard::cli {
namespace {

struct ProbeOptions {
  std::string model;
  ProbeConfig cfg;
  std::string mode = "full";
  std::string task = "copy";
  std::string placement;      // comma-separated expert -> EP rank
  int64_t blocks = 1;
  double balance_rate = -1;  // < 0: the proxy's default
  int64_t base_steps = -1;   // LoRA base phase; -1 = the mode's default (DefaultProbeConfig)
  int64_t steps = -1;        // -1 = the mode's default
  double lr = -1;            // -1 = the mode's default
  int64_t lora_rank = -1;    // -1 = the mode's default (DefaultProbeConfig; --weights: its own)
  std::string kda_kernel;     // generated | torch; "" = default (generated, torch fallback)
  std::string dtype = "fp32";  // --dtype, parsed by ParseFloatDtype (core/float_dtype.h)
  bool json = false;
  std::string recompute;  // --recompute KIND=POLICY,... (issue 17)
  std::string plan_file;  // --plan plan.json (issue 17)
  bool weights =
      false;           // --weights: MODEL is a checkpoint directory, train LoRA on its real layers (issue 16)
  std::string layers;  // --layers A-B with --weights
  double lora_alpha = -1;  // -1 = the default (2 x rank)
};

// --weights (backends/probe_weights.h): the real embedding, layers and head of the checkpoint, LoRA on
// kLoraTargets (attention, dense MLP, shared experts), judged against the frozen checkpoint's held-out loss.
int RunWeightsProbeCommand(const ProbeOptions& o) {
  Expected<FinetuneMode> mode = ParseFinetuneMode("--mode", "mode", o.mode);
  if (!mode.ok()) return ReportError("probe", mode.status());
  if (*mode != FinetuneMode::kLoRA)
    return ReportError("probe",
                       BadInput("--mode", "mode", "--weights trains LoRA adapters: --mode lora", o.mode));
  WeightsProbeOptions w;
  w.checkpoint = o.model;
  if (Status st = cli::ParseLayerRange(o.layers, &w.layers); !st.ok()) return ReportError("probe", st);
  w.text_file = o.cfg.text_file;
  w.ranks = o.cfg.ranks;
  w.tp = o.cfg.tp_degree();
  w.ep = o.cfg.ep == 0 ? 1 : o.cfg.ep;  // --weights: 0 (the flag's default) = no EP; bad values are refused
  w.fsdp = o.cfg.fsdp == 0 ? 1 : o.cfg.fsdp;
  w.pp = o.cfg.pp;
  w.interleave = o.cfg.interleave;
  if (o.steps != -1) w.steps = o.steps;
  if (o.lr != -1) w.lr = o.lr;
  w.seq = o.cfg.seq;
  w.batch = o.cfg.batch;
  w.micro_batch = o.cfg.micro_batch;
  w.seed = o.cfg.seed;
  if (o.lora_rank != -1) w.lora_rank = o.lora_rank;
  w.lora_alpha = o.lora_alpha != -1 ? o.lora_alpha : DefaultLoraAlpha(w.lora_rank);  // checked by the backend
  Expected<FloatDtype> dtype = ParseFloatDtype("--dtype", "dtype", o.dtype);
  if (!dtype.ok()) return ReportError("probe", dtype.status());
  w.fp64 = *dtype == FloatDtype::kFP64;
  w.control = o.cfg.control;
  w.out_dir = o.cfg.out_dir;
  w.worker_binary = o.cfg.worker_binary;
  w.timeout_s = o.cfg.timeout_s;
  Expected<const BackendEntryPoints*> be = LoadBackend();
  if (!be.ok()) return ReportError("probe", be.status());
  Expected<WeightsProbeResult> r = (*be)->run_weights_probe(w);
  if (!r.ok()) return ReportError("probe", r.status());
  if (o.json) {  // the document RunWeightsProbe wrote (backends/probe_weights.h WeightsProbeToJson)
    std::ifstream f(r->out_dir + "/weights_probe.json");
    std::cout << f.rdbuf();
  } else {
    std::cout << (*be)->format_weights_probe(*r);
  }
  return r->learned ? 0 : ExitCodeFor(ErrorCode::kCheckFailed);
}

// --plan: the plan scaled to the probe's ranks (tp, pp, ep, fsdp, micro-batches, recompute), each factor
// printed with what the probe runs and why (stderr under --json, so stdout stays one document).
Status ApplyPlanFile(const ProbeOptions& o, const ModelIR& model, const ProxySpec& spec, ProbeConfig* cfg) {
  Expected<Plan> plan = agent::LoadPlanFile(o.plan_file);
  if (!plan.ok()) return plan.status();
  if (cfg->ranks < 1 || cfg->batch % cfg->ranks != 0)
    return BadInput("--batch", "batch", "must be a positive multiple of ranks=" + std::to_string(cfg->ranks),
                    std::to_string(cfg->batch));
  Expected<agent::ProbeLayout> L =
      agent::ApplyPlanToProbe(*plan, cfg->ranks, cfg->batch / cfg->ranks, spec.num_experts, &spec,
                              static_cast<int64_t>(model.layers.size()));
  if (!L.ok()) return L.status();
  cfg->tp = L->tp;
  cfg->sequence_parallel = L->sequence_parallel;
  cfg->etp = L->etp;
  cfg->pp = L->pp;
  cfg->interleave = L->interleave;
  cfg->stage_layer_starts = L->stage_layer_starts;
  cfg->ep = L->ep;
  cfg->fsdp = L->fsdp;
  cfg->micro_batch = L->micro_batch;
  cfg->recompute = L->recompute;
  std::ostream& os = o.json ? std::cerr : std::cout;
  os << "plan " << o.plan_file << " -> probe on " << cfg->ranks << " ranks:\n";
  for (const agent::ProbeFactor& f : L->factors)
    os << "  " << f.factor << ": plan " << f.plan << " -> probe " << f.probe
       << (f.reason.empty() ? "" : " (" + f.reason + ")") << "\n";
  os << "  compute_dtype: plan " << PrecisionName(plan->compute_dtype) << " -> probe "
     << FloatDtypeName(cfg->dtype)
     << " (the probe trains in its own dtype on CPU; the plan's GEMM precision is not rehearsed)\n";
  return Status::Ok();
}

Status ParsePlacement(const std::string& text, std::vector<int64_t>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out->push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return BadInput("--expert-placement", "expert_placement", "needs comma-separated integers", item);
    }
  }
  return Status::Ok();
}

int RunProbeCommand(ProbeOptions o) {
  if (o.weights) return RunWeightsProbeCommand(o);
  Expected<FinetuneMode> mode = ParseFinetuneMode("--mode", "mode", o.mode);
  if (!mode.ok()) return ReportError("probe", mode.status());
  o.cfg.mode = *mode;
  // The mode's tuned recipe (backends/probe_schedule.cpp) where the user set nothing.
  const ProbeConfig defaults = DefaultProbeConfig(o.cfg.mode);
  o.cfg.steps = o.steps == -1 ? defaults.steps : o.steps;
  o.cfg.lr = o.lr == -1 ? defaults.lr : o.lr;
  o.cfg.lora_rank = o.lora_rank == -1 ? defaults.lora_rank : o.lora_rank;
  if (!o.cfg.text_file.empty()) o.task = "text";
  Expected<ProbeTask> task = ParseProbeTask("--task", "task", o.task);
  if (!task.ok()) return ReportError("probe", task.status());
  o.cfg.task = *task;
  if (!o.placement.empty()) {
    Status st = ParsePlacement(o.placement, &o.cfg.expert_placement);
    if (!st.ok()) return ReportError("probe", st);
  }
  if (o.base_steps < -1 || o.base_steps > 100000)
    return ReportError("probe", BadInput("--base-steps", "base_steps", "must be in [0, 100000]",
                                         std::to_string(o.base_steps)));
  o.cfg.base_steps = o.base_steps == -1 ? defaults.base_steps : o.base_steps;
  Expected<FloatDtype> dtype = ParseFloatDtype("--dtype", "dtype", o.dtype);
  if (!dtype.ok()) return ReportError("probe", dtype.status());
  o.cfg.dtype = *dtype;
  if (!o.kda_kernel.empty()) {
    Expected<ProbeKernel> k = ParseProbeKernel("--kda-kernel", "kda_kernel", o.kda_kernel);
    if (!k.ok()) return ReportError("probe", k.status());
    o.cfg.kda_kernel = *k;
  }
  if (o.blocks < 1 || o.blocks > 16)
    return ReportError("probe", BadInput("--blocks", "blocks", "must be in [1, 16]", std::to_string(o.blocks)));
  Expected<ModelIR> model = LoadModel(o.model);
  if (!model.ok()) return ReportError("probe", model.status());
  ProxySpec spec = ProxyFromModel(*model, o.blocks);
  if (o.balance_rate >= 0) spec.balance_rate = o.balance_rate;
  if (!o.plan_file.empty()) {
    Status st = ApplyPlanFile(o, *model, spec, &o.cfg);
    if (!st.ok()) return ReportError("probe", st);
  }
  if (!o.recompute.empty()) {  // explicit kinds override the plan's
    Status st = ParseRecomputeList(o.recompute, &o.cfg.recompute);
    if (!st.ok()) return ReportError("probe", st);
  }
  Expected<ProbeResult> r = backend::RunProbeSpec(spec, o.cfg);
  if (!r.ok()) return ReportError("probe", r.status());
  if (o.json) std::cout << ProbeResultToJson(*r) << "\n";
  else std::cout << FormatProbeResult(*r);
  if (!o.cfg.out_dir.empty()) {
    std::ofstream(o.cfg.out_dir + "/probe_result.json") << ProbeResultToJson(*r) << "\n";
  }
  const bool parity_ok = std::all_of(r->loss_parity.begin(), r->loss_parity.end(),
                                     [](const ProbeLossParity& p) { return p.pass; });
  return r->convergence == "converged" && parity_ok ? 0 : ExitCodeFor(ErrorCode::kCheckFailed);
}

OnboardCommand kProbe{
    "probe", "Train a scaled-down proxy across N processes (FSDP + EP over c10d) and report", 40,
    [](CLI::App& sub) -> RunFn {
      auto o = std::make_shared<ProbeOptions>();
      sub.add_option("model", o->model, "model directory, config.json or .onnx")->required();
      sub.add_option("--ranks", o->cfg.ranks, "processes on this machine")->capture_default_str();
      sub.add_option("--ep", o->cfg.ep, "expert-parallel degree (default: ranks; --weights: 1)");
      sub.add_option("--fsdp", o->cfg.fsdp,
                     "FSDP shard degree (default: ranks; --weights: 1, the frozen base row-sharded)");
      sub.add_option("--tp", o->cfg.tp,
                     "tensor-parallel degree: groups of T consecutive ranks split heads, MLP widths "
                     "and vocab (Megatron-style); ep and fsdp then divide ranks/(T*P) (default 1)");
      sub.add_flag("--sequence-parallel", o->cfg.sequence_parallel,
                   "Megatron sequence parallelism over the TP group (needs --tp > 1 dividing --seq)");
      sub.add_option("--etp", o->cfg.etp,
                     "expert tensor parallelism: 1 = routed experts whole on every TP rank (default), "
                     "= tp: each expert's FFN split over the TP group (Megatron "
                     "--expert-tensor-parallel-size)");
      sub.add_option("--pp", o->cfg.pp,
                     "pipeline stages P (outermost: stage = rank / (ranks/P)); divides ranks/T; ep and "
                     "fsdp then divide ranks/(T*P)")
          ->capture_default_str();
      sub.add_option("--interleave", o->cfg.interleave,
                     "virtual pipeline stages per rank (1 = 1F1B; > 1 = interleaved 1F1B)")
          ->capture_default_str();
      sub.add_option("--steps", o->steps, "optimizer steps (default: full 400; lora 150 adapter steps)");
      sub.add_option("--mode", o->mode, "full | lora")->capture_default_str();
      sub.add_option("--lora-rank", o->lora_rank, "LoRA rank (default 16; --weights: 4)");
      sub.add_option("--kda-kernel", o->kda_kernel,
                     "KDA forward: generated (CPU kernel from codegen/, default) | torch (LibTorch ops)");
      sub.add_option("--base-steps", o->base_steps,
                     "lora: full-training steps of the base on the source task before the adapter "
                     "steps (default: the full recipe's 400 steps)");
      const double full_lr = DefaultProbeConfig(FinetuneMode::kFull).lr,
                   lora_lr = DefaultProbeConfig(FinetuneMode::kLoRA).lr;
      std::ostringstream lr_help;  // the recipe's own numbers (backends/probe_schedule.h)
      lr_help << "peak learning rate (default: full " << full_lr << "; lora adapters " << lora_lr
              << ", base phase lr x " << full_lr / lora_lr << ")";
      sub.add_option("--lr", o->lr, lr_help.str());
      sub.add_option("--warmup", o->cfg.warmup, "warm-up steps")->capture_default_str();
      sub.add_option("--clip", o->cfg.clip, "grad-norm clip (0 = off)")->capture_default_str();
      sub.add_option("--seed", o->cfg.seed, "seed")->capture_default_str();
      sub.add_option("--seq", o->cfg.seq, "tokens per sequence")->capture_default_str();
      sub.add_option("--batch", o->cfg.batch, "global sequences per step")->capture_default_str();
      sub.add_option("--micro-batch", o->cfg.micro_batch,
                     "sequences per micro-batch per rank (0 = batch/ranks); gradients accumulate "
                     "over batch/(ranks*micro_batch) micro-steps")->capture_default_str();
      sub.add_option("--task", o->task,
                     "copy | text | lookup (needs the experts: backends/probe_lookup.h) | image (needs the "
                     "vision tower: backends/probe_image.h)")
          ->capture_default_str();
      sub.add_option("--text", o->cfg.text_file, "text file for the byte-level text task");
      sub.add_option("--blocks", o->blocks, "proxy depth in 4-layer blocks")->capture_default_str();
      sub.add_option("--balance-rate", o->balance_rate,
                     "aux-loss-free balancing bias step per optimizer step (models with an expert "
                     "score bias; default 0.02, 0 = bias off)");
      sub.add_option("--device", o->cfg.device, "cpu | cuda (rank r on cuda:r; several ranks need "
                     "ONBOARD_PROBE_BACKEND=nccl)")->capture_default_str();
      sub.add_option("--threads", o->cfg.threads_per_rank, "intra-op threads per rank")->capture_default_str();
      sub.add_option("--expert-placement", o->placement, "expert->EP rank list, e.g. 0,1,0,1,...");
      sub.add_option("--converge-fraction", o->cfg.converge_fraction,
                     "converged when final loss < fraction * start")->capture_default_str();
      sub.add_option("--timeout", o->cfg.timeout_s, "seconds for the whole probe")->capture_default_str();
      sub.add_option("--out", o->cfg.out_dir, "folder for logs and per-rank JSON");
      sub.add_option("--worker", o->cfg.worker_binary, "onboard binary for the workers (default: this one)");
      sub.add_option("--launcher", o->cfg.launcher,
                     "local (fork/exec here) | slurm (one srun step: inside an allocation, or its own)")
          ->check(CLI::IsMember({"local", "slurm"}))->capture_default_str();
      sub.add_option("--dtype", o->dtype, "fp32 | fp64")->capture_default_str();
      sub.add_option(
          "--control", o->cfg.control,
          "negative control that must fail the learning verdict: no_lookback | "
          "random_router | frozen_lora (lora mode) | perturbed_kda_gate (caught by kernel loss parity) | "
          "no_image (task image: blank images)");
      sub.add_option("--loss-parity", o->cfg.loss_parity_steps,
                     "kernel loss parity: also train the proxy's KDA layers this many steps with the "
                     "generated kernel and with the LibTorch ops and compare the curves (0 = off; e.g. 50)")
          ->capture_default_str();
      sub.add_option("--recompute", o->recompute,
                     "recompute per block kind, e.g. KDA=selective,MoE=none (kinds KDA, MLA, DSA, MoE, "
                     "MLP, * = the rest; default full)");
      sub.add_option(
          "--plan", o->plan_file,
          "plan JSON (`onboard plan --json`): its ep, fsdp, micro-batches and recompute, scaled to --ranks");
      // Issue 18 (expert communication).
      sub.add_option("--ranks-per-node", o->cfg.ranks_per_node,
                     "ranks that share a node (consecutive; 0 = one node): the probe measures "
                     "cross-node (slow-tier) expert traffic, e.g. --ranks 4 --ranks-per-node 2")
          ->capture_default_str();
      sub.add_option("--max-route-nodes", o->cfg.max_route_nodes,
                     "node-limited routing (DeepSeek-V3): each token's experts on at most M nodes "
                     "(0 = off; needs --ranks-per-node)")
          ->capture_default_str();
      sub.add_flag("--moe-overlap", o->cfg.moe_overlap,
                   "post the EP dispatch / combine all-to-alls asynchronously and run the shared "
                   "expert while they are in flight (the curve is unchanged; exposed vs hidden "
                   "all-to-all time is measured)");
      sub.add_option(
             "--ep-dispatcher", o->cfg.ep_dispatcher,
             "EP dispatch: alltoall (one row per token and expert rank) or deepep (node-deduplicated: "
             "once per remote node, forwarded inside it; needs --ranks-per-node with >= 2 nodes)")
          ->capture_default_str();
      sub.add_option("--expert-phy2log", o->cfg.expert_phy2log,
                     "redundant experts (EPLB phy2log): logical expert of each physical slot, slots of EP "
                     "rank r = [r*S, (r+1)*S); copies a power of two dividing ep")
          ->delimiter(',');
      sub.add_flag("--json", o->json, "print the result as JSON");
      // Issue 16 (real checkpoints).
      CLI::Option* weights = sub.add_flag(
          "--weights", o->weights,
          "MODEL is a checkpoint directory: LoRA on its real embedding, --layers and head over "
          "--text (needs --mode lora; --ranks, --tp, --steps, --lr, --seq, --batch, --lora-rank apply)");
      // Without --weights these two would be ignored: refused instead (exit 2, "... requires --weights").
      sub.add_option("--layers", o->layers,
                     "with --weights: decoder layers A-B (0-based, inclusive; default all)")
          ->needs(weights);
      sub.add_option("--lora-alpha", o->lora_alpha, "with --weights: LoRA alpha (default 2 x rank)")
          ->needs(weights);
      return [o] { return RunProbeCommand(*o); };
    }};

}  // namespace
}  // namespace onboard::cli
