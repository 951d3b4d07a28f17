#!/usr/bin/env bash
# Megatron-LM launch for this plan, written by `onboard plan --export`.
# Target: NVIDIA/Megatron-LM main @ d98e8a64 (2026-08-22).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - MEGATRON_CHECKPOINT_DIR - the HF weights converted to a Megatron checkpoint at this TP/PP/EP (e.g. Megatron-Bridge AutoBridge.import_ckpt)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MEGATRON_LM_DIR - a Megatron-LM checkout at the targeted commit
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
NNODES=16
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=32
ONBOARD_UNSUPPORTED=0
ARGS=(
  --num-layers 32
  --hidden-size 4096
  --ffn-hidden-size 14336
  --num-attention-heads 32
  --group-query-attention
  --num-query-groups 8
  --kv-channels 128
  --normalization RMSNorm
  --norm-epsilon 1e-05
  --swiglu
  --position-embedding-type rope
  --rotary-base 500000
  --use-rope-scaling
  --rope-scaling-factor 8
  --max-position-embeddings 131072
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 1
  --expert-tensor-parallel-size 1
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads_params
  --use-distributed-optimizer
  --ckpt-format fsdp_dtensor
  --num-distributed-optimizer-instances 16
  --outer-dp-sharding-strategy no_shard
  --overlap-grad-reduce
  --overlap-param-gather
  --bf16
  --fp8-format hybrid
  --fp8-recipe tensorwise
  --first-last-layers-bf16
  --num-layers-at-start-in-bf16 1
  --num-layers-at-end-in-bf16 1
  --micro-batch-size 4
  --global-batch-size 1024
  --seq-length 4096
  --tokenizer-type HuggingFaceTokenizer
  --tokenizer-model "${HF_MODEL_PATH:?required}"
  --load "${MEGATRON_CHECKPOINT_DIR:?required}"
  --finetune
  --save "${SAVE_DIR:?required}"
  --save-interval "${SAVE_INTERVAL:-500}"
  --data-path "${DATA_PREFIX:?required}"
  --split 99,1,0
  --train-iters "${TRAIN_ITERS:-1000}"
  --lr 1e-5
  --min-lr 1e-6
  --lr-decay-style cosine
  --lr-warmup-iters 50
)
# onboard_launch TORCHRUN_ARGS...: refuses what the engine cannot do, then starts the ranks.
onboard_launch() {
  if [[ "$ONBOARD_UNSUPPORTED" != 0 && "${ONBOARD_FORCE:-0}" != 1 ]]; then
    echo "onboard: this plan uses what Megatron-LM does not support (see the header); not launching" >&2
    exit 3
  fi
  exec torchrun "$@" "${MEGATRON_LM_DIR:?set MEGATRON_LM_DIR}/pretrain_gpt.py" "${ARGS[@]}"
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  onboard_launch --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE"
fi
