#!/usr/bin/env bash
# MindSpeed-LLM (Ascend NPU) launch for this plan, written by `onboard plan --export`.
# Target: Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# Exported differently from the plan:
#   - virtual pipeline (interleave 3): --num-layer-list cannot express it; one stage per rank exported
#   - Megatron-FSDP is not used on MindSpeed-LLM here: the distributed optimizer (ZeRO-1) shards only optimizer state, so weights and gradients take more memory per device than the plan's FSDP
#   - LoRA alpha = 2 * rank; targets MindSpeed's usual four projections
#   - LoRA adapts the routed experts too (MindSpeed-LLM's LoRA builds them as LoraParallelGroupedMLP with grouped GEMM; no target list excludes them): the plan adapts only the shared experts of these MoE layers (core/lora_targets.h), so adapter memory and FLOPs exceed the plan's
#   - token dispatcher alltoall_seq: MindSpeed-LLM's LoRA on MoE layers takes only that one
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MINDSPEED_LLM_DIR - a MindSpeed-LLM checkout (with MindSpeed and Megatron-LM as it pins)
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
NNODES=256
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=1
export HCCL_CONNECT_TIMEOUT=3600
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
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
  --num-experts 256
  --moe-router-topk 8
  --moe-ffn-hidden-size 2048
  --moe-shared-expert-intermediate-size 2048
  --moe-router-score-function sigmoid
  --moe-router-topk-scaling-factor 2.5
  --moe-router-num-groups 8
  --moe-router-group-topk 4
  --moe-router-enable-expert-bias
  --moe-router-load-balancing-type none
  --moe-router-dtype fp32
  --moe-grouped-gemm
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 2
  --context-parallel-size 1
  --expert-model-parallel-size 16
  --expert-tensor-parallel-size 1
  --sequence-parallel
  --mtp-num-layers 1
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --bf16
  --micro-batch-size 1
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
  --num-layer-list 31,30
  --first-k-dense-replace 3
  --moe-layer-freq 1
  --norm-topk-prob
  --rope-scaling-type yarn
  --rope-scaling-factor 40
  --beta-fast 32
  --beta-slow 1
  --rope-scaling-mscale 1
  --rope-scaling-mscale-all-dim 1
  --rope-scaling-original-max-position-embeddings 4096
  --spec mindspeed_llm.tasks.models.spec.deepseek_spec layer_spec
  --use-mcore-models
  --use-flash-attn
  --ckpt-format torch
  --tokenizer-type PretrainedFromHF
  --tokenizer-name-or-path "${HF_MODEL_PATH:?required}"
  --enable-hf2mg-convert
  --model-type-hf deepseek3
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
