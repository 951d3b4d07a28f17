# torchtitan config for this plan, written by `onboard plan --export`.
# Target: pytorch/torchtitan main @ b5bcd76c (2026-08-21).
# NOT SUPPORTED:
#   - 69 KDA layers: torchtitan has no KDA layer
#   - no torchtitan model flavor matches kimi_k3 with 93 layers, hidden 7168 (torchtitan/models has llama3, qwen3, deepseek_v3, gpt_oss, ...): add one
# You must supply:
#   - HF_MODEL_PATH - absolute path of the Hugging Face model folder (tokenizer + safetensors)
#   - dataset: the baseline's (c4 through HF datasets); replace it for your data
#   - optimizer / schedule / steps: the baseline's, except steps
# Launch on every node (this file importable as plan_torchtitan):
#   torchrun --nnodes 64 --nproc-per-node 8 -m torchtitan.train --module plan_torchtitan --config onboard_plan
import os


def onboard_plan():
    raise NotImplementedError("onboard: torchtitan cannot train this plan: see the header")
