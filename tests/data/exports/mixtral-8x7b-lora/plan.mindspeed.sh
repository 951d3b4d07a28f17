#!/usr/bin/env bash
# MindSpeed-LLM (Ascend NPU) launch for this plan, written by `onboard plan --export`.
# Target: Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# Exported differently from the plan:
#   - aux-loss coefficient 1e-3 is a training choice, not from the config
#   - Megatron-FSDP is not used on MindSpeed-LLM here: the distributed optimizer (ZeRO-1) shards only optimizer state, so weights and gradients take more memory per device than the plan's FSDP
#   - LoRA alpha = 2 * rank; targets MindSpeed's usual four projections
#   - token dispatcher alltoall_seq: MindSpeed-LLM's LoRA on MoE layers takes only that one
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MINDSPEED_LLM_DIR - a MindSpeed-LLM checkout (with MindSpeed and Megatron-LM as it pins)
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
NNODES=16
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=1
export HCCL_CONNECT_TIMEOUT=3600
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
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
  --rotary-base 1000000
  --max-position-embeddings 32768
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --num-experts 8
  --moe-router-topk 2
  --moe-ffn-hidden-size 14336
  --moe-layer-freq '([1]*32)'
  --moe-router-score-function softmax
  --moe-router-load-balancing-type aux_loss
  --moe-aux-loss-coeff 0.001
  --moe-router-dtype fp32
  --moe-grouped-gemm
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 1
  --expert-tensor-parallel-size 1
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --bf16
  --micro-batch-size 2
  --global-batch-size 1024
  --seq-length 4096
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
  --norm-topk-prob
  --use-mcore-models
  --use-flash-attn
  --ckpt-format torch
  --tokenizer-type PretrainedFromHF
  --tokenizer-name-or-path "${HF_MODEL_PATH:?required}"
  --enable-hf2mg-convert
  --model-type-hf mixtral
  --load "${HF_MODEL_PATH:?required}"
  --lora-r 16
  --lora-alpha 32
  --lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2
  --moe-token-dispatcher-type alltoall_seq
)
# onboard_launch TORCHRUN_ARGS...: refuses what the engine cannot do, then starts the ranks.
onboard_launch() {
  if [[ "$ONBOARD_UNSUPPORTED" != 0 && "${ONBOARD_FORCE:-0}" != 1 ]]; then
    echo "onboard: this plan uses what MindSpeed-LLM (Ascend NPU) does not support (see the header); not launching" >&2
    exit 3
  fi
  exec torchrun "$@" "${MINDSPEED_LLM_DIR:?set MINDSPEED_LLM_DIR}/posttrain_gpt.py" "${ARGS[@]}"
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  onboard_launch --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE"
fi
