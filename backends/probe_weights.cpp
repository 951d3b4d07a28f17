// RunWeightsProbe: the real-weights LoRA probe's launcher side (probe_weights.h): options, the spec
// file the ranks read, launch (probe_launch.h), merge of the ranks' JSON, the verdict and the text
// report. The ranks themselves: probe_weights_worker.cpp. Units: nats per target token, bytes, s.
#include "backends/probe_weights.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/probe_launch.h"
#include "backends/probe_text_split.h"
#include "backends/probe_weights_worker.h"
#include "parsers/json_fields.h"

namespace onboard {
namespace {

using nlohmann::json;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Step 4 helper: the ranks' JSON into the result (rank 0's losses and counts; every rank's bytes).
Status MergeRanks(const WeightsProbeOptions& o, const std::string& dir, WeightsProbeResult* r) {
  for (int64_t k = 0; k < o.ranks; ++k) {
    const std::string path = dir + "/rank" + std::to_string(k) + ".json";
    const json j = json::parse(Slurp(path), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("bytes_read"))
      return Status(ErrorCode::kInternal,
                    "weights probe rank " + std::to_string(k) + " wrote no valid result " + path);
    r->rank_bytes.push_back(j["bytes_read"].get<uint64_t>());
    if (k != 0) continue;
    r->model_type = j["model_type"].get<std::string>();
    r->layers_first = j["layers"][0].get<int64_t>();
    r->layers_last = j["layers"][1].get<int64_t>();
    r->checkpoint_bytes = j["checkpoint_bytes"].get<uint64_t>();
    r->tensors_used = j["tensors_used"].get<int64_t>();
    r->dtypes = j["dtypes"].get<std::vector<std::string>>();
    r->targets = j["targets"].get<std::vector<std::string>>();
    r->lora_params = j["lora_params"].get<int64_t>();
    r->caveat = j.value("caveat", std::string());
    r->train_loss = j["train_loss"].get<std::vector<double>>();
    r->held_out_frozen = j["held_out_frozen"].get<double>();
    r->held_out_final = j["held_out_final"].get<double>();
    r->held_out_windows = j["held_out_windows"].get<int64_t>();
  }
  // PP: each stage's first rank's measured bubble (ranks s * D * T), and the 1F1B theory.
  if (o.pp > 1) {
    for (int64_t s = 0; s < o.pp; ++s) {
      const json j = json::parse(Slurp(dir + "/rank" + std::to_string(s * o.data_ranks() * o.tp) + ".json"));
      r->pp_bubble_by_stage.push_back(j.value("pp_bubble", 0.0));
      r->pp_stage_layers.push_back(j.value("stage_layers", std::vector<int64_t>{}));
    }
    r->pp_bubble_theory = PpBubbleTheory(o.pp, o.microbatches(), o.interleave);
  }
  return Status::Ok();
}

// Step 5: the verdict against the frozen model (one rule, kWeightsProbeMinFall), the byte baselines.
void Judge(WeightsProbeResult* r) {
  const double bar = (1.0 - kWeightsProbeMinFall) * r->held_out_frozen;
  r->learned =
      std::isfinite(r->held_out_final) && std::isfinite(r->held_out_frozen) && r->held_out_final < bar;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%s: held-out %.4f nats after LoRA vs %.4f for the frozen checkpoint (bar < %.4f)",
                r->learned ? "learned" : "not_learned", r->held_out_final, r->held_out_frozen, bar);
  r->verdict = buf;
  const std::string text = Slurp(r->options.text_file);
  Expected<backends::TextSplit> split =
      backends::SplitText(r->options.text_file, int64_t(text.size()), r->options.seq);
  if (!split.ok()) return;
  const backends::TextBaselines b = backends::ComputeTextBaselines(text, *split);
  r->unigram_nats = b.unigram_nats;
  r->bigram_nats = b.bigram_nats;
}

}  // namespace

Status WeightsProbeOptions::Validate() const {
  auto bad = [](const char* flag, const std::string& why, auto v) {
    std::ostringstream os;
    os << v;
    return BadInput("probe --weights", flag, why, os.str());
  };
  if (checkpoint.empty()) return bad("checkpoint", "a checkpoint directory is required", "(empty)");
  if (text_file.empty()) return bad("--text", "--weights trains on a text file: --text FILE", "(empty)");
  if (ranks < 1 || ranks > 64) return bad("--ranks", "must be in [1, 64]", ranks);
  if (tp < 1 || ranks % tp != 0)
    return bad("--tp", "must be >= 1 and divide ranks=" + std::to_string(ranks), tp);
  if (pp < 1 || (ranks / tp) % pp != 0)
    return bad("--pp", "must be >= 1 and divide ranks/tp=" + std::to_string(ranks / tp), pp);
  const int64_t D = ranks / (tp * pp);
  if (interleave < 1 || interleave > 64) return bad("--interleave", "must be in [1, 64]", interleave);
  if (ep < 1) return bad("--ep", "must be >= 1", ep);
  if (D % ep != 0) return bad("--ep", "must divide ranks/(tp*pp)=" + std::to_string(D), ep);
  if (fsdp < 1) return bad("--fsdp", "must be >= 1", fsdp);
  if (D % fsdp != 0) return bad("--fsdp", "must divide ranks/(tp*pp)=" + std::to_string(D), fsdp);
  if (ep > 1 && fsdp > 1 && fsdp % ep != 0 && ep % fsdp != 0)  // EP groups nest in FSDP's, or FSDP's in EP's
    return bad("--fsdp", "must be a multiple or a divisor of --ep=" + std::to_string(ep), fsdp);
  if (steps < 1 || steps > 100000) return bad("--steps", "must be in [1, 100000]", steps);
  if (seq < 2 || seq > 65536) return bad("--seq", "must be in [2, 65536]", seq);
  if (batch < 1 || batch % D != 0)
    return bad("--batch", "must be a positive multiple of ranks/(tp*pp)=" + std::to_string(D), batch);
  if (micro_batch < 0 || (micro_batch > 0 && (batch / D) % micro_batch != 0))
    return bad("--micro-batch", "must divide batch/(ranks/(tp*pp))=" + std::to_string(batch / D),
               micro_batch);
  if (lora_rank < 1 || lora_rank > 4096) return bad("--lora-rank", "must be in [1, 4096]", lora_rank);
  if (!(lora_alpha > 0) || !std::isfinite(lora_alpha)) return bad("--lora-alpha", "must be > 0", lora_alpha);
  if (!(lr >= 0) || !std::isfinite(lr)) return bad("--lr", "must be >= 0 and finite", lr);
  if (warmup < 0) return bad("--warmup", "must be >= 0", warmup);
  if (layers.first < 0 || (layers.last >= 0 && layers.last < layers.first))
    return bad("--layers", "must be A-B with 0 <= A <= B",
               std::to_string(layers.first) + "-" + std::to_string(layers.last));
  if (!control.empty() && control != "frozen_lora")
    return bad("--control", "must be frozen_lora or empty", control);
  if (!fault.empty() && fault != "wrong_expert_range" && fault != "wrong_fsdp_chunk" &&
      fault != "wrong_expert_chunk" && fault != "wrong_stage_layers" && fault != "wrong_kda_heads" &&
      fault != "no_latent_allreduce" && fault != "wrong_chunk_order")
    return bad("fault",
               "must be wrong_expert_range, wrong_fsdp_chunk, wrong_expert_chunk, wrong_stage_layers, "
               "wrong_kda_heads, no_latent_allreduce, wrong_chunk_order or empty",
               fault);
  return Status::Ok();
}

namespace backends {

std::string WeightsProbeSpecToJson(const WeightsProbeOptions& o) {
  const json j = {{"checkpoint", o.checkpoint},
                  {"layers_first", o.layers.first},
                  {"layers_last", o.layers.last},
                  {"text_file", o.text_file},
                  {"ranks", o.ranks},
                  {"tp", o.tp},
                  {"ep", o.ep},
                  {"fsdp", o.fsdp},
                  {"pp", o.pp},
                  {"interleave", o.interleave},
                  {"fault", o.fault},
                  {"steps", o.steps},
                  {"seq", o.seq},
                  {"batch", o.batch},
                  {"micro_batch", o.micro_batch},
                  {"lora_rank", o.lora_rank},
                  {"lora_alpha", o.lora_alpha},
                  {"lr", o.lr},
                  {"warmup", o.warmup},
                  {"seed", o.seed},
                  {"fp64", o.fp64},
                  {"control", o.control},
                  {"out_dir", o.out_dir},
                  {"collective_timeout_s", o.collective_timeout_s}};
  return json{{kWeightsProbeSpecKey, j}}.dump(2);
}

Status WeightsProbeSpecFromJson(const std::string& text, const std::string& file, WeightsProbeOptions* o) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains(kWeightsProbeSpecKey))
    return BadInput(file, kWeightsProbeSpecKey, "missing or not valid JSON");
  JsonFields f(doc[kWeightsProbeSpecKey], file, kWeightsProbeSpecKey);
  o->checkpoint = f.StrOr("checkpoint", "");
  o->layers.first = f.IntOr({"layers_first"}, 0, 0, int64_t{1} << 20);
  o->layers.last = f.IntOr({"layers_last"}, -1, -1, int64_t{1} << 20);
  o->text_file = f.StrOr("text_file", "");
  o->ranks = f.Int("ranks", 1, 64);
  o->tp = f.Int("tp", 1, 64);
  o->ep = f.IntOr({"ep"}, 1, 1, 64);
  o->fsdp = f.IntOr({"fsdp"}, 1, 1, 64);
  o->pp = f.IntOr({"pp"}, 1, 1, 64);
  o->interleave = f.IntOr({"interleave"}, 1, 1, 64);
  o->fault = f.StrOr("fault", "");
  o->steps = f.Int("steps", 1, 100000);
  o->seq = f.Int("seq", 2, 65536);
  o->batch = f.Int("batch", 1, 1 << 20);
  o->micro_batch = f.IntOr({"micro_batch"}, 0, 0, 1 << 20);
  o->lora_rank = f.Int("lora_rank", 1, 4096);
  o->lora_alpha = f.DoubleOr("lora_alpha", DefaultLoraAlpha(o->lora_rank), 1e-9, 1e9);
  o->lr = f.DoubleOr("lr", 1e-2, 0.0, 1e3);
  o->warmup = f.IntOr({"warmup"}, 0, 0, 100000);
  o->seed = uint64_t(f.IntOr({"seed"}, 1234, 0, std::numeric_limits<int64_t>::max()));
  o->fp64 = f.BoolOr("fp64", false);
  o->control = f.StrOr("control", "");
  o->out_dir = f.StrOr("out_dir", "");
  o->collective_timeout_s = f.DoubleOr("collective_timeout_s", 60.0, 1.0, 86400.0);
  if (!f.ok()) return f.status();
  return o->Validate();
}

bool IsWeightsProbeSpec(const std::string& spec_file) {
  const json doc = json::parse(Slurp(spec_file), nullptr, false);
  return !doc.is_discarded() && doc.is_object() && doc.contains(kWeightsProbeSpecKey);
}

}  // namespace backends

Expected<WeightsProbeResult> RunWeightsProbe(const WeightsProbeOptions& in) {
  const auto t0 = std::chrono::steady_clock::now();
  ONBOARD_RETURN_IF_ERROR(in.Validate());
  // Step 1: the output folder and the spec file.
  ProbeConfig launch;  // what the shared launcher reads (probe_launch.h)
  launch.ranks = in.ranks;
  launch.out_dir = in.out_dir;
  launch.worker_binary = in.worker_binary;
  launch.timeout_s = in.timeout_s;
  launch.collective_timeout_s = in.collective_timeout_s;
  ONBOARD_RETURN_IF_ERROR(backends::PrepareProbeOutDir(&launch));
  WeightsProbeResult r;
  r.options = in;
  r.options.out_dir = launch.out_dir;
  r.out_dir = launch.out_dir;
  const std::string spec_file = launch.out_dir + "/weights_probe_spec.json";
  std::ofstream(spec_file) << backends::WeightsProbeSpecToJson(r.options);
  // Steps 2-3: store, ranks (a rank's bad input comes back as kBadInput naming what it refused).
  ONBOARD_RETURN_IF_ERROR(backends::LaunchProbeRanks(launch, spec_file, nullptr));
  // Steps 4-5: merge, judge.
  ONBOARD_RETURN_IF_ERROR(MergeRanks(r.options, launch.out_dir, &r));
  r.adapter_dir = launch.out_dir + "/adapter";
  Judge(&r);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream(launch.out_dir + "/weights_probe.json") << WeightsProbeToJson(r) << "\n";
  return r;
}

std::string FormatWeightsProbe(const WeightsProbeResult& r) {
  std::ostringstream os;
  char buf[512];
  const WeightsProbeOptions& o = r.options;
  std::snprintf(buf, sizeof(buf),
                "weights probe  %s (%s), layers %lld-%lld, %lld ranks (pp %lld x data %lld x tp %lld; ep "
                "%lld, fsdp %lld)\n",
                o.checkpoint.c_str(), r.model_type.c_str(), (long long)r.layers_first,
                (long long)r.layers_last, (long long)o.ranks, (long long)o.pp,
                (long long)(o.ranks / (o.tp * o.pp)), (long long)o.tp, (long long)o.ep, (long long)o.fsdp);
  os << buf;
  std::string dts;
  for (const std::string& d : r.dtypes) dts += (dts.empty() ? "" : ",") + d;
  std::snprintf(buf, sizeof(buf), "weights        %lld tensors (%s) of %.3f MB; bytes read per rank:",
                (long long)r.tensors_used, dts.c_str(), double(r.checkpoint_bytes) / 1e6);
  os << buf;
  for (uint64_t b : r.rank_bytes) os << " " << b;
  os << "\n";
  std::snprintf(buf, sizeof(buf),
                "lora           r %lld, alpha %g, %zu modules, %lld params, lr %g, %lld steps%s\n",
                (long long)o.lora_rank, o.lora_alpha, r.targets.size(), (long long)r.lora_params, o.lr,
                (long long)o.steps, o.control.empty() ? "" : (" (control " + o.control + ")").c_str());
  os << buf;
  if (!r.train_loss.empty()) {
    std::snprintf(buf, sizeof(buf), "train loss     %.4f -> %.4f nats\n", r.train_loss.front(),
                  r.train_loss.back());
    os << buf;
  }
  std::snprintf(
      buf, sizeof(buf),
      "held-out       %.4f nats (frozen checkpoint %.4f; byte unigram %.4f, bigram %.4f), %lld windows\n",
      r.held_out_final, r.held_out_frozen, r.unigram_nats, r.bigram_nats, (long long)r.held_out_windows);
  os << buf;
  if (o.pp > 1) {
    os << "pp bubble      measured per stage:";
    for (double b : r.pp_bubble_by_stage) {
      std::snprintf(buf, sizeof(buf), " %.1f%%", 100 * b);
      os << buf;
    }
    std::snprintf(buf, sizeof(buf), "; 1F1B theory (P-1)/(V*M+P-1) = %.1f%% (M %lld, V %lld)\n",
                  100 * r.pp_bubble_theory, (long long)o.microbatches(), (long long)o.interleave);
    os << buf;
  }
  if (!r.caveat.empty()) os << "caveat         " << r.caveat << "\n";
  os << "verdict        " << r.verdict << "\n";
  os << "adapter        " << r.adapter_dir << " (PEFT)\n";
  return os.str();
}

double PpBubbleTheory(int64_t stages, int64_t microbatches, int64_t interleave) {
  return double(stages - 1) / double(interleave * microbatches + stages - 1);
}

std::string WeightsProbeToJson(const WeightsProbeResult& r) {
  const WeightsProbeOptions& o = r.options;
  json j = {{"checkpoint", o.checkpoint},
            {"model_type", r.model_type},
            {"layers", {r.layers_first, r.layers_last}},
            {"ranks", o.ranks},
            {"tp", o.tp},
            {"ep", o.ep},
            {"fsdp", o.fsdp},
            {"pp", o.pp},
            {"interleave", o.interleave},
            {"microbatches", o.microbatches()},
            {"tensors_used", r.tensors_used},
            {"dtypes", r.dtypes},
            {"checkpoint_bytes", r.checkpoint_bytes},
            {"rank_bytes", r.rank_bytes},
            {"targets", r.targets},
            {"lora_params", r.lora_params},
            {"caveat", r.caveat},
            {"train_loss", r.train_loss},
            {"held_out_frozen", r.held_out_frozen},
            {"held_out_final", r.held_out_final},
            {"held_out_windows", r.held_out_windows},
            {"learned", r.learned},
            {"verdict", r.verdict},
            {"adapter_dir", r.adapter_dir},
            {"wall_s", r.wall_s}};
  if (o.pp > 1)
    j["pp_bubble"] = {{"measured_by_stage", r.pp_bubble_by_stage},
                      {"theory", r.pp_bubble_theory},
                      {"stage_layers", r.pp_stage_layers}};
  return j.dump(2);
}

}  // namespace onboard
