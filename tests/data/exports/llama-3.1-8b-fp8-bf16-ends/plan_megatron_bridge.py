# Megatron-Bridge recipe for this plan, written by `onboard plan --export`.
# Target: NVIDIA-NeMo/Megatron-Bridge main @ 067f987d (2026-08-22).
# Run once, in one process, to convert the HF checkpoint:  python THIS --import
# Then launch on every node:  torchrun --nnodes 16 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 THIS
# Exported differently from the plan:
#   - model architecture comes from the HF config via AutoBridge (not from onboard's IR)
#   - offline sequence packing (the templates' default) is off: Bridge packs only with micro-batch 1, and the plan's micro-batch is 4
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
LORA = False


def plan_config():
    cfg = _peft_common() if LORA else _sft_common()
    cfg.model = AutoBridge.from_hf_pretrained(HF_MODEL_PATH).to_megatron_provider(load_weights=False)
    cfg.tokenizer.tokenizer_model = HF_MODEL_PATH
    cfg.checkpoint.pretrained_checkpoint = MEGATRON_CHECKPOINT_DIR
    model = cfg.model
    model.tensor_model_parallel_size = 1
    model.sequence_parallel = False
    model.pipeline_model_parallel_size = 1
    model.virtual_pipeline_model_parallel_size = None
    model.pipeline_dtype = None
    model.pipeline_model_parallel_layout = None
    model.context_parallel_size = 1
    model.expert_model_parallel_size = 1
    model.expert_tensor_parallel_size = None
    model.seq_length = 4096
    cfg.dataset.seq_length = 4096
    cfg.dataset.enable_offline_packing = False
    cfg.dataset.offline_packing_specs = None
    cfg.train.micro_batch_size = 4
    cfg.train.global_batch_size = 1024
    model.recompute_granularity = None
    cfg.mixed_precision = mixed_precision.bf16_with_fp8_current_scaling_mixed()
    cfg.mixed_precision.first_last_layers_bf16 = True
    cfg.mixed_precision.num_layers_at_start_in_bf16 = 1
    cfg.mixed_precision.num_layers_at_end_in_bf16 = 1
    cfg.dist.use_megatron_fsdp = True
    cfg.ddp.use_megatron_fsdp = True
    cfg.ddp.data_parallel_sharding_strategy = "optim_grads_params"
    cfg.checkpoint.ckpt_format = "fsdp_dtensor"
    cfg.ddp.use_distributed_optimizer = True
    cfg.optimizer.use_distributed_optimizer = True
    cfg.peft = None
    return cfg


if __name__ == "__main__":
    if "--import" in sys.argv:
        AutoBridge.import_ckpt(HF_MODEL_PATH, MEGATRON_CHECKPOINT_DIR)
        sys.exit(0)
    if UNSUPPORTED and os.environ.get("ONBOARD_FORCE") != "1":
        print("onboard: this plan uses what Megatron-Bridge does not support (see the header)", file=sys.stderr)
        sys.exit(3)
    finetune(config=plan_config(), forward_step_func=forward_step)
