// ONNX -> ModelIR: recovers module structure from exporter output (torch.onnx / optimum graphs).
//
// What it reads: scoped node names (/model/layers.0/self_attn/q_proj/MatMul), initializers reached
// through Identity chains (tied / shared weights, counted once), MatMul weight shapes per scope,
// Reshape constants (heads), TopK k (experts per token), Softmax vs Sigmoid routers, LayerNormalization
// vs Pow/ReduceMean/Sqrt RMSNorm, Erf/Gelu vs Sigmoid*Mul (SiLU) activations. Nothing is taken from the
// file name. External-data initializers are counted from their declared shape, never read.
// Input is untrusted: size is capped, declared dims are checked before multiplying; errors are
// kBadInput naming the file, the field (initializer/node name) and the value.
// Units: dims are element counts; params are scalars; bytes are bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// Files larger than this are refused (protobuf's own limit is 2 GiB; big weights live in external data).
constexpr uint64_t kOnnxMaxFileBytes = 2000ull * 1000 * 1000;

struct OnnxModelInfo {
  ModelIR ir;
  int64_t unique_params = 0;         // sum of numel over distinct weight initializers (see README)
  int64_t initializers = 0;          // initializer entries in the graph
  int64_t shared_initializers = 0;   // initializers reached by more than one consumer path
  int64_t external_initializers = 0; // data_location == EXTERNAL (shape counted, data unread)
  int64_t nodes = 0;
  std::string producer;              // producer_name + version
  std::vector<std::string> notes;    // how each fact was recovered ("top_k=2 from TopK k constant")
};

// Parses and analyses an ONNX model file. Missing file -> kNotFound.
[[nodiscard]] Expected<OnnxModelInfo> AnalyzeOnnxFile(const std::string& path);
// Same from bytes in memory (fuzz entry); `origin` names the input in errors.
[[nodiscard]] Expected<OnnxModelInfo> AnalyzeOnnxBytes(const std::string& bytes, const std::string& origin);

// The IR only (what LoadModel uses).
[[nodiscard]] Expected<ModelIR> ParseOnnxFile(const std::string& path);
[[nodiscard]] Expected<ModelIR> ParseOnnxBytes(const std::string& bytes, const std::string& origin);

}  // namespace onboard
