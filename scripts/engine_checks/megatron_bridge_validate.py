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
  Step 4  (LoRA) the target modules, matched by Bridge's own PEFT matcher: PEFT.__call__'s validation
          walk (_init_target_match_state, ModuleMatcher.match on every module, _validate_target_matches,
          whose "No modules matched" warning is captured) over the model's module names. The names are
          read as data from the family bridge's mapping_registry() (every megatron_param it maps to an
          HF weight, "*" as 0, the parameter name dropped): building the model itself needs CUDA and
          Transformer Engine. Bridge only warns on a target that matches nothing (LoRA then silently
          skips it); this check refuses it, labelled [onboard: Bridge's matcher]. The routed experts'
          targets (*.mlp.experts.linear_fc1/2, models without shared experts) match the grouped
          experts' names (mapping "decoder.layers.*.mlp.experts.linear_fc1.weight*" gives
          decoder.layers.0.mlp.experts.linear_fc1); share_expert_adapters is printed with the counts.
WORLD_SIZE is the export's NNODES x GPUS_PER_NODE (get_world_size_safe reads WORLD_SIZE); RANK 0.
MEGATRON_CHECKPOINT_DIR is an empty temporary folder (CheckpointConfig checks it exists).
Not run: model build and LoRA's transform (they need CUDA and Transformer Engine), so a target
that matches a module of a type LoRA cannot wrap is not caught here.
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


def lora_targets_matched(peft):
    """Step 4: Bridge's validation walk of PEFT.__call__ over the bridge's module names; returns
    'targets: name N modules, ...' or raises with Bridge's own warning text."""
    import logging

    import torch
    from megatron.bridge import AutoBridge
    registry = AutoBridge.from_hf_pretrained(os.environ["HF_MODEL_PATH"])._model_bridge.mapping_registry()
    modules = sorted({m.megatron_param.replace("*", "0").rsplit(".", 1)[0] for m in registry.mappings})
    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    logger = logging.getLogger("megatron.bridge.peft.module_matcher")
    logger.addHandler(handler)
    try:
        peft._init_target_match_state()
        for fqn in modules:
            prefix, _, name = fqn.rpartition(".")
            peft.match(torch.nn.Linear(1, 1), name, prefix or None)
        counts = {alias: len(found) for alias, found in peft._alias_matches.items()}
        peft._validate_target_matches()
        peft._reset_target_match_state()
    finally:
        logger.removeHandler(handler)
    if warnings:
        raise ValueError("[onboard: Bridge's matcher over the bridge's mapping_registry, "
                         f"{len(modules)} module names] LoRA target_modules: " + "; ".join(warnings))
    return "targets matched: " + ", ".join(f"{a} {n}" for a, n in counts.items())


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
        lora = (f"LoRA dim {peft.dim} alpha {peft.alpha} share_expert_adapters {peft.share_expert_adapters} "
                f"{lora_targets_matched(peft)}" if peft else "no PEFT")  # Step 4
        return (f"world {world}, {type(m).__name__}, layers {m.num_layers}, {sizes} dp {cfg.data_parallel_size}, "
                f"micro {cfg.train.micro_batch_size} global {cfg.train.global_batch_size}, {lora}" + bridge_env.gate_suffix())
    return engine_env.print_verdict(root, check)


if __name__ == "__main__":
    sys.exit(main())
