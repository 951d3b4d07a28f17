"""The one list of what this machine's Python lacks for importing the engines, and nothing else.

Debian's python3-torch is 1.13 on Python 3.11; the engines target torch >= 2.6 on Python >= 3.12.
Their validation code is plain Python over argparse/dataclasses and runs unchanged; only imports of
modules it never calls are served by absent_modules stand-ins (each recorded; after arm() a call of
one raises, so a validation that needed one would be refused loudly, never accepted)."""
import contextlib
import importlib
import io
import os
import sys
import traceback

import absent_modules

# torch 2.x modules absent from torch 1.13 (or broken there on Python 3.11: torch.distributed._shard's
# dataclasses), plus CUDA kernel packages (triton) and numpy >= 1.25's numpy.dtypes.
TORCH2_MODULES = [
    "torch.distributed.checkpoint", "torch.distributed._shard", "torch.distributed._tensor",
    "torch.distributed.tensor", "torch.distributed.device_mesh", "torch.distributed.fsdp",
    "torch.distributed._composable", "torch.distributed.algorithms", "torch.distributed._symmetric_memory",
    "torch.distributed.pipelining", "torch.distributed._functional_collectives", "torch._functorch", "torch.distributed.elastic", "torch.nn.attention", "torch._dynamo",
    "torch._inductor", "torch.utils.checkpoint", "torch.distributed._local_tensor",
    "torch.distributed._mesh_layout", "torch.utils.tensorboard",
    "triton", "numpy.dtypes",
]
# pip-only packages: the real one is imported when it is on ENGINE_PYTHONPATH (tried after the torch
# stand-ins above exist, so a package that only names torch 2.x modules at import loads for real:
# spmd_types, whose sharding types torchtitan main's update_from_config builds); otherwise a stand-in.
# torchtitan's data/metrics stack (its tokenizer, loader and loggers are not built by the check).
PIP_ONLY_MODULES = ["spmd_types", "tokenizers", "torchdata", "grain", "tensorboard", "wandb", "datasets"]
# torch 2.x attributes that modules read at import (dtypes in tables, decorators, type names).
TORCH2_ATTRS = [
    "torch:float8_e8m0fnu", "torch:float8_e4m3fn", "torch:float8_e5m2", "torch:compile",
    "torch.distributed:DeviceMesh", "torch.distributed:_coalescing_manager", "torch.cuda.memory:CUDAPluggableAllocator",
    "torch.optim.optimizer:ParamsT", "torch.cuda:MemPool",
    "torch._utils:_get_device_module", "torch.optim.lr_scheduler:LRScheduler", "torch:_higher_order_ops", "torch.nn:RMSNorm", "torch:compiler", "torch.library:custom_op",
    "torch.utils.checkpoint:CheckpointPolicy", "torch.utils.checkpoint:create_selective_checkpoint_contexts",
]

# torch 2.x methods that modules name at import (spmd_types' checker lists Tensor.untyped_storage).
TORCH2_CLASS_ATTRS = ["torch.Tensor:untyped_storage"]


def _common():
    import torch
    import typing
    import typing_extensions
    # torch < 2.2 compiles TorchScript eagerly when a fusion kernel is decorated (Megatron's jit_fuser);
    # torch >= 2.2, which the engines target, compiles lazily. The kernels are never run here.
    torch.jit.script = lambda fn=None, *a, **k: fn
    # Python 3.12's typing.override is a marker decorator; typing_extensions has the same one.
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override
    # torch 2.x aten ops that torchtitan names at import in its selective-AC save list
    # (torch.ops.aten._scaled_dot_product_efficient_attention, ...): absent ops become stand-ins.
    op_getattr = torch._ops._OpNamespace.__getattr__

    def _op_or_absent(self, op_name):
        try:
            return op_getattr(self, op_name)
        except AttributeError:
            if op_name.startswith("__"):
                raise
            return absent_modules._absent(f"torch.ops.{self.name}.{op_name}")
    torch._ops._OpNamespace.__getattr__ = _op_or_absent
    extra_m = [m for m in os.environ.get("ONBOARD_EXTRA_ABSENT_MODULES", "").split(",") if m]
    extra_a = [a for a in os.environ.get("ONBOARD_EXTRA_ABSENT_ATTRS", "").split(",") if a]
    for spec in TORCH2_CLASS_ATTRS:  # "torch.Tensor:untyped_storage": a method torch 1.13's class lacks
        owner, name = spec.split(":")
        cls = getattr(importlib.import_module(owner.rsplit(".", 1)[0]), owner.rsplit(".", 1)[1])
        if not hasattr(cls, name):
            setattr(cls, name, absent_modules._absent(owner + "." + name))
    missing = absent_modules.install(TORCH2_MODULES + extra_m, TORCH2_ATTRS + extra_a)
    return missing + absent_modules.install(PIP_ONLY_MODULES)


class _TargetGpu:
    """What torch.cuda answers about the GPU the plan targets (no GPU here). Validation reads only
    the compute capability: Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 for TP/CP before
    Blackwell (arch < 10), and grouped GEMM needs arch >= 8."""

    def __init__(self, major, minor):
        self.major, self.minor, self.name = major, minor, f"target sm_{major}{minor}"


def target_gpu(capability):
    """capability: 'MAJOR.MINOR' (9.0 Hopper: H100/H200/H800; 10.0 Blackwell: B200/GB200)."""
    import torch
    major, minor = (int(x) for x in capability.split("."))
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_properties = lambda device=None: _TargetGpu(major, minor)
    return major, minor


def target_transformer_engine(version):
    """Megatron asks the installed Transformer Engine's version and whether its fused kernels
    imported. There is no TE here (it needs CUDA), so answer for the TE the checkout's own uv.lock
    pins (2.17.1 at Megatron-LM d98e8a64): the version cache, and the fused-RoPE kernels as
    stand-ins (present, never called: calling one after arm() raises)."""
    from packaging.version import Version
    import megatron.core.utils as mcore_utils
    from megatron.core.models.common.embeddings import rope_utils
    mcore_utils._te_version = Version(version)
    for name in ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd"):
        if getattr(rope_utils, name) is None:
            setattr(rope_utils, name, absent_modules._absent("transformer_engine." + name))


def prepend_path(paths):
    """paths: ':'-separated folders put first on the import path, in that order (an engine's own
    pins, e.g. BRIDGE_PYTHONPATH)."""
    for p in reversed([p for p in paths.split(":") if p]):
        sys.path.insert(0, p)


def prepare(root):
    """Puts the engine checkout first on the import path and installs the stand-ins."""
    sys.path.insert(0, root)
    return _common()


def arm():
    absent_modules.arm()


def used_summary():
    used, called = absent_modules.report(), absent_modules.CALLED
    allowed = sorted(set(absent_modules.CALLED_ALLOWED))
    return (f"{len(used)} names at import, {len(called)} called during validation {sorted(set(called))}"
            + (f", data-loader option objects built as stand-ins: {allowed}" if allowed else ""))


def engine_frame(e, root):
    """The innermost frame inside the engine checkout: where the engine refused."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith(root)]
    f = frames[-1] if frames else traceback.extract_tb(e.__traceback__)[-1]
    return f"{os.path.relpath(f.filename, root)}:{f.lineno} {f.name}"


class _CapturedStderr(io.StringIO):
    """Captures what Python code writes to stderr; code that asks for the stream's file descriptor
    (MindSpeed's imports do) gets the real stderr's."""

    def fileno(self):
        return sys.__stderr__.fileno()


def print_verdict(root, check):
    """Runs check() (it returns what was accepted) and prints the one VERDICT line; 0 / 1.
    An argparse or tyro refusal (SystemExit) is reported with its 'error' lines."""
    err = _CapturedStderr()
    try:
        with contextlib.redirect_stderr(err):
            what = check()
    except SystemExit as e:
        lines = [l.strip(" │") for l in err.getvalue().splitlines() if l.strip(" │╭╰─")]
        errors = [l for l in lines if "error:" in l] or [l for l in lines if "error" in l.lower()] or lines
        print(f"VERDICT refused: parser: {' '.join(errors)[-400:] if errors else 'exit ' + str(e.code)}")
        return 1
    except Exception as e:  # noqa: BLE001 - any engine refusal is the verdict
        print(f"VERDICT refused: {type(e).__name__}: {str(e).strip()} ({engine_frame(e, root)})")
        return 1
    print(f"VERDICT accepted: {what}; stand-ins used: {used_summary()}")
    return 0
