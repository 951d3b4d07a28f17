"""Runs torchtitan v0.2.x's own config validation on one exported plan.torchtitan-v0.2.toml.

Usage: python3 torchtitan_v02_validate.py TORCHTITAN_V02_DIR PLAN.torchtitan-v0.2.toml WORLD_SIZE
What runs, unchanged, from the checkout (what torchtitan.train does before it touches a GPU):
  Step 1  ConfigManager().parse_args(["--job.config_file", TOML])   (TOML -> JobConfig with tyro: an
          unknown section or key, or a value of the wrong type, is refused; then _validate_config)
  Step 2  ParallelDims(..., world_size=WORLD_SIZE)                   (its __post_init__ _validate)
  Step 3  get_train_spec(model.name).model_args[model.flavor], then update_from_config(job_config)
Step 4 is the one check torchtitan makes inline in Trainer.__init__ (train.py), which needs the
process group: global_batch_size % (local_batch_size * dp_replicate * dp_shard) == 0. It is re-stated
here (the only non-engine line of the check) and labelled so in the verdict.
torchtitan/__init__.py is not executed: it only imports torchtitan.components.quantization to
register float8/mx converters, which need torch >= 2.6; the package is entered without it.
Prints 'VERDICT accepted ...' or 'VERDICT refused: ...'; exit 0 / 1; 2 for a broken setup."""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engine_env  # noqa: E402


def enter_package(root):
    """Registers the torchtitan package without running its __init__ (see the docstring)."""
    pkg = types.ModuleType("torchtitan")
    pkg.__path__ = [os.path.join(root, "torchtitan")]
    pkg.__version__ = "0.2.x"
    sys.modules["torchtitan"] = pkg


def import_model_package(toml):
    """Imports torchtitan.models.<model.name> before arm(): get_train_spec imports it lazily, and its
    kernels (triton) are decorated at import. A name that is no model is left for Step 3 to refuse."""
    import importlib
    import tomllib
    with open(toml, "rb") as f:
        name = tomllib.load(f).get("model", {}).get("name", "")
    from torchtitan.models import _supported_models
    if name in _supported_models:
        importlib.import_module(f"torchtitan.models.{name}")


def validate(root, toml, world):
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.protocols import train_spec as train_spec_module
    import_model_package(toml)
    engine_env.arm()
    cfg = ConfigManager().parse_args(["--job.config_file", toml])          # Step 1
    p = cfg.parallelism
    dims = ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                        cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                        ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=world)  # Step 2
    spec = train_spec_module.get_train_spec(cfg.model.name)                  # Step 3
    if cfg.model.flavor not in spec.model_args:
        raise KeyError(f"model.flavor {cfg.model.flavor!r} not in {sorted(spec.model_args)}")
    model_args = spec.model_args[cfg.model.flavor]
    model_args.update_from_config(cfg)
    batch_degree = dims.dp_replicate * dims.dp_shard                         # Step 4 (re-stated)
    gbs, lbs = cfg.training.global_batch_size, cfg.training.local_batch_size
    if gbs % (lbs * batch_degree) != 0:
        raise AssertionError(f"[re-stated train.py check] global_batch_size {gbs} % (local_batch_size {lbs} * "
                             f"dp {batch_degree}) != 0")
    accum = gbs // (lbs * batch_degree)
    return (f"{cfg.model.name}/{cfg.model.flavor} {type(model_args).__name__} "
            f"dp {dims.dp_replicate}x{dims.dp_shard} tp {dims.tp} pp {dims.pp} ep {dims.ep} cp {dims.cp}, "
            f"local batch {lbs}, grad accumulation {accum}")


def run_torchtitan_check(validate_fn, file_kind):
    """argv: TORCHTITAN_DIR FILE WORLD_SIZE; validate_fn(root, file, world) -> what was accepted."""
    if len(sys.argv) != 4:
        print(f"usage: {os.path.basename(sys.argv[0])} TORCHTITAN_DIR {file_kind} WORLD_SIZE", file=sys.stderr)
        return 2
    root, path, world = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3])
    engine_env.prepare(root)
    enter_package(root)
    return engine_env.print_verdict(root, lambda: validate_fn(root, path, world))


if __name__ == "__main__":
    sys.exit(run_torchtitan_check(validate, "PLAN.torchtitan-v0.2.toml"))
