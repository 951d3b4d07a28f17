// One rank of the training probe: rendezvous, process groups, seeded init + sharding, the training
// loop (AdamW on local shards, warm-up + cosine, global-norm clipping) and the per-step record.
//
// Ranks and groups (N = world, F = fsdp, E = ep; groups of consecutive ranks):
//   fsdp group  {F*(r/F) .. +F}   non-expert weights sharded, grads reduce-scattered
//   replicas    {r%F + j*F}       HSDP: shard grads all-reduced across fsdp groups (N/F of them)
//   ep group    {E*(r/E) .. +E}   routed experts partitioned, tokens exchanged all-to-all
//   ep replicas {r%E + j*E}       local experts' buffer sharded over them (N/E), FSDP-style: gathered
//                                 before use, grads reduce-scattered (torchtitan's dp_shard_mod_ep)
// Every rank is data-parallel: it takes batch/N of the global batch (generated identically on all),
// as micro_steps() micro-batches of micro_batch_size() sequences whose gradients accumulate.
#include <dlfcn.h>
#include <sys/resource.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include <torch/cuda.h>

#include "backends/fsdp_unit.h"
#include "backends/kda_generated.h"
#include "backends/ordered_sum.h"
#include "backends/probe_controls.h"
#include "backends/probe_data.h"
#include "backends/probe_schedule.h"

namespace onboard {
namespace {

using backends::Group;
using backends::UnitLayout;
using nlohmann::json;

// One trainable or frozen flat buffer with its AdamW state.
struct Buffer {
  at::Tensor p;        // shard (dense/lora) or local experts (expert/expert_lora)
  at::Tensor m, v, decay;
  bool trainable = false;
  bool expert = false;  // sharded over the ep replicas (else: sharded over fsdp, replicated over its replicas)
};

struct UnitState {
  Buffer dense, lora, expert, expert_lora;
};

// OpenBLAS (when Debian's alternatives point LibTorch's BLAS at it) keeps its own thread pool,
// sized from the environment at load time, not by at::set_num_threads: set it explicitly per rank
// so N ranks on N cores do not each start one BLAS thread per core. Returns false when the BLAS
// in this process is not OpenBLAS (the reference BLAS is single-threaded).
bool SetOpenBlasThreads(int64_t threads) {
  using SetFn = void (*)(int);
  auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn == nullptr) return false;
  fn(static_cast<int>(threads));
  return true;
}

int64_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

Buffer MakeShard(const at::Tensor& full, const at::Tensor& decay, int64_t rank, int64_t size,
                 bool trainable) {
  const int64_t n = full.numel(), shard = (n + size - 1) / size;
  at::Tensor padded = at::constant_pad_nd(full, {0, shard * size - n});
  at::Tensor dpad = at::constant_pad_nd(decay, {0, shard * size - n});
  Buffer b;
  b.p = padded.narrow(0, rank * shard, shard).clone().requires_grad_(trainable);
  b.decay = dpad.narrow(0, rank * shard, shard).clone();
  b.trainable = trainable;
  return b;
}

// Local experts' buffers, sharded over the EP replicas (rank `rep` of `reps`): experts are
// generated one by one from (seed, expert id), so every rank builds the same values for an expert
// whatever the placement, then keeps its shard of the local experts' flat buffer.
Buffer MakeExperts(const backends::FlatLayout& layout, const std::vector<int64_t>& local,
                   uint64_t seed, bool trainable, int64_t rep, int64_t reps) {
  if (layout.numel == 0) {
    Buffer b;
    b.p = at::zeros({0});
    b.decay = at::zeros({0});
    b.trainable = trainable;
    b.expert = true;
    return b;
  }
  std::vector<at::Tensor> rows, masks;
  for (int64_t e : local) {
    rows.push_back(backends::InitFlat(layout, seed + static_cast<uint64_t>(e) * 7919u));
    masks.push_back(backends::DecayMask(layout));
  }
  Buffer b = MakeShard(at::cat(rows), at::cat(masks), rep, reps, trainable);
  b.expert = true;
  return b;
}

void AdamW(Buffer& b, const ProbeConfig& c, double lr, int64_t step, double clip_coef) {
  if (!b.trainable || b.p.numel() == 0) return;
  at::NoGradGuard ng;
  at::Tensor g = b.p.grad().defined() ? b.p.grad() * clip_coef : at::zeros_like(b.p);
  if (!b.m.defined()) { b.m = at::zeros_like(b.p); b.v = at::zeros_like(b.p); }
  b.m.mul_(c.beta1).add_(g, 1 - c.beta1);
  b.v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
  const double bc1 = 1 - std::pow(c.beta1, step + 1), bc2 = 1 - std::pow(c.beta2, step + 1);
  at::Tensor update = (b.m / bc1) / ((b.v / bc2).sqrt() + c.adam_eps);
  b.p.mul_(1 - lr * c.weight_decay * b.decay);  // decoupled decay (decay mask: matrices only)
  b.p.add_(update, -lr);
  b.p.mutable_grad() = at::Tensor();
}

}  // namespace

Status RunProbeWorker(const ProbeWorkerArgs& a) {
  // Step 1: spec + config.
  std::ifstream in(a.spec_file);
  if (!in) return NotFound("probe spec file " + a.spec_file);
  std::stringstream ss;
  ss << in.rdbuf();
  ProxySpec spec;
  ProbeConfig cfg;
  ONBOARD_RETURN_IF_ERROR(ProbeSpecConfigFromJson(ss.str(), &spec, &cfg));
  ONBOARD_RETURN_IF_ERROR(cfg.Validate(spec));
  if (a.world != cfg.ranks)
    return BadInput(a.spec_file, "ranks", "worker world size differs from config",
                    std::to_string(a.world));
  at::set_num_threads(static_cast<int>(cfg.threads_per_rank));
  if (SetOpenBlasThreads(cfg.threads_per_rank))
    std::printf("rank %lld openblas threads %lld\n", static_cast<long long>(a.rank),
                static_cast<long long>(cfg.threads_per_rank));
  backends::SetProcessKdaImpl(backends::KdaImplFromName(cfg.kda_kernel));
  if (cfg.dtype == "fp64") at::set_default_dtype(caffe2::TypeMeta::Make<double>());  // every buffer
  const int64_t N = a.world, r = a.rank, F = cfg.fsdp_degree(), E = cfg.ep_degree();
  at::Device dev(at::kCPU);
  if (cfg.device == "cuda") {
    if (!torch::cuda::is_available())
      return BadInput(a.spec_file, "device", "no CUDA device visible to this LibTorch (" +
                      backends::TorchVersionString() + ", backends " + backends::CompiledBackends() + ")", "cuda");
    const char* local = std::getenv("LOCAL_RANK");  // torchrun; else the rank on this machine
    const int64_t lr = local != nullptr ? std::atoll(local) : r;
    dev = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(lr % static_cast<int64_t>(torch::cuda::device_count())));
  }

  // Step 2: rendezvous and process groups.
  backends::Rendezvous store(a.master_addr, a.master_port, a.serve_store, cfg.collective_timeout_s);
  const double to = cfg.collective_timeout_s;
  Group world(store, "world", r, N, to, a.master_addr);
  Group fsdp(store, "fsdp" + std::to_string(r / F), r % F, F, to, a.master_addr);
  Group frep(store, "fsdp_rep" + std::to_string(r % F), r / F, N / F, to, a.master_addr);
  Group ep(store, "ep" + std::to_string(r / E), r % E, E, to, a.master_addr);
  Group erep(store, "ep_rep" + std::to_string(r % E), r / E, N / E, to, a.master_addr);
  if (dev.is_cuda())
    for (Group* g : {&world, &fsdp, &frep, &ep, &erep}) g->set_device(dev);  // NCCL stages CPU tensors there
  if (dev.is_cuda() && N > 1 && world.backend() != "nccl")
    return BadInput(a.spec_file, "device", "device=cuda with ranks=" + std::to_string(N) +
                    " needs ONBOARD_PROBE_BACKEND=nccl (the " + world.backend() +
                    " backend's all-to-all takes CPU tensors)", "cuda");

  // Step 3: layout, expert placement, seeded full init then shard.
  const int64_t baseline_rss = PeakRssBytes();
  std::vector<UnitLayout> units = backends::BuildLayout(spec, cfg);
  backends::MoeRouting routing;
  routing.ep = &ep;
  routing.placement = cfg.expert_placement;
  if (routing.placement.empty())
    for (int64_t e = 0; e < spec.num_experts; ++e) routing.placement.push_back(e / (spec.num_experts / E));
  for (int64_t e = 0; e < spec.num_experts; ++e)
    if (routing.placement[static_cast<size_t>(e)] == r % E) routing.local_experts.push_back(e);
  std::map<int64_t, std::vector<int64_t>> load;
  routing.load = &load;
  // Aux-loss-free balancing (ProxySpec::balance_bias): per MoE layer, a selection bias per expert.
  std::map<int64_t, at::Tensor> score_bias;
  if (spec.balance_bias)
    for (const UnitLayout& L : units)
      if (L.expert.numel > 0) score_bias[L.layer] = at::zeros({spec.num_experts}, at::kFloat);
  routing.score_bias = score_bias.empty() ? nullptr : &score_bias;
  const ProxyParamCounts counts = backends::CountParams(units, spec, cfg);
  const bool lora = cfg.mode == FinetuneMode::kLoRA;
  const int64_t base_steps = lora ? backends::LoraBaseSteps(cfg) : 0;
  // LoRA with a base phase: the base (dense + experts) is trained first, adapters frozen.
  const bool base_first = base_steps > 0;
  std::vector<UnitState> state(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    const uint64_t base = cfg.seed * 1000003u + u * 16u;
    const UnitLayout& L = units[u];
    state[u].dense = MakeShard(backends::InitFlat(L.dense, base), backends::DecayMask(L.dense),
                               r % F, F, !lora || base_first);
    state[u].lora = MakeShard(backends::InitFlat(L.lora, base + 1), backends::DecayMask(L.lora),
                              r % F, F, lora && !base_first);
    state[u].expert = MakeExperts(L.expert, routing.local_experts, base + 2, !lora || base_first, r / E, N / E);
    state[u].expert_lora = MakeExperts(L.expert_lora, routing.local_experts, base + 3, lora && !base_first,
                                       r / E, N / E);
  }
  // Built on the CPU from seeds (same values on every device), then moved to the rank's device.
  if (!dev.is_cpu()) {
    for (UnitState& st : state)
      for (Buffer* b : {&st.dense, &st.lora, &st.expert, &st.expert_lora}) {
        b->p = b->p.detach().to(dev).requires_grad_(b->p.requires_grad());
        b->decay = b->decay.to(dev);
      }
  }
  const double lora_scale = lora ? cfg.lora_alpha / static_cast<double>(cfg.lora_rank) : 0.0;

  // One optimizer step of `phase` (its steps/warmup drive the lr schedule) on `data`.
  // Micro-batches: rank r's micro-step i takes global micro-batch j = i*N + r (micro_batch
  // sequences from j*micro_batch). Per micro-step, in this order:
  //   forward + backward          FSDP reduce-scatters each unit's shard gradient over the fsdp
  //                               group, experts sum their EP sources' gradients (both in the
  //                               canonical pairwise order of ordered_sum.h)
  //   replica sums                HSDP / EP replicas: ordered all-reduce (all-gather + same order)
  //   accumulation                the micro-step's gradient is pushed into a TreeAccumulator
  // so the N micro-batches of a micro-step form one aligned block of the one-process tree.
  const int64_t mb = cfg.micro_batch_size(), micro_steps = cfg.micro_steps();
  // fn(unit, buffer index 0..3 = dense, lora, expert, expert_lora, buffer) over trainable buffers.
  auto for_each_trainable = [&](auto&& fn) {
    for (size_t u = 0; u < state.size(); ++u) {
      Buffer* bufs[4] = {&state[u].dense, &state[u].lora, &state[u].expert, &state[u].expert_lora};
      for (size_t k = 0; k < 4; ++k)
        if (bufs[k]->trainable && bufs[k]->p.numel() > 0) fn(u, k, bufs[k]);
    }
  };
  auto train_step = [&](const backends::ProbeData& data, const ProbeConfig& phase, int64_t step,
                        double scale) -> json {
    backends::CommClock() = CollectiveTimes{};
    load.clear();
    const auto t0 = std::chrono::steady_clock::now();
    backends::UnitInputs inputs;
    std::map<int64_t, double> indexer_kl;  // MLA layer -> KL(attention || indexer), summed over micro-steps
    inputs.indexer_kl = &indexer_kl;
    double correct = 0;  // exact-match counted targets on this rank (integer-valued: any order)
    inputs.correct = &correct;
    inputs.inv_global_tokens = 1.0 / static_cast<double>(data.CountedTokensPerStep());
    std::vector<backends::UnitRunner> runners(units.size());
    std::vector<std::array<backends::TreeAccumulator, 4>> acc(units.size());
    double local_loss = 0;  // sum of fp32 micro-batch losses: exact in fp64, any order
    for (int64_t i = 0; i < micro_steps; ++i) {
      backends::ApplyControl(phase, &phase != &cfg, step, i * N + r, &inputs, &routing);
      backends::Batch batch = data.Get(step, (i * N + r) * mb, mb);
      if (!dev.is_cpu()) batch = {batch.tokens.to(dev), batch.targets.to(dev), batch.mask.to(dev)};
      inputs.targets = &batch.targets;
      inputs.loss_mask = &batch.mask;
      at::Tensor x = batch.tokens;
      for (size_t u = 0; u < units.size(); ++u) {
        runners[u] = {&spec, &units[u], &fsdp, &erep, &routing, &inputs, scale};
        x = backends::RunFsdpUnit(&runners[u], x, state[u].dense.p, state[u].lora.p,
                                  state[u].expert.p, state[u].expert_lora.p);
      }
      local_loss += x.item<double>();
      x.backward();
      for_each_trainable([&](size_t u, size_t k, Buffer* b) {
        at::Tensor g = b->p.grad().defined() ? b->p.grad() : at::zeros_like(b->p);
        b->p.mutable_grad() = at::Tensor();
        // Dense shards: HSDP replicas sum here. Expert shards were already reduce-scattered over
        // the ep replicas in the unit's backward.
        if (!b->expert && frep.size() > 1) g = frep.AllReduceSumOrdered(g);
        acc[u][k].Push(g);
      });
    }
    // The step's gradients, then the global grad norm and loss.
    double sq = 0;
    for_each_trainable([&](size_t u, size_t k, Buffer* b) {
      at::Tensor g = acc[u][k].Take();
      b->p.mutable_grad() = g;
      const double copies = static_cast<double>(b->expert ? 1 : N / F);  // ranks holding this shard
      sq += g.to(at::kDouble).pow(2).sum().item<double>() / copies;  // fp64: layout-independent
    });
    at::Tensor red = at::tensor({local_loss, sq, correct}, at::kDouble).to(dev);
    world.AllReduceSum(red);
    const double loss = red[0].item<double>(), gnorm = std::sqrt(red[1].item<double>());
    const double accuracy = red[2].item<double>() / static_cast<double>(data.CountedTokensPerStep());
    const double clip_coef = (phase.clip > 0 && gnorm > phase.clip) ? phase.clip / (gnorm + 1e-6) : 1.0;
    const double lr = backends::LearningRate(phase, step);
    for (UnitState& st : state)
      for (Buffer* b : {&st.dense, &st.lora, &st.expert, &st.expert_lora}) AdamW(*b, phase, lr, step, clip_coef);
    // Balancing bias: the step's global tokens per expert (exact integer sums over all ranks),
    // then bias += balance_rate * sign(mean - load): under-loaded experts become likelier picks.
    if (!score_bias.empty()) {
      at::Tensor g = at::zeros({static_cast<int64_t>(score_bias.size()), spec.num_experts}, at::kDouble);
      int64_t i = 0;
      for (auto& [layer, bias] : score_bias) {
        auto it = load.find(layer);
        if (it != load.end()) g[i].copy_(at::tensor(it->second, at::kLong).to(at::kDouble));
        ++i;
      }
      world.AllReduceSum(g);
      i = 0;
      for (auto& [layer, bias] : score_bias) {
        at::Tensor l = g[i++];
        bias.add_(at::sign(l.mean() - l).to(at::kFloat), spec.balance_rate);
      }
    }
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const CollectiveTimes& c = backends::CommClock();
    json lj = json::array();
    for (auto& [layer, counts] : load) lj.push_back({{"layer", layer}, {"tokens", counts}});
    json kl = json::array();
    for (auto& [layer, v] : indexer_kl) kl.push_back({{"layer", layer}, {"kl", v}});
    return {{"step", step}, {"loss", std::isfinite(loss) ? json(loss) : json(nullptr)},
            {"grad_norm", std::isfinite(gnorm) ? json(gnorm) : json(nullptr)},
            {"lr", lr}, {"accuracy", accuracy}, {"step_s", step_s}, {"all_gather_s", c.all_gather_s},
            {"reduce_scatter_s", c.reduce_scatter_s}, {"all_to_all_s", c.all_to_all_s},
            {"all_reduce_s", c.all_reduce_s}, {"peak_rss_bytes", PeakRssBytes()},
            {"expert_load", lj}, {"indexer_kl", kl}};
  };
  auto print_step = [&](const char* what, const json& j) {
    std::printf("rank %lld %s %lld loss %.6f acc %.3f grad_norm %.4g lr %.3g %.1f ms\n",
                static_cast<long long>(r), what, static_cast<long long>(j["step"].get<int64_t>()),
                j["loss"].is_null() ? NAN : j["loss"].get<double>(), j["accuracy"].get<double>(),
                j["grad_norm"].is_null() ? NAN : j["grad_norm"].get<double>(), j["lr"].get<double>(),
                j["step_s"].get<double>() * 1e3);
    std::fflush(stdout);
  };

  // Step 4a (LoRA): base phase. Full training of the base for base_steps on the related source
  // task (copy over the next copy_symbols letters), then freeze it and train only the adapters.
  json base_phase = {{"steps", json::array()}, {"symbol_offset", backends::LoraSourceSymbolOffset(cfg)},
                     {"target_share", backends::kLoraSourceTargetShare}};
  if (base_first) {
    ProbeConfig bcfg = cfg;
    bcfg.mode = FinetuneMode::kFull;
    bcfg.steps = base_steps;
    bcfg.warmup = std::min(cfg.warmup, std::max<int64_t>(1, base_steps / 4));
    bcfg.lr = cfg.lr / backends::kLoraLrScale;  // full training of the base: the full-mode rate
    if (bcfg.control == kControlFrozenLora) bcfg.control.clear();  // the base itself trains
    backends::ProbeData source(spec, bcfg, base_phase["symbol_offset"].get<int64_t>(),
                               backends::kLoraSourceTargetShare);
    ONBOARD_RETURN_IF_ERROR(source.status());
    for (int64_t step = 0; step < base_steps; ++step) {
      json j = train_step(source, bcfg, step, 0.0);
      print_step("base_step", j);
      base_phase["steps"].push_back(j);
      if (j["loss"].is_null()) return Status(ErrorCode::kInternal, "LoRA base phase diverged at step " + std::to_string(step));
    }
    for (UnitState& st : state) {
      for (Buffer* b : {&st.dense, &st.expert}) {
        b->p.requires_grad_(false);
        b->trainable = false;
        b->m = at::Tensor();
        b->v = at::Tensor();
      }
      for (Buffer* b : {&st.lora, &st.expert_lora}) {
        b->p.requires_grad_(b->p.numel() > 0);
        b->trainable = true;
      }
    }
  }

  // Step 4b: the recorded training loop (full, or LoRA adapters on the frozen base).
  backends::ProbeData data(spec, cfg);
  ONBOARD_RETURN_IF_ERROR(data.status());
  json steps = json::array();
  for (int64_t step = 0; step < cfg.steps; ++step) {
    if (r == cfg.die_rank && step == cfg.die_step) std::raise(SIGKILL);  // fault injection (tests)
    json j = train_step(data, cfg, step, lora_scale);
    print_step("step", j);
    steps.push_back(j);
    if (j["loss"].is_null()) break;  // every rank sees the same reduced loss: all stop together
  }
  world.Barrier();  // nobody leaves (and tears down a store it serves) while others still talk
  // Step 5: result file (written to a temp name, then renamed: the launcher never reads half).
  json out = {{"rank", r}, {"world", N}, {"backend", world.backend()},
              {"torch", backends::TorchVersionString()}, {"local_experts", routing.local_experts},
              {"baseline_rss_bytes", baseline_rss},
              {"params", {{"total", counts.total}, {"expert", counts.expert}, {"lora", counts.lora},
                          {"trainable", counts.trainable}}},
              {"steps", steps}, {"base_phase", base_phase}};
  if (!a.out_file.empty()) {
    const std::string tmp = a.out_file + ".tmp";
    std::ofstream f(tmp);
    f << out.dump();
    f.close();
    if (!f || std::rename(tmp.c_str(), a.out_file.c_str()) != 0)
      return IoError("cannot write probe result " + a.out_file);
  }
  return Status::Ok();
}

}  // namespace onboard
