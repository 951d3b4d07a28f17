"""Runs Megatron-Bridge's own config validation on one exported plan_megatron_bridge.py.

Usage: python3 megatron_bridge_validate.py BRIDGE_DIR plan_megatron_bridge.py HF_CONFIG.json WORLD_SIZE
BRIDGE_DIR: NVIDIA-NeMo/Megatron-Bridge (its src/ is imported). BRIDGE_PYTHONPATH (':'-separated, put
first on the import path): Megatron-LM at the commit Bridge's 3rdparty/Megatron-LM submodule pins, and
the src/ folders of HF transformers and huggingface_hub. What runs, unchanged, from the checkouts:
  Step 1  import the export (megatron.bridge: AutoBridge, the recipes, LoRA, finetune)
  Step 2  the export's plan_config(): _peft_common()/_sft_common(), then
          AutoBridge.from_hf_pretrained(HF folder).to_megatron_provider(load_weights=False)
          (transformers' AutoConfig reads HF_CONFIG.json; the bridge registered for its architecture
          maps it onto a Megatron model provider), then the plan's parallelism, batch, recompute,
          precision and LoRA set on the ConfigContainer
  Step 3  runtime_config_update(cfg): what pretrain() (so finetune()) runs first: mixed precision
          setup, data-parallel size, comm overlap, ConfigContainer.validate() (the model provider's
          finalize: Megatron-Core TransformerConfig/MLATransformerConfig __post_init__, the pipeline
          layout, batch divisibility, distributed optimizer, checkpoint, scheduler)
WORLD_SIZE is the export's NNODES x GPUS_PER_NODE (get_world_size_safe reads WORLD_SIZE); RANK 0.
MEGATRON_CHECKPOINT_DIR is an empty temporary folder (CheckpointConfig checks it exists).
Not run: model build and LoRA's transform (they need CUDA and Transformer Engine), so LoRA target
module names are not matched against a model here.
Prints 'VERDICT accepted' or 'VERDICT refused: <engine message>'; exit 0 / 1."""
import atexit
import importlib.util
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bridge_env  # noqa: E402
import engine_env  # noqa: E402


def main():
    if len(sys.argv) != 5:
        print("usage: megatron_bridge_validate.py BRIDGE_DIR plan_megatron_bridge.py HF_CONFIG.json WORLD_SIZE",
              file=sys.stderr)
        return 2
    bridge, recipe, hf_config, world = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="onboard-bridge-check-")
    atexit.register(shutil.rmtree, tmp, True)
    os.environ.update(WORLD_SIZE=world, RANK="0", LOCAL_RANK="0", HF_HUB_OFFLINE="1",
                      HF_MODEL_PATH=bridge_env.hf_model_dir(hf_config, os.path.join(tmp, "hf")),
                      MEGATRON_CHECKPOINT_DIR=os.path.join(tmp, "megatron_ckpt"))
    os.makedirs(os.environ["MEGATRON_CHECKPOINT_DIR"])
    engine_env.prepend_path(os.environ.get("BRIDGE_PYTHONPATH", ""))
    root = os.path.join(bridge, "src")
    engine_env.prepare(root)
    bridge_env.prepare()
    engine_env.target_gpu(os.environ.get("ONBOARD_TARGET_GPU_CAPABILITY", "9.0"))
    spec = importlib.util.spec_from_file_location("plan_megatron_bridge", recipe)
    plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan)                                       # Step 1
    from megatron.bridge.training.config import runtime_config_update
    engine_env.arm()

    def check():
        cfg = plan.plan_config()                                        # Step 2
        runtime_config_update(cfg)                                      # Step 3
        m, peft = cfg.model, cfg.peft
        sizes = " ".join(f"{k} {getattr(m, a)}" for k, a in (
            ("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
            ("vp", "virtual_pipeline_model_parallel_size"), ("cp", "context_parallel_size"),
            ("ep", "expert_model_parallel_size"), ("etp", "expert_tensor_parallel_size")))
        lora = f"LoRA dim {peft.dim} alpha {peft.alpha} targets {len(peft.target_modules)}" if peft else "no PEFT"
        return (f"world {world}, {type(m).__name__}, layers {m.num_layers}, {sizes} dp {cfg.data_parallel_size}, "
                f"micro {cfg.train.micro_batch_size} global {cfg.train.global_batch_size}, {lora}" + bridge_env.gate_suffix())
    return engine_env.print_verdict(root, check)


if __name__ == "__main__":
    sys.exit(main())
