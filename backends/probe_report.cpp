// Merge of the ranks' JSON, the task floors and the cost model's prediction (probe_report.h); the
// verdicts that FinishProbeResult adds: probe_verdicts.cpp.
#include "backends/probe_report.h"
#include "backends/probe_pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "backends/probe_data.h"
#include "backends/probe_image.h"
#include "backends/probe_lookup.h"
#include "backends/probe_schedule.h"
#include "backends/probe_step_codec.h"
#include "backends/probe_step_series.h"
#include "backends/probe_text_split.h"
#include "core/number_text.h"
#include "search/planner.h"
#include "validators/convergence.h"
#include "validators/learning_verdict.h"
#include "validators/probe_observations.h"

namespace onboard::backends {
namespace {

using nlohmann::json;

std::string Fmt(double v, int digits = 3) { return FormatSignificant(v, digits); }

// j[key] as T, refused (naming file, field and value) when missing or of another type.
template <typename T>
Status Get(const json& j, const std::string& where, const std::string& key, T* out) {
  if (!j.is_object() || !j.contains(key)) return BadInput(where, key, "missing");
  try {
    *out = j.at(key).get<T>();
  } catch (const json::exception&) {
    return BadInput(where, key, "has the wrong type", j.at(key).dump());
  }
  return Status::Ok();
}

// A JSON array of ProbeStep records (probe_step_codec.h), each decoded strictly.
Status ReadSteps(const json& j, const std::string& where, const std::string& key,
                 std::vector<ProbeStep>* out) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
    return BadInput(where, key, "must be an array of step records");
  const json& a = j.at(key);
  for (size_t i = 0; i < a.size(); ++i) {
    Expected<ProbeStep> s = ProbeStepFromJson(a[i], where + " " + key + "[" + std::to_string(i) + "]");
    if (!s.ok()) return s.status();
    out->push_back(std::move(*s));
  }
  return Status::Ok();
}

// The LoRA base phase (rank 0's "base_phase"), reported beside the curve, never in it.
Status BasePhaseNote(const RankFile& r0, ProbeResult* r) {
  const std::string where = r0.path + " base_phase";
  json bp;
  ONBOARD_RETURN_IF_ERROR(Get(r0.j, r0.path, "base_phase", &bp));
  std::vector<ProbeStep> bs;
  ONBOARD_RETURN_IF_ERROR(ReadSteps(bp, where, "steps", &bs));
  int64_t offset = 0;
  double share = 0;
  ONBOARD_RETURN_IF_ERROR(Get(bp, where, "symbol_offset", &offset));
  ONBOARD_RETURN_IF_ERROR(Get(bp, where, "target_share", &share));
  if (bs.empty()) return Status::Ok();
  int64_t planned = 0;
  bool competent = false;
  ONBOARD_RETURN_IF_ERROR(Get(bp, where, "planned_steps", &planned));
  ONBOARD_RETURN_IF_ERROR(Get(bp, where, "competent", &competent));
  int64_t cooldown = 0;  // the annealing steps after the competence stop (probe_schedule.h)
  ONBOARD_RETURN_IF_ERROR(Get(bp, where, "cooldown_steps", &cooldown));
  const int64_t stop = static_cast<int64_t>(bs.size()) - cooldown;
  double acc = 0;
  const size_t w = std::min<size_t>(static_cast<size_t>(LearningCriteria{}.window), bs.size());
  for (size_t i = bs.size() - w; i < bs.size(); ++i) acc += bs[i].accuracy / static_cast<double>(w);
  auto mean3 = [&](bool last) {
    double sum = 0;
    const size_t n = std::min<size_t>(3, bs.size());
    for (size_t i = 0; i < n; ++i) sum += bs[last ? bs.size() - 1 - i : i].loss;
    return sum / static_cast<double>(n);
  };
  double secs = 0;
  for (const ProbeStep& st : bs) secs += st.step_s;
  r->spec.notes.push_back(
      "LoRA base phase (not in the curve): " + std::to_string(bs.size()) +
      " full-training steps on the source task (copy over letters shifted by " + std::to_string(offset) +
      ", " + Fmt(100 * share) + "% target letters), loss " + Fmt(mean3(false)) + " -> " + Fmt(mean3(true)) +
      " (mean of first/last 3), " + "source accuracy " + Fmt(100 * acc) + "% (" +
      (competent ? "competent" : "NOT competent") + " after " + std::to_string(stop) + " of planned " +
      std::to_string(planned) + " steps, at most " + std::to_string(planned * kLoraBaseMaxFactor) +
      ", then " + std::to_string(cooldown) + " cooldown steps to the minimum rate), " + Fmt(secs) +
      " s; then base frozen, adapters trained on the target task");
  return Status::Ok();
}

// Pipeline parallelism (issue 17): send / recv times and the bubble, max over ranks; each rank's bubble.
void MergePipelineStep(const ProbeStep& b, size_t k, ProbeStep* s) {
  if (k == 0) s->pp_bubble_by_rank.clear();
  s->comm.pp_send_s = std::max(s->comm.pp_send_s, b.comm.pp_send_s);
  s->comm.pp_recv_s = std::max(s->comm.pp_recv_s, b.comm.pp_recv_s);
  s->pp_bubble = std::max(s->pp_bubble, b.pp_bubble);
  s->pp_bubble_by_rank.push_back(b.pp_bubble);
}

// Step i over the ranks: rank 0's global values; times, memory: max; expert load, indexer KL: sum
// (each rank's KL share is already scaled by the global token count).
Status MergeStep(const std::vector<ProbeStep>& per_rank, const std::vector<RankFile>& ranks, double tokens,
                 ProbeStep* s) {
  const ProbeStep& a = per_rank[0];
  *s = a;  // then the max / sum over the other ranks
  for (size_t k = 0; k < per_rank.size(); ++k) {
    const ProbeStep& b = per_rank[k];
    const std::string where = ranks[k].path + " steps[" + std::to_string(s->step) + "]";
    if (b.step != a.step)
      return BadInput(where, "step", "differs from rank 0's " + std::to_string(a.step),
                      std::to_string(b.step));
    if (b.expert_load.size() != a.expert_load.size() || b.indexer_kl.size() != a.indexer_kl.size())
      return BadInput(where, "expert_load", "has other MoE / MLA layers than rank 0's record",
                      std::to_string(b.expert_load.size()) + " rows");
    s->step_s = std::max(s->step_s, b.step_s);
    s->comm.all_gather_s = std::max(s->comm.all_gather_s, b.comm.all_gather_s);
    s->comm.reduce_scatter_s = std::max(s->comm.reduce_scatter_s, b.comm.reduce_scatter_s);
    s->comm.all_to_all_s = std::max(s->comm.all_to_all_s, b.comm.all_to_all_s);
    s->comm.all_to_all_hidden_s = std::max(s->comm.all_to_all_hidden_s, b.comm.all_to_all_hidden_s);
    s->comm.all_reduce_s = std::max(s->comm.all_reduce_s, b.comm.all_reduce_s);
    s->comm.tp_all_reduce_s = std::max(s->comm.tp_all_reduce_s, b.comm.tp_all_reduce_s);
    s->comm.tp_all_gather_s = std::max(s->comm.tp_all_gather_s, b.comm.tp_all_gather_s);
    s->comm.tp_reduce_scatter_s = std::max(s->comm.tp_reduce_scatter_s, b.comm.tp_reduce_scatter_s);
    s->compute_s = std::max(s->compute_s, b.compute_s);
    s->peak_rss_bytes = std::max(s->peak_rss_bytes, b.peak_rss_bytes);
    s->live_peak_bytes = std::max(s->live_peak_bytes, b.live_peak_bytes);
    MergePipelineStep(b, k, s);
    if (k == 0) continue;
    for (size_t l = 0; l < a.expert_load.size(); ++l) {
      if (b.expert_load[l].size() != a.expert_load[l].size())
        return BadInput(where, "expert_load[" + std::to_string(l) + "]",
                        "has another expert count than rank 0's", std::to_string(b.expert_load[l].size()));
      for (size_t e = 0; e < a.expert_load[l].size(); ++e) s->expert_load[l][e] += b.expert_load[l][e];
    }
    for (size_t l = 0; l < a.indexer_kl.size(); ++l) s->indexer_kl[l] += b.indexer_kl[l];
  }
  s->tokens_per_s = s->step_s > 0 ? tokens / s->step_s : 0;
  return Status::Ok();
}

}  // namespace

Status MergeRankResults(const std::vector<RankFile>& ranks, ProbeResult* r) {
  if (ranks.empty()) return Status::Ok();
  // Step 1: rank 0's header and base phase.
  const RankFile& r0 = ranks[0];
  ONBOARD_RETURN_IF_ERROR(Get(r0.j, r0.path, "backend", &r->backend));
  ONBOARD_RETURN_IF_ERROR(Get(r0.j, r0.path, "torch", &r->torch_version));
  json p;
  ONBOARD_RETURN_IF_ERROR(Get(r0.j, r0.path, "params", &p));
  const std::string pw = r0.path + " params";
  ONBOARD_RETURN_IF_ERROR(Get(p, pw, "total", &r->params.total));
  ONBOARD_RETURN_IF_ERROR(Get(p, pw, "expert", &r->params.expert));
  ONBOARD_RETURN_IF_ERROR(Get(p, pw, "lora", &r->params.lora));
  ONBOARD_RETURN_IF_ERROR(Get(p, pw, "trainable", &r->params.trainable));
  ONBOARD_RETURN_IF_ERROR(BasePhaseNote(r0, r));
  json held;  // text and copy tasks: {"loss", "accuracy", "windows", "counted_tokens"}; null otherwise
  ONBOARD_RETURN_IF_ERROR(Get(r0.j, r0.path, "held_out", &held));
  if (!held.is_null()) {
    const std::string hw = r0.path + " held_out";
    ONBOARD_RETURN_IF_ERROR(Get(held, hw, "loss", &r->held_out_loss));
    ONBOARD_RETURN_IF_ERROR(Get(held, hw, "accuracy", &r->held_out_accuracy));
    ONBOARD_RETURN_IF_ERROR(Get(held, hw, "counted_tokens", &r->held_out_tokens));
  }
  if (r0.j.contains("kda_calls")) {  // what the KDA layers ran (issue 12); absent in older rank files
    const json& kc = r0.j.at("kda_calls");
    const std::string kw = r0.path + " kda_calls";
    ONBOARD_RETURN_IF_ERROR(Get(kc, kw, "generated", &r->kda_calls.generated));
    ONBOARD_RETURN_IF_ERROR(Get(kc, kw, "torch", &r->kda_calls.torch));
    ONBOARD_RETURN_IF_ERROR(Get(kc, kw, "fallback_reason", &r->kda_calls.fallback_reason));
  }
  // Step 2: every rank's step records.
  std::vector<std::vector<ProbeStep>> steps(ranks.size());
  size_t n = std::numeric_limits<size_t>::max();
  for (size_t k = 0; k < ranks.size(); ++k) {
    ONBOARD_RETURN_IF_ERROR(ReadSteps(ranks[k].j, ranks[k].path, "steps", &steps[k]));
    n = std::min(n, steps[k].size());
    int64_t live = 0;  // this rank's live-tensor peak over its steps
    for (const ProbeStep& st : steps[k]) live = std::max(live, st.live_peak_bytes);
    r->rank_live_peak_bytes.push_back(live);
    int64_t rss = 0;
    ONBOARD_RETURN_IF_ERROR(Get(ranks[k].j, ranks[k].path, "baseline_rss_bytes", &rss));
    r->baseline_rss_bytes = std::max(r->baseline_rss_bytes, rss);
  }
  // Step 3: merged step by step.
  const double tokens = static_cast<double>(r->config.batch * r->config.seq);
  std::vector<ProbeStep> per_rank(ranks.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ranks.size(); ++k) per_rank[k] = steps[k][i];
    ProbeStep s;
    ONBOARD_RETURN_IF_ERROR(MergeStep(per_rank, ranks, tokens, &s));
    r->steps.push_back(std::move(s));
  }
  // Step 4: expert co-activation and tier traffic, summed over ranks (absent in older rank files).
  std::vector<json> coact;
  std::vector<std::string> where;
  for (const RankFile& f : ranks) {
    coact.push_back(f.j.contains("coactivation") ? f.j.at("coactivation") : json());
    where.push_back(f.path);
  }
  return MergeCoactivation(coact, where, r->config.ranks_per_node, r->config.nodes(), &r->coactivation);
}

// Text: the held-out baselines from the file (probe_text_split.h); a file that cannot be read
// again leaves them NaN (the verdict then cannot pass).
std::string TextTaskFloor(const ProbeConfig& c, ProbeResult* r) {
  r->floor_nats = std::numeric_limits<double>::quiet_NaN();
  r->baseline_nats = r->bigram_nats = std::numeric_limits<double>::quiet_NaN();
  std::ifstream f(c.text_file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  Expected<TextSplit> split = SplitText(c.text_file, static_cast<int64_t>(text.size()), c.seq);
  if (!f || !split.ok())
    return "text task (byte-level " + c.text_file + "): no baselines (" +
           (split.ok() ? std::string("unreadable") : split.status().message()) + ")";
  const TextBaselines b = ComputeTextBaselines(text, *split);
  r->baseline_nats = b.unigram_nats;
  r->bigram_nats = b.bigram_nats;
  return "text task (byte-level " + c.text_file + ", train " + std::to_string(split->train_end) +
         " bytes, held out " + std::to_string(split->held_out_targets()) + " target bytes in " +
         std::to_string(split->held_windows) + " windows): no known floor; held-out unigram " +
         Fmt(b.unigram_nats) + " nats, bigram " + Fmt(b.bigram_nats) + " nats (lambda " +
         Fmt(b.bigram_lambda, 2) + "); uniform bytes = ln(256) = 5.55 nats";
}

std::string TaskFloor(const ProxySpec& spec, const ProbeConfig& c, double* floor_nats,
                      double* baseline_nats) {
  *floor_nats = 0.0;
  if (c.task == ProbeTask::kImage) {  // probe_image.h: the answers' colours need the image
    const ProxyVision& v = spec.vision;
    *baseline_nats = ImageNoImageNats();
    return "image task (" + std::to_string(ImageTokens(v)) + " region colours of a " +
           std::to_string(v.image) + "x" + std::to_string(v.image) + " image, " +
           std::to_string(kImageColours) + " colours, loss + exact match on the answers; vision tower " +
           std::to_string(v.blocks) + " ViT block(s) of width " + std::to_string(v.hidden) + ", patch " +
           std::to_string(v.patch) + ", " + std::to_string(v.merge) + "x" + std::to_string(v.merge) +
           " merge, projector into " + std::to_string(spec.hidden) + ", scaled from " + v.source +
           "): floor 0 nats; no-image (unigram) baseline ln(" + std::to_string(kImageColours) +
           ") = " + Fmt(*baseline_nats) + " nats";
  }
  if (c.task == ProbeTask::kLookup) {  // probe_lookup.h: the table's value entropy
    *baseline_nats = LookupUnigramNats(LookupTable(c.lookup_keys, c.lookup_values), c.lookup_values);
    return "lookup task (" + std::to_string(LookupTriples(c.seq)) + " (a, b, Y[a][b]) triples of a fixed " +
           std::to_string(c.lookup_keys) + "x" + std::to_string(c.lookup_keys) + " table of " +
           std::to_string(c.lookup_values) + " values, loss + exact match on the values): floor 0 nats; " +
           "no-learning (unigram of the values) baseline " + Fmt(*baseline_nats) + " nats";
  }
  *baseline_nats = std::log(static_cast<double>(c.copy_symbols));  // uniform targets: unigram entropy
  return "copy task (" + std::to_string(CopyHalf(c.seq)) + " distinct of " + std::to_string(c.copy_symbols) +
         " symbols, loss + exact match on the copied half): floor 0 nats; no-learning (unigram) baseline "
         "ln(" +
         std::to_string(c.copy_symbols) + ") = " + Fmt(*baseline_nats) +
         " nats; uniform start ln(256) = 5.55 nats";
}

// Pipeline parallelism (issue 17): the probe's stages, interleave, data ranks and micro-batches on
// the plan the cost model evaluates (ranks = pp x data ranks; stage starts in proxy layers).
void PipelinePlan(const ProxySpec& spec, const ProbeConfig& cfg, Plan* plan) {
  if (cfg.pp_degree() <= 1) return;
  plan->deg.pp = cfg.pp_degree();
  plan->deg.interleave = cfg.interleave;
  plan->micro_batch = cfg.micro_batch_size();
  plan->num_micro_batches = cfg.micro_steps();
  plan->stage_layer_starts = cfg.stage_layer_starts.empty()
                                 ? BalancedStageStarts(spec.num_layers(), cfg.pp_degree() * cfg.interleave)
                                 : cfg.stage_layer_starts;
}

// The cost model's bubble as a share of the pipeline phase (m micro-batches of t_mb plus the
// bubble; search/cost_model.cpp: bubble = (p-1)/v * t_mb), the quantity the probe measures.
double PredictedBubbleShare(const Plan& plan, const PlanEstimate& est) {
  if (plan.deg.pp <= 1 || !(est.bubble_s > 0)) return 0;
  const double p = static_cast<double>(plan.deg.pp), v = static_cast<double>(plan.deg.interleave);
  const double t_mb = est.bubble_s * v / (p - 1);
  return est.bubble_s / (static_cast<double>(plan.num_micro_batches) * t_mb + est.bubble_s);
}

void ProbePlanRequest(const ProxySpec& spec, const ProbeConfig& cfg, const Topology& topo, PlanRequest* req,
                      Plan* plan) {
  req->model = ProxyToModelIR(spec);
  req->topology = topo;
  req->mode = cfg.mode;
  req->lora_rank = cfg.lora_rank;
  req->seq = cfg.seq;
  req->global_batch = cfg.batch;
  req->constraints.reserved_gib = 0;
  req->constraints.memory_margin = 0;
  req->threads = 1;
  // The probe's attention is LibTorch ops (proxy_forward.cpp): its softmax scores and probabilities
  // are materialised and saved for backward, as the memory model's unfused attention counts them.
  req->attention_kernel = "unfused";
  plan->deg.dp_shard = cfg.fsdp_degree();
  plan->deg.dp_replicate = cfg.data_ranks() / cfg.fsdp_degree();
  plan->deg.tp = cfg.tp_degree();  // tensor parallelism (issue 17)
  plan->deg.sequence_parallel = cfg.sequence_parallel;
  plan->deg.etp = cfg.etp_degree();
  plan->deg.ep = cfg.ep_degree();
  // The cost model's expert data parallelism spans dp_shard * tp / ep ranks (etp = 1); the probe
  // replicates experts over its TP ranks instead (tp = 1: the same fsdp / ep).
  plan->deg.expert_fsdp =
      std::max<int64_t>(1, cfg.fsdp_degree() * cfg.tp_degree() / (cfg.ep_degree() * cfg.etp_degree()));
  plan->micro_batch = cfg.micro_batch_size();
  plan->num_micro_batches = cfg.micro_steps();
  plan->seq = cfg.seq;
  plan->global_batch = cfg.batch;
  plan->mode = cfg.mode;
  plan->lora_rank = cfg.lora_rank;
  for (const char* k : {"KDA", "MLA", "DSA", "MoE", "MLP"}) plan->recompute[k] = cfg.recompute_for(k);
  PipelinePlan(spec, cfg, plan);  // pipeline parallelism (issue 17)
}

ProbePrediction PredictProbe(const ProxySpec& spec, const ProbeConfig& cfg, const Topology& topo) {
  ProbePrediction p;
  p.topology = topo.source + ": " + Fmt(topo.device.tflops_fp32 * 1e3) + " GFLOP/s per rank, loopback " +
               Fmt(topo.tiers.empty() ? 0 : topo.tiers.back().bw_gbps) + " GB/s, " +
               Fmt(topo.tiers.empty() ? 0 : topo.tiers.back().latency_us) + " us";
  PlanRequest req;
  Plan plan;
  ProbePlanRequest(spec, cfg, topo, &req, &plan);
  Expected<PlanEstimate> est = EvaluatePlan(req, plan);
  if (!est.ok()) {
    p.notes.push_back("cost model: " + est.status().message());
    return p;
  }
  p.available = true;
  p.step_s = est->step_s;
  p.memory_bytes = est->memory.total;
  p.comm_s = est->exposed_comm_s;
  p.collectives = PredictedCollectives(est->time_terms);
  p.memory = PredictedMemory(est->memory, cfg, spec.vocab);
  p.pp_bubble = PredictedBubbleShare(plan, *est);
  p.notes.push_back("cost model assumes bf16 weights/activations; the probe runs fp32");
  if (cfg.tp_degree() > 1)
    p.notes.push_back(
        "cost model shards experts over expert_fsdp = fsdp*tp/ep = " + std::to_string(plan.deg.expert_fsdp) +
        " ranks; the probe replicates them over its TP ranks");
  for (const std::string& n : est->notes) p.notes.push_back(n);
  return p;
}

}  // namespace onboard::backends
