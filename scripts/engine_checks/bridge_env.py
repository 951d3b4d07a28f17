"""What Megatron-Bridge's import needs beyond engine_env on this machine, and nothing else.

Megatron-Bridge (main @ 067f987d) imports HF transformers, Megatron-Core at its submodule pin and many
CUDA / data / logging packages. The sources used are unmodified checkouts (see scripts/README.md,
"Megatron-Bridge"); this file only answers what this machine's Python lacks, each answer recorded:
  - transformers' import-time version gate (dependency_versions_check) runs for real, package by
    package; what it refuses (Debian's regex is older than it asks; tokenizers and safetensors are not
    installed) is recorded in the verdict instead of stopping the import;
  - transformers is told the torch version Bridge's uv.lock pins (2.13.0): it imports torch.nn only
    for torch >= 2.4. The torch that runs is Debian's 1.13;
  - torch >= 2.0 lets @torch.no_grad decorate without parentheses: torch.no_grad is given that form;
  - modules and attributes below are stand-ins (absent_modules): recorded at import, raising when
    called after arm(), so a validation that needed one is refused, never accepted."""
import ast
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys

import absent_modules

# Versions the absent packages report (Bridge's uv.lock at 067f987d).
VERSIONS = {"transformer_engine": "2.18.0", "nvidia_resiliency_ext": "0.6.0"}
TARGET_TORCH_VERSION = "2.13.0"
# Imported unguarded by Bridge or transformers; called only to build, train or save a model.
ABSENT_MODULES = ["transformer_engine", "einops", "diffusers", "modelopt", "megatron.energon",
                  "nvidia_resiliency_ext", "safetensors"]
# transformers modules whose module body calls torch 2.x at import (fp8 dtype tables); never
# imported by config loading itself.
ABSENT_ENGINE_MODULES = ["transformers.integrations.finegrained_fp8"]
# torch 2.x attributes that transformers calls or reads at import (pytree registration of its
# output classes, custom-op registration, dtype tables, torch._dynamo decorators).
TORCH2_ATTRS = ["torch.utils._pytree:register_pytree_node", "torch.library:register_fake",
                "torch.library:register_autograd", "torch:uint16", "torch:uint32", "torch:uint64",
                "torch:float8_e4m3fnuz", "torch:float8_e5m2fnuz", "torch:float4_e2m1fn_x2", "torch:_dynamo"]

GATE_REFUSED = []  # what transformers' version gate refused


class _VersionGate(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs transformers/dependency_versions_check.py statement by statement; its loop over
    pkgs_to_check_at_runtime runs once per package, and each refusal is recorded."""
    NAME = "transformers.dependency_versions_check"

    def find_spec(self, name, path, target=None):
        if name != self.NAME:
            return None
        self.real = importlib.machinery.PathFinder.find_spec(name, path)
        return importlib.machinery.ModuleSpec(name, self, origin=self.real.origin)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = self.real.origin
        with open(self.real.origin) as f:
            tree = ast.parse(f.read(), self.real.origin)
        for node in tree.body:
            code = compile(ast.Module([node], []), self.real.origin, "exec")
            if not isinstance(node, ast.For):
                exec(code, module.__dict__)
                continue
            every = list(module.pkgs_to_check_at_runtime)
            for pkg in every:
                module.pkgs_to_check_at_runtime = [pkg]
                try:
                    exec(code, module.__dict__)
                except ImportError as e:
                    GATE_REFUSED.append(str(e).splitlines()[0].replace("No package metadata was found for ", ""))
            module.pkgs_to_check_at_runtime = every


def _torch_no_grad_bare_decorator():
    import torch

    class no_grad(torch.no_grad):  # noqa: N801 - torch's own name
        def __new__(cls, orig_func=None):
            return super().__new__(cls) if orig_func is None else cls()(orig_func)

        def __init__(self, orig_func=None):
            super().__init__()
    torch.no_grad = no_grad


def prepare():
    """Call after engine_env.prepare(): installs the answers above."""
    absent_modules.VERSIONS.update(VERSIONS)
    sys.meta_path.insert(0, _VersionGate())
    real_version = importlib.metadata.version
    importlib.metadata.version = lambda name: TARGET_TORCH_VERSION if name == "torch" else real_version(name)
    _torch_no_grad_bare_decorator()
    sys.meta_path.insert(0, absent_modules._Finder(ABSENT_ENGINE_MODULES))
    return absent_modules.install(ABSENT_MODULES, TORCH2_ATTRS)


def gate_suffix():
    """'; <what transformers' version gate refused>' for the verdict line, or ''."""
    return f"; transformers version gate refused (recorded, import went on): {GATE_REFUSED}" if GATE_REFUSED else ""


def hf_model_dir(hf_config, tmp):
    """AutoConfig reads a folder: one holding HF_CONFIG.json as config.json."""
    os.makedirs(tmp, exist_ok=True)
    with open(hf_config) as src, open(os.path.join(tmp, "config.json"), "w") as dst:
        dst.write(src.read())
    return tmp
