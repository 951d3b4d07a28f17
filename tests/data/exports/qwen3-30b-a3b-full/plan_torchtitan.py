# torchtitan config for this plan, written by `onboard plan --export`.
# Target: pytorch/torchtitan main @ b5bcd76c (2026-08-21).
# Exported differently from the plan:
#   - fsdp_pipelining per_micro_batch (gathers and reduce-scatters every micro-batch): torchtitan with PP keeps the stage gathered and reduce-scatters once per step (fsdp_reshard_after_forward "default"; more memory, less traffic than planned; plan with --export torchtitan to cost that)
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
from torchtitan.models.qwen3 import model_registry
from torchtitan.models.qwen3.config_registry import qwen3_30b_a3b
from torchtitan.trainer import Trainer

HF_MODEL_PATH = os.environ.get("HF_MODEL_PATH", "/set/HF_MODEL_PATH")


def onboard_plan() -> Trainer.Config:
    config = qwen3_30b_a3b()
    config.hf_assets_path = HF_MODEL_PATH
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=8,
        data_parallel_shard_degree=8,
        tensor_parallel_degree=1,
        enable_sequence_parallel=False,
        context_parallel_degree=1,
        expert_parallel_degree=1,
        pipeline_parallel_degree=2,
        pipeline_parallel_schedule="Interleaved1F1B",
        num_pp_microbatches=4,
        module_fqns_per_model_part=[
            ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4", "layers.5"],
            ["layers.6", "layers.7", "layers.8", "layers.9", "layers.10", "layers.11"],
            ["layers.12", "layers.13", "layers.14", "layers.15", "layers.16", "layers.17"],
            ["layers.18", "layers.19", "layers.20", "layers.21", "layers.22", "layers.23"],
            ["layers.24", "layers.25", "layers.26", "layers.27", "layers.28", "layers.29"],
            ["layers.30", "layers.31", "layers.32", "layers.33", "layers.34", "layers.35"],
            ["layers.36", "layers.37", "layers.38", "layers.39", "layers.40", "layers.41"],
            ["layers.42", "layers.43", "layers.44", "layers.45", "layers.46", "layers.47", "norm", "output"],
        ],
    )
    config.training = TrainingConfig(
        num_tokens_per_microbatch_per_dp_rank=4 * 4096,
        num_tokens_per_train_step=1024 * 4096,
        max_context_length=4096,
        steps=int(os.environ.get("TRAIN_STEPS", "1000")),
        mixed_precision_param="bfloat16",
        disable_cuda_graphs=True,  # torchtitan's CUDA graphs refuse pipeline parallelism
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
