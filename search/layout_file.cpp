// Layout files for `onboard plan --evaluate` (schema in search/README.md).
// Every error names the file, the JSON path of the field and the value.
#include "search/layout_file.h"

#include "search/layout_file_fields.h"
#include "search/plan_request_checks.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard {
namespace layout {

namespace {

// Step 1: degrees. "vp" is Megatron's name for interleave; "fsdp" > 0 shards weights (zero 3) over
// that many of the dp ranks; "etp" splits each routed expert over that many ranks.
Status ReadDegrees(const Fields& f, Plan* p, int64_t* dp, int64_t* fsdp) {
  constexpr int64_t kMax = kMaxDegree;
  ONBOARD_RETURN_IF_ERROR(f.Int("tp", 1, kMax, &p->deg.tp));
  ONBOARD_RETURN_IF_ERROR(f.Int("pp", 1, kMax, &p->deg.pp));
  ONBOARD_RETURN_IF_ERROR(f.Int("cp", 1, kMax, &p->deg.cp));
  ONBOARD_RETURN_IF_ERROR(f.Int("dp", 1, kMax, dp));
  ONBOARD_RETURN_IF_ERROR(f.Int("fsdp", 0, kMax, fsdp));
  ONBOARD_RETURN_IF_ERROR(f.Int("dp_shard", 1, kMax, &p->deg.dp_shard));
  ONBOARD_RETURN_IF_ERROR(f.Int("dp_replicate", 1, kMax, &p->deg.dp_replicate));
  ONBOARD_RETURN_IF_ERROR(f.Int("ep", 1, kMax, &p->deg.ep));
  ONBOARD_RETURN_IF_ERROR(f.Int("etp", 1, kMax, &p->deg.etp));
  ONBOARD_RETURN_IF_ERROR(f.Int("interleave", 1, kMaxInterleave, &p->deg.interleave));
  ONBOARD_RETURN_IF_ERROR(f.Int("vp", 1, kMaxInterleave, &p->deg.interleave));
  return f.Bool("sequence_parallel", &p->deg.sequence_parallel);
}

// Step 2: batch, precision, optimizer.
Status ReadBatchAndPrecision(const Fields& f, Plan* p) {
  ONBOARD_RETURN_IF_ERROR(f.Int("micro_batch", 1, kMaxDegree, &p->micro_batch));
  ONBOARD_RETURN_IF_ERROR(f.Int("global_batch", 1, kMaxGlobalBatch, &p->global_batch));
  ONBOARD_RETURN_IF_ERROR(f.Int("seq", 1, kMaxSeq, &p->seq));
  ONBOARD_RETURN_IF_ERROR(f.Int("lora_rank", 1, kMaxLoraRank, &p->lora_rank));
  ONBOARD_RETURN_IF_ERROR(f.Int("mtp_layers", 0, 16, &p->mtp_layers));
  ONBOARD_RETURN_IF_ERROR(f.Prec("base_dtype", PrecisionUse::kFrozenBase, &p->base_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Prec("precision", PrecisionUse::kCompute, &p->compute_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Int("bf16_layers_first", 0, kMaxDegree, &p->bf16_layers_first));
  ONBOARD_RETURN_IF_ERROR(f.Int("bf16_layers_last", 0, kMaxDegree, &p->bf16_layers_last));
  ONBOARD_RETURN_IF_ERROR(f.Prec("optimizer_dtype", PrecisionUse::kOptimizerState, &p->optimizer_dtype));
  ONBOARD_RETURN_IF_ERROR(f.Prec("param_dtype", PrecisionUse::kOptimizerState, &p->param_dtype));
  return f.Prec("grad_dtype", PrecisionUse::kGrads, &p->grad_dtype);
}

// Step 3: how the engine runs it: CP exchange, pipeline schedule, TP overlap, CUDA graphs, EP
// dispatcher, fine-tuning mode.
Status ReadRuntime(const Fields& f, Plan* p) {
  std::string mode = "full", cp_comm;
  ONBOARD_RETURN_IF_ERROR(f.Str("cp_comm", &cp_comm));
  if (!cp_comm.empty() && cp_comm != "ring" && cp_comm != "allgather")
    return BadInput(f.origin(), f.path() + "cp_comm", "must be ring or allgather", cp_comm);
  p->cp_comm = cp_comm == "allgather" ? CpComm::kAllGather : CpComm::kRing;
  std::string graph, dispatcher, schedule;
  ONBOARD_RETURN_IF_ERROR(f.Str("pipeline_schedule", &schedule));
  if (!schedule.empty() && schedule != "1f1b" && schedule != "dualpipe")
    return BadInput(f.origin(), f.path() + "pipeline_schedule", "must be 1f1b or dualpipe", schedule);
  p->pipeline_schedule = schedule == "dualpipe" ? PipelineSchedule::kDualPipe : PipelineSchedule::k1F1B;
  ONBOARD_RETURN_IF_ERROR(f.Bool("tp_comm_overlap", &p->tp_comm_overlap));
  ONBOARD_RETURN_IF_ERROR(f.Str("cuda_graph", &graph));
  if (!graph.empty() && graph != "none" && graph != "layers" && graph != "full")
    return BadInput(f.origin(), f.path() + "cuda_graph", "must be none, layers or full", graph);
  p->cuda_graph = graph == "full" ? CudaGraph::kFull : graph == "layers" ? CudaGraph::kLayers : CudaGraph::kNone;
  std::string fsdp_pipelining;
  ONBOARD_RETURN_IF_ERROR(f.Str("fsdp_pipelining", &fsdp_pipelining));
  if (!fsdp_pipelining.empty()) {
    ONBOARD_ASSIGN_OR_RETURN(p->fsdp_pipelining,
                             ParseFsdpPipelining(f.origin(), f.path() + "fsdp_pipelining", fsdp_pipelining));
  }
  ONBOARD_RETURN_IF_ERROR(f.Str("ep_dispatcher", &dispatcher));
  if (!dispatcher.empty()) {
    ONBOARD_ASSIGN_OR_RETURN(p->ep_dispatcher,
                             ParseEpDispatcher(f.origin(), f.path() + "ep_dispatcher", dispatcher));
  }
  ONBOARD_RETURN_IF_ERROR(f.Str("mode", &mode));
  ONBOARD_ASSIGN_OR_RETURN(p->mode, ParseFinetuneMode(f.origin(), f.path() + "mode", mode));
  if (p->mode == FinetuneMode::kLoRA && p->lora_rank == 0) p->lora_rank = 16;
  return Status::Ok();
}

// Step 4: data-parallel sharding from "dp", "fsdp" and "optimizer_sharding", then the expert-FSDP
// degree and the micro-batches per step.
Status ApplySharding(const Fields& f, int64_t dp, int64_t fsdp, Plan* p) {
  std::string sharding;
  ONBOARD_RETURN_IF_ERROR(f.Str("optimizer_sharding", &sharding));
  if (dp > 0) {  // Megatron-style "dp": data-parallel ranks; sharding says what they share
    p->deg.dp_shard = dp;
    p->deg.dp_replicate = 1;
    p->zero_stage = 0;
  }
  if (fsdp > 0) {
    if (dp > 0 && dp % fsdp != 0)
      return BadInput(f.origin(), f.path() + "fsdp", "must divide dp=" + std::to_string(dp), std::to_string(fsdp));
    p->deg.dp_shard = fsdp;
    p->deg.dp_replicate = dp > 0 ? dp / fsdp : 1;
    p->zero_stage = 3;
  }
  if (!sharding.empty()) {
    if (sharding == "none") p->zero_stage = 0;
    else if (sharding == "zero1") p->zero_stage = 1;
    else if (sharding == "fsdp") p->zero_stage = 3;
    else return BadInput(f.origin(), f.path() + "optimizer_sharding", "must be none, zero1 or fsdp", sharding);
  }
  p->deg.expert_fsdp =
      std::max<int64_t>(1, p->deg.dp_shard * p->deg.cp * p->deg.tp / (p->deg.ep * p->deg.etp));
  const int64_t dpt = p->deg.dp_replicate * p->deg.dp_shard;
  p->num_micro_batches = std::max<int64_t>(1, p->global_batch / std::max<int64_t>(1, p->micro_batch * dpt));
  if (p->global_batch == 0) p->global_batch = p->micro_batch * p->num_micro_batches * dpt;
  return Status::Ok();
}

// Step 5: recompute per block kind: one level for every kind ("full"), or one per kind name.
Status ReadRecompute(const json& j, const Fields& f, Plan* p) {
  auto rc = j.find("recompute");
  if (rc == j.end()) return Status::Ok();
  if (rc->is_string()) {
    ONBOARD_ASSIGN_OR_RETURN(Recompute r,
                             ParseRecompute(f.origin(), f.path() + "recompute", rc->get<std::string>()));
    p->recompute["*"] = r;
  } else if (rc->is_object()) {
    for (auto it = rc->begin(); it != rc->end(); ++it) {
      if (!it->is_string())
        return BadInput(f.origin(), f.path() + "recompute." + it.key(), "must be a string", it->dump());
      ONBOARD_ASSIGN_OR_RETURN(Recompute r, ParseRecompute(f.origin(), f.path() + "recompute." + it.key(),
                                                           it->get<std::string>()));
      p->recompute[it.key()] = r;
    }
  } else {
    return BadInput(f.origin(), f.path() + "recompute", "must be a string or an object", rc->dump());
  }
  return Status::Ok();
}

}  // namespace

Status ReadPlan(const json& j, const Fields& f, Plan* p, int64_t* layout_layers) {
  *layout_layers = -1;
  int64_t dp = 0, fsdp = 0;
  // Steps 1-5, in the order their errors are reported.
  ONBOARD_RETURN_IF_ERROR(ReadDegrees(f, p, &dp, &fsdp));
  ONBOARD_RETURN_IF_ERROR(ReadBatchAndPrecision(f, p));
  ONBOARD_RETURN_IF_ERROR(ReadRuntime(f, p));
  ONBOARD_RETURN_IF_ERROR(ApplySharding(f, dp, fsdp, p));
  ONBOARD_RETURN_IF_ERROR(ReadRecompute(j, f, p));
  // Step 6: the pipeline layout (Megatron's pipeline_model_parallel_layout string).
  std::string pp_layout;
  ONBOARD_RETURN_IF_ERROR(f.Str("pp_layout", &pp_layout));
  if (!pp_layout.empty()) {
    ONBOARD_RETURN_IF_ERROR(ParsePipelineLayout(pp_layout, p->deg.pp * p->deg.interleave, f, "pp_layout",
                                                &p->stage_layer_starts, &p->mtp_layers, layout_layers));
  }
  return Status::Ok();
}

// The request's expert routing (PlanRequest::expert_nodes_per_token, ::max_route_nodes), checked by
// CheckExpertRouting (the model's top_k is checked again by PlanRequest::Validate).
Status ReadExpertRouting(const Fields& f, LayoutRun* run) {
  ONBOARD_RETURN_IF_ERROR(f.Num("expert_nodes_per_token", -1e300, 1e300, &run->expert_nodes_per_token));
  ONBOARD_RETURN_IF_ERROR(f.Int("max_route_nodes", std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<int64_t>::max(), &run->max_route_nodes));
  return CheckExpertRouting(f.origin(), f.path(), run->expert_nodes_per_token, run->max_route_nodes,
                            run->has_model ? MaxRoutedTopK(run->model) : kTopKUnknown);
}

Status CheckLayoutLayers(int64_t layout_layers, const ModelIR& m, const Fields& f) {
  const int64_t L = static_cast<int64_t>(m.layers.size());
  if (layout_layers >= 0 && layout_layers != L)
    return BadInput(f.origin(), f.path() + "pp_layout",
                    "places " + std::to_string(layout_layers) + " decoder layers, the model has " + std::to_string(L));
  return Status::Ok();
}

namespace {

Expected<ModelIR> ModelFromJson(const json& m, const std::string& origin, const std::string& path) {
  if (!m.is_object()) return BadInput(origin, path, "must be an object", m.dump().substr(0, 40));
  Fields f(m, origin, path + ".");
  constexpr int64_t kDim = int64_t{1} << 22;
  int64_t hidden = 0, ffn = 0, heads = 0, layers = 0, vocab = 0, kv = 0, seq = 2048;
  int64_t experts = 0, top_k = 0, moe_ffn = 0, shared = 0, dense_layers = 0;
  bool gated = false;
  ONBOARD_RETURN_IF_ERROR(f.Int("hidden", 1, kDim, &hidden, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("ffn", 1, kDim, &ffn, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("heads", 1, 65536, &heads, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("layers", 1, 4096, &layers, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("vocab", 1, kDim, &vocab, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("seq", 1, int64_t{1} << 24, &seq));
  ONBOARD_RETURN_IF_ERROR(f.Int("kv_heads", 1, 65536, &kv));
  ONBOARD_RETURN_IF_ERROR(f.Int("experts", 0, 65536, &experts));
  ONBOARD_RETURN_IF_ERROR(f.Int("top_k", 0, 65536, &top_k));
  ONBOARD_RETURN_IF_ERROR(f.Int("moe_ffn", 0, kDim, &moe_ffn));
  ONBOARD_RETURN_IF_ERROR(f.Int("shared_experts", 0, 64, &shared));
  ONBOARD_RETURN_IF_ERROR(f.Int("dense_layers", 0, 4096, &dense_layers));
  ONBOARD_RETURN_IF_ERROR(f.Bool("gated", &gated));
  if (hidden % heads != 0)
    return BadInput(origin, path + ".heads", "must divide hidden=" + std::to_string(hidden), std::to_string(heads));
  if (kv > 0 && heads % kv != 0)
    return BadInput(origin, path + ".kv_heads", "must divide heads=" + std::to_string(heads), std::to_string(kv));
  if (experts > 0 && (top_k < 1 || top_k > experts))
    return BadInput(origin, path + ".top_k", "must be in [1, experts=" + std::to_string(experts) + "]", std::to_string(top_k));
  ModelIR ir;
  ir.name = path;
  ir.source = origin;
  ir.family = "decoder";
  ir.hidden = hidden;
  ir.vocab = vocab;
  ir.max_position = seq;
  ir.has_position_embedding = !gated;  // GPT-style (learned positions) unless SwiGLU/RoPE-style
  ir.tied_embeddings = !gated;
  for (int64_t i = 0; i < layers; ++i) {
    LayerSpec l;
    l.index = i;
    l.attn.kind = kv > 0 && kv < heads ? MixerKind::kGQA : MixerKind::kMHA;
    l.attn.num_heads = heads;
    l.attn.num_kv_heads = kv > 0 ? kv : heads;
    l.attn.head_dim = hidden / heads;
    l.attn.v_head_dim = hidden / heads;
    l.attn.qkv_bias = l.attn.o_bias = !gated;
    l.norm_bias = !gated;
    if (experts > 0 && i >= dense_layers) {
      l.channel = ChannelKind::kMoE;
      l.moe.num_experts = experts;
      l.moe.top_k = top_k;
      l.moe.expert_intermediate = moe_ffn > 0 ? moe_ffn : ffn;
      l.moe.num_shared = shared;
      l.moe.shared_intermediate = moe_ffn > 0 ? moe_ffn : ffn;
      l.moe.gated = gated;
    } else {
      l.mlp.intermediate = ffn;
      l.mlp.gated = gated;
      l.mlp.bias = !gated;
      l.mlp.act = gated ? Activation::kSwiGLU : Activation::kGELU;
    }
    ir.layers.push_back(l);
  }
  if (!ModelSizeFitsInt64(ir)) return BadInput(origin, path, "dimensions too large", std::to_string(hidden));
  return ir;
}

Expected<LayoutRun> ParseRun(const json& r, const std::string& origin, const std::string& path) {
  if (!r.is_object()) return BadInput(origin, path, "must be an object", r.dump().substr(0, 40));
  Fields f(r, origin, path + ".");
  LayoutRun run;
  ONBOARD_RETURN_IF_ERROR(f.Str("id", &run.id));
  if (run.id.empty()) run.id = path;
  auto m = r.find("model");
  if (m == r.end()) return BadInput(origin, path + ".model", "missing (a run needs its model dims)");
  ONBOARD_ASSIGN_OR_RETURN(run.model, ModelFromJson(*m, origin, path + ".model"));
  run.model.name = run.id.substr(0, run.id.find('/'));
  run.has_model = true;
  Fields mf(*m, origin, path + ".model.");
  run.dropout = 0.1;
  run.attention_kernel = "unfused";
  ONBOARD_RETURN_IF_ERROR(mf.Num("dropout", 0, 0.99, &run.dropout));
  ONBOARD_RETURN_IF_ERROR(mf.Str("attention", &run.attention_kernel));
  if (run.attention_kernel != "flash" && run.attention_kernel != "unfused")
    return BadInput(origin, path + ".model.attention", "must be flash or unfused", run.attention_kernel);
  run.plan.seq = run.model.max_position;
  run.plan.compute_dtype = Precision::kFP16;
  int64_t layout_layers = -1;
  ONBOARD_RETURN_IF_ERROR(ReadPlan(r, f, &run.plan, &layout_layers));
  ONBOARD_RETURN_IF_ERROR(CheckLayoutLayers(layout_layers, run.model, f));
  ONBOARD_RETURN_IF_ERROR(ReadExpertRouting(f, &run));
  std::string hw;
  int64_t gpus = 0;
  double nic = 200;
  ONBOARD_RETURN_IF_ERROR(f.Str("hardware", &hw, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("gpus", 1, int64_t{1} << 20, &gpus, true));
  ONBOARD_RETURN_IF_ERROR(f.Num("nic_gbit", 1, 1e5, &nic));
  ONBOARD_ASSIGN_OR_RETURN(run.topology, TopologyForHardware(hw, gpus, nic, origin, path + "."));
  double measured = 0;
  ONBOARD_RETURN_IF_ERROR(f.Num("measured_step_s", 0, 1e9, &measured));
  if (measured > 0) run.measured_step_s = measured;
  return run;
}

}  // namespace
}  // namespace layout

using layout::json;

Expected<ModelIR> ModelFromDims(const std::string& json_text, const std::string& origin) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded()) return BadInput(origin, "(document)", "not valid JSON");
  return layout::ModelFromJson(j, origin, "model");
}

Expected<std::vector<LayoutRun>> ParseLayoutJson(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return BadInput(origin, "(document)", "not valid JSON");
  if (!j.is_object()) return BadInput(origin, "(document)", "must be a JSON object", j.dump().substr(0, 40));
  std::vector<LayoutRun> out;
  auto runs = j.find("runs");
  if (runs == j.end()) {  // (a) one layout for the model/topology on the command line
    LayoutRun run;
    run.id = "layout";
    run.plan.seq = 0;  // 0 = take --seq from the command line
    layout::Fields f(j, origin, "");
    ONBOARD_RETURN_IF_ERROR(layout::ReadPlan(j, f, &run.plan, &run.layout_layers));
    run.mode_stated = j.contains("mode");
    ONBOARD_RETURN_IF_ERROR(f.Bool("recompute_norms", &run.recompute_norms));
    ONBOARD_RETURN_IF_ERROR(f.Bool("fp8_act_input_store", &run.fp8_act_input_store));
    ONBOARD_RETURN_IF_ERROR(f.Bool("fp8_expert_padding", &run.fp8_expert_padding));
    ONBOARD_RETURN_IF_ERROR(f.Int("cpu_offload_layers", 0, int64_t{1} << 20, &run.cpu_offload_layers));
    ONBOARD_RETURN_IF_ERROR(f.Str("cross_entropy", &run.cross_entropy));
    if (j.contains("cross_entropy")) ONBOARD_RETURN_IF_ERROR(CheckCrossEntropy(origin, run.cross_entropy));
    ONBOARD_RETURN_IF_ERROR(layout::ReadExpertRouting(f, &run));
    out.push_back(run);
    return out;
  }
  if (!runs->is_array() || runs->empty()) return BadInput(origin, "runs", "must be a non-empty array", runs->dump().substr(0, 40));
  if (j.contains("configs")) return layout::ParseMeasuredRuns(j, origin);  // (c) measured_training_runs.json
  for (size_t i = 0; i < runs->size(); ++i) {
    ONBOARD_ASSIGN_OR_RETURN(LayoutRun run, layout::ParseRun((*runs)[i], origin, "runs[" + std::to_string(i) + "]"));
    out.push_back(std::move(run));
  }
  // Figure-1 style memory, keyed by model name (the id before '/').
  auto mem = j.find("memory_gib_per_gpu");
  if (mem != j.end() && mem->is_object()) {
    for (auto& run : out) {
      auto it = mem->find(run.model.name);
      if (it == mem->end() || !it->is_object()) continue;
      layout::Fields f(*it, origin, "memory_gib_per_gpu." + run.model.name + ".");
      MeasuredMemoryGiB mm;
      ONBOARD_RETURN_IF_ERROR(f.Num("params_grads_optimizer", 0, 1e6, &mm.params_grads_optimizer));
      ONBOARD_RETURN_IF_ERROR(f.Num("activations_no_recompute", 0, 1e6, &mm.activations_no_recompute));
      ONBOARD_RETURN_IF_ERROR(f.Num("activations_seq_selective", 0, 1e6, &mm.activations_seq_selective));
      run.measured_memory = mm;
    }
  }
  return out;
}

Expected<std::vector<LayoutRun>> LoadLayoutFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("layout file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseLayoutJson(ss.str(), path);
}

PlanRequest RequestForRun(const LayoutRun& run) {
  PlanRequest req;
  req.model = run.model;
  req.topology = run.topology;
  req.mode = run.plan.mode;
  req.lora_rank = run.plan.lora_rank > 0 ? run.plan.lora_rank : 16;
  req.base_dtype = run.plan.base_dtype;
  req.compute_dtype = run.plan.compute_dtype;
  req.bf16_layers_first = run.plan.bf16_layers_first;
  req.bf16_layers_last = run.plan.bf16_layers_last;
  req.seq = run.plan.seq;
  req.global_batch = run.plan.global_batch;
  req.dropout = run.dropout;
  req.attention_kernel = run.attention_kernel;
  ApplyRunOptions(run, &req);
  return req;
}

std::map<std::string, Recompute> CoreAttnRecompute() {
  return {{"*", Recompute::kSelective}, {"MLP", Recompute::kNone}, {"MoE", Recompute::kNone}};
}

void ApplyRunOptions(const LayoutRun& run, PlanRequest* req) {
  req->overlap_ep_comm = run.overlap_ep_comm;
  req->overlap_pp_p2p = run.overlap_pp_p2p;
  req->recompute_norms = run.recompute_norms;
  req->fp8_act_input_store = run.fp8_act_input_store;
  req->fp8_expert_padding = run.fp8_expert_padding;
  req->cpu_offload_layers = run.cpu_offload_layers;
  if (!run.cross_entropy.empty()) req->cross_entropy = run.cross_entropy;
  req->expert_nodes_per_token = run.expert_nodes_per_token;
  req->max_route_nodes = run.max_route_nodes;
}

}  // namespace onboard
