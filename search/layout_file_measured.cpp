// Reader for measured_training_runs.json-style files (layout form (c), search/layout_file.h): each
// run names its model ("org/name", resolved through the top-level `configs` to a Hugging Face
// config), its hardware and its exact layout, and quotes what was measured. The source's free-text
// fields are read by the fixed rules below; every rule applied to a run is recorded in
// LayoutRun::assumptions so a reader can check it against the quoted row.
//
// Rules (one per field):
//   dp                : gpus / (tp*pp*cp) (checked); fsdp > 0 shards weights (zero 3) over fsdp ranks,
//                       else Megatron's distributed optimizer (zero 1) unless the optimizer text says
//                       otherwise. vp/cp/ep/etp null = 1; expert_fsdp = dp_shard*cp*tp/(ep*etp).
//   recipe settings   : precision, recompute, optimizer, pipeline layout, MTP, offloading, overlap,
//                       graphs, dispatcher, loss: search/layout_file_recipe.cpp, one rule per field.
//   micro_batch       : null = 1, the smallest, recorded as an assumption (the DeepSeek-V3 report gives
//                       only the global batch; one sequence per micro-batch is the least memory).
//   measured          : tokens_per_s_per_gpu, else from step_s (global_batch*seq/(step_s*gpus)), else from
//                       gpu_hours_per_trillion_tokens (1e12 / (hours * 3600)), else from tflops_per_gpu
//                       where the row names the FLOP count its source reports (tflops_count.formula,
//                       search/megatron_reported_flops.h: TFLOP/s * 1e12 / FLOPs per token); a run with
//                       none of them is `skipped` with the reason.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "parsers/load_model.h"
#include "search/layout_file.h"
#include "search/layout_file_fields.h"
#include "search/layout_file_recipe.h"
#include "search/megatron_reported_flops.h"
#include "search/plan_request_checks.h"

namespace onboard::layout {
namespace {

namespace fs = std::filesystem;

// Null-tolerant integer in [0, hi]: absent or null = `dflt`.
Status IntOrNull(const json& r, const Fields& f, const char* key, int64_t dflt, int64_t hi, int64_t* out) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) {
    *out = dflt;
    return Status::Ok();
  }
  return f.Int(key, 0, hi, out);
}

// Config file of `model`: configs[model].file relative to the layout file's folder, its parent, or
// the basename in <folder>/hf/ (tests/data keeps configs there).
Expected<std::string> ConfigPath(const json& doc, const std::string& model, const std::string& origin,
                                 const std::string& path) {
  auto cfgs = doc.find("configs");
  if (cfgs == doc.end() || !cfgs->is_object() || !cfgs->contains(model))
    return BadInput(origin, path + ".model", "has no entry in top-level configs", model);
  const json& e = (*cfgs)[model];
  if (!e.is_object() || !e.contains("file") || !e["file"].is_string())
    return BadInput(origin, "configs." + model + ".file", "missing config file path", e.dump().substr(0, 40));
  const fs::path rel = e["file"].get<std::string>();
  const fs::path dir = fs::path(origin).parent_path();
  // The error_code overload: a name the OS refuses (ENAMETOOLONG, ELOOP, EACCES) is "not found"
  // below, not a filesystem_error thrown out of the reader.
  std::error_code ec;
  for (const fs::path& cand : {dir / rel, dir.parent_path() / rel, dir / "hf" / rel.filename()})
    if (fs::is_regular_file(cand, ec)) return cand.string();
  return BadInput(origin, "configs." + model + ".file", "not found beside the file, its parent or hf/", rel.string());
}

// tokens/s/GPU from a published TFLOP/s/GPU, by the FLOP count the row says its source reports
// (`tflops_count.formula`, search/megatron_reported_flops.h); no count named: 0 (not converted).
Status TokensFromTflops(const json& r, const Fields& f, double tflops, LayoutRun* run, double* tps) {
  auto c = r.find("tflops_count");
  if (c == r.end()) return Status::Ok();
  const std::string field = f.path() + "tflops_count.formula";
  if (!c->is_object() || !c->contains("formula") || !(*c)["formula"].is_string())
    return BadInput(f.origin(), field, "missing string", c->dump().substr(0, 40));
  const std::string formula = (*c)["formula"].get<std::string>();
  auto per_token = ReportedFlopsPerToken(formula, run->model, run->plan.seq, run->plan.deg.tp);
  if (!per_token.ok()) return BadInput(f.origin(), field, per_token.status().message(), formula);
  *tps = tflops * 1e12 / *per_token;
  char b[160];
  std::snprintf(b, sizeof b,
                "measured tokens/s from the published %g TFLOP/s/GPU by %s's count: %.4g FLOPs per token",
                tflops, formula.c_str(), *per_token);
  run->assumptions.push_back(b);
  return Status::Ok();
}

Status ReadMeasured(const json& r, const Fields& f, LayoutRun* run) {
  auto m = r.find("measured");
  if (m == r.end() || !m->is_object()) return BadInput(f.origin(), f.path() + "measured", "missing object");
  Fields mf(*m, f.origin(), f.path() + "measured.");
  double tps = 0, step = 0, tflops = 0;
  ONBOARD_RETURN_IF_ERROR(mf.Num("tokens_per_s_per_gpu", 0, 1e9, &tps));
  ONBOARD_RETURN_IF_ERROR(mf.Num("step_s", 0, 1e9, &step));
  ONBOARD_RETURN_IF_ERROR(mf.Num("tflops_per_gpu", 0, 1e6, &tflops));
  // GPU hours per 10^12 tokens (DeepSeek-V3 report sec. 1): 10^12 / (h * 3600) tokens/s/GPU.
  double gpu_hours = 0;
  ONBOARD_RETURN_IF_ERROR(mf.Num("gpu_hours_per_trillion_tokens", 0, 1e12, &gpu_hours));
  const char* from = "tokens_per_s_per_gpu";  // the field tokens/s comes from
  if (tps <= 0 && step <= 0 && gpu_hours > 0) {
    tps = 1e12 / (gpu_hours * 3600);
    from = "gpu_hours_per_trillion_tokens";
  }
  const double tokens = static_cast<double>(run->plan.global_batch * run->plan.seq);
  const double gpus = static_cast<double>(run->topology.num_devices);
  if (tps <= 0 && step > 0) {
    tps = tokens / (step * gpus);
    from = "step_s";
  }
  if (tps <= 0 && tflops > 0) {
    ONBOARD_RETURN_IF_ERROR(TokensFromTflops(r, f, tflops, run, &tps));
    from = "tflops_per_gpu";
  }
  if (tps > 0) {
    const double step_s = step > 0 ? step : tokens / (tps * gpus);
    // A value in range but near 0 (5e-324) gives an infinite rate or a zero step: refused, not costed.
    if (!std::isfinite(tps) || !std::isfinite(step_s) || !(step_s > 0))
      return BadInput(f.origin(), mf.path() + from, "gives no finite tokens/s and step time",
                      m->value(from, json()).dump());
    run->measured_tokens_per_s_per_gpu = tps;
    run->measured_step_s = step_s;
  } else if (run->skipped.empty()) {
    run->skipped = "no tokens/s or step time measured (only other metrics)";
  }
  if (tflops > 0) run->measured_tflops_per_gpu = tflops;
  return Status::Ok();
}

Status ReadLayout(const json& r, const Fields& f, LayoutRun* run) {
  Plan& p = run->plan;
  int64_t tp, pp, vp, cp, ep, etp, dp, fsdp, mb, gb, seq;
  // The layout form's limits (layout_file.cpp, plan_request_checks.h): degrees and micro-batch
  // 2^20, vp 1024, so that tp*pp*cp, ep*etp and global_batch*seq (<= 2^54) stay far from int64 overflow.
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "tp", 1, kMaxDegree, &tp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "pp", 1, kMaxDegree, &pp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "vp", 1, kMaxInterleave, &vp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "cp", 1, kMaxDegree, &cp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "ep", 1, kMaxDegree, &ep));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "etp", 1, kMaxDegree, &etp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "dp", 0, kMaxDegree, &dp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "fsdp", 0, kMaxDegree, &fsdp));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "micro_batch", 0, kMaxDegree, &mb));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "global_batch", 0, kMaxGlobalBatch, &gb));
  ONBOARD_RETURN_IF_ERROR(IntOrNull(r, f, "seq", 0, kMaxSeq, &seq));
  for (auto [k, v] : {std::pair<const char*, int64_t>{"tp", tp}, {"pp", pp}, {"vp", vp}, {"cp", cp}, {"ep", ep},
                      {"global_batch", gb}, {"seq", seq}})
    if (v < 1) return BadInput(f.origin(), f.path() + k, "must be >= 1", std::to_string(v));
  if (etp < 1) return BadInput(f.origin(), f.path() + "etp", "must be >= 1", std::to_string(etp));
  const int64_t gpus = run->topology.num_devices;
  if (gpus % (tp * pp * cp) != 0 || (dp > 0 && dp != gpus / (tp * pp * cp)))
    return BadInput(f.origin(), f.path() + "dp", "must equal gpus/(tp*pp*cp)=" + std::to_string(gpus / (tp * pp * cp)),
                    std::to_string(dp));
  dp = gpus / (tp * pp * cp);
  if (mb < 1) {
    mb = 1;
    run->assumptions.push_back(
        "micro_batch not given: 1 assumed (the smallest; the source gives only the global batch)");
  }
  p.deg.tp = tp;
  p.deg.pp = pp;
  p.deg.interleave = vp;
  p.deg.cp = cp;
  p.deg.ep = ep;
  p.deg.etp = etp;
  p.deg.sequence_parallel = tp > 1;  // Megatron-Bridge/NeMo enable SP with TP in these recipes
  if (fsdp > 0) {
    if (dp % fsdp != 0) return BadInput(f.origin(), f.path() + "fsdp", "must divide dp=" + std::to_string(dp), std::to_string(fsdp));
    p.deg.dp_shard = fsdp;
    p.deg.dp_replicate = dp / fsdp;
    p.zero_stage = 3;
  } else {
    p.deg.dp_shard = dp;
    p.zero_stage = 1;
  }
  p.deg.expert_fsdp = std::max<int64_t>(1, p.deg.dp_shard * cp * tp / (ep * etp));
  p.micro_batch = mb;
  p.seq = seq;
  p.global_batch = gb;
  p.num_micro_batches = std::max<int64_t>(1, gb / (mb * dp));
  if (gb % (mb * dp) != 0 && run->skipped.empty())
    run->skipped = "global_batch not a multiple of micro_batch*dp";
  return Status::Ok();
}

Expected<LayoutRun> ParseMeasuredRun(const json& doc, const json& r, const std::string& origin, const std::string& path) {
  if (!r.is_object()) return BadInput(origin, path, "must be an object", r.dump().substr(0, 40));
  Fields f(r, origin, path + ".");
  LayoutRun run;
  std::string model, hw;
  int64_t gpus = 0;
  ONBOARD_RETURN_IF_ERROR(f.Str("id", &run.id, true));
  ONBOARD_RETURN_IF_ERROR(f.Str("model", &model, true));
  ONBOARD_RETURN_IF_ERROR(f.Str("hardware", &hw, true));
  ONBOARD_RETURN_IF_ERROR(f.Int("gpus", 1, int64_t{1} << 20, &gpus, true));
  ONBOARD_RETURN_IF_ERROR(f.Str("uncertain", &run.uncertain));
  // The free-text fields the readers below search: strings where present, else a one-line error
  // naming the field (not a JSON type error from deep inside a reader).
  for (const char* k :
       {"precision", "optimizer", "recompute", "framework", "source", "kernel_optimizations"}) {
    std::string text;
    ONBOARD_RETURN_IF_ERROR(f.Str(k, &text));
  }
  // Step 1: model and topology.
  ONBOARD_ASSIGN_OR_RETURN(std::string cfg, ConfigPath(doc, model, origin, path));
  ONBOARD_ASSIGN_OR_RETURN(run.model, LoadModel(cfg));
  run.has_model = true;
  run.dropout = 0;
  run.attention_kernel = "flash";
  auto topo = TopologyForHardware(hw, gpus, 0, origin, path + ".");
  if (!topo.ok()) {
    run.skipped = "hardware '" + hw + "' not in the catalog";
    run.topology = Topology{};
    run.topology.num_devices = gpus;
  } else {
    run.topology = *topo;
  }
  // Step 2: layout, precision, recompute, optimizer, pipeline layout, MTP.
  ONBOARD_RETURN_IF_ERROR(ReadLayout(r, f, &run));
  ONBOARD_RETURN_IF_ERROR(ReadRecipeSettings(r, origin, path, &run));
  // Step 3: what was measured.
  ONBOARD_RETURN_IF_ERROR(ReadMeasured(r, f, &run));
  return run;
}

}  // namespace

Expected<std::vector<LayoutRun>> ParseMeasuredRuns(const json& doc, const std::string& origin) {
  const json& runs = doc["runs"];
  std::vector<LayoutRun> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    ONBOARD_ASSIGN_OR_RETURN(LayoutRun run, ParseMeasuredRun(doc, runs[i], origin, "runs[" + std::to_string(i) + "]"));
    out.push_back(std::move(run));
  }
  return out;
}

}  // namespace onboard::layout
