// ONNX -> ModelIR entry points (see parsers/onnx_model.h).
//
// Step 1  bytes -> onnx::ModelProto (size capped; protobuf rejects malformed wire data).
// Step 2  GraphIndex: initializer dims validated, producers/consumers, scopes (onnx_graph_index.cpp).
// Step 3  parameters: unique weights, Identity aliases, tied copies (onnx_params.cpp).
// Step 4  token embedding (largest Gather over a 2-D weight) -> vocab, hidden; position/type tables.
// Step 5  layers: node scopes "/.../layers.N/..." grouped by N; each analysed (onnx_layer_analysis.cpp).
// Step 6  head (linear to vocab outside the layers; tied when it reads the embedding or a transposed
//         copy of it), final norm, decoder vs encoder (causal mask: Trilu / Range comparisons).
// Step 7  parameters no IR field models (head bias, pooler, embedding norm) -> ModelIR::extra_params.
// Step 8  the IR's parameter count (ComputeStats) against the graph's: a gap is a warning.
#include "parsers/onnx_model.h"

#include <algorithm>
#include <map>

#include "parsers/onnx_graph.h"
#include "parsers/onnx_layer_analysis.h"
#include "parsers/mapped_file.h"

namespace onboard {
namespace {

using namespace onnx_internal;

constexpr int64_t kMaxLayers = 100000;

std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".onnx") == 0) base.resize(base.size() - 5);
  return base;
}

DType FromOnnx(int32_t t) {
  using T = onnx::TensorProto;
  switch (t) {
    case T::FLOAT: return DType::kF32;
    case T::FLOAT16: return DType::kF16;
    case T::BFLOAT16: return DType::kBF16;
    case T::DOUBLE: return DType::kF64;
    case T::INT8: return DType::kI8;
    case T::UINT8: return DType::kU8;
    default: return (t >= 17 && t <= 20) ? DType::kFP8 : DType::kUnknown;
  }
}

}  // namespace

// Shared with the fusion pattern finder (declared in parsers/onnx_layer_analysis.h).
namespace onnx_internal {

// Step 5: the repeated block list = the indexed scope prefix ("/model/layers") with most indices.
std::vector<LayerNodes> FindLayers(const GraphIndex& g) {
  std::map<std::string, std::map<int64_t, LayerNodes>> groups;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const auto& segs = g.scopes[size_t(i)];
    for (size_t d = 0; d < segs.size(); ++d) {
      const std::string& s = segs[d];
      const size_t dot = s.rfind('.');
      if (dot == std::string::npos || dot == 0 || dot + 1 >= s.size() || s.size() - dot > 7 ||
          s.find_first_not_of("0123456789", dot + 1) != std::string::npos)
        continue;
      std::string key;
      for (size_t k = 0; k < d; ++k) key += "/" + segs[k];
      key += "/" + s.substr(0, dot);
      const int64_t idx = std::stoll(s.substr(dot + 1));
      LayerNodes& ln = groups[key][idx];
      ln.index = idx;
      ln.depth = d;
      ln.nodes.push_back(i);
      break;
    }
  }
  const std::map<int64_t, LayerNodes>* best = nullptr;
  for (const auto& [key, layers] : groups)
    if (best == nullptr || layers.size() > best->size()) best = &layers;
  std::vector<LayerNodes> out;
  if (best)
    for (const auto& [idx, ln] : *best) out.push_back(ln);
  return out;
}

bool IsNormNode(const GraphIndex& g, int n) {
  const onnx::NodeProto& node = g.node(n);
  const std::string& op = node.op_type();
  if (op == "LayerNormalization" || op == "SimplifiedLayerNormalization" || op == "RMSNormalization") return true;
  if (op != "Sqrt" || node.input_size() < 1) return false;
  // ReduceMean -> (Add eps) -> Sqrt
  std::string v = node.input(0);
  for (int s = 0; s < 3; ++s) {
    auto it = g.producer.find(v);
    if (it == g.producer.end()) return false;
    const onnx::NodeProto& p = g.node(it->second);
    if (p.op_type() == "ReduceMean") return true;
    if (p.op_type() != "Add" || p.input_size() < 1) return false;
    v = p.input(0);
  }
  return false;
}

}  // namespace onnx_internal

namespace {

bool HasCausalMask(const GraphIndex& g) {
  for (int i = 0; i < g.num_nodes(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() == "Trilu") return true;
    if (IntAttr(n, "unidirectional", 0) == 1 || IntAttr(n, "is_causal", 0) == 1) return true;
    if (n.op_type() == "Less" || n.op_type() == "Greater" || n.op_type() == "LessOrEqual" ||
        n.op_type() == "GreaterOrEqual") {
      int ranges = 0;
      for (const std::string& in : n.input()) {
        std::string v = in;
        for (int s = 0; s < 3; ++s) {  // Range possibly behind Unsqueeze/Reshape
          auto it = g.producer.find(v);
          if (it == g.producer.end()) break;
          const onnx::NodeProto& p = g.node(it->second);
          if (p.op_type() == "Range") {
            ++ranges;
            break;
          }
          if (p.input_size() < 1) break;
          v = p.input(0);
        }
      }
      if (ranges == 2) return true;
    }
  }
  return false;
}

// Steps 2-3: what the model and its index say before any analysis.
OnnxModelInfo DescribeModel(const onnx::ModelProto& model, const std::string& origin, const GraphIndex& g) {
  OnnxModelInfo info;
  ModelIR& ir = info.ir;
  ir.name = Stem(origin);
  ir.source = origin;
  ir.model_type = "onnx";
  ir.architecture = model.producer_name();
  info.producer = model.producer_name() + " " + model.producer_version();
  info.nodes = g.num_nodes();
  info.initializers = int64_t(g.initializers.size());
  for (const auto& [name, m] : g.initializers) info.external_initializers += m.external ? 1 : 0;
  return info;
}

// Step 4: the token embedding = the largest Gather over a 2-D weight (-1 when none); `tables` gets
// every such Gather.
int FindEmbedding(const GraphIndex& g, const ParamTable& p, std::vector<int>* tables) {
  int embed = -1;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "Gather" || n.input_size() != 2 || !IsParam(p, n.input(0))) continue;
    const TensorMeta* m = g.Init(n.input(0));
    if (m == nullptr || m->dims.size() != 2) continue;
    tables->push_back(i);
    if (embed < 0 || m->dims[0] > g.Init(g.node(embed).input(0))->dims[0]) embed = i;
  }
  return embed;
}

// Step 4: vocab, hidden and dtype from the embedding; the other hidden-wide tables are token types
// (indexed by a graph input) or positions.
void ReadEmbeddings(const GraphIndex& g, int embed, const std::vector<int>& tables,
                    const std::string& embed_root, OnnxModelInfo* info, std::set<std::string>* attributed) {
  ModelIR& ir = info->ir;
  const TensorMeta& em = g.initializers.at(embed_root);
  ir.vocab = em.dims[0];
  ir.hidden = em.dims[1];
  ir.dtype = ir.expert_dtype = FromOnnx(em.dtype);
  attributed->insert(g.node(embed).input(0));
  info->notes.push_back("vocab " + std::to_string(ir.vocab) + ", hidden " + std::to_string(ir.hidden) +
                        " from embedding Gather " + g.node(embed).name());
  for (int t : tables) {
    if (t == embed) continue;
    const onnx::NodeProto& n = g.node(t);
    const TensorMeta* m = g.Init(n.input(0));
    if (m->dims[1] != ir.hidden || g.RootOf(n.input(0)) == embed_root) continue;
    if (g.graph_inputs.count(n.input(1)) && ir.type_vocab == 0) {
      ir.type_vocab = m->dims[0];
    } else if (!ir.has_position_embedding) {
      ir.has_position_embedding = true;
      ir.max_position = m->dims[0];
    } else {
      continue;
    }
    attributed->insert(n.input(0));
  }
}

// Step 5: the layers' nodes, and the last of them in graph order.
struct LayerSpan {
  std::set<int> nodes;
  int last = -1;
};

// Step 5: each layer analysed in order; a malformed layer is kBadInput.
Status AnalyzeLayers(const GraphIndex& g, const ParamTable& p, const std::vector<LayerNodes>& layers,
                     const std::string& origin, OnnxModelInfo* info, std::set<std::string>* attributed,
                     LayerSpan* span) {
  ModelIR& ir = info->ir;
  for (const LayerNodes& ln : layers) {
    LayerFacts f = AnalyzeLayer(g, p, ln, ir.hidden);
    if (f.error) return BadInput(origin, f.error->field, f.error->problem, f.error->value);
    f.spec.index = int64_t(ir.layers.size());
    ir.layers.push_back(f.spec);
    attributed->insert(f.params.begin(), f.params.end());
    if (ir.layers.size() == 1) info->notes.insert(info->notes.end(), f.notes.begin(), f.notes.end());
    for (auto& w : f.warnings) ir.warnings.push_back(w);
    span->nodes.insert(ln.nodes.begin(), ln.nodes.end());
    span->last = std::max(span->last, ln.nodes.back());
  }
  return Status::Ok();
}

// Step 6: the head = a linear hidden -> vocab outside the layers; tied when it reads the embedding or a
// transposed copy of it (the copy is then not counted).
void ReadHead(const GraphIndex& g, const std::string& embed_root, const LayerSpan& span, ParamTable* p,
              OnnxModelInfo* info, std::set<std::string>* attributed) {
  ModelIR& ir = info->ir;
  std::optional<Linear> head;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (span.nodes.count(i)) continue;
    if (auto l = AsLinear(g, *p, i); l && l->out == ir.vocab && l->in == ir.hidden) head = l;
  }
  if (!head) {
    ir.tied_embeddings = true;
    ir.warnings.push_back("no output head (linear hidden -> vocab) found; counted as tied");
    return;
  }
  const std::string root = g.RootOf(head->weight);
  if (root == embed_root) {
    ir.tied_embeddings = true;
    info->notes.push_back("head reads the embedding weight: tied");
  } else if (IsTransposedCopy(g, embed_root, root)) {
    ir.tied_embeddings = true;
    p->total -= p->numel.at(root);
    p->numel.erase(root);
    p->tied_copies.insert(root);
    info->notes.push_back("head weight " + root +
                          " is a transposed copy of the embedding: tied, counted once");
  }
  attributed->insert(head->weight);
}

// Step 6: the final norm = the first norm after the last layer node; its scope's parameters are its own.
void ReadFinalNorm(const GraphIndex& g, const ParamTable& p, const LayerSpan& span, ModelIR* ir,
                   std::set<std::string>* attributed) {
  ir->final_norm = false;
  for (int i = span.last + 1; i < g.num_nodes(); ++i) {
    if (span.nodes.count(i) || !IsNormNode(g, i)) continue;
    ir->final_norm = true;
    const auto& scope = g.scopes[size_t(i)];
    for (int j = 0; j < g.num_nodes(); ++j)
      if (!span.nodes.count(j) && g.scopes[size_t(j)] == scope && !scope.empty())
        for (const std::string& in : g.node(j).input())
          if (IsParam(p, in)) attributed->insert(in);
    for (const std::string& in : g.node(i).input())
      if (IsParam(p, in)) attributed->insert(in);
    break;
  }
}

// Step 7: parameters no IR field models -> extra_params; the graph's counts into info.
void CountExtraParams(const ParamTable& p, const std::set<std::string>& attributed, OnnxModelInfo* info) {
  ModelIR& ir = info->ir;
  for (const auto& [name, n] : p.numel)
    if (!attributed.count(name)) ir.extra_params += n;
  if (ir.extra_params > 0)
    info->notes.push_back(std::to_string(ir.extra_params) +
                          " parameters outside the modelled modules -> extra_params");
  info->unique_params = p.total;
  info->shared_initializers = p.shared;
}

Expected<OnnxModelInfo> Analyze(const onnx::ModelProto& model, const std::string& origin) {
  // Steps 2-3: graph index and parameter table.
  if (!model.has_graph()) return BadInput(origin, "graph", "ModelProto has no graph");
  ONBOARD_ASSIGN_OR_RETURN(GraphIndex g, BuildGraphIndex(model.graph(), origin));
  ParamTable p = CountParams(g);
  OnnxModelInfo info = DescribeModel(model, origin, g);
  ModelIR& ir = info.ir;

  // Step 4: embeddings.
  std::set<std::string> attributed;
  std::vector<int> tables;
  const int embed = FindEmbedding(g, p, &tables);
  if (embed < 0) return BadInput(origin, "graph.node", "no token embedding (Gather over a 2-D weight) found");
  const std::string embed_root = g.RootOf(g.node(embed).input(0));
  ReadEmbeddings(g, embed, tables, embed_root, &info, &attributed);

  // Step 5: layers.
  const std::vector<LayerNodes> layers = FindLayers(g);
  if (layers.empty())
    return BadInput(origin, "graph.node", "no layer scopes ('/.../layers.N/...') in node names",
                    g.num_nodes() > 0 ? g.node(0).name() : "");
  if (int64_t(layers.size()) > kMaxLayers)
    return BadInput(origin, "graph.node", "too many layers", std::to_string(layers.size()));
  LayerSpan span;
  ONBOARD_RETURN_IF_ERROR(AnalyzeLayers(g, p, layers, origin, &info, &attributed, &span));

  // Step 6: head, final norm, family.
  ReadHead(g, embed_root, span, &p, &info, &attributed);
  ReadFinalNorm(g, p, span, &ir, &attributed);
  // A KDA recurrence is causal by construction: its graph needs no mask.
  const bool recurrent = std::any_of(ir.layers.begin(), ir.layers.end(),
                                     [](const LayerSpec& l) { return l.attn.kind == MixerKind::kKDA; });
  ir.family = HasCausalMask(g) || recurrent ? "decoder" : "encoder";

  // Step 7: parameters no field models.
  CountExtraParams(p, attributed, &info);
  if (!ModelSizeFitsInt64(ir)) return BadInput(origin, "graph.initializer", "parameter count overflows int64");
  // Step 8: the IR's parameter formulas against the graph's weights; a gap is a module the formulas
  // model otherwise (e.g. a KDA op without the dt_bias / o_norm the IR's KDA formula counts).
  if (const int64_t modelled = ComputeStats(ir, 1).total_params; modelled != p.total)
    ir.warnings.push_back("the IR's parameter formulas count " + std::to_string(modelled) +
                          ", the graph's weights " + std::to_string(p.total) +
                          " (IR - graph = " + std::to_string(modelled - p.total) + ")");
  return info;
}

}  // namespace

Expected<OnnxModelInfo> AnalyzeOnnxBytes(const std::string& bytes, const std::string& origin) {
  if (bytes.size() > kOnnxMaxFileBytes || bytes.size() > size_t(INT32_MAX))
    return BadInput(origin, "(file)", "exceeds the ONNX size cap of " + std::to_string(kOnnxMaxFileBytes) + " bytes",
                    std::to_string(bytes.size()));
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    return BadInput(origin, "(protobuf)", "not a valid ONNX ModelProto (truncated or corrupt)",
                    std::to_string(bytes.size()) + " bytes");
  return Analyze(model, origin);
}

Expected<OnnxModelInfo> AnalyzeOnnxFile(const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(std::string bytes, ReadFileCapped(path, kOnnxMaxFileBytes, "(file)"));
  return AnalyzeOnnxBytes(bytes, path);
}

Expected<ModelIR> ParseOnnxFile(const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(OnnxModelInfo info, AnalyzeOnnxFile(path));
  return std::move(info.ir);
}

Expected<ModelIR> ParseOnnxBytes(const std::string& bytes, const std::string& origin) {
  ONBOARD_ASSIGN_OR_RETURN(OnnxModelInfo info, AnalyzeOnnxBytes(bytes, origin));
  return std::move(info.ir);
}

}  // namespace onboard
