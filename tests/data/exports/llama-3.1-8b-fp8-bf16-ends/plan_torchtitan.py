# torchtitan config for this plan, written by `onboard plan --export`.
# Target: pytorch/torchtitan main @ b5bcd76c (2026-08-21).
# Exported differently from the plan:
#   - fp8 GEMMs: not exported (add a Float8/MXFP8 converter by hand)
#   - bf16 first / last layers (1 / 1): not exported with the quantised GEMMs above
# You must supply:
#   - HF_MODEL_PATH - absolute path of the Hugging Face model folder (tokenizer + safetensors)
#   - dataset: the baseline's (c4 through HF datasets); replace it for your data
#   - optimizer / schedule / steps: the baseline's, except steps
# Launch on every node (this file importable as plan_torchtitan):
#   torchrun --nnodes 16 --nproc-per-node 8 -m torchtitan.train --module plan_torchtitan --config onboard_plan
import os

from torchtitan.components.checkpointer import CheckpointManager
from torchtitan.components.lora import LoRAConverter
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_8b
from torchtitan.trainer import Trainer

HF_MODEL_PATH = os.environ.get("HF_MODEL_PATH", "/set/HF_MODEL_PATH")


def onboard_plan() -> Trainer.Config:
    config = llama3_8b()
    config.hf_assets_path = HF_MODEL_PATH
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=16,
        data_parallel_shard_degree=8,
        tensor_parallel_degree=1,
        enable_sequence_parallel=False,
        context_parallel_degree=1,
        expert_parallel_degree=1,
        pipeline_parallel_degree=1,
    )
    config.training = TrainingConfig(
        num_tokens_per_microbatch_per_dp_rank=4 * 4096,
        num_tokens_per_train_step=1024 * 4096,
        max_context_length=4096,
        steps=int(os.environ.get("TRAIN_STEPS", "1000")),
        mixed_precision_param="bfloat16",
    )
    config.activation_checkpoint = None
    config.checkpoint = CheckpointManager.Config(
        enable=True,
        initial_load_path=HF_MODEL_PATH,
        initial_load_in_hf=True,
        initial_load_model_only=True,
        interval=500,
    )
    return config
