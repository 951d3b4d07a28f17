// Hand-written DSA reference: indexer scores in fp64, exact top-k per query with causal masking
// (k = min(topk, t+1), order (score desc, index asc)), softmax attention over exactly the selected
// keys, optional sigmoid output gate and attention sink. Layouts as codegen/kernel_abi.h.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_spec.h"

namespace onboard::validators {

struct DsaInputs {
  int64_t batch = 0;
  int64_t seq = 0;
  std::vector<float> q, k, v, index_q, index_k, index_w, gate, sink;  // gate/sink empty when off
  std::vector<float> v_up;  // [HQ,DV,VO] when spec.v_up_dim > 0, else empty
};

struct DsaReference {
  std::vector<double> o;         // [B,T,HQ,OV], OV = v_up_dim or DV
  std::vector<int32_t> indices;  // [B,T,TOPK], sorted ascending, -1 padded
};

// Indexer + selection only.
std::vector<int32_t> ReferenceDsaIndices(const codegen::DsaSpec& spec, const DsaInputs& in);
// Attention over given indices ([B,T,TOPK], -1 padded) in fp64; then the per-head value up-projection
// (v_up_dim > 0) and the output gate on its result (the model's order).
std::vector<double> ReferenceDsaAttention(const codegen::DsaSpec& spec, const DsaInputs& in,
                                          const std::vector<int32_t>& indices);
DsaReference ReferenceDsa(const codegen::DsaSpec& spec, const DsaInputs& in);

DsaInputs RandomDsaInputs(const codegen::DsaSpec& spec, int64_t batch, int64_t seq, uint64_t seed);

}  // namespace onboard::validators
