#!/usr/bin/env bash
# Megatron-LM launch for this plan, written by `onboard plan --export`.
# Target: NVIDIA/Megatron-LM main @ d98e8a64 (2026-08-22).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# NOT SUPPORTED by this engine (the script refuses to run; ONBOARD_FORCE=1 overrides):
#   - MLP activation situ: Megatron-LM's flags give swiglu, gelu, squared-relu, quick-geglu
#   - attention output gate with MLA: Megatron-LM has no output gate for MLA yet
#   - 69 KDA (Kimi Delta Attention) layers: Megatron-LM has no KDA layer (its linear-attention variant is gated DeltaNet, scalar decay per head)
#   - MLA without RoPE (mla_use_nope): Megatron's MLA rotates the qk-pos-emb dims
#   - LoRA (rank 16): Megatron-LM has no LoRA; this list would train every weight. Launch plan_megatron_bridge.py (Megatron-Bridge PEFT) instead
# Exported differently from the plan:
#   - rope_theta not in config.json: Megatron's default base 10000 exported
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
ONBOARD_UNSUPPORTED=5
ARGS=(
  --num-layers 93
  --hidden-size 7168
  --ffn-hidden-size 33792
  --num-attention-heads 96
  --kv-channels 128
  --qk-layernorm
  --normalization RMSNorm
  --norm-epsilon 1e-05
  --position-embedding-type rope
  --rotary-base 10000
  --max-position-embeddings 1048576
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --multi-latent-attention
  --q-lora-rank 1536
  --kv-lora-rank 512
  --qk-head-dim 128
  --qk-pos-emb-head-dim 64
  --v-head-dim 128
  --rope-type rope
  --experimental-attention-variant dsa
  --dsa-indexer-n-heads 32
  --dsa-indexer-head-dim 128
  --dsa-indexer-topk 2048
  --no-rope-fusion
  --num-experts 896
  --moe-router-topk 16
  --moe-ffn-hidden-size 3072
  --moe-shared-expert-intermediate-size 6144
  --moe-layer-freq '([0]*1+[1]*92)'
  --moe-router-score-function sigmoid
  --moe-router-enable-expert-bias
  --moe-router-load-balancing-type none
  --moe-latent-size 3584
  --moe-router-dtype fp32
  --moe-grouped-gemm
  --moe-token-dispatcher-type alltoall
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 128
  --expert-tensor-parallel-size 1
  --sequence-parallel
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads_params
  --use-distributed-optimizer
  --ckpt-format fsdp_dtensor
  --overlap-grad-reduce
  --overlap-param-gather
  --bf16
  --micro-batch-size 1
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
