// RunProbeWorker: one rank of the training probe, the loop that puts the pieces together
// (probe_worker_state.h): spec + config, device and threads, process groups, state, the LoRA base
// phase, the recorded steps and the result file.
// Units: seconds, bytes; loss in nats per counted token.
#include <dlfcn.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <torch/cuda.h>

#include "backends/dsa_generated.h"
#include "backends/kda_generated.h"
#include "backends/probe_schedule.h"
#include "backends/probe_step_codec.h"
#include "backends/probe_weights_worker.h"
#include "backends/probe_worker_state.h"
#include "backends/tensor_memory_compat.h"
#include "validators/learning_verdict.h"

namespace onboard {
namespace {

using backends::ProbeGroups;
using backends::WorkerState;
using nlohmann::json;

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

// Step 1 helper: the spec file's spec + config, validated against this worker's world size.
Status LoadSpecConfig(const ProbeWorkerArgs& a, ProxySpec* spec, ProbeConfig* cfg) {
  std::ifstream in(a.spec_file);
  if (!in) return NotFound("probe spec file " + a.spec_file);
  std::stringstream ss;
  ss << in.rdbuf();
  ONBOARD_RETURN_IF_ERROR(ProbeSpecConfigFromJson(ss.str(), spec, cfg));
  ONBOARD_RETURN_IF_ERROR(cfg->Validate(*spec));
  if (a.world != cfg->ranks)
    return BadInput(a.spec_file, "ranks", "worker world size differs from config", std::to_string(a.world));
  return Status::Ok();
}

// Step 1 helper: intra-op + BLAS threads, the KDA implementation and the default dtype of this process.
void ConfigureProcess(const ProbeConfig& cfg, int64_t rank) {
  at::set_num_threads(static_cast<int>(cfg.threads_per_rank));
  if (SetOpenBlasThreads(cfg.threads_per_rank))
    std::printf("rank %lld openblas threads %lld\n", static_cast<long long>(rank),
                static_cast<long long>(cfg.threads_per_rank));
  backends::SetProcessKdaImpl(cfg.kda_kernel);
  backends::SetProcessDsaImpl(cfg.dsa_kernel == ProbeKernel::kGenerated,
                              cfg.control == kControlPerturbedDsaTopk);
  backends::SetProcessKdaGateFault(cfg.control == kControlPerturbedKdaGate);  // negative control
  if (cfg.dtype == FloatDtype::kFP64)
    at::set_default_dtype(caffe2::TypeMeta::Make<double>());  // every buffer
}

// Step 1 helper: the rank's device (cuda: the local rank's GPU, torchrun's LOCAL_RANK if set).
Status RankDevice(const ProbeWorkerArgs& a, const ProbeConfig& cfg, at::Device* dev) {
  if (cfg.device != "cuda") return Status::Ok();
  if (!torch::cuda::is_available())
    return BadInput(a.spec_file, "device",
                    "no CUDA device visible to this LibTorch (" + backends::TorchVersionString() +
                        ", backends " + backends::CompiledBackends() + ")",
                    "cuda");
  const char* local = std::getenv("LOCAL_RANK");  // torchrun; else the rank on this machine
  const int64_t lr = local != nullptr ? std::atoll(local) : a.rank;
  *dev = at::Device(at::kCUDA,
                    static_cast<c10::DeviceIndex>(lr % static_cast<int64_t>(torch::cuda::device_count())));
  return Status::Ok();
}

// The human log line of a step (rank<r>.log); records go through probe_step_codec.h.
void PrintStep(int64_t r, const char* what, const ProbeStep& s) {
  std::printf("rank %lld %s %lld loss %.6f acc %.3f grad_norm %.4g lr %.3g %.1f ms\n",
              static_cast<long long>(r), what, static_cast<long long>(s.step), s.loss, s.accuracy,
              s.grad_norm, s.lr, s.step_s * 1e3);
  std::fflush(stdout);
}

json StepsJson(const std::vector<ProbeStep>& steps) {
  json a = json::array();
  for (const ProbeStep& s : steps) a.push_back(backends::ProbeStepToJson(s));
  return a;
}

// Rank 0's live record of the recorded steps (ProbeWorkerArgs::steps_file): one line per step,
// flushed when the step ends, so the launcher can follow the probe (probe_step_tail.h).
class StepStream {
 public:
  Status Open(const std::string& path) {
    if (path.empty()) return Status::Ok();
    path_ = path;
    f_.open(path, std::ios::out | std::ios::trunc);
    return f_ ? Status::Ok() : IoError("cannot write probe steps " + path);
  }
  Status Append(const ProbeStep& s) {
    if (path_.empty()) return Status::Ok();
    f_ << backends::ProbeStepToLine(s) << std::flush;
    return f_ ? Status::Ok() : IoError("cannot write probe steps " + path_);
  }

 private:
  std::string path_;
  std::ofstream f_;
};

// Step 4a helper: the base is competent on its copy source task (probe_schedule.h): the mean
// accuracy of the last LearningCriteria::window steps reaches min_accuracy. Every rank sees the
// same reduced accuracies, so all stop at the same step.
bool BaseCompetent(const ProbeConfig& c, const std::vector<ProbeStep>& steps) {
  const LearningCriteria bar;
  const size_t w = static_cast<size_t>(bar.window);
  if (c.task != ProbeTask::kCopy || steps.size() < w) return false;
  double sum = 0;
  for (size_t i = steps.size() - w; i < steps.size(); ++i) sum += steps[i].accuracy;
  return sum / static_cast<double>(w) >= bar.min_accuracy;
}

// Step 4a (LoRA): base phase. Full training of the base on the related source task (copy over
// the next copy_symbols letters) for its planned base_steps, then on while it is not competent, at
// most kLoraBaseMaxFactor x base_steps; then anneal it (the cooldown), freeze it and train only the
// adapters.
Status RunBasePhase(WorkerState& st, ProbeGroups& g, json* base_phase) {
  const int64_t symbol_offset = backends::LoraSourceSymbolOffset(st.cfg);
  std::vector<ProbeStep> steps;
  *base_phase = {{"steps", json::array()},
                 {"symbol_offset", symbol_offset},
                 {"target_share", backends::kLoraSourceTargetShare}};
  if (st.base_steps <= 0) return Status::Ok();
  ProbeConfig bcfg = st.cfg;
  bcfg.mode = FinetuneMode::kFull;
  bcfg.steps = st.base_steps * backends::kLoraBaseMaxFactor;  // the schedule spans the maximum
  bcfg.warmup = std::min(st.cfg.warmup, std::max<int64_t>(1, st.base_steps / 4));
  bcfg.lr = st.cfg.lr / backends::kLoraLrScale;  // full training of the base: the full-mode rate
  if (bcfg.control == kControlFrozenLora) bcfg.control.clear();  // the base itself trains
  backends::ProbeData source(st.spec, bcfg, symbol_offset, backends::kLoraSourceTargetShare);
  ONBOARD_RETURN_IF_ERROR(source.status());
  // One base step under `phase` (the main schedule or the cooldown), printed as `what`.
  auto train = [&](const ProbeConfig& phase, int64_t step, const char* what) {
    steps.push_back(backends::TrainStep(st, g, source, phase, step, 0.0));
    PrintStep(st.rank, what, steps.back());
    if (std::isfinite(steps.back().loss)) return Status::Ok();
    return Status(ErrorCode::kInternal,
                  std::string("LoRA base phase diverged at ") + what + " " + std::to_string(step));
  };
  bool competent = false;
  for (int64_t step = 0; step < bcfg.steps; ++step) {
    ONBOARD_RETURN_IF_ERROR(train(bcfg, step, "base_step"));
    competent = BaseCompetent(bcfg, steps);
    if (competent && step + 1 >= st.base_steps) break;  // trained as planned, and competent
  }
  // The base anneals before it is frozen (probe_schedule.h, kLoraBaseCooldownFraction).
  const int64_t stop = static_cast<int64_t>(steps.size()), cooldown = backends::LoraBaseCooldownSteps(st.cfg);
  const ProbeConfig cool = backends::BaseCooldownPhase(bcfg, stop, cooldown);
  for (int64_t step = stop; step < stop + cooldown; ++step)
    ONBOARD_RETURN_IF_ERROR(train(cool, step, "base_cooldown_step"));
  (*base_phase)["steps"] = StepsJson(steps);
  (*base_phase)["planned_steps"] = st.base_steps;
  (*base_phase)["cooldown_steps"] = cooldown;
  (*base_phase)["competent"] = competent;
  backends::FreezeBaseForAdapters(&st);
  return Status::Ok();
}

// Step 5: result file (written to a temp name, then renamed: the launcher never reads half).
Status WriteResult(const std::string& path, const json& out) {
  if (path.empty()) return Status::Ok();
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp);
  f << out.dump();
  f.close();
  if (!f || std::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot write probe result " + path);
  return Status::Ok();
}

// Step 2 (devices): the groups stage CPU tensors on this rank's GPU under NCCL; CUDA with more
// than one rank needs the NCCL backend.
Status SetGroupDevices(const ProbeWorkerArgs& a, const WorkerState& st, ProbeGroups& g) {
  if (!st.dev.is_cuda()) return Status::Ok();
  for (backends::Group* grp : g.all()) grp->set_device(st.dev);  // NCCL stages CPU tensors there
  for (auto& link : g.pp_links) link->set_device(st.dev);        // pipeline pairs (issue 17)
  for (auto& sub : {g.ep_inter.get(), g.ep_intra.get()})         // deepep's sub-groups (issue 18)
    if (sub != nullptr) sub->set_device(st.dev);
  if (st.world > 1 && g.world.backend() != "nccl")
    return BadInput(a.spec_file, "device",
                    "device=cuda with ranks=" + std::to_string(st.world) +
                        " needs ONBOARD_PROBE_BACKEND=nccl (the " + g.world.backend() +
                        " backend's all-to-all takes CPU tensors)",
                    "cuda");
  return Status::Ok();
}

// Steps 4b and 4c: the recorded training loop (full, or LoRA adapters on the frozen base); rank 0
// streams each step's record to steps_file. Then (text, copy) the final weights on the held-out
// rows, which no step trained on (*held_out; null without held-out rows).
Status TrainRecordedSteps(const ProbeWorkerArgs& a, WorkerState& st, ProbeGroups& g,
                          std::vector<ProbeStep>* steps, json* held_out) {
  const ProbeConfig& cfg = st.cfg;
  backends::ProbeData data(st.spec, cfg);
  ONBOARD_RETURN_IF_ERROR(data.status());
  StepStream stream;
  ONBOARD_RETURN_IF_ERROR(stream.Open(st.rank == 0 ? a.steps_file : ""));
  for (int64_t step = 0; step < cfg.steps; ++step) {
    if (st.rank == cfg.die_rank && step == cfg.die_step) std::raise(SIGKILL);  // fault injection (tests)
    steps->push_back(backends::TrainStep(st, g, data, cfg, step, st.lora_scale));
    PrintStep(st.rank, "step", steps->back());
    ONBOARD_RETURN_IF_ERROR(stream.Append(steps->back()));
    if (!std::isfinite(steps->back().loss))
      break;  // every rank sees the same reduced loss: all stop together
  }
  if (data.HeldOutWindows() > 0) {
    const backends::HeldOutResult h = backends::HeldOutEval(st, g, data, st.lora_scale);
    *held_out = {{"loss", h.loss},
                 {"accuracy", h.accuracy},
                 {"windows", data.HeldOutWindows()},
                 {"counted_tokens", data.HeldOutCountedTokens()}};
  }
  return Status::Ok();
}

// Step 5 (contents): the rank's result JSON.
json ResultJson(const WorkerState& st, ProbeGroups& g, const std::vector<ProbeStep>& steps,
                const json& base_phase, const json& held_out) {
  const ProxyParamCounts& counts = st.counts;
  const backends::KernelCallCounts kda = backends::ProcessKdaCalls(), dsa = backends::ProcessDsaCalls();
  return {{"kda_calls",
           {{"generated", kda.generated}, {"torch", kda.torch}, {"fallback_reason", kda.fallback_reason}}},
          {"dsa_calls",
           {{"generated", dsa.generated}, {"torch", dsa.torch}, {"fallback_reason", dsa.fallback_reason}}},
          {"rank", st.rank},
          {"world", st.world},
          {"backend", g.world.backend()},
          {"torch", backends::TorchVersionString()},
          {"local_experts", st.routing.local_experts},
          {"baseline_rss_bytes", st.baseline_rss},
          {"params",
           {{"total", counts.total},
            {"expert", counts.expert},
            {"lora", counts.lora},
            {"trainable", counts.trainable}}},
          {"steps", StepsJson(steps)},
          {"base_phase", base_phase},
          {"held_out", held_out},
          {"coactivation", st.coact.ToJson()}};
}

}  // namespace

Status RunProbeWorker(const ProbeWorkerArgs& a) {
  // Step 0: a real-weights probe's spec runs its own worker (probe_weights.h).
  if (backends::IsWeightsProbeSpec(a.spec_file)) return backends::RunWeightsProbeWorker(a);
  // Step 1: spec + config, process settings, device.
  WorkerState st;
  ONBOARD_RETURN_IF_ERROR(LoadSpecConfig(a, &st.spec, &st.cfg));
  const ProbeConfig& cfg = st.cfg;
  st.rank = a.rank;
  st.world = a.world;
  ConfigureProcess(cfg, st.rank);
  backends::InstallLiveTensorCounter();  // live-tensor peak per step (before any tensor exists)
  ONBOARD_RETURN_IF_ERROR(RankDevice(a, cfg, &st.dev));

  // Step 2: rendezvous and process groups, on the rank's device.
  ProbeGroups g(a.master_addr, a.master_port, a.serve_store, cfg, st.rank);
  ONBOARD_RETURN_IF_ERROR(SetGroupDevices(a, st, g));

  // Step 3: layout, expert placement, seeded full init then shard.
  st.routing.ep_inter = g.ep_inter.get(), st.routing.ep_intra = g.ep_intra.get();  // deepep; else null
  backends::InitWorkerState(g.ep, g.tp, &st);

  // Step 4a (LoRA): the base phase, then the base is frozen.
  json base_phase;
  ONBOARD_RETURN_IF_ERROR(RunBasePhase(st, g, &base_phase));
  st.coact.Clear();  // co-activation of the recorded steps only

  // Steps 4b and 4c: the recorded steps, then the held-out evaluation (text, copy).
  std::vector<ProbeStep> steps;
  json held_out = nullptr;
  ONBOARD_RETURN_IF_ERROR(TrainRecordedSteps(a, st, g, &steps, &held_out));
  g.world.Barrier();  // nobody leaves (and tears down a store it serves) while others still talk

  // Step 5: result file.
  return WriteResult(a.out_file, ResultJson(st, g, steps, base_phase, held_out));
}

}  // namespace onboard
