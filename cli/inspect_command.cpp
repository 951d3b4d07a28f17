// `onboard inspect PATH [--seq N] [--json] [--fusion [--precision P]]`: what the model is. PATH is a model
// directory (config.json, plus the safetensors inventory cross-check when weights or an index lie beside it),
// a config.json, or an .onnx file. Text: folded layer summary (1-based layers), vision tower, totals,
// active parameters, forward FLOPs per token at --seq, activation bytes, weight memory by dtype,
// warnings. --json: core/model_json.h's object (+ "safetensors" when cross-checked). --fusion: also the
// fusion plan of search/fusion_plan.h at --seq (text; JSON key "fusion"); --precision names the GEMM
// input precision it assumes (bf16 | fp16 | fp8 | mxfp8 | nvfp4, core/precision.h; the quantised ones fuse
// each norm with its quantise step). Exit 2 on bad input.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command_registry.h"
#include "core/model_json.h"
#include "core/precision.h"
#include "parsers/load_model.h"
#include "report/report_format.h"
#include "search/fusion_plan_graph.h"
#include "search/fusion_plan_json.h"

namespace onboard::cli {
namespace {

struct InspectOptions {
  std::string path;
  int64_t seq = 4096;
  bool json = false;
  bool fusion = false;
  std::string precision = "bf16";  // compute precision of the fusion plan (core/precision.h)
};

std::string Count(double n) { return agent::FmtCount(n); }

std::string Bytes(double b) {
  char buf[48];
  if (b >= 1e12) std::snprintf(buf, sizeof(buf), "%.2f TB", b / 1e12);
  else if (b >= 1e9) std::snprintf(buf, sizeof(buf), "%.1f GB", b / 1e9);
  else std::snprintf(buf, sizeof(buf), "%.1f MB", b / 1e6);
  return buf;
}

void PrintText(const ModelIR& m, const ModelStats& s, const std::string& crosscheck) {
  std::printf("model      %s  (%s%s%s)\n", m.name.c_str(), m.model_type.c_str(),
              m.architecture.empty() ? "" : ", ", m.architecture.c_str());
  std::printf("source     %s\n", m.source.c_str());
  std::printf("shape      hidden %lld, vocab %lld, context %lld, %zu layers, embeddings %s\n",
              static_cast<long long>(m.hidden), static_cast<long long>(m.vocab),
              static_cast<long long>(m.max_position), m.layers.size(), m.tied_embeddings ? "tied" : "untied");
  std::printf("dtypes     weights %s", DTypeName(m.dtype));
  if (m.linear_dtype != DType::kUnknown && m.linear_dtype != m.dtype)
    std::printf(", in-layer linears %s", DTypeName(m.linear_dtype));
  std::printf(", routed experts %s%s%s\n", DTypeName(m.expert_dtype), m.quantization.empty() ? "" : ", quantization ",
              m.quantization.c_str());
  std::printf("layers\n");
  for (const std::string& line : SummarizeLayers(m)) std::printf("  %s\n", line.c_str());
  if (m.mtp_layers > 0)
    std::printf("  + %lld multi-token-prediction layer(s) in the checkpoint, not counted\n",
                static_cast<long long>(m.mtp_layers));
  if (m.vision) {
    const VisionTower& v = *m.vision;
    std::printf("vision     %s: %lld blocks x %lld (mlp %lld, %lld heads), patch %lld, merge %lldx%lld -> %lld, %s params\n",
                v.kind.c_str(), static_cast<long long>(v.depth), static_cast<long long>(v.hidden),
                static_cast<long long>(v.intermediate), static_cast<long long>(v.heads),
                static_cast<long long>(v.patch), static_cast<long long>(v.merge), static_cast<long long>(v.merge),
                static_cast<long long>(v.out_hidden), Count(static_cast<double>(v.params)).c_str());
  }
  int64_t experts = 0;
  double attn_flops = 0, act = 0;
  for (const LayerStats& l : s.layers) {
    experts += l.expert_params;
    attn_flops += l.attn_flops_per_token;
    act += l.act_bytes_per_token;
  }
  std::printf("params     total %s, active %s per token (%.1f%%)\n", Count(static_cast<double>(s.total_params)).c_str(),
              Count(static_cast<double>(s.active_params)).c_str(),
              s.total_params > 0 ? 100.0 * static_cast<double>(s.active_params) / static_cast<double>(s.total_params) : 0.0);
  std::printf("           layers %s (routed experts %s), embeddings %s, head %s, vision %s, other %s\n",
              Count(static_cast<double>(s.total_params - s.embedding_params - s.head_params - s.vision_params -
                                        s.other_params)).c_str(),
              Count(static_cast<double>(experts)).c_str(), Count(static_cast<double>(s.embedding_params)).c_str(),
              Count(static_cast<double>(s.head_params)).c_str(), Count(static_cast<double>(s.vision_params)).c_str(),
              Count(static_cast<double>(s.other_params)).c_str());
  std::printf("flops      %.3g forward FLOPs/token at seq %lld (attention/recurrence %.3g, %.1f%%); "
              "training ~3x = %.3g\n",
              s.flops_per_token, static_cast<long long>(s.seq), attn_flops,
              s.flops_per_token > 0 ? 100.0 * attn_flops / s.flops_per_token : 0.0, 3 * s.flops_per_token);
  std::printf("activations %s per token over all layers (16-bit, no recompute)\n", Bytes(act).c_str());
  std::printf("weights    %s:", Bytes(s.weight_bytes).c_str());
  for (const auto& [dt, b] : s.weight_bytes_by_dtype) std::printf(" %s %s", DTypeName(dt), Bytes(b).c_str());
  std::printf("\n");
  if (!crosscheck.empty()) std::printf("safetensors %s\n", crosscheck.c_str());
  if (!m.warnings.empty()) {
    std::printf("warnings\n");
    for (const std::string& w : m.warnings) std::printf("  - %s\n", w.c_str());
  }
}

int RunInspect(const InspectOptions& o) {
  Expected<ModelIR> ir = LoadModel(o.path);
  if (!ir.ok()) return ReportError("inspect", ir.status());
  std::string note;
  Expected<std::optional<TensorInventory>> inv = LoadInventoryBeside(o.path, &note);
  if (!inv.ok()) return ReportError("inspect", inv.status());
  ModelIR& m = *ir;
  if (!note.empty()) m.warnings.push_back(note);
  const ModelStats s = ComputeStats(m, o.seq);
  std::optional<CrossCheckReport> check;
  if (inv->has_value()) check = CrossCheckInventory(**inv, m);
  std::optional<FusionPlan> fplan;
  if (o.fusion) {
    Expected<Precision> prec =
        ParsePrecision("--precision", "precision", o.precision, PrecisionUse::kCompute);
    if (!prec.ok()) return ReportError("inspect", prec.status());
    FusionOptions fo;
    fo.seq = o.seq;
    fo.gemm_input = *prec;
    Expected<FusionPlan> f = PlanFusionsForModelFile(m, o.path, fo);
    if (!f.ok()) return ReportError("inspect", f.status());
    fplan = std::move(*f);
  }
  if (o.json) {
    nlohmann::json j = ModelStatsToJson(m, s);
    if (check) {
      j["safetensors"] = {{"summary", check->Summary()},       {"agree", check->agree},
                          {"missing", check->missing},         {"extra", check->extra},
                          {"shape_mismatch", check->shape_mismatch},
                          {"inventory_params", check->inventory_params}, {"param_diff", check->param_diff},
                          {"warnings", check->warnings}};
    }
    if (o.fusion) {
      j["fusion"] = FusionPlanJson(*fplan, /*per_layer=*/true);
    }
    std::cout << j.dump(2) << "\n";
  } else {
    PrintText(m, s, check ? check->Summary() : "");
    if (o.fusion) {
      std::printf("%s", FormatFusionPlan(*fplan).c_str());
    }
  }
  return 0;
}

}  // namespace

static OnboardCommand kInspect{
    "inspect", "Describe a model: layers, parameters, FLOPs, memory", 10, [](CLI::App& sub) -> RunFn {
      auto o = std::make_shared<InspectOptions>();
      sub.add_option("path", o->path, "model directory, config.json or .onnx file")->required();
      sub.add_option("--seq", o->seq, "sequence length for the attention FLOPs (tokens)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
      sub.add_flag("--json", o->json, "print a machine-readable JSON object");
      sub.add_flag("--fusion", o->fusion, "also print the fusion plan: launches and HBM bytes saved per layer");
      sub.add_option(
          "--precision", o->precision,
          "GEMM input precision the fusion plan assumes: bf16 | fp16 | fp8 | mxfp8 | nvfp4 (default bf16)");
      return [o] { return RunInspect(*o); };
    }};

}  // namespace onboard::cli
