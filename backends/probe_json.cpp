// JSON for the probe: spec + config handed to the workers, and the result (`onboard probe --json`).
#include <cmath>
#include <nlohmann/json.hpp>

#include "backends/probe.h"
#include "backends/probe_step_codec.h"

namespace onboard {
namespace {

using nlohmann::json;

json SpecJsonCore(const ProxySpec& s) {
  json layers = json::array();
  for (const ProxyLayer& l : s.layers)
    layers.push_back({{"mixer", l.mixer == ProxyMixer::kKDA ? "KDA" : "MLA"},
                      {"channel", l.channel == ProxyChannel::kMoE ? "MoE" : "MLP"}});
  return {{"source_model", s.source_model}, {"layers", layers}, {"vocab", s.vocab},
          {"hidden", s.hidden}, {"kda_heads", s.kda_heads}, {"kda_head_dim", s.kda_head_dim},
          {"conv_kernel", s.conv_kernel}, {"gate_lower_bound", s.gate_lower_bound},
          {"chunk", s.chunk}, {"gate_rank", s.gate_rank}, {"mla_heads", s.mla_heads},
          {"q_lora_rank", s.q_lora_rank}, {"kv_lora_rank", s.kv_lora_rank},
          {"qk_nope_dim", s.qk_nope_dim}, {"qk_rope_dim", s.qk_rope_dim},
          {"v_head_dim", s.v_head_dim}, {"mla_output_gate", s.mla_output_gate},
          {"index_heads", s.index_heads}, {"index_head_dim", s.index_head_dim},
          {"index_topk", s.index_topk}, {"indexer_kl_weight", s.indexer_kl_weight},
          {"num_experts", s.num_experts}, {"top_k", s.top_k},
          {"num_shared", s.num_shared}, {"expert_inter", s.expert_inter},
          {"shared_inter", s.shared_inter}, {"latent_dim", s.latent_dim},
          {"latent_norm", s.latent_norm},
          {"router", s.router == RouterActivation::kSigmoid ? "sigmoid" : "softmax"},
          {"renormalize", s.renormalize}, {"routed_scaling", s.routed_scaling},
          {"balance_bias", s.balance_bias}, {"balance_rate", s.balance_rate},
          {"mlp_inter", s.mlp_inter}, {"notes", s.notes}, {"pattern", s.PatternString()}};
}

void SpecFromJson(const json& j, ProxySpec* s) {
  s->source_model = j.at("source_model").get<std::string>();
  s->layers.clear();
  for (const json& l : j.at("layers")) {
    ProxyLayer pl;
    pl.mixer = l.at("mixer") == "KDA" ? ProxyMixer::kKDA : ProxyMixer::kMLA;
    pl.channel = l.at("channel") == "MoE" ? ProxyChannel::kMoE : ProxyChannel::kDense;
    s->layers.push_back(pl);
  }
#define ONBOARD_GET(f) s->f = j.at(#f).get<decltype(s->f)>()
  ONBOARD_GET(vocab); ONBOARD_GET(hidden); ONBOARD_GET(kda_heads); ONBOARD_GET(kda_head_dim);
  ONBOARD_GET(conv_kernel); ONBOARD_GET(gate_lower_bound); ONBOARD_GET(chunk);
  ONBOARD_GET(gate_rank); ONBOARD_GET(mla_heads); ONBOARD_GET(q_lora_rank);
  ONBOARD_GET(kv_lora_rank); ONBOARD_GET(qk_nope_dim); ONBOARD_GET(qk_rope_dim);
  ONBOARD_GET(v_head_dim); ONBOARD_GET(mla_output_gate); ONBOARD_GET(index_heads);
  ONBOARD_GET(index_head_dim); ONBOARD_GET(index_topk); ONBOARD_GET(num_experts);
  ONBOARD_GET(top_k); ONBOARD_GET(num_shared); ONBOARD_GET(expert_inter);
  ONBOARD_GET(shared_inter); ONBOARD_GET(latent_dim); ONBOARD_GET(latent_norm);
  ONBOARD_GET(renormalize); ONBOARD_GET(routed_scaling); ONBOARD_GET(mlp_inter); ONBOARD_GET(notes);
#undef ONBOARD_GET
  s->indexer_kl_weight = j.value("indexer_kl_weight", 1.0);  // absent in older spec files
  s->balance_bias = j.value("balance_bias", false);
  s->rope = j.value("rope", false);
  s->rope_theta = j.value("rope_theta", 10000.0);
  s->balance_rate = j.value("balance_rate", 2e-2);
  s->router = j.at("router") == "sigmoid" ? RouterActivation::kSigmoid : RouterActivation::kSoftmax;
  s->vision = ProxyVision{};
  if (j.contains("vision")) {  // absent: no tower
    const json& v = j.at("vision");
    s->vision = {v.at("blocks").get<int64_t>(), v.at("hidden").get<int64_t>(),
                 v.at("heads").get<int64_t>(),  v.at("inter").get<int64_t>(),
                 v.at("patch").get<int64_t>(),  v.at("merge").get<int64_t>(),
                 v.at("image").get<int64_t>(),  v.at("source").get<std::string>()};
  }
}

// The two field lists are kept as tables (unformatted).
// clang-format off
json ConfigJsonCore(const ProbeConfig& c) {
  return {{"ranks", c.ranks}, {"ep", c.ep_degree()}, {"fsdp", c.fsdp_degree()}, {"steps", c.steps},
          {"mode", FinetuneModeName(c.mode)}, {"lora_rank", c.lora_rank},
          {"lora_alpha", c.lora_alpha}, {"lr", c.lr}, {"warmup", c.warmup},
          {"min_lr_ratio", c.min_lr_ratio}, {"clip", c.clip}, {"weight_decay", c.weight_decay},
          {"beta1", c.beta1}, {"beta2", c.beta2}, {"adam_eps", c.adam_eps}, {"seed", c.seed},
          {"seq", c.seq}, {"batch", c.batch}, {"micro_batch", c.micro_batch}, {"task", ProbeTaskName(c.task)},
          {"copy_symbols", c.copy_symbols}, {"text_file", c.text_file},
          {"expert_placement", c.expert_placement},
          {"timeout_s", c.timeout_s}, {"collective_timeout_s", c.collective_timeout_s},
          {"out_dir", c.out_dir}, {"threads_per_rank", c.threads_per_rank}, {"device", c.device},
          {"die_rank", c.die_rank}, {"die_step", c.die_step},
          {"converge_fraction", c.converge_fraction}, {"dtype", FloatDtypeName(c.dtype)},
          {"base_steps", c.base_steps}, {"kda_kernel", ProbeKernelName(c.kda_kernel)},
          {"dsa_kernel", ProbeKernelName(c.dsa_kernel)}};
}

void ConfigFromJson(const json& j, ProbeConfig* c) {
#define ONBOARD_GET(f) c->f = j.at(#f).get<decltype(c->f)>()
  ONBOARD_GET(ranks); ONBOARD_GET(ep); ONBOARD_GET(fsdp); ONBOARD_GET(steps);
  ONBOARD_GET(lora_rank); ONBOARD_GET(lora_alpha); ONBOARD_GET(lr); ONBOARD_GET(warmup);
  ONBOARD_GET(min_lr_ratio); ONBOARD_GET(clip); ONBOARD_GET(weight_decay); ONBOARD_GET(beta1);
  ONBOARD_GET(beta2); ONBOARD_GET(adam_eps); ONBOARD_GET(seed); ONBOARD_GET(seq);
  ONBOARD_GET(batch); ONBOARD_GET(micro_batch); ONBOARD_GET(copy_symbols); ONBOARD_GET(text_file);
  ONBOARD_GET(expert_placement); ONBOARD_GET(timeout_s); ONBOARD_GET(collective_timeout_s);
  ONBOARD_GET(out_dir); ONBOARD_GET(threads_per_rank); ONBOARD_GET(device); ONBOARD_GET(die_rank);
  ONBOARD_GET(die_step); ONBOARD_GET(converge_fraction);
  ONBOARD_GET(base_steps);
#undef ONBOARD_GET
  for (auto [field, dst] : {std::pair<const char*, ProbeKernel*>{"kda_kernel", &c->kda_kernel},
                            std::pair<const char*, ProbeKernel*>{"dsa_kernel", &c->dsa_kernel}}) {
    Expected<ProbeKernel> k = ParseProbeKernel("probe config", field, j.at(field).get<std::string>());
    if (!k.ok()) throw std::invalid_argument(k.status().message());
    *dst = *k;
  }
  Expected<FinetuneMode> mode = ParseFinetuneMode("probe config", "mode", j.at("mode").get<std::string>());
  if (!mode.ok()) throw std::invalid_argument(mode.status().message());
  c->mode = *mode;
  Expected<ProbeTask> task = ParseProbeTask("probe config", "task", j.at("task").get<std::string>());
  if (!task.ok()) throw std::invalid_argument(task.status().message());
  c->task = *task;
  c->control = j.value("control", std::string());
  Expected<FloatDtype> dt = ParseFloatDtype("probe config", "dtype", j.at("dtype").get<std::string>());
  if (!dt.ok()) throw std::invalid_argument(dt.status().message());
  c->dtype = *dt;
  c->lookup_keys = j.value("lookup_keys", int64_t{16});
  c->lookup_values = j.value("lookup_values", int64_t{16});
  c->tp = j.value("tp", int64_t{1});  // tensor parallelism (issue 17); absent in older files
  c->sequence_parallel = j.value("sequence_parallel", false);
  c->etp = j.value("etp", int64_t{0});
  c->recompute.clear();
  const json rc = j.value("recompute", json::object());  // named: items() of a temporary dangles
  for (auto it = rc.begin(); it != rc.end(); ++it) {
    Expected<Recompute> r = ParseRecomputePolicy(it->get<std::string>(), "probe config", "recompute." + it.key());
    if (!r.ok()) throw std::invalid_argument(r.status().message());
    c->recompute[it.key()] = *r;
  }
  // pipeline parallelism (issue 17); absent in older spec files
  c->pp = j.value("pp", int64_t{1});
  c->interleave = j.value("interleave", int64_t{1});
  c->stage_layer_starts = j.value("stage_layer_starts", std::vector<int64_t>{});
  c->pp_fault = j.value("pp_fault", std::string());
  c->ranks_per_node = j.value("ranks_per_node", int64_t{0});
  c->max_route_nodes = j.value("max_route_nodes", int64_t{0});
  c->expert_phy2log = j.value("expert_phy2log", std::vector<int64_t>{});
  c->fault_log2phy = j.value("fault_log2phy", false);
  c->moe_overlap = j.value("moe_overlap", false);
  c->ep_dispatcher = j.value("ep_dispatcher", std::string("alltoall"));
  c->loss_parity_steps = j.value("loss_parity_steps", int64_t{0});
}
// clang-format on

// Fields added for issue 12 (RoPE, negative controls), kept apart from the core lists.
json SpecJson(const ProxySpec& s) {
  json j = SpecJsonCore(s);
  j["rope"] = s.rope;
  j["rope_theta"] = s.rope_theta;
  if (s.vision.blocks > 0)  // the vision tower (issue 12 item 6; proxy_vision.h)
    j["vision"] = {{"blocks", s.vision.blocks}, {"hidden", s.vision.hidden}, {"heads", s.vision.heads},
                   {"inter", s.vision.inter},   {"patch", s.vision.patch},   {"merge", s.vision.merge},
                   {"image", s.vision.image},   {"source", s.vision.source}};
  return j;
}

json ConfigJson(const ProbeConfig& c) {
  json j = ConfigJsonCore(c);
  j["control"] = c.control;
  j["lookup_keys"] = c.lookup_keys;
  j["lookup_values"] = c.lookup_values;
  j["tp"] = c.tp_degree();  // tensor parallelism (issue 17)
  j["sequence_parallel"] = c.sequence_parallel;
  j["etp"] = c.etp;
  json rc = json::object();  // recompute per block kind (issue 17)
  for (const auto& [kind, r] : c.recompute) rc[kind] = RecomputeName(r);
  j["recompute"] = rc;
  // pipeline parallelism (issue 17)
  j["pp"] = c.pp;
  j["interleave"] = c.interleave;
  j["stage_layer_starts"] = c.stage_layer_starts;
  j["pp_fault"] = c.pp_fault;
  j["ranks_per_node"] = c.ranks_per_node;
  j["max_route_nodes"] = c.max_route_nodes;
  j["expert_phy2log"] = c.expert_phy2log;
  j["fault_log2phy"] = c.fault_log2phy;
  j["moe_overlap"] = c.moe_overlap;
  j["ep_dispatcher"] = c.ep_dispatcher;
  j["loss_parity_steps"] = c.loss_parity_steps;  // kernel loss parity (issue 12)
  return j;
}

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json LossParityJson(const std::vector<ProbeLossParity>& all) {
  json a = json::array();
  for (const ProbeLossParity& p : all) a.push_back(LossParityToJson(p));
  return a;
}

}  // namespace

// Kernel loss parity (issue 12): one compared kernel, with both curves.
json LossParityToJson(const ProbeLossParity& p) {
  json gen = json::array(), ref = json::array();
  for (double v : p.generated) gen.push_back(Num(v));
  for (double v : p.reference) ref.push_back(Num(v));
  return {{"kernel", p.kernel},
          {"proxy", p.proxy},
          {"pass", p.pass},
          {"steps", p.steps},
          {"max_rel", Num(p.max_rel)},
          {"worst_step", p.worst_step},
          {"tolerance", p.tolerance},
          {"message", p.message},
          {"generated_kernel_calls", p.generated_kernel_calls},
          {"torch_op_calls", p.torch_op_calls},
          {"generated_losses", gen},
          {"reference_losses", ref}};
}

std::string ProbeSpecConfigToJson(const ProxySpec& spec, const ProbeConfig& config) {
  return json{{"spec", SpecJson(spec)}, {"config", ConfigJson(config)}}.dump(2);
}

Status ProbeSpecConfigFromJson(const std::string& text, ProxySpec* spec, ProbeConfig* config) {
  try {
    json j = json::parse(text);
    SpecFromJson(j.at("spec"), spec);
    ConfigFromJson(j.at("config"), config);
  } catch (const std::exception& e) {
    return BadInput("probe spec", "json", e.what());
  }
  return Status::Ok();
}

json PredictionComparisonToJson(const ProbePrediction& p) {
  json coll = json::array();
  for (const CollectiveComparison& c : p.collectives)
    coll.push_back({{"kind", c.kind},
                    {"term", c.term},
                    {"measured_s", c.measured_s},
                    {"predicted_s", c.predicted_s},
                    {"ratio", c.ratio}});
  const MemoryComparison& m = p.memory;
  return json{{"collectives", coll},
              {"pp_bubble", p.pp_bubble},
              {"memory",
               {{"weights", m.weights},
                {"grads", m.grads},
                {"optimizer", m.optimizer},
                {"activations", m.activations},
                {"a2a_buffers", m.a2a_buffers},
                {"workspace", m.workspace},
                {"predicted_bytes", m.predicted},
                {"measured_live_peak_bytes", m.measured},
                {"ratio", m.ratio},
                {"dtype_note", m.dtype_note}}}};
}

json ExpertCommToJson(const ProbeResult& r) {
  if (r.coactivation.empty()) return nullptr;
  const ProbeTierTraffic t = TotalTraffic(r.coactivation);
  const MeasuredExpertAllToAll a2a = MeasuredExpertExchange(r);
  return json{
      {"nodes", r.coactivation.nodes},
      {"ranks_per_node", r.coactivation.ranks_per_node > 0 ? r.coactivation.ranks_per_node : r.config.ranks},
      {"placement", r.config.expert_placement.empty() ? "contiguous" : "set"},
      {"physical_slots", static_cast<int64_t>(r.config.expert_phy2log.size())},
      {"overlap", r.config.moe_overlap},
      {"nodes_per_token", t.nodes_per_token},
      {"cross_node_rows_per_token", t.cross_node_rows_per_token},
      {"cross_node_copies_per_token", t.cross_node_copies_per_token},
      {"slow_tier_bytes_per_token", t.slow_tier_bytes_per_token},
      {"rank_max_over_mean", t.rank_max_over_mean},
      {"a2a_exposed_s", a2a.exposed_s},
      {"a2a_hidden_s", a2a.hidden_s}};
}

std::string ProbeResultToJson(const ProbeResult& r) {
  json steps = json::array();
  for (const ProbeStep& s : r.steps) steps.push_back(backends::ProbeStepToJson(s));
  json pred = {{"available", r.prediction.available}, {"topology", r.prediction.topology},
               {"step_s", r.prediction.step_s},       {"memory_bytes", r.prediction.memory_bytes},
               {"comm_s", r.prediction.comm_s},       {"notes", r.prediction.notes}};
  // Measured beside predicted per collective kind, for the bubble and for live-tensor memory (issue 17).
  const json cmp = PredictionComparisonToJson(r.prediction);
  for (const char* key : {"collectives", "pp_bubble", "memory"}) pred[key] = cmp.at(key);
  pred["memory"]["rank_live_peak_bytes"] = r.rank_live_peak_bytes;
  return json{{"spec", SpecJson(r.spec)},
              {"config", ConfigJson(r.config)},
              {"params",
               {{"total", r.params.total},
                {"expert", r.params.expert},
                {"lora", r.params.lora},
                {"trainable", r.params.trainable}}},
              {"task_floor", r.task_floor},
              {"floor_nats", Num(r.floor_nats)},
              {"baseline_nats", Num(r.baseline_nats)},
              {"baselines",
               {{"no_learning_nats", Num(r.baseline_nats)},
                {"floor_nats", Num(r.floor_nats)},
                {"loss_target_nats", Num(r.loss_target)},
                {"bigram_nats", Num(r.bigram_nats)}}},
              {"skill",
               {{"metric", r.skill_metric},
                {"value", Num(r.skill)},
                {"target", r.skill_target},
                {"final_loss", Num(r.final_loss)},
                {"held_out_loss", Num(r.held_out_loss)},
                {"held_out_accuracy", Num(r.held_out_accuracy)},
                {"held_out_tokens", r.held_out_tokens},
                {"last_steps_accuracy", Num(r.last_steps_accuracy)}}},
              {"steps", steps},
              {"prediction", pred},
              {"convergence", r.convergence},
              {"checks", r.checks},
              {"out_dir", r.out_dir},
              {"wall_s", r.wall_s},
              {"coactivation", CoactivationToJson(r.coactivation)},  // issue 18
              {"loss_parity", LossParityJson(r.loss_parity)},        // issue 12
              {"kda_calls",
               {{"generated", r.kda_calls.generated},
                {"torch", r.kda_calls.torch},
                {"fallback_reason", r.kda_calls.fallback_reason}}}}
      .dump(2);
}

}  // namespace onboard
