// The measured-runs reader's recipe rules (search/layout_file_measured.cpp reads the layout and the
// measurement): what a run's free text (precision, optimizer, recompute, framework, source) and its
// recipe (recipe.preset_fields, recipe.model_overrides, recipe.note, the recipe files it names) say
// about how it ran. Every rule applied is recorded in LayoutRun::assumptions where the source does not
// state the value itself.
//
// Rules (one per field):
//   precision         : first word: mxfp8 | nvfp4 | fp8 (per-tensor / block scaling) | bf16 | fp16
//                       (costed as bf16); any other (fp32, mxfp4, ...) skips the run, never costed as
//                       another precision.
//   recompute         : "none..." = none; recompute_modules=[...] (or the recipe's list) per module:
//                       mla_up_proj -> MLA selective, core_attn -> every mixer selective, mlp -> MLP full,
//                       moe -> MoE full, moe_act -> MoE selective, layernorm -> RMSNorm outputs
//                       recomputed (recompute_norms); "RMSNorm" in the text (DeepSeek-V3 report sec.
//                       3.2.3: "We recompute all RMSNorm operations and MLA up-projections") = the same;
//                       "selective" without a list = Megatron-Core's default [core_attn];
//                       "full" / "activation_checkpointing: true" = full; unknown / not stated = the
//                       lightest of none < selective < full that fits (the run ran, so it fit).
//   optimizer         : "precision-aware" = bf16 moments (optimizer_dtype) and bf16 main grads (grad_dtype),
//                       fp32 master: Megatron-Bridge's recipes set exp_avg(_sq)_dtype and main_grads_dtype
//                       = torch.bfloat16 beside use_precision_aware_optimizer (recipes/deepseek/
//                       deepseek_v3.py: main_grads_dtype "Different from default float32").
//   grad reduce dtype : bf16 when the recipe file is one of Megatron-Bridge's scripts/performance/configs/
//                       (every set_*_common_configs / yaml there sets ddp.grad_reduce_in_fp32 = False,
//                       checked at 21d102f5, c270efc5, 5776a6d9, fa0315ae), or the notes cite NeMo's
//                       Mixtral pretrain_performance_optimizations (nemo/collections/llm/recipes/
//                       mixtral_8x7b.py sets plugins.grad_reduce_in_fp32 = False), or a recipe text says
//                       grad_reduce_in_fp32=False; else fp32.
//   mtp               : recipe.mtp_layers, else the m's of the pipeline layout, else run.mtp_layers, else
//                       none where the source's model label says "w/o MTP" (Megatron-Bridge 25.11 tables:
//                       "DeepSeekV3 (w/o MTP)" beside "DeepSeekV3 (w/ MTP)"), else
//                       none for NeMo AutoModel (NVIDIA-NeMo/Automodel@05e09029:nemo_automodel/components/
//                       models/deepseek_v3/model.py: DeepseekV3ForCausalLM builds num_hidden_layers blocks
//                       and the head, no MTP module), else the config's num_nextn_predict_layers
//                       (Megatron-Bridge base recipes train them).
//   pp_layout         : recipe.preset_fields.pp_layout or recipe.model_overrides.
//                       pipeline_model_parallel_layout;
//                       without one, when the L decoder layers do not divide into pp*vp chunks but L+2
//                       do, the run used account_for_embedding/loss_in_pipeline_split (Megatron-Core
//                       TransformerConfig: the embedding and the loss each take one layer's slot, so the
//                       first and the last chunk hold one decoder layer less, none at one slot a chunk:
//                       transformer_block.py asserts only num_layers_to_build >= 0; Megatron-Bridge sets
//                       both for Llama-3.1-405B, recipes/llama/llama3.py, and runs it at pp16 vp8 = 128
//                       chunks for 126 layers): the only even split Megatron accepts.
//   cpu offloading    : recipe.preset_fields.cpu_offloading_num_layers (Megatron-Bridge's perf presets;
//                       overrides.py sets cpu_offloading, activations only) -> cpu_offload_layers.
//   overlap           : recipe.preset_fields.moe_a2a_overlap. PP sends: a Megatron-Core framework (Bridge,
//                       NeMo 2, Megatron-LM) with vp > 1 overlaps them (overlap_p2p_comm: Megatron-Bridge
//                       training/comm_overlap.py _get_model_comm_overlap_cfgs, NeMo 2's
//                       MegatronCommOverlapCallback, Megatron-LM arguments.py default); vp 1: batched,
//                       blocking.
//   TP comm overlap   : tp > 1 and the recipe names Megatron-Bridge's scripts/performance/configs/llama/
//                       llama31_llm_pretrain.py (it keeps llama31_405b_pretrain_config's
//                       CommOverlapConfig(tp_comm_overlap=True), recipes/llama/llama3.py, except for nvfp4),
//                       or a recipe text says tp_comm_overlap=True; else not overlapped (the Qwen3 H100
//                       preset sets CommOverlapConfig(tp_comm_overlap=False); DeepSeek-V3's sets nothing).
//   schedule          : "DualPipe" in the framework text = pipeline_schedule dualpipe (DeepSeek-V3).
//   cuda graphs       : cuda_graph_impl full_iteration = full; transformer_engine/local with a non-empty
//                       cuda_graph_scope, or "cuda_graphs=1" in the recipe note = layers; else none.
//   dispatcher        : recipe.preset_fields.moe_flex_dispatcher_backend (deepep | hybridep), else "DeepEP"
//                       in kernel_optimizations (NeMo AutoModel's column), else all-to-all.
//   fp8 row padding   : a Megatron-Core framework, a dropless run (the source says "token-dropless") and no
//                       "padding_for_fp8=True" / "padding_for_quantization=True" in its recipe =
//                       fp8_expert_padding (Megatron-Bridge's Qwen3 / DeepSeek-V3 recipes leave router
//                       padding off: recipes/deepseek/deepseek_v3.py moe_router_padding_for_fp8 = False,
//                       qwen3_moe.py sets none; NeMo 2's Mixtral drop-and-pad runs hand the experts
//                       capacity-sized, aligned rows). The cost model charges it to fp8 plans whose
//                       dispatcher is not HybridEP.
//   fp8 storage       : a run whose source is the DeepSeek-V3 report (arXiv 2412.19437) in fp8: its sec.
//                       3.3.3 "we cache the inputs of the SwiGLU operator and recompute its output in the
//                       backward pass. These activations are also stored in FP8" = fp8_act_input_store and
//                       MoE selective (the SwiGLU output recomputed, as Megatron's moe_act).
//   optimizer states  : a run whose source is the DeepSeek-V3 report, any precision: sec. 3.3.3 "Low-
//                       Precision Optimizer States": "We adopt the BF16 data format instead of FP32 to
//                       track the first and second moments in the AdamW optimizer ... the master weights
//                       (stored by the optimizer) and gradients (used for batch size accumulation) are
//                       still retained in FP32" = optimizer_dtype bf16, grad_dtype fp32.
//   parameter dtype   : framework NeMo AutoModel under FSDP (zero 3), full training = param_dtype,
//                       grad_dtype and optimizer_dtype bf16. Each pipeline part is initialised by
//                       load_model_from_base_checkpoint -> initialize_weights(dtype=torch.bfloat16) ->
//                       self.to(dtype), whether or not base weights load, for its DeepSeek-V3, GPT-OSS
//                       and Qwen3-MoE classes (NVIDIA-NeMo/Automodel@89e3a9fd, the commit that published
//                       the DeepSeek-V3 rows: components/checkpoint/checkpointing.py, models/*/model.py),
//                       after which the recipe builds torch.optim.Adam, whose moments take the
//                       parameter's dtype, and FSDP2 hands each sharded parameter its gradient in that
//                       dtype (the reduce itself in fp32: MixedPrecisionPolicy reduce_dtype).
//   FSDP pipelining   : framework NeMo AutoModel or torchtitan (torch FSDP2 under
//                       torch.distributed.pipelining), zero 3 and pp > 1 = fsdp_pipelining per_step: the
//                       stage stays gathered and its grads accumulate unsharded until the last backward
//                       (core/plan.h FsdpPipelining; AutoModel's MoE parallelizer apply_fsdp:
//                       reshard_after_forward = not pp_enabled, reduce_dtype fp32, NVIDIA-NeMo/
//                       Automodel@89e3a9fd); Megatron-Core FSDP runs keep per_micro_batch.
//   cross entropy     : framework "Megatron-Bridge ..." = Transformer Engine's fused loss: every version of
//                       its scripts/performance sets cross_entropy_fusion_impl "te" (25.09 yaml configs at
//                       ea299063; utils/overrides.py at 97ad8cc6 .. 4ab94dfa) over GPTModelProvider's
//                       cross_entropy_loss_fusion = True; "te_inplace" (gradient in the bf16 logits) up to
//                       container 26.08 (the 26.04 and 26.06 lockfiles pin TE f031cf87 and f8a01cd5, before
//                       TE PR #3193; 26.08's lists the TE 2.17.1 wheel, also before it), "te" after;
//                       torchtitan = torch; other Megatron-Core frameworks (NeMo 2, Megatron-LM) = megatron;
//                       else megatron, recorded as an assumption (search/cross_entropy_cost.h).
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "search/layout_file_recipe.h"

namespace onboard::layout {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The recompute modules list: the recipe's preset field, else "recompute_modules=[...]" in the text.
std::vector<std::string> RecomputeModules(const json& r, const std::string& text, bool* found) {
  std::vector<std::string> mods;
  *found = false;
  auto rec = r.find("recipe");
  if (rec != r.end() && rec->is_object()) {
    auto pf = rec->find("preset_fields");
    if (pf != rec->end() && pf->is_object()) {
      auto rm = pf->find("recompute_modules");
      if (rm != pf->end() && rm->is_array()) {
        *found = true;
        for (const auto& m : *rm)
          if (m.is_string()) mods.push_back(m.get<std::string>());
        return mods;
      }
    }
  }
  const size_t a = text.find("recompute_modules=[");
  if (a == std::string::npos) return mods;
  *found = true;
  const size_t b = text.find(']', a);
  std::string list = text.substr(a + 19, b == std::string::npos ? std::string::npos : b - a - 19);
  std::string cur;
  for (char c : list + ",") {
    if (c == ',') {
      if (!cur.empty()) mods.push_back(cur);
      cur.clear();
    } else if (c != '\'' && c != '"' && c != ' ') {
      cur += c;
    }
  }
  return mods;
}

void ReadRecompute(const json& r, const std::string& text, LayoutRun* run) {
  const std::string t = Lower(text);
  auto& rc = run->plan.recompute;
  bool listed = false;
  const std::vector<std::string> mods = RecomputeModules(r, text, &listed);
  if (t.rfind("none", 0) == 0 && !listed) return;
  if (listed) {
    for (const std::string& m : mods) {
      if (m == "mla_up_proj")
        rc["MLA"] = Recompute::kSelective;
      else if (m == "core_attn")
        for (const auto& [k, v] : CoreAttnRecompute()) rc.emplace(k, v);  // the mixers; channels as listed
      else if (m == "mlp")
        rc["MLP"] = Recompute::kFull;
      else if (m == "moe")
        rc["MoE"] = Recompute::kFull;
      else if (m == "moe_act")
        rc["MoE"] = Recompute::kSelective;
      else if (m == "layernorm")
        run->recompute_norms = true;
      else
        run->assumptions.push_back("recompute module '" + m + "' not modelled");
    }
    return;
  }
  if (t.find("rmsnorm") != std::string::npos) run->recompute_norms = true;
  if (t.find("mla up-projection") != std::string::npos) {
    rc["MLA"] = Recompute::kSelective;
  } else if (t.rfind("selective", 0) == 0) {
    rc = CoreAttnRecompute();
    run->assumptions.push_back(
        "recompute 'selective' without modules read as Megatron-Core's default [core_attn]");
  } else if (t.find("full") != std::string::npos ||
             t.find("activation_checkpointing: true") != std::string::npos) {
    rc["*"] = Recompute::kFull;
  } else {
    run->recompute_unstated =
        true;  // the run ran, so it fit: the lightest policy that fits (calibration_table.h)
  }
}

const json* RecipeField(const json& r, const char* group, const char* key) {
  auto rec = r.find("recipe");
  if (rec == r.end() || !rec->is_object()) return nullptr;
  auto g = rec->find(group);
  if (g == rec->end() || !g->is_object()) return nullptr;
  auto it = g->find(key);
  return it == g->end() || it->is_null() ? nullptr : &*it;
}

void ReadPrecisionOptimizer(const json& r, LayoutRun* run) {
  const std::string prec = Lower(r.value("precision", std::string("bf16")));
  run->plan.compute_dtype = prec.rfind("mxfp8", 0) == 0   ? Precision::kMXFP8
                            : prec.rfind("nvfp4", 0) == 0 ? Precision::kNVFP4
                            : prec.rfind("fp8", 0) == 0   ? Precision::kFP8
                                                          : Precision::kBF16;
  const bool half = prec.rfind("bf16", 0) == 0 || prec.rfind("fp16", 0) == 0;
  if (run->plan.compute_dtype == Precision::kBF16 && !half && run->skipped.empty())  // fp32, mxfp4, ...
    run->skipped = "precision '" + prec.substr(0, prec.find(' ')).substr(0, 20) +
                   "' not modelled (GEMMs are costed at bf16, fp8, mxfp8 or nvfp4)";
  const std::string opt = Lower(r.value("optimizer", std::string()));
  if (opt.find("precision-aware") != std::string::npos)
    run->plan.optimizer_dtype = run->plan.grad_dtype = Precision::kBF16;
  std::string recipe_text;
  auto rec = r.find("recipe");
  if (rec != r.end() && rec->is_object())
    for (const char* k : {"file", "common_file", "base_recipe"})
      if (rec->contains(k) && (*rec)[k].is_string()) recipe_text += (*rec)[k].get<std::string>() + " ";
  auto notes = r.find("notes");
  if (notes != r.end() && notes->is_array())
    for (const auto& n : *notes)
      if (n.is_string() &&
          n.get<std::string>().find("pretrain_performance_optimizations") != std::string::npos)
        recipe_text += "grad_reduce_in_fp32=False ";
  const bool bridge_perf = recipe_text.find("Megatron-Bridge@") != std::string::npos &&
                           recipe_text.find(":scripts/performance/configs/") != std::string::npos;
  if (bridge_perf || recipe_text.find("grad_reduce_in_fp32=False") != std::string::npos)
    run->plan.grad_dtype = Precision::kBF16;
  const bool llama_perf = bridge_perf &&
                          recipe_text.find("configs/llama/llama31_llm_pretrain.py") != std::string::npos &&
                          run->plan.compute_dtype != Precision::kNVFP4;  // "False if precision == nvfp4"
  if (run->plan.deg.tp > 1 && (llama_perf || recipe_text.find("tp_comm_overlap=True") != std::string::npos)) {
    run->plan.tp_comm_overlap = true;
    run->assumptions.push_back(
        "recipe keeps tp_comm_overlap=True: TP all-gather/reduce-scatter overlapped with GEMMs");
  }
  if (r.value("framework", std::string()).find("DualPipe") != std::string::npos)
    run->plan.pipeline_schedule = PipelineSchedule::kDualPipe;
  if (run->plan.zero_stage != 3 && (opt.empty() || opt.find("not stated") != std::string::npos))
    run->assumptions.push_back("optimizer not stated: Megatron distributed optimizer (zero 1), fp32 state");
}

// The DeepSeek-V3 report's low-precision optimizer states and activation storage (rules "optimizer
// states" and "fp8 storage" above).
void ReadLowPrecisionStorage(const json& r, LayoutRun* run) {
  if (r.value("source", std::string()).find("2412.19437") == std::string::npos) return;
  run->plan.optimizer_dtype = Precision::kBF16;
  run->plan.grad_dtype = Precision::kFP32;
  run->assumptions.push_back(
      "DeepSeek-V3 report sec. 3.3.3: AdamW moments in bf16, master weights and grads fp32");
  if (run->plan.compute_dtype != Precision::kFP8 && run->plan.compute_dtype != Precision::kMXFP8) return;
  run->fp8_act_input_store = true;
  run->plan.recompute["MoE"] = Recompute::kSelective;
  run->assumptions.push_back(
      "DeepSeek-V3 report sec. 3.3.3: MoE SwiGLU inputs kept in fp8, their outputs recomputed (MoE "
      "selective)");
}

// NeMo AutoModel's bf16 parameters and states (rule "parameter dtype" above).
void ReadAutoModelStates(const json& r, LayoutRun* run) {
  if (r.value("framework", std::string()).find("AutoModel") == std::string::npos) return;
  if (run->plan.zero_stage != 3 || run->plan.mode != FinetuneMode::kFull) return;
  run->plan.param_dtype = run->plan.grad_dtype = run->plan.optimizer_dtype = Precision::kBF16;
  run->assumptions.push_back(
      "NeMo AutoModel: parameters cast to bf16 at initialisation (initialize_weights), so FSDP2's shards, "
      "their gradients and torch.optim.Adam's moments are bf16");
}

// torch FSDP2 with pipelining (rule "FSDP pipelining" above).
void ReadFsdpPipelining(const json& r, LayoutRun* run) {
  const std::string fw = r.value("framework", std::string());
  if (fw.find("AutoModel") == std::string::npos && fw.find("torchtitan") == std::string::npos) return;
  if (run->plan.zero_stage != 3 || run->plan.deg.pp <= 1) return;
  run->plan.fsdp_pipelining = FsdpPipelining::kPerStep;
  run->assumptions.push_back(
      "torch FSDP2 under torch.distributed.pipelining: the stage stays gathered across micro-batches and its "
      "grads accumulate unsharded (fp32) until the last backward (fsdp_pipelining per_step)");
}

void ReadLaunchSettings(const json& r, LayoutRun* run) {
  const json* impl = RecipeField(r, "preset_fields", "cuda_graph_impl");
  const json* scope = RecipeField(r, "preset_fields", "cuda_graph_scope");
  const std::string im = impl && impl->is_string() ? impl->get<std::string>() : "";
  std::string note;
  auto rec = r.find("recipe");
  if (rec != r.end() && rec->is_object() && rec->contains("note") && (*rec)["note"].is_string())
    note = (*rec)["note"].get<std::string>();
  if (im == "full_iteration")
    run->plan.cuda_graph = CudaGraph::kFull;
  else if ((!im.empty() && scope && scope->is_array() && !scope->empty()) ||
           note.find("cuda_graphs=1") != std::string::npos)
    run->plan.cuda_graph = CudaGraph::kLayers;
  const json* be = RecipeField(r, "preset_fields", "moe_flex_dispatcher_backend");
  std::string b = be && be->is_string() ? be->get<std::string>() : "";
  if (b.empty() && Lower(r.value("kernel_optimizations", std::string())).find("deepep") != std::string::npos)
    b = "deepep";
  run->plan.ep_dispatcher = b == "deepep"     ? EpDispatcher::kDeepEP
                            : b == "hybridep" ? EpDispatcher::kHybridEP
                                              : EpDispatcher::kAllToAll;
  if (rec == r.end() || !rec->is_object() || rec->empty())
    run->assumptions.push_back("launch settings not stated: eager, all-to-all dispatcher");
}

// The loss over the logits (rule "cross entropy" above).
void ReadLossKernel(const json& r, LayoutRun* run) {
  const std::string fw = r.value("framework", std::string());
  if (fw.rfind("Megatron-Bridge", 0) == 0) {
    int yy = 0, mm = 0;
    const size_t at = fw.find("container ");
    const bool dated =
        at != std::string::npos && std::sscanf(fw.c_str() + at, "container %d.%d", &yy, &mm) == 2;
    run->cross_entropy = dated && yy * 100 + mm > 2608 ? "te" : "te_inplace";
    run->assumptions.push_back(
        "Megatron-Bridge performance scripts: Transformer Engine's fused cross-entropy (" +
        run->cross_entropy + ")");
  } else if (fw.find("torchtitan") != std::string::npos) {
    run->cross_entropy = "torch";
  } else if (fw.find("Megatron-Core") == std::string::npos) {
    run->assumptions.push_back("loss not stated: Megatron-Core's vocab_parallel_cross_entropy");
  }
}

// Megatron's account_for_embedding/loss_in_pipeline_split (rule above) where it is the only even split.
void EmbeddingLossSplit(LayoutRun* run) {
  Plan& p = run->plan;
  const int64_t chunks = p.deg.pp * p.deg.interleave;
  const int64_t L = static_cast<int64_t>(run->model.layers.size());
  if (chunks < 2 || !p.stage_layer_starts.empty() || L % chunks == 0 || (L + 2) % chunks != 0) return;
  const int64_t per = (L + 2) / chunks;  // >= 1: at one slot a chunk, the first holds the embedding alone
  for (int64_t ch = 0; ch < chunks; ++ch) p.stage_layer_starts.push_back(ch == 0 ? 0 : ch * per - 1);
  run->assumptions.push_back(std::to_string(L) + " layers on " + std::to_string(chunks) +
                             " chunks: embedding and loss each count as a layer (account_for_embedding/"
                             "loss_in_pipeline_split), " +
                             std::to_string(per - 1) + " decoder layers on the first and last chunk");
}

// The pipeline layout (rule "pp_layout" above); `mtp` gets the layout's MTP count where it names one.
Status ReadPipelineLayout(const json& r, const std::string& origin, const std::string& path, LayoutRun* run,
                          int64_t* mtp) {
  const json* layout = RecipeField(r, "preset_fields", "pp_layout");
  if (!layout) layout = RecipeField(r, "model_overrides", "pipeline_model_parallel_layout");
  int64_t layout_layers = -1;
  if (layout && layout->is_string()) {
    Fields rf(r, origin, path + ".recipe.");
    ONBOARD_RETURN_IF_ERROR(ParsePipelineLayout(layout->get<std::string>(),
                                                run->plan.deg.pp * run->plan.deg.interleave, rf, "pp_layout",
                                                &run->plan.stage_layer_starts, mtp, &layout_layers));
    ONBOARD_RETURN_IF_ERROR(CheckLayoutLayers(layout_layers, run->model, rf));
  }
  EmbeddingLossSplit(run);
  return Status::Ok();
}

// How many MTP layers trained (rule "mtp" above); `mtp` >= 0 where the pipeline layout named them.
void ReadMtp(const json& r, int64_t mtp, LayoutRun* run) {
  auto rec = r.find("recipe");
  if (rec != r.end() && rec->is_object() && rec->contains("mtp_layers") &&
      (*rec)["mtp_layers"].is_number_integer())
    mtp = (*rec)["mtp_layers"].get<int64_t>();
  if (mtp < 0 && r.contains("mtp_layers") && r["mtp_layers"].is_number_integer())
    mtp = r["mtp_layers"].get<int64_t>();
  const auto label = r.find("model_label_in_source");
  if (mtp < 0 && label != r.end() && label->is_string() &&
      label->get<std::string>().find("w/o MTP") != std::string::npos) {
    mtp = 0;
    run->assumptions.push_back("MTP: the source's model label says 'w/o MTP': none trained");
  }
  if (mtp < 0 && r.value("framework", std::string()).find("AutoModel") != std::string::npos) {
    mtp = 0;
    run->assumptions.push_back("NeMo AutoModel: no MTP layers (its DeepseekV3ForCausalLM builds none)");
  }
  if (mtp < 0 && run->model.mtp_layers > 0) {
    mtp = run->model.mtp_layers;
    run->assumptions.push_back("MTP not stated: the config's " + std::to_string(mtp) + " layer(s) trained");
  }
  run->plan.mtp_layers = std::max<int64_t>(0, mtp);
}

// What the recipe says about overlap and offloading (rules "overlap", "cpu offloading" and "fp8 row
// padding" above).
void ReadOverlapOffload(const json& r, LayoutRun* run) {
  const bool mcore = r.value("framework", std::string()).find("Megatron-Core") != std::string::npos;
  const json* ov = RecipeField(r, "preset_fields", "moe_a2a_overlap");
  run->overlap_ep_comm = ov && ov->is_boolean() && ov->get<bool>();
  const json* off = RecipeField(r, "preset_fields", "cpu_offloading_num_layers");
  if (off && off->is_number_integer() && off->get<int64_t>() > 0)
    run->cpu_offload_layers = off->get<int64_t>();
  run->overlap_pp_p2p = run->plan.deg.pp > 1 && run->plan.deg.interleave > 1 && mcore;
  const std::string text = r.dump();
  run->fp8_expert_padding = mcore && text.find("token-dropless") != std::string::npos &&
                            text.find("padding_for_fp8=True") == std::string::npos &&
                            text.find("padding_for_quantization=True") == std::string::npos;
}

}  // namespace

Status ReadRecipeSettings(const json& r, const std::string& origin, const std::string& path, LayoutRun* run) {
  // Step 1: precision, optimizer and recompute, from the free text (the DeepSeek-V3 report's storage last).
  ReadPrecisionOptimizer(r, run);
  ReadRecompute(r, r.value("recompute", std::string()), run);
  ReadLowPrecisionStorage(r, run);
  ReadAutoModelStates(r, run);
  ReadFsdpPipelining(r, run);
  // Step 2: the pipeline layout, then MTP (a layout may name MTP layers).
  int64_t mtp = -1;
  ONBOARD_RETURN_IF_ERROR(ReadPipelineLayout(r, origin, path, run, &mtp));
  ReadMtp(r, mtp, run);
  // Step 3: overlap, offloading, graphs, dispatcher and the loss.
  ReadOverlapOffload(r, run);
  ReadLaunchSettings(r, run);
  ReadLossKernel(r, run);
  return Status::Ok();
}

}  // namespace onboard::layout
