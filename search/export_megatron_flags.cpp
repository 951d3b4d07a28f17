// MegatronKnownFlags: the Megatron-LM flags the exports use, as Megatron's parser defines them
// (megatron/training/arguments.py _add_*_args, and ArgumentGroupFactory in
// megatron/training/argument_utils.py, which turns config dataclass fields into flags: bool False ->
// store_true, Literal -> choices, list -> nargs="+"). Read from Megatron-LM main @ d98e8a64.
#include "search/export_megatron.h"

namespace onboard {

const std::map<std::string, MegatronFlagSpec>& MegatronKnownFlags() {
  using K = MegatronFlagSpec;
  static const std::map<std::string, MegatronFlagSpec> flags = {
      {"--num-layers", {K::kOne, {}}}, {"--hidden-size", {K::kOne, {}}}, {"--ffn-hidden-size", {K::kOne, {}}},
      {"--num-attention-heads", {K::kOne, {}}}, {"--group-query-attention", {K::kSwitch, {}}},
      {"--num-query-groups", {K::kOne, {}}}, {"--kv-channels", {K::kOne, {}}}, {"--qk-layernorm", {K::kSwitch, {}}},
      {"--normalization", {K::kOne, {"LayerNorm", "RMSNorm"}}}, {"--norm-epsilon", {K::kOne, {}}},
      {"--swiglu", {K::kSwitch, {}}},
      {"--position-embedding-type", {K::kOne, {"learned_absolute", "rope", "yarn", "mrope", "relative", "none"}}},
      {"--rotary-base", {K::kOne, {}}}, {"--use-rope-scaling", {K::kSwitch, {}}}, {"--rope-scaling-factor", {K::kOne, {}}},
      {"--max-position-embeddings", {K::kOne, {}}}, {"--untie-embeddings-and-output-weights", {K::kSwitch, {}}},
      {"--disable-bias-linear", {K::kSwitch, {}}}, {"--add-qkv-bias", {K::kSwitch, {}}},
      {"--attention-output-gate", {K::kSwitch, {}}}, {"--multi-latent-attention", {K::kSwitch, {}}},
      {"--q-lora-rank", {K::kOne, {}}}, {"--kv-lora-rank", {K::kOne, {}}}, {"--qk-head-dim", {K::kOne, {}}},
      {"--qk-pos-emb-head-dim", {K::kOne, {}}}, {"--v-head-dim", {K::kOne, {}}}, {"--rope-type", {K::kOne, {"rope", "yarn"}}},
      {"--rotary-scaling-factor", {K::kOne, {}}}, {"--mscale", {K::kOne, {}}}, {"--mscale-all-dim", {K::kOne, {}}},
      {"--experimental-attention-variant", {K::kOne, {"gdn", "gdn2", "dsa", "gated_delta_net"}}},
      {"--dsa-indexer-n-heads", {K::kOne, {}}}, {"--dsa-indexer-head-dim", {K::kOne, {}}},
      {"--dsa-indexer-topk", {K::kOne, {}}}, {"--no-rope-fusion", {K::kSwitch, {}}},
      {"--cp-comm-type", {K::kMany, {"p2p", "a2a", "allgather", "a2a+p2p"}}}, {"--num-experts", {K::kOne, {}}}, {"--moe-router-topk", {K::kOne, {}}},
      {"--moe-ffn-hidden-size", {K::kOne, {}}}, {"--moe-shared-expert-intermediate-size", {K::kOne, {}}},
      {"--moe-shared-expert-gate", {K::kSwitch, {}}}, {"--moe-layer-freq", {K::kOne, {}}},
      {"--moe-router-score-function", {K::kOne, {"softmax", "sigmoid", "sqrtsoftplus"}}},
      {"--moe-router-pre-softmax", {K::kSwitch, {}}}, {"--moe-router-topk-scaling-factor", {K::kOne, {}}},
      {"--moe-router-num-groups", {K::kOne, {}}}, {"--moe-router-group-topk", {K::kOne, {}}},
      {"--moe-router-enable-expert-bias", {K::kSwitch, {}}},
      {"--moe-router-load-balancing-type",
       {K::kMany, {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "quantile_balancing", "none"}}},
      {"--moe-aux-loss-coeff", {K::kMany, {}}}, {"--moe-latent-size", {K::kOne, {}}},
      {"--moe-router-dtype", {K::kOne, {"fp32", "fp64"}}}, {"--moe-grouped-gemm", {K::kSwitch, {}}},
      {"--moe-token-dispatcher-type", {K::kOne, {"allgather", "alltoall", "flex"}}},
      {"--mtp-num-layers", {K::kOne, {}}}, {"--tensor-model-parallel-size", {K::kOne, {}}},
      {"--pipeline-model-parallel-size", {K::kOne, {}}}, {"--context-parallel-size", {K::kOne, {}}},
      {"--expert-model-parallel-size", {K::kOne, {}}}, {"--expert-tensor-parallel-size", {K::kOne, {}}},
      {"--sequence-parallel", {K::kSwitch, {}}}, {"--pipeline-model-parallel-layout", {K::kOne, {}}},
      {"--num-virtual-stages-per-pipeline-rank", {K::kOne, {}}}, {"--num-layers-per-virtual-pipeline-stage", {K::kOne, {}}},
      {"--no-overlap-p2p-communication", {K::kSwitch, {}}}, {"--use-megatron-fsdp", {K::kSwitch, {}}},
      {"--megatron-fsdp-version", {K::kOne, {"1", "2"}}}, {"--use-torch-fsdp2", {K::kSwitch, {}}},
      {"--data-parallel-sharding-strategy", {K::kOne, {"no_shard", "optim", "optim_grads", "optim_grads_params"}}},
      {"--use-distributed-optimizer", {K::kSwitch, {}}}, {"--num-distributed-optimizer-instances", {K::kOne, {}}},
      {"--outer-dp-sharding-strategy", {K::kOne, {"no_shard", "optim"}}},
      {"--no-gradient-accumulation-fusion", {K::kSwitch, {}}},
      {"--ckpt-format", {K::kOne, {"torch", "torch_dist", "torch_dcp", "fsdp_dtensor"}}},
      {"--overlap-grad-reduce", {K::kSwitch, {}}}, {"--overlap-param-gather", {K::kSwitch, {}}},
      {"--recompute-granularity", {K::kOne, {"full", "selective"}}}, {"--recompute-method", {K::kOne, {"uniform", "block"}}},
      {"--recompute-num-layers", {K::kOne, {}}}, {"--recompute-modules", {K::kMany, {}}},
      {"--bf16", {K::kSwitch, {}}}, {"--fp16", {K::kSwitch, {}}}, {"--fp8-format", {K::kOne, {"e4m3", "hybrid"}}},
      {"--micro-batch-size", {K::kOne, {}}}, {"--global-batch-size", {K::kOne, {}}}, {"--seq-length", {K::kOne, {}}},
      {"--tokenizer-type", {K::kOne, {"BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
                                       "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
                                       "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer", "NullTokenizer",
                                       "NullMultimodalTokenizer", "SFTTokenizer"}}},
      {"--tokenizer-model", {K::kOne, {}}}, {"--load", {K::kOne, {}}}, {"--finetune", {K::kSwitch, {}}},
      {"--save", {K::kOne, {}}}, {"--save-interval", {K::kOne, {}}}, {"--data-path", {K::kMany, {}}},
      {"--mock-data", {K::kSwitch, {}}}, {"--split", {K::kOne, {}}}, {"--train-iters", {K::kOne, {}}},
      {"--lr", {K::kOne, {}}}, {"--min-lr", {K::kOne, {}}},
      {"--lr-decay-style", {K::kOne, {"constant", "linear", "cosine", "inverse-square-root", "WSD"}}},
      {"--lr-warmup-iters", {K::kOne, {}}},
  };
  return flags;
}

}  // namespace onboard
