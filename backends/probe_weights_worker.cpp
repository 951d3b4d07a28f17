// RunWeightsProbeWorker: one rank of the real-weights LoRA probe (probe_weights.h has the layout, the
// adapter maths and the verdict): load the rank's slice of the checkpoint, put LoRA adapters on
// kLoraTargets' projections (probe_weights_model.cpp LayerTargets), train them over c10d, measure the
// held-out loss before and after. The rank's model and its forward: probe_weights_model.h. Units: nats per
// target token, bytes.
#include "backends/probe_weights_worker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_schedule.h"
#include "backends/probe_weights_model.h"
#include "backends/probe_weights_pp.h"

namespace onboard::backends {
namespace {

using nlohmann::json;

// World mean of a TP-replicated loss: TP rank 0 of each data rank contributes.
double GlobalLoss(Group& world, const RankModel& m, const torch::Tensor& local) {
  torch::Tensor red = torch::tensor({m.place.tp_rank == 0 ? local.item<double>() : 0.0}, torch::kDouble);
  world.AllReduceSum(red);
  return red[0].item<double>();
}

// Step 4c: held-out loss over data rank d's block of the fixed windows (no gradient).
double HeldOut(Group& world, RankModel& m, TpContext& tp, PpContext* pp, const ProbeData& data, int64_t d,
               int64_t D, bool frozen) {
  torch::NoGradGuard no_grad;
  m.frozen = frozen;
  if (!m.fsdp) ApplyAdapters(m, frozen);
  // Data rank d scores windows [d*W/D, (d+1)*W/D): every window once, whatever the layout
  // (probe_text_split.h). Without EP / FSDP only its TP group runs collectives in BatchLoss, so the
  // blocks' sizes may differ by one window between data ranks; with them every rank runs
  // ceil(W/D) windows, the rows past its block padding (not counted).
  const int64_t W = data.HeldOutWindows(), first = d * W / D, end = (d + 1) * W / D;
  const bool grouped = m.ep != nullptr || m.fsdp != nullptr;
  const Batch b = data.GetHeldOut(first, grouped ? (W + D - 1) / D : end - first, end);
  const double inv = 1.0 / double(W * b.tokens.size(1));
  return GlobalLoss(
      world, m,
      pp ? PpStageStep(m, tp, *pp, b, end - first, inv, false).loss : BatchLoss(m, tp, b, end - first, inv));
}

// Step 4b helper: the rank's loss of one step with its gradients accumulated over the micro-batches
// (--pp: the 1F1B schedule, its measured bubble into `bubble`).
torch::Tensor StepLoss(RankModel& m, TpContext& tp, PpContext* pp, const Batch& b, int64_t per, int64_t M,
                       double inv, double* bubble) {
  if (pp) {
    const PpStepResult r = PpStageStep(m, tp, *pp, b, per, inv, true, M);
    *bubble = r.bubble;
    return r.loss;
  }
  const int64_t bm = per / M;
  torch::Tensor loss;
  for (int64_t i = 0; i < M; ++i) {
    Batch mb;
    mb.tokens = b.tokens.narrow(0, i * bm, bm);
    mb.targets = b.targets.narrow(0, i * bm, bm);
    if (!m.fsdp) ApplyAdapters(m, false);  // anew per micro-batch: each backward frees its graph
    const torch::Tensor l = BatchLoss(m, tp, mb, bm, inv);
    l.backward();
    loss = i == 0 ? l.detach() : loss + l.detach();
  }
  return loss;
}

// Step 4b helper: the gradients of the adapters with routed == `routed` (all of them without EP),
// summed over `g`.
void SumGradients(RankModel& m, Group& g, bool routed) {
  auto part = [&](const Adapter& ad) { return (m.expert_dp != nullptr && ad.routed) == routed; };
  std::vector<torch::Tensor> grads;
  for (Adapter& ad : m.adapters)
    if (part(ad))
      for (torch::Tensor* p : {&ad.a, &ad.b}) grads.push_back(p->grad().flatten());
  if (grads.empty()) return;
  torch::Tensor flat = torch::cat(grads);
  g.AllReduceSum(flat);
  int64_t off = 0;
  for (Adapter& ad : m.adapters)
    if (part(ad))
      for (torch::Tensor* p : {&ad.a, &ad.b}) {
        p->mutable_grad().copy_(flat.narrow(0, off, p->numel()).view_as(*p));
        off += p->numel();
      }
}

// Step 4b: one AdamW step of the adapters on the global batch.
double TrainStep(Group& world, RankModel& m, TpContext& tp, PpContext* pp, const ProbeData& data,
                 torch::optim::AdamW& opt, const ProbeConfig& sched, int64_t step, int64_t d, int64_t D,
                 int64_t M, double* bubble) {
  opt.zero_grad();
  m.frozen = false;
  const int64_t per = sched.batch / D;
  const Batch b = data.Get(step, d * per, per);
  const double inv = 1.0 / double(sched.batch * sched.seq);
  const torch::Tensor loss = StepLoss(m, tp, pp, b, per, M, inv, bubble);
  // Every rank's gradient is its shard's / data rank's part: the world sum (PP: the stage's) is the
  // whole gradient; under EP a routed expert's adapter is on its owners only: summed over them.
  SumGradients(m, pp ? *pp->stage : world, false);
  if (m.expert_dp != nullptr) SumGradients(m, *m.expert_dp, true);
  std::vector<torch::Tensor> params, counted;
  for (Adapter& ad : m.adapters) {
    params.insert(params.end(), {ad.a, ad.b});
    // The global norm counts each adapter once: on data rank 0 (a routed expert's under EP: on the
    // first EP group) and TP rank 0 of its stage.
    const bool own = m.place.tp_rank == 0 && (m.expert_dp != nullptr && ad.routed ? d < m.place.ep : d == 0);
    if (own) counted.insert(counted.end(), {ad.a, ad.b});
  }
  if (pp || m.expert_dp != nullptr)
    ClipToGlobalNorm(params, counted, world);
  else
    torch::nn::utils::clip_grad_norm_(params, 1.0);
  for (auto& group : opt.param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(LearningRate(sched, step));
  opt.step();
  return GlobalLoss(world, m, loss.detach());
}

// Step 5 (rank 0; PP / EP: each part's writer): the adapters (`routed_only`: the routed experts') in
// PEFT's format into `dir`.
Status ExportAdapter(const WeightsProbeOptions& o, const RankModel& m, const std::string& dir,
                     bool routed_only = false) {
  PeftLoraAdapter pa;
  pa.r = o.lora_rank;
  pa.alpha = o.lora_alpha;
  pa.base_model = o.checkpoint;
  for (const Adapter& ad : m.adapters) {
    if (!ad.routed && routed_only) continue;
    pa.modules.push_back({ad.module, ad.a.detach().to(torch::kFloat), ad.b.detach().to(torch::kFloat)});
    // gpt-oss's fused experts: PEFT's target_parameters entries (WritePeftAdapter writes each once).
    if (!ad.parameter.empty()) pa.target_parameters.push_back(ad.parameter);
  }
  std::sort(pa.modules.begin(), pa.modules.end(),
            [](const LoraModule& x, const LoraModule& y) { return x.module < y.module; });
  return WritePeftAdapter(dir, pa);
}

std::vector<std::string> DtypeNames(const std::vector<HfWeightDtype>& dtypes) {
  std::vector<std::string> out;
  for (const HfWeightDtype& d : dtypes) out.push_back(HfWeightDtypeName(d));
  return out;
}

// `merged` (PP / EP, rank 0): the whole model's adapter, for the targets and counts; `layers`: the loaded
// range.
json RankJson(const ProbeWorkerArgs& a, const RankModel& m, const std::vector<double>& losses, double frozen,
              double final_loss, int64_t windows, const std::vector<int64_t>& layers,
              const PeftLoraAdapter* merged, double bubble) {
  int64_t lora = 0;
  std::vector<std::string> targets;
  for (const Adapter& ad : m.adapters) {
    lora += ad.a.numel() + ad.b.numel();
    targets.push_back(ad.module);
  }
  if (merged != nullptr) {
    lora = 0;
    targets.clear();
    for (const LoraModule& x : merged->modules) {
      lora += x.a.numel() + x.b.numel();
      targets.push_back(x.module);
    }
  }
  std::vector<int64_t> stage_layers;  // the decoder layers this rank holds (its chunks')
  for (const HfLayerWeights& l : m.w.layers) stage_layers.push_back(l.index);
  return {{"rank", a.rank},
          {"model_type", m.c.ir.model_type},
          {"bytes_read", m.bytes_read},
          {"checkpoint_bytes", m.checkpoint_bytes},
          {"tensors_used", m.w.used.size()},
          {"ep", m.place.ep},
          {"fsdp", m.place.fsdp},
          {"fsdp_gathers", m.fsdp ? m.fsdp->gathers() : 0},
          {"dtypes", DtypeNames(m.w.dtypes_seen)},
          {"layers", layers},
          {"pp", m.place.pp},
          {"pp_bubble", bubble},
          {"stage_layers", stage_layers},
          {"targets", targets},
          {"caveat", FrozenPlannedExperts(m)},
          {"lora_params", lora},
          {"train_loss", losses},
          {"held_out_frozen", frozen},
          {"held_out_final", final_loss},
          {"held_out_windows", windows}};
}

// Step 1 helper: rank r = (stage * D + d) * T + t; EP / FSDP groups: o.ep / o.fsdp consecutive data
// ranks of one stage and TP rank.
RankPlace PlaceOf(const WeightsProbeOptions& o, int64_t rank) {
  RankPlace p;
  p.tp = o.tp;
  p.data = o.ranks / (o.tp * o.pp);
  p.data_rank = (rank / p.tp) % p.data;
  p.tp_rank = rank % p.tp;
  p.pp = o.pp;
  p.stage = rank / (p.tp * p.data);
  p.interleave = o.interleave;
  p.ep = o.ep;
  p.ep_rank = p.data_rank % o.ep;
  p.fsdp = o.fsdp;
  p.fsdp_rank = p.data_rank % o.fsdp;
  // The routed experts' chunk: under EP x FSDP over the FSDP group's ranks with this EP rank (the EP
  // groups nest in the FSDP group when ep divides fsdp: fsdp / ep of them; else none: 1).
  p.expert_fsdp = o.ep == 1 ? o.fsdp : (o.fsdp % o.ep == 0 ? o.fsdp / o.ep : 1);
  p.expert_fsdp_rank = o.ep == 1 ? p.fsdp_rank : (p.expert_fsdp > 1 ? p.fsdp_rank / o.ep : 0);
  return p;
}

// Step 2 helper: the text data and the lr schedule of the proxy probe (one home).
ProbeConfig TextSchedule(const WeightsProbeOptions& o, int64_t data_ranks) {
  ProbeConfig sched;
  sched.task = ProbeTask::kText;
  sched.text_file = o.text_file;
  sched.seq = o.seq;
  sched.batch = o.batch;
  sched.seed = o.seed;
  sched.ranks = data_ranks;
  sched.steps = o.steps;
  sched.lr = o.lr;
  sched.warmup = o.warmup;
  sched.mode = FinetuneMode::kLoRA;
  sched.control = o.control;
  return sched;
}

// The rank's process groups beside the world: TP, and EP / FSDP / the pipeline pair + stage groups.
struct RankGroups {
  std::unique_ptr<Group> tp, ep, expert_dp, fsdp, expert_fsdp, pair, stage;
  TpContext tpc;
  PpContext ppc;
  PpContext* pp = nullptr;  // --pp > 1
};

// Step 3 helper: the groups, created in one order on every rank; the EP group and FSDP units set on m.
void MakeGroups(Rendezvous& store, const ProbeWorkerArgs& a, const WeightsProbeOptions& o, RankModel* m,
                RankGroups* g) {
  const RankPlace& p = m->place;
  const double to = o.collective_timeout_s;
  // Names: the stage and TP rank, then the group's index (EP / FSDP groups live inside one stage).
  const std::string d = std::to_string(p.data_rank), tname = ".t" + std::to_string(p.tp_rank) + ".";
  const std::string sname = ".s" + std::to_string(p.stage) + tname;
  g->tp = std::make_unique<Group>(store, "tp" + std::to_string(p.stage) + "." + d, p.tp_rank, p.tp, to,
                                  a.master_addr);
  g->tpc.group = g->tp.get();
  g->tpc.rank = p.tp_rank;
  g->tpc.size = p.tp;
  if (o.ep > 1) {
    g->ep = std::make_unique<Group>(store, "ep" + sname + std::to_string(p.data_rank / o.ep), p.ep_rank, o.ep,
                                    to, a.master_addr);
    m->ep = g->ep.get();
    // The holders of this EP rank's experts: the stage's data ranks d with d % ep = ep_rank, every TP rank.
    g->expert_dp = std::make_unique<Group>(
        store, "edp.s" + std::to_string(p.stage) + ".e" + std::to_string(p.ep_rank),
        (p.data_rank / o.ep) * p.tp + p.tp_rank, (p.data / o.ep) * p.tp, to, a.master_addr);
    m->expert_dp = g->expert_dp.get();
  }
  if (o.fsdp > 1) {
    const std::string block = std::to_string(p.data_rank / o.fsdp);
    g->fsdp = std::make_unique<Group>(store, "fsdp" + sname + block, p.fsdp_rank, o.fsdp, to, a.master_addr);
    if (o.ep > 1 && p.expert_fsdp > 1)  // EP x FSDP: this EP rank's ranks of the FSDP group
      g->expert_fsdp =
          std::make_unique<Group>(store, "efsdp" + sname + block + "." + std::to_string(p.ep_rank),
                                  p.expert_fsdp_rank, p.expert_fsdp, to, a.master_addr);
    SetUpFsdp(m, &g->tpc, *g->fsdp, g->expert_fsdp.get());
  }
  if (o.pp > 1) {  // this (data rank, TP rank)'s stages; this stage's ranks
    g->pair = std::make_unique<Group>(store, "pp.d" + d + tname, p.stage, o.pp, to, a.master_addr);
    g->stage = std::make_unique<Group>(store, "stage" + std::to_string(p.stage),
                                       p.data_rank * p.tp + p.tp_rank, p.data * p.tp, to, a.master_addr);
    g->ppc = {g->pair.get(), g->stage.get(), p.stage, o.pp, o.interleave};
    g->pp = &g->ppc;
  }
}

// Step 5 helper: the PEFT adapter (rank 0; PP / EP: parts, which rank 0 merges and gets back whole in
// `merged`). Each stage's first rank writes its part; under EP the other ranks of its EP group (TP rank
// 0) write their routed experts' adapters, where they hold any: every expert's adapter is in the file.
Status WriteAdapter(const ProbeWorkerArgs& a, const WeightsProbeOptions& o, const RankModel& m, Group& world,
                    std::optional<PeftLoraAdapter>* merged) {
  const std::string adapter = o.out_dir + "/adapter";
  if (o.pp == 1 && o.ep == 1) return a.rank == 0 ? ExportAdapter(o, m, adapter) : Status::Ok();
  auto part = [&](int64_t s, int64_t e) {
    return adapter + "_stage" + std::to_string(s) + (e > 0 ? "_ep" + std::to_string(e) : "");
  };
  const bool routed =
      std::any_of(m.adapters.begin(), m.adapters.end(), [](const Adapter& x) { return x.routed; });
  const int64_t d = m.place.data_rank;
  if (m.place.tp_rank == 0 && (d == 0 || (d < o.ep && routed)))
    ONBOARD_RETURN_IF_ERROR(ExportAdapter(o, m, part(m.place.stage, d), /*routed_only=*/d > 0));
  world.Barrier();
  if (a.rank != 0) return Status::Ok();
  std::vector<std::string> parts;
  for (int64_t s = 0; s < o.pp; ++s)
    for (int64_t e = 0; e < o.ep; ++e)
      if (e == 0 || std::ifstream(part(s, e) + "/adapter_config.json").good()) parts.push_back(part(s, e));
  ONBOARD_RETURN_IF_ERROR(MergeStageAdapters(parts, adapter));
  ONBOARD_ASSIGN_OR_RETURN(*merged, ReadPeftAdapter(adapter));
  return Status::Ok();
}

}  // namespace

Status RunWeightsProbeWorker(const ProbeWorkerArgs& a) {
  // Step 1: options (validated again here: the file is input), one thread per rank, the rank's place.
  std::ifstream in(a.spec_file);
  std::stringstream ss;
  ss << in.rdbuf();
  WeightsProbeOptions o;
  ONBOARD_RETURN_IF_ERROR(WeightsProbeSpecFromJson(ss.str(), a.spec_file, &o));
  if (a.world != o.ranks)
    return BadInput(a.spec_file, "ranks", "worker world size differs from the spec", std::to_string(a.world));
  at::set_num_threads(1);
  const RankPlace place = PlaceOf(o, a.rank);
  const int64_t D = place.data, d = place.data_rank;

  // Step 2: the rank's slice of the checkpoint, before any collective (bad input exits 2 on every rank).
  RankModel m;
  ONBOARD_RETURN_IF_ERROR(LoadRankModel(o, place, &m));
  ProxySpec byte_spec;  // the text task's data only reads the vocabulary (bytes)
  byte_spec.vocab = m.c.ir.vocab;
  const ProbeConfig sched = TextSchedule(o, D);
  const ProbeData data(byte_spec, sched);
  ONBOARD_RETURN_IF_ERROR(data.status());

  // Step 3: rendezvous, the world group, the rank's other groups, the FSDP units.
  Rendezvous store(a.master_addr, a.master_port, a.serve_store, o.collective_timeout_s);
  Group world(store, "world", a.rank, o.ranks, o.collective_timeout_s, a.master_addr);
  RankGroups g;
  MakeGroups(store, a, o, &m, &g);

  // Step 4: the frozen model's held-out loss, the adapter steps, the held-out loss again.
  const double frozen = HeldOut(world, m, g.tpc, g.pp, data, d, D, true);
  std::vector<torch::Tensor> params;
  for (Adapter& ad : m.adapters) params.insert(params.end(), {ad.a, ad.b});
  torch::optim::AdamW opt(
      params, torch::optim::AdamWOptions(o.lr).betas(std::make_tuple(0.9, 0.95)).weight_decay(0.0));
  std::vector<double> losses;
  double bubble = 0, bubble_sum = 0;  // --pp: the mean over the steps after the first (warm-up)
  for (int64_t step = 0; step < o.steps; ++step) {
    losses.push_back(
        TrainStep(world, m, g.tpc, g.pp, data, opt, sched, step, d, D, o.microbatches(), &bubble));
    if (step > 0 || o.steps == 1) bubble_sum += bubble;
    std::printf("rank %lld step %lld loss %.6f\n", (long long)a.rank, (long long)step, losses.back());
    std::fflush(stdout);
    if (!std::isfinite(losses.back())) break;
  }
  const double final_loss = HeldOut(world, m, g.tpc, g.pp, data, d, D, false);
  world.Barrier();

  // Step 5: the PEFT adapter and the rank's result file.
  std::optional<PeftLoraAdapter> merged;
  ONBOARD_RETURN_IF_ERROR(WriteAdapter(a, o, m, world, &merged));
  const int64_t n = int64_t(m.c.ir.layers.size());
  const std::vector<int64_t> layers{o.layers.first, o.layers.last < 0 ? n - 1 : o.layers.last};
  const std::string tmp = a.out_file + ".tmp";
  std::ofstream(tmp) << RankJson(a, m, losses, frozen, final_loss, data.HeldOutWindows(), layers,
                                 merged ? &*merged : nullptr,
                                 bubble_sum / double(std::max<int64_t>(1, losses.size() - 1)))
                            .dump();
  if (std::rename(tmp.c_str(), a.out_file.c_str()) != 0) return IoError("cannot write " + a.out_file);
  return Status::Ok();
}

}  // namespace onboard::backends
