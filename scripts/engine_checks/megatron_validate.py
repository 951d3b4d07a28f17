"""Runs Megatron-LM's own argument and config validation on one exported plan.megatron.sh.

Usage: python3 megatron_validate.py MEGATRON_LM_DIR PLAN.megatron.sh HF_CONFIG.json
What runs, unchanged, from the checkout: the same calls pretrain_gpt.py makes before it builds a model:
  Step 1  megatron.training.arguments.parse_args()       (argparse of every exported flag)
  Step 2  validate_args(args, {'tokenizer_type': 'GPT2BPETokenizer'})   (pretrain_gpt.py's defaults)
  Step 3  gpt_config_from_args(args)                      (TransformerConfig / MLA / MoE __post_init__)
  Step 4  pretrain_cfg_container_from_args(args, cfg)     (training, optimizer, DDP configs)
The environment is the script's (CUDA_DEVICE_MAX_CONNECTIONS), WORLD_SIZE = NNODES x GPUS_PER_NODE, RANK 0;
torch.cuda answers with the target GPU's compute capability (ONBOARD_TARGET_GPU_CAPABILITY, default 9.0).
Transformer Engine: answered as the version the checkout's uv.lock pins (ONBOARD_TARGET_TE_VERSION, 2.17.1).
Not run: set_global_variables (it builds the tokenizer from the checkpoint folder and starts timers);
its one effect on the config, padded_vocab_size, is computed with the engine's vocab_size_with_padding
from HF_CONFIG.json's vocab_size.
Prints 'VERDICT accepted' or 'VERDICT refused: <engine message>'; exit 0 / 1; 2 for a broken setup."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engine_env  # noqa: E402


def exported_args(script):
    """Step 0: the ARGS array and the node shape, read by bash itself (the script is sourced)."""
    env = dict(os.environ, HF_MODEL_PATH=os.environ.get("HF_MODEL_PATH", "/placeholder/hf_model"),
               MEGATRON_CHECKPOINT_DIR="/placeholder/ckpt",
               SAVE_DIR="/placeholder/save", DATA_PREFIX="/placeholder/data_text_document")
    out = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\0" "$NNODES" "$GPUS_PER_NODE" "${CUDA_DEVICE_MAX_CONNECTIONS:-}" "${ARGS[@]}"',
                          "_", script], env=env, capture_output=True, check=True).stdout
    fields = out.decode().split("\0")[:-1]
    return int(fields[0]), int(fields[1]), fields[2], fields[3:]


def main():
    if len(sys.argv) != 4:
        print("usage: megatron_validate.py MEGATRON_LM_DIR PLAN.megatron.sh HF_CONFIG.json", file=sys.stderr)
        return 2
    root, script = sys.argv[1], sys.argv[2]
    with open(sys.argv[3]) as f:
        hf = json.load(f)
    vocab = hf.get("vocab_size") or hf.get("text_config", {}).get("vocab_size")
    nnodes, gpus, max_connections, args = exported_args(script)
    os.environ.update(WORLD_SIZE=str(nnodes * gpus), RANK="0", LOCAL_RANK="0")
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    if max_connections:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = max_connections  # as the script exports it
    engine_env.prepare(root)
    engine_env.target_gpu(os.environ.get("ONBOARD_TARGET_GPU_CAPABILITY", "9.0"))
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.argument_utils import gpt_config_from_args, pretrain_cfg_container_from_args
    from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding
    engine_env.target_transformer_engine(os.environ.get("ONBOARD_TARGET_TE_VERSION", "2.17.1"))
    engine_env.arm()
    sys.argv = [os.path.join(root, "pretrain_gpt.py")] + args

    def check():
        parsed = parse_args()
        validate_args(parsed, {"tokenizer_type": "GPT2BPETokenizer"})
        # set_global_variables' tokenizer build pads the tokenizer's vocab with the engine's own rule
        parsed.padded_vocab_size = vocab_size_with_padding(vocab, parsed, logging_enabled=False)
        cfg = gpt_config_from_args(parsed)
        pretrain_cfg_container_from_args(parsed, cfg)
        return (f"world {parsed.world_size}, {type(cfg).__name__}, layers {cfg.num_layers}, "
                f"tp {cfg.tensor_model_parallel_size} pp {cfg.pipeline_model_parallel_size} "
                f"ep {cfg.expert_model_parallel_size}")
    return engine_env.print_verdict(root, check)


if __name__ == "__main__":
    sys.exit(main())
