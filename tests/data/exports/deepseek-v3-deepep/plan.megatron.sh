#!/usr/bin/env bash
# Megatron-LM launch for this plan, written by `onboard plan --export`.
# Target: NVIDIA/Megatron-LM main @ d98e8a64 (2026-08-22).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# Exported differently from the plan:
#   - recompute per block kind (MLA=full, MLP=none, MoE=none): the engine takes one setting; the strongest is exported
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - MEGATRON_CHECKPOINT_DIR - the HF weights converted to a Megatron checkpoint at this TP/PP/EP (e.g. Megatron-Bridge AutoBridge.import_ckpt)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MEGATRON_LM_DIR - a Megatron-LM checkout at the targeted commit
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
NNODES=256
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=32
ONBOARD_UNSUPPORTED=0
ARGS=(
  --num-layers 61
  --hidden-size 7168
  --ffn-hidden-size 18432
  --num-attention-heads 128
  --kv-channels 128
  --qk-layernorm
  --normalization RMSNorm
  --norm-epsilon 1e-06
  --swiglu
  --position-embedding-type rope
  --rotary-base 10000
  --max-position-embeddings 163840
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --multi-latent-attention
  --q-lora-rank 1536
  --kv-lora-rank 512
  --qk-head-dim 128
  --qk-pos-emb-head-dim 64
  --v-head-dim 128
  --rope-type yarn
  --rotary-scaling-factor 40
  --mscale 1
  --mscale-all-dim 1
  --num-experts 256
  --moe-router-topk 8
  --moe-ffn-hidden-size 2048
  --moe-shared-expert-intermediate-size 2048
  --moe-layer-freq '([0]*3+[1]*58)'
  --moe-router-score-function sigmoid
  --moe-router-topk-scaling-factor 2.5
  --moe-router-num-groups 8
  --moe-router-group-topk 4
  --moe-router-enable-expert-bias
  --moe-router-load-balancing-type none
  --moe-router-dtype fp32
  --moe-grouped-gemm
  --moe-token-dispatcher-type flex
  --moe-flex-dispatcher-backend deepep
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 256
  --expert-tensor-parallel-size 1
  --sequence-parallel
  --mtp-num-layers 1
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads_params
  --use-distributed-optimizer
  --ckpt-format fsdp_dtensor
  --num-distributed-optimizer-instances 4
  --outer-dp-sharding-strategy no_shard
  --overlap-grad-reduce
  --overlap-param-gather
  --recompute-granularity full
  --recompute-method uniform
  --recompute-num-layers 1
  --bf16
  --micro-batch-size 2
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
