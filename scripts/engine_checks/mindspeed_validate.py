"""Runs MindSpeed-LLM's own argument validation on one exported plan.mindspeed.sh.

Usage: python3 mindspeed_validate.py MINDSPEED_LLM_DIR PLAN.mindspeed.sh HF_CONFIG.json
MINDSPEED_PYTHONPATH (':'-separated, put first on the import path): Ascend/MindSpeed, Megatron-LM at
the commit MindSpeed-LLM's 3rdparty/Megatron-LM pins, and the src/ folders of HF transformers (the
version MindSpeed-LLM's requirements.txt pins), peft, accelerate and huggingface_hub.
What runs, unchanged, from the checkouts (pretrain_gpt.py / posttrain_gpt.py up to the model build):
  Step 1  from mindspeed_llm import megatron_adaptor: MindSpeed-LLM's FeatureAdaptor.execute() parses
          its own flags, then MindSpeed's features manager patches Megatron-LM (argument parser,
          validate_args, Megatron-Core configs)
  Step 2  megatron.training.arguments.parse_args()   (patched: Megatron's flags + every feature's)
  Step 3  megatron.training.arguments.validate_args(args, {})   (patched: the features' pre-checks,
          Megatron's validate_args, the features' validate_args: num-layer-list, MoE, rotary,
          tokenizer, checkpoint conversion, LoRA, ...)
  Step 4  (LoRA) every --lora-target-modules name is one MindSpeed-LLM maps: a key of its
          configs/checkpoint/lora_cfg.json "lora_mappings" (read as data: the LoRA names its checkpoint
          conversion knows). Its peft matching runs on the built model (NPU), so a name it maps that the
          model lacks is not caught here. Labelled [onboard: MindSpeed-LLM's lora_cfg.json].
The environment is the script's, WORLD_SIZE = NNODES x GPUS_PER_NODE, RANK 0. HF_MODEL_PATH is a
temporary folder with HF_CONFIG.json as config.json and an empty model.safetensors: with
--enable-hf2mg-convert, validation only checks that --load names a folder holding *.safetensors
(the conversion itself runs later, in initialize_megatron, and is not run here).
torch_npu (Ascend's torch backend), torchair and acl (CANN) are stand-ins: recorded at import,
raising when called after Step 1, so a validation that needed an NPU is refused, never accepted.
Prints 'VERDICT accepted' or 'VERDICT refused: <engine message>'; exit 0 / 1."""
import atexit
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import absent_modules  # noqa: E402
import bridge_env  # noqa: E402
import engine_env  # noqa: E402
from megatron_validate import exported_args  # noqa: E402

# Ascend's torch backend and CANN: imported at module level by MindSpeed and MindSpeed-LLM.
NPU_MODULES = ["torch_npu", "torchair", "acl", "einops"]
# torch_npu registers torch.npu on import; torch 2.x names read at import by MindSpeed / accelerate.
NPU_ATTRS = ["torch:npu", "torch.utils.checkpoint:noop_context_fn", "torch.amp:GradScaler"]


def main():
    if len(sys.argv) != 4:
        print("usage: mindspeed_validate.py MINDSPEED_LLM_DIR PLAN.mindspeed.sh HF_CONFIG.json", file=sys.stderr)
        return 2
    root, script, hf_config = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="onboard-mindspeed-check-")
    atexit.register(shutil.rmtree, tmp, True)
    hf = bridge_env.hf_model_dir(hf_config, os.path.join(tmp, "hf"))
    open(os.path.join(hf, "model.safetensors"), "w").close()
    os.environ["HF_MODEL_PATH"] = hf
    nnodes, gpus, max_connections, args = exported_args(script)
    os.environ.update(WORLD_SIZE=str(nnodes * gpus), RANK="0", LOCAL_RANK="0")
    if max_connections:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = max_connections
    engine_env.prepend_path(os.environ.get("MINDSPEED_PYTHONPATH", ""))
    engine_env.prepare(root)
    bridge_env.prepare()   # transformers' import needs the same answers as for Bridge
    absent_modules.FILES["torch_npu"] = "/absent/torch_npu/__init__.py"
    absent_modules.install(NPU_MODULES, NPU_ATTRS)
    sys.argv = [os.path.join(root, "pretrain_gpt.py")] + args

    def check():   # the adaptor and validate_args print every argument (stdout; the verdict is its own line)
        from mindspeed_llm import megatron_adaptor  # noqa: F401              Step 1
        import megatron.training.arguments as mta
        engine_env.arm()
        parsed = mta.parse_args(None, False)                                 # Step 2
        mta.validate_args(parsed, {})                                        # Step 3
        lora = parsed.lora_r if getattr(parsed, "lora_target_modules", None) else None
        if lora is not None:                                                 # Step 4
            import json
            with open(os.path.join(root, "configs", "checkpoint", "lora_cfg.json")) as f:
                known = json.load(f)["lora_mappings"]
            unknown = [t for t in parsed.lora_target_modules if t not in known]
            if unknown:
                raise ValueError(f"[onboard: MindSpeed-LLM's lora_cfg.json] --lora-target-modules {unknown} are not "
                                 f"among the LoRA names it maps: {sorted(known)}")
        return (f"world {parsed.world_size}, layers {parsed.num_layers}, tp {parsed.tensor_model_parallel_size} "
                f"pp {parsed.pipeline_model_parallel_size} ep {parsed.expert_model_parallel_size}, num-layer-list "
                f"{getattr(parsed, 'num_layer_list', None)}, lora r {lora}" + bridge_env.gate_suffix())
    return engine_env.print_verdict(root, check)


if __name__ == "__main__":
    sys.exit(main())
