# torchtitan config for this plan, written by `onboard plan --export`.
# Target: pytorch/torchtitan main @ b5bcd76c (2026-08-21).
# NOT SUPPORTED:
#   - no torchtitan model flavor matches mixtral with 32 layers, hidden 4096 (torchtitan/models has llama3, qwen3, deepseek_v3, gpt_oss, ...): add one
# Exported differently from the plan:
#   - LoRA leaves the routed experts frozen: LoRAConverter wraps Linear configs only and the experts are grouped parameters (GroupedExperts); the plan adapts them, one adapter per expert, in MoE layers without a shared expert (core/lora_targets.h), so these MoE layers train no FFN weight here
# You must supply:
#   - HF_MODEL_PATH - absolute path of the Hugging Face model folder (tokenizer + safetensors)
#   - dataset: the baseline's (c4 through HF datasets); replace it for your data
#   - optimizer / schedule / steps: the baseline's, except steps
# Launch on every node (this file importable as plan_torchtitan):
#   torchrun --nnodes 16 --nproc-per-node 8 -m torchtitan.train --module plan_torchtitan --config onboard_plan
import os


def onboard_plan():
    raise NotImplementedError("onboard: torchtitan cannot train this plan: see the header")
