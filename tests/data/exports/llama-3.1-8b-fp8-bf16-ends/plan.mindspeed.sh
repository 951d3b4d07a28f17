#!/usr/bin/env bash
# MindSpeed-LLM (Ascend NPU) launch for this plan, written by `onboard plan --export`.
# Target: Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# Exported differently from the plan:
#   - Megatron-FSDP is not used on MindSpeed-LLM here: the distributed optimizer (ZeRO-1) shards only optimizer state, so weights and gradients take more memory per device than the plan's FSDP
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - MEGATRON_CHECKPOINT_DIR - the HF weights converted to a Megatron checkpoint at this TP/PP/EP (e.g. Megatron-Bridge AutoBridge.import_ckpt)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MINDSPEED_LLM_DIR - a MindSpeed-LLM checkout (with MindSpeed and Megatron-LM as it pins)
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
#   - a MindSpeed checkpoint of the HF weights (MindSpeed-LLM lists no --model-type-hf for llama; convert with its checkpoint tools)
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
  --rotary-base 500000
  --max-position-embeddings 131072
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 1
  --expert-tensor-parallel-size 1
  --use-distributed-optimizer
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
  --rope-scaling-type llama3
  --rope-scaling-factor 8
  --low-freq-factor 1
  --high-freq-factor 4
  --original-max-position-embeddings 8192
  --use-mcore-models
  --use-flash-attn
  --ckpt-format torch
  --tokenizer-type PretrainedFromHF
  --tokenizer-name-or-path "${HF_MODEL_PATH:?required}"
)
# onboard_launch TORCHRUN_ARGS...: refuses what the engine cannot do, then starts the ranks.
onboard_launch() {
  if [[ "$ONBOARD_UNSUPPORTED" != 0 && "${ONBOARD_FORCE:-0}" != 1 ]]; then
    echo "onboard: this plan uses what MindSpeed-LLM (Ascend NPU) does not support (see the header); not launching" >&2
    exit 3
  fi
  exec torchrun "$@" "${MINDSPEED_LLM_DIR:?set MINDSPEED_LLM_DIR}/pretrain_gpt.py" "${ARGS[@]}"
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  onboard_launch --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE"
fi
