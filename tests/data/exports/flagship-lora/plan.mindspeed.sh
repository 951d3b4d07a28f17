#!/usr/bin/env bash
# MindSpeed-LLM (Ascend NPU) launch for this plan, written by `onboard plan --export`.
# Target: Ascend/MindSpeed-LLM master @ c77308a1 (2026-08-21).
# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun
# (plan.torchrun.sh / plan.sbatch launch it on every node).
# NOT SUPPORTED by this engine (the script refuses to run; ONBOARD_FORCE=1 overrides):
#   - MLP activation situ: Megatron-LM's flags give swiglu, gelu, squared-relu, quick-geglu (Megatron core's gap; MindSpeed-LLM builds on it)
#   - attention output gate with MLA: Megatron-LM has no output gate for MLA yet (Megatron core's gap; MindSpeed-LLM builds on it)
#   - 69 KDA (Kimi Delta Attention) layers: Megatron-LM has no KDA layer (its linear-attention variant is gated DeltaNet, scalar decay per head) (Megatron core's gap; MindSpeed-LLM builds on it)
#   - MLA without RoPE (mla_use_nope): Megatron's MLA rotates the qk-pos-emb dims (Megatron core's gap; MindSpeed-LLM builds on it)
#   - MoE latent projection (moe_latent_size 3584): MindSpeed-LLM's Megatron base (core_r0.12) has no --moe-latent-size
# Exported differently from the plan:
#   - rope_theta not in config.json: Megatron's default base 10000 exported
#   - Megatron-FSDP is not used on MindSpeed-LLM here: the distributed optimizer (ZeRO-1) shards only optimizer state, so weights and gradients take more memory per device than the plan's FSDP
#   - LoRA alpha = 2 * rank; targets MindSpeed's usual four projections
#   - LoRA adapts the routed experts too (MindSpeed-LLM's LoRA builds them as LoraParallelGroupedMLP with grouped GEMM; no target list excludes them): the plan adapts only the shared experts of these MoE layers (core/lora_targets.h), so adapter memory and FLOPs exceed the plan's
#   - token dispatcher alltoall_seq: MindSpeed-LLM's LoRA on MoE layers takes only that one
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model folder (config, tokenizer, safetensors)
#   - MEGATRON_CHECKPOINT_DIR - the HF weights converted to a Megatron checkpoint at this TP/PP/EP (e.g. Megatron-Bridge AutoBridge.import_ckpt)
#   - SAVE_DIR - where checkpoints are written
#   - DATA_PREFIX - Megatron indexed dataset prefix (tools/preprocess_data.py output, no .bin/.idx)
#   - MINDSPEED_LLM_DIR - a MindSpeed-LLM checkout (with MindSpeed and Megatron-LM as it pins)
#   - learning-rate schedule: 1e-5 cosine to 1e-6 with 50 warm-up steps is a placeholder
#   - a MindSpeed checkpoint of the HF weights (MindSpeed-LLM lists no --model-type-hf for kimi_k3; convert with its checkpoint tools)
NNODES=16
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=1
export HCCL_CONNECT_TIMEOUT=3600
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
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
  --no-rope-fusion
  --num-experts 896
  --moe-router-topk 16
  --moe-ffn-hidden-size 3072
  --moe-shared-expert-intermediate-size 6144
  --moe-router-score-function sigmoid
  --moe-router-enable-expert-bias
  --moe-router-load-balancing-type none
  --moe-router-dtype fp32
  --moe-grouped-gemm
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --expert-model-parallel-size 128
  --expert-tensor-parallel-size 1
  --sequence-parallel
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --bf16
  --micro-batch-size 1
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
  --first-k-dense-replace 1
  --moe-layer-freq 1
  --norm-topk-prob
  --enable-dsa-indexer
  --index-n-heads 32
  --index-head-dim 128
  --index-topk 2048
  --use-mcore-models
  --use-flash-attn
  --ckpt-format torch
  --tokenizer-type PretrainedFromHF
  --tokenizer-name-or-path "${HF_MODEL_PATH:?required}"
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
