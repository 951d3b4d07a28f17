# Megatron-Bridge recipe for this plan, written by `onboard plan --export`.
# Target: NVIDIA-NeMo/Megatron-Bridge main @ 067f987d (2026-08-22).
# Run once, in one process, to convert the HF checkpoint:  python THIS --import
# Then launch on every node:  torchrun --nnodes 256 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 THIS
# Exported differently from the plan:
#   - model architecture comes from the HF config via AutoBridge (not from onboard's IR)
#   - LoRA alpha = 2 * rank (the plan has no alpha; the probe's default ratio)
#   - LoRA targets linear_q_down_proj, linear_q_up_proj, linear_kv_down_proj, linear_kv_up_proj, linear_proj, *.mlp.linear_fc1, *.mlp.linear_fc2, *.mlp.shared_experts.linear_fc1, *.mlp.shared_experts.linear_fc2: the routed experts are not adapted (the shared experts are the MoE layers' trainable path, core/lora_targets.h)
#   - the plan FSDP-shards the frozen base over dp_shard=4; this recipe uses the distributed optimizer (Bridge's PEFT recipes do), so base weights are replicated over data-parallel ranks: check per-device memory
# You must supply:
#   - HF_MODEL_PATH - Hugging Face model id or folder
#   - MEGATRON_CHECKPOINT_DIR - where --import writes the Megatron checkpoint (read as pretrained_checkpoint)
#   - dataset: the template's default (SQuAD through HF datasets); replace cfg.dataset for your data
#   - optimizer / schedule: the template's defaults (_peft_common: lr 1e-4 cosine; _sft_common: its own)
import os
import sys

import torch
from megatron.bridge import AutoBridge
from megatron.bridge.peft.lora import LoRA
from megatron.bridge.recipes.common import _peft_common, _sft_common
from megatron.bridge.training.finetune import finetune
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training import mixed_precision

HF_MODEL_PATH = os.environ.get("HF_MODEL_PATH", "<set HF_MODEL_PATH>")
MEGATRON_CHECKPOINT_DIR = os.environ.get("MEGATRON_CHECKPOINT_DIR", "<set MEGATRON_CHECKPOINT_DIR>")
UNSUPPORTED = 0
LORA = True


def plan_config():
    cfg = _peft_common() if LORA else _sft_common()
    cfg.model = AutoBridge.from_hf_pretrained(HF_MODEL_PATH).to_megatron_provider(load_weights=False)
    cfg.tokenizer.tokenizer_model = HF_MODEL_PATH
    cfg.checkpoint.pretrained_checkpoint = MEGATRON_CHECKPOINT_DIR
    model = cfg.model
    model.tensor_model_parallel_size = 4
    model.sequence_parallel = True
    model.pipeline_model_parallel_size = 2
    model.virtual_pipeline_model_parallel_size = 3
    model.pipeline_dtype = torch.bfloat16
    model.pipeline_model_parallel_layout = "Et*11|t*10|t*10|t*10|t*10|t*10mL"
    model.context_parallel_size = 1
    model.expert_model_parallel_size = 16
    model.expert_tensor_parallel_size = 1
    model.moe_token_dispatcher_type = "alltoall"
    model.seq_length = 4096
    cfg.dataset.seq_length = 4096
    if cfg.dataset.offline_packing_specs is not None:
        cfg.dataset.offline_packing_specs.packed_sequence_size = 4096
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 1024
    model.recompute_granularity = None
    cfg.mixed_precision = mixed_precision.bf16_mixed()
    cfg.ddp.use_distributed_optimizer = True
    cfg.optimizer.use_distributed_optimizer = True
    cfg.peft = LoRA(target_modules=["linear_q_down_proj", "linear_q_up_proj", "linear_kv_down_proj", "linear_kv_up_proj", "linear_proj", "*.mlp.linear_fc1", "*.mlp.linear_fc2", "*.mlp.shared_experts.linear_fc1", "*.mlp.shared_experts.linear_fc2"], dim=16, alpha=32, dropout=0.0)
    return cfg


if __name__ == "__main__":
    if "--import" in sys.argv:
        AutoBridge.import_ckpt(HF_MODEL_PATH, MEGATRON_CHECKPOINT_DIR)
        sys.exit(0)
    if UNSUPPORTED and os.environ.get("ONBOARD_FORCE") != "1":
        print("onboard: this plan uses what Megatron-Bridge does not support (see the header)", file=sys.stderr)
        sys.exit(3)
    finetune(config=plan_config(), forward_step_func=forward_step)
