"""Runs torchtitan main's own config validation on one exported plan_torchtitan.py.

Usage: python3 torchtitan_main_validate.py TORCHTITAN_DIR plan_torchtitan.py WORLD_SIZE
What runs, unchanged, from the checkout (torchtitan.train's main up to config.build()):
  Step 1  ConfigManager().parse_args(["--module", "plan_torchtitan", "--config", "onboard_plan"]):
          imports the export, calls its config function (every dataclass field it sets must exist:
          a removed key is a TypeError), tyro over the result, Trainer.Config.__post_init__,
          _validate_config
  Step 2  ParallelDims.from_config(config.parallelism, WORLD_SIZE)   (Trainer.init_distributed's call)
  Step 3  config.model_spec.model.update_from_config(config=config)  (Trainer.__init__'s call); it
          builds the sharding config with spmd_types (pip only: put meta-pytorch/spmd_types on
          ENGINE_PYTHONPATH; without it the call reaches a stand-in and the verdict says
          "Step 3 NOT RUN", never "accepted" silently)
Step 4 re-states the two checks Trainer.__init__ makes inline once the mesh exists (trainer.py):
tokens per micro-batch divisible by tp (sequence parallel) * 2cp, and tokens per step divisible
by tokens per micro-batch * dp. They are labelled so in the verdict.
torchtitan/__init__.py is not executed (see torchtitan_v02_validate.py)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engine_env  # noqa: E402
from torchtitan_v02_validate import run_torchtitan_check  # noqa: E402


def validate(root, export, world):
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
    sys.path.insert(0, os.path.dirname(export))
    module = os.path.splitext(os.path.basename(export))[0]
    __import__(module)   # its imports (torchtitan modules, kernels decorated at import) before arm()
    engine_env.arm()
    cfg = ConfigManager().parse_args(["--module", module, "--config", "onboard_plan"])   # Step 1
    dims = ParallelDims.from_config(cfg.parallelism, world)                              # Step 2
    t, p = cfg.training, cfg.parallelism                                                 # Step 4 (re-stated)
    divisor = (dims.tp if p.enable_sequence_parallel else 1) * (2 * dims.cp if dims.cp > 1 else 1)
    if t.num_tokens_per_microbatch_per_dp_rank % divisor != 0:
        raise ValueError(f"[re-stated trainer.py check] tokens per micro-batch {t.num_tokens_per_microbatch_per_dp_rank} "
                         f"not divisible by {divisor}")
    dp = dims.dp_replicate * dims.dp_shard
    per_iter = t.num_tokens_per_microbatch_per_dp_rank * dp
    if t.num_tokens_per_train_step % per_iter != 0:
        raise ValueError(f"[re-stated trainer.py check] num_tokens_per_train_step {t.num_tokens_per_train_step} "
                         f"not divisible by {per_iter}")
    try:
        cfg.model_spec.model.update_from_config(config=cfg)                              # Step 3
        step3 = "update_from_config ran"
    except engine_env.absent_modules.AbsentCalled as e:  # a missing package, never a refusal
        step3 = f"Step 3 NOT RUN ({e}: not installable here)"
    return (f"{step3}; {cfg.model_spec.name}/{cfg.model_spec.flavor} dp {dims.dp_replicate}x{dims.dp_shard} tp {dims.tp} "
            f"pp {dims.pp} ep {dims.ep} cp {dims.cp}, grad accumulation {t.num_tokens_per_train_step // per_iter}")


if __name__ == "__main__":
    sys.exit(run_torchtitan_check(validate, "plan_torchtitan.py"))
