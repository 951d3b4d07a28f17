// RunWeightsProbeWorker: one rank of the real-weights LoRA probe (probe_weights.h has the layout, the
// adapter maths and the verdict): load the rank's slice of the checkpoint, put LoRA adapters on the
// attention projections, train them over c10d, measure the held-out loss before and after.
// Shapes: weights [out, in] (this rank's TP shard); A [r, in], B [out, r] whole on every rank;
// activations [S, hidden] per window; tokens / targets [b, S]. Units: nats per target token, bytes.
#include "backends/probe_weights_worker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/hf_model.h"
#include "backends/hf_peft_adapter.h"
#include "backends/probe_data.h"
#include "backends/probe_schedule.h"
#include "backends/probe_tp.h"

namespace onboard::backends {
namespace {

using nlohmann::json;

// One adapted projection. `target` points into the rank's loaded layers; its weight is replaced by
// base + scale x (B A restricted to the shard) before each forward.
struct Adapter {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  HfLinear* target = nullptr;
  torch::Tensor base;  // the loaded shard [out_l, in_l]
  bool cols = false;   // row-parallel (o_proj): the shard holds columns of W, so A's columns
  torch::Tensor a, b;  // [r, in], [out, r], trainable
};

struct RankModel {
  std::optional<SafetensorsCheckpoint> ckpt;  // kept open: F32 weights alias its mapping
  HfForwardConfig c;
  HfModelWeights w;              // the rank's slice (TP shard when tp > 1)
  std::vector<LayerSpec> specs;  // per loaded layer: the shard's spec
  std::vector<Adapter> adapters;
  double scale = 0;  // alpha / r
  int64_t tp = 1, tp_rank = 0;
  uint64_t bytes_read = 0, checkpoint_bytes = 0;
};

// Step 3 helper: adapters on q/k/v/o_proj of every loaded layer that has them (GQA, MLA with a
// full-rank q, KDA); A ~ U(+-1/sqrt(in)) (PEFT's kaiming-uniform bound), B = 0.
void AddAdapters(const WeightsProbeOptions& o, RankModel* m) {
  torch::manual_seed(o.seed);  // the same A on every rank
  for (HfLayerWeights& l : m->w.layers) {
    // "model.layers.N.self_attn.X" (the split rule's name); the module as the checkpoint names it.
    const std::string p = HfLayerPrefix(m->c.ir.layers[size_t(l.index)]) + "self_attn.";
    const std::pair<const char*, HfLinear*> targets[] = {
        {"q_proj", &l.attn.q}, {"k_proj", &l.attn.k}, {"v_proj", &l.attn.v}, {"o_proj", &l.attn.o}};
    for (const auto& [name, lin] : targets) {
      if (!lin->w.defined()) continue;
      Adapter ad;
      ad.module = m->c.weights_root + (p + name).substr(std::string("model.").size());
      ad.target = lin;
      ad.base = lin->w;
      ad.cols = HfTpSplitOf(p + name + ".weight") == HfTpSplit::kCols;
      const int64_t out = ad.base.size(0) * (ad.cols ? 1 : m->tp),
                    in = ad.base.size(1) * (ad.cols ? m->tp : 1);
      const double bound = 1.0 / std::sqrt(double(in));
      ad.a = (torch::rand({o.lora_rank, in}, ad.base.options()) * 2 - 1).mul_(bound).requires_grad_(true);
      ad.b = torch::zeros({out, o.lora_rank}, ad.base.options()).requires_grad_(true);
      m->adapters.push_back(std::move(ad));
    }
  }
}

// Step 3: the rank's slice of the checkpoint (its TP rows / columns only), specs and adapters.
Status LoadRankModel(const WeightsProbeOptions& o, int64_t tp_rank, RankModel* m) {
  ONBOARD_ASSIGN_OR_RETURN(m->c, ReadHfForwardConfig(o.checkpoint));
  ONBOARD_ASSIGN_OR_RETURN(m->ckpt, SafetensorsCheckpoint::Open(o.checkpoint));
  const SafetensorsCheckpoint& ckpt = *m->ckpt;
  if (m->c.ir.vocab < 256)
    return BadInput(m->c.config_path, "vocab_size", "--text feeds bytes as token ids: needs >= 256",
                    std::to_string(m->c.ir.vocab));
  const int64_t n = int64_t(m->c.ir.layers.size()), last = o.layers.last < 0 ? n - 1 : o.layers.last;
  for (int64_t i = o.layers.first; o.tp > 1 && i <= last && i < n; ++i) {
    const LayerSpec& l = m->c.ir.layers[size_t(i)];
    ONBOARD_RETURN_IF_ERROR(CheckTpDivides(m->c, l, o.tp));
    if (l.attn.kind == MixerKind::kKDA)
      return BadInput(m->c.config_path, "--tp", "KDA layers are not tensor-parallel in this probe",
                      std::to_string(o.tp));
  }
  HfRankSlice s;
  s.layers = o.layers;
  s.tp = o.tp;
  s.tp_rank = tp_rank;
  ONBOARD_ASSIGN_OR_RETURN(m->w, MapHfSlice(m->c, ckpt, s, o.fp64 ? torch::kDouble : torch::kFloat));
  m->bytes_read = ckpt.touched_bytes();
  m->checkpoint_bytes = ckpt.data_bytes();
  m->tp = o.tp;
  m->tp_rank = tp_rank;
  for (const HfLayerWeights& l : m->w.layers)
    m->specs.push_back(HfTpLocalSpec(m->c.ir.layers[size_t(l.index)], o.tp));
  m->scale = o.lora_alpha / double(o.lora_rank);
  AddAdapters(o, m);
  return Status::Ok();
}

// Step 4 helper: every adapted weight = base + scale x (B A) on this rank's rows / columns.
void ApplyAdapters(RankModel& m, bool frozen) {
  for (Adapter& ad : m.adapters) {
    if (frozen) {
      ad.target->w = ad.base;
      continue;
    }
    const torch::Tensor delta =
        ad.cols ? torch::matmul(ad.b, ad.a.narrow(1, m.tp_rank * ad.base.size(1), ad.base.size(1)))
                : torch::matmul(ad.b.narrow(0, m.tp_rank * ad.base.size(0), ad.base.size(0)), ad.a);
    ad.target->w = ad.base + m.scale * delta;
  }
}

// Step 4 helper: summed next-token NLL of one window (the HF decoder, TP regions between f and g).
torch::Tensor WindowNll(const RankModel& m, const TpContext& tp, const torch::Tensor& tokens,
                        const torch::Tensor& targets) {
  const double eps = m.c.rms_eps;
  torch::Tensor h = m.w.embed.index_select(0, tokens);
  for (size_t i = 0; i < m.w.layers.size(); ++i) {
    const HfLayerWeights& lw = m.w.layers[i];
    const LayerSpec& l = m.specs[i];
    h = h + TpReduceOut(&tp, HfAttention(m.c, l, lw.attn, TpCopyIn(&tp, HfRmsNorm(h, lw.input_norm, eps))));
    const torch::Tensor x = TpCopyIn(&tp, HfRmsNorm(h, lw.post_norm, eps));
    h = h + TpReduceOut(&tp, lw.moe ? HfMoe(m.c, l.moe, lw.experts, x) : HfMlp(m.c, x, lw.mlp));
  }
  const torch::Tensor logits = torch::matmul(HfRmsNorm(h, m.w.final_norm, eps), m.w.lm_head.t());
  return torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

// This rank's summed NLL over a batch of windows, scaled by `inv_tokens`.
torch::Tensor BatchLoss(const RankModel& m, const TpContext& tp, const Batch& b, double inv_tokens) {
  torch::Tensor sum = torch::zeros({}, m.w.embed.options());
  for (int64_t i = 0; i < b.tokens.size(0); ++i) sum = sum + WindowNll(m, tp, b.tokens[i], b.targets[i]);
  return sum * inv_tokens;
}

// World mean of a TP-replicated loss: TP rank 0 of each data rank contributes.
double GlobalLoss(Group& world, const RankModel& m, const torch::Tensor& local) {
  torch::Tensor red = torch::tensor({m.tp_rank == 0 ? local.item<double>() : 0.0}, torch::kDouble);
  world.AllReduceSum(red);
  return red[0].item<double>();
}

// Step 4c: held-out loss over data rank d's block of the fixed windows (no gradient).
double HeldOut(Group& world, RankModel& m, const TpContext& tp, const ProbeData& data, int64_t d, int64_t D,
               bool frozen) {
  torch::NoGradGuard no_grad;
  ApplyAdapters(m, frozen);
  // Data rank d scores windows [d*W/D, (d+1)*W/D): every window once, whatever the layout
  // (probe_text_split.h). Only its TP group runs collectives in BatchLoss, so the blocks' sizes may
  // differ by one window between data ranks.
  const int64_t W = data.HeldOutWindows(), first = d * W / D, end = (d + 1) * W / D;
  const Batch b = data.GetHeldOut(first, end - first, end);
  return GlobalLoss(world, m, BatchLoss(m, tp, b, 1.0 / double(W * b.tokens.size(1))));
}

// Step 4b: one AdamW step of the adapters on the global batch.
double TrainStep(Group& world, RankModel& m, const TpContext& tp, const ProbeData& data,
                 torch::optim::AdamW& opt, const ProbeConfig& sched, int64_t step, int64_t d, int64_t D) {
  opt.zero_grad();
  ApplyAdapters(m, false);
  const int64_t per = sched.batch / D;
  const Batch b = data.Get(step, d * per, per);
  const torch::Tensor loss = BatchLoss(m, tp, b, 1.0 / double(sched.batch * sched.seq));
  loss.backward();
  // Every rank's gradient is its shard's / data rank's part: the world sum is the whole gradient.
  std::vector<torch::Tensor> grads;
  for (Adapter& ad : m.adapters)
    for (torch::Tensor* p : {&ad.a, &ad.b}) grads.push_back(p->grad().flatten());
  torch::Tensor flat = torch::cat(grads);
  world.AllReduceSum(flat);
  int64_t off = 0;
  for (Adapter& ad : m.adapters)
    for (torch::Tensor* p : {&ad.a, &ad.b}) {
      p->mutable_grad().copy_(flat.narrow(0, off, p->numel()).view_as(*p));
      off += p->numel();
    }
  std::vector<torch::Tensor> params;
  for (Adapter& ad : m.adapters) params.insert(params.end(), {ad.a, ad.b});
  torch::nn::utils::clip_grad_norm_(params, 1.0);
  for (auto& group : opt.param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(LearningRate(sched, step));
  opt.step();
  return GlobalLoss(world, m, loss.detach());
}

// Step 5 (rank 0): the adapters in PEFT's format.
Status ExportAdapter(const WeightsProbeOptions& o, const RankModel& m) {
  PeftLoraAdapter pa;
  pa.r = o.lora_rank;
  pa.alpha = o.lora_alpha;
  pa.base_model = o.checkpoint;
  for (const Adapter& ad : m.adapters)
    pa.modules.push_back({ad.module, ad.a.detach().to(torch::kFloat), ad.b.detach().to(torch::kFloat)});
  std::sort(pa.modules.begin(), pa.modules.end(),
            [](const LoraModule& x, const LoraModule& y) { return x.module < y.module; });
  return WritePeftAdapter(o.out_dir + "/adapter", pa);
}

std::vector<std::string> DtypeNames(const std::vector<HfWeightDtype>& dtypes) {
  std::vector<std::string> out;
  for (const HfWeightDtype& d : dtypes) out.push_back(HfWeightDtypeName(d));
  return out;
}

json RankJson(const ProbeWorkerArgs& a, const RankModel& m, const std::vector<double>& losses, double frozen,
              double final_loss, int64_t windows) {
  int64_t lora = 0;
  std::vector<std::string> targets;
  for (const Adapter& ad : m.adapters) {
    lora += ad.a.numel() + ad.b.numel();
    targets.push_back(ad.module);
  }
  return {{"rank", a.rank},
          {"model_type", m.c.ir.model_type},
          {"bytes_read", m.bytes_read},
          {"checkpoint_bytes", m.checkpoint_bytes},
          {"tensors_used", m.w.used.size()},
          {"dtypes", DtypeNames(m.w.dtypes_seen)},
          {"layers", {m.w.layers.front().index, m.w.layers.back().index}},
          {"targets", targets},
          {"lora_params", lora},
          {"train_loss", losses},
          {"held_out_frozen", frozen},
          {"held_out_final", final_loss},
          {"held_out_windows", windows}};
}

}  // namespace

Status RunWeightsProbeWorker(const ProbeWorkerArgs& a) {
  // Step 1: options (validated again here: the file is input), one thread per rank.
  std::ifstream in(a.spec_file);
  std::stringstream ss;
  ss << in.rdbuf();
  WeightsProbeOptions o;
  ONBOARD_RETURN_IF_ERROR(WeightsProbeSpecFromJson(ss.str(), a.spec_file, &o));
  if (a.world != o.ranks)
    return BadInput(a.spec_file, "ranks", "worker world size differs from the spec", std::to_string(a.world));
  at::set_num_threads(1);
  const int64_t T = o.tp, D = o.ranks / T, d = a.rank / T, t = a.rank % T;

  // Step 2: the rank's slice of the checkpoint, before any collective (bad input exits 2 on every rank).
  RankModel m;
  ONBOARD_RETURN_IF_ERROR(LoadRankModel(o, t, &m));
  ProxySpec byte_spec;  // the text task's data only reads the vocabulary (bytes)
  byte_spec.vocab = m.c.ir.vocab;
  ProbeConfig sched;  // the text data and the lr schedule of the proxy probe (one home)
  sched.task = ProbeTask::kText;
  sched.text_file = o.text_file;
  sched.seq = o.seq;
  sched.batch = o.batch;
  sched.seed = o.seed;
  sched.ranks = D;
  sched.steps = o.steps;
  sched.lr = o.lr;
  sched.warmup = o.warmup;
  sched.mode = FinetuneMode::kLoRA;
  sched.control = o.control;
  const ProbeData data(byte_spec, sched);
  ONBOARD_RETURN_IF_ERROR(data.status());

  // Step 3: rendezvous, the world group and this data rank's TP group.
  Rendezvous store(a.master_addr, a.master_port, a.serve_store, o.collective_timeout_s);
  Group world(store, "world", a.rank, o.ranks, o.collective_timeout_s, a.master_addr);
  Group tpg(store, "tp" + std::to_string(d), t, T, o.collective_timeout_s, a.master_addr);
  TpContext tp;
  tp.group = &tpg;
  tp.rank = t;
  tp.size = T;

  // Step 4: the frozen model's held-out loss, the adapter steps, the held-out loss again.
  const double frozen = HeldOut(world, m, tp, data, d, D, true);
  std::vector<torch::Tensor> params;
  for (Adapter& ad : m.adapters) params.insert(params.end(), {ad.a, ad.b});
  torch::optim::AdamW opt(
      params, torch::optim::AdamWOptions(o.lr).betas(std::make_tuple(0.9, 0.95)).weight_decay(0.0));
  std::vector<double> losses;
  for (int64_t step = 0; step < o.steps; ++step) {
    losses.push_back(TrainStep(world, m, tp, data, opt, sched, step, d, D));
    std::printf("rank %lld step %lld loss %.6f\n", (long long)a.rank, (long long)step, losses.back());
    std::fflush(stdout);
    if (!std::isfinite(losses.back())) break;
  }
  const double final_loss = HeldOut(world, m, tp, data, d, D, false);
  world.Barrier();

  // Step 5: the PEFT adapter (rank 0) and the rank's result file.
  if (a.rank == 0) ONBOARD_RETURN_IF_ERROR(ExportAdapter(o, m));
  const std::string tmp = a.out_file + ".tmp";
  std::ofstream(tmp) << RankJson(a, m, losses, frozen, final_loss, data.HeldOutWindows()).dump();
  if (std::rename(tmp.c_str(), a.out_file.c_str()) != 0) return IoError("cannot write " + a.out_file);
  return Status::Ok();
}

}  // namespace onboard::backends
