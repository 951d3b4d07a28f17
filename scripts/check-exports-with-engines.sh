#!/usr/bin/env bash
# Runs the engines' OWN argument/config validation on onboard's exports (the code lives in the engine
# checkouts you give; nothing of it is in this repo). See scripts/README.md.
# Usage:
#   scripts/check-exports-with-engines.sh [--self-test] CASES.json     (tests/data/exports/cases.json: the goldens)
#   scripts/check-exports-with-engines.sh [--self-test] EXPORT_DIR HF_CONFIG.json [EXPORT_DIR HF_CONFIG.json ...]
# Engines, each checked only when its variable is set:
#   MEGATRON_LM_DIR      NVIDIA/Megatron-LM checkout      -> plan.megatron.sh        (parse_args, validate_args, configs)
#   TORCHTITAN_V02_DIR   pytorch/torchtitan v0.2.x        -> plan.torchtitan-v0.2.toml (ConfigManager, ParallelDims, model args)
#   TORCHTITAN_DIR       pytorch/torchtitan main          -> plan_torchtitan.py      (ConfigManager over the config function,
#                        ParallelDims, the model's update_from_config)
#   MEGATRON_BRIDGE_DIR  NVIDIA-NeMo/Megatron-Bridge main -> plan_megatron_bridge.py (the recipe's plan_config(): AutoBridge
#                        over the HF config, then runtime_config_update / ConfigContainer.validate); BRIDGE_PYTHONPATH:
#                        Megatron-LM at Bridge's 3rdparty/Megatron-LM pin, transformers' and huggingface_hub's src/
#   MINDSPEED_LLM_DIR    Ascend/MindSpeed-LLM master      -> plan.mindspeed.sh       (megatron_adaptor, then the patched
#                        parse_args and validate_args); MINDSPEED_PYTHONPATH: Ascend/MindSpeed, Megatron-LM at
#                        MindSpeed-LLM's pin, the src/ of transformers (its pinned version), peft, accelerate, huggingface_hub
# PYTHON: an interpreter that imports torch (default /usr/bin/python3: Debian's python3-torch).
# ENGINE_PYTHONPATH: extra import path for engine dependencies Debian lacks (torchtitan needs tyro,
#   docstring_parser, typeguard >= 4 and typing_extensions >= 4.13; its main's update_from_config
#   needs meta-pytorch/spmd_types; Megatron-Bridge needs transformers and huggingface_hub, see scripts/README.md).
# Expected verdicts: every Megatron export accepted (what Megatron cannot build is left out of the
# arguments and the script refuses to launch); a torchtitan or Bridge export accepted unless it is
# written to stop that engine (then the engine must refuse it). --self-test also breaks one copy per engine
# (a flag Megatron lacks; a TOML key torchtitan lacks; a TrainingConfig field torchtitan main lacks;
# for Bridge, more TP ranks than attention heads, a global batch the data-parallel ranks do not
# divide and an HF module name among the LoRA targets; for MindSpeed-LLM, an unknown flag, a
# --num-layer-list one entry short, a noop layer out of range and an HF LoRA target) and requires the engine to refuse
# it, so a check that accepts everything is caught. A guarded negative refused by another rule than
# the one it breaks is reported UNEXPECTED.
# Exit: 0 all as expected, 1 an unexpected verdict, 2 bad usage or no engine given.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-/usr/bin/python3}"
export PYTHONPATH="${ENGINE_PYTHONPATH:-}"
self_test=0
if [[ "${1:-}" == "--self-test" ]]; then self_test=1; shift; fi
if [[ -z "${MEGATRON_LM_DIR:-}${TORCHTITAN_V02_DIR:-}${TORCHTITAN_DIR:-}${MEGATRON_BRIDGE_DIR:-}${MINDSPEED_LLM_DIR:-}" ]]; then
  echo "check-exports-with-engines: set MEGATRON_LM_DIR, TORCHTITAN_V02_DIR, TORCHTITAN_DIR, MEGATRON_BRIDGE_DIR and/or MINDSPEED_LLM_DIR" >&2
  exit 2
fi
[[ -z "${MEGATRON_BRIDGE_DIR:-}" || -n "${BRIDGE_PYTHONPATH:-}" ]] ||
  { echo "check-exports-with-engines: MEGATRON_BRIDGE_DIR needs BRIDGE_PYTHONPATH (see the header)" >&2; exit 2; }
[[ -z "${MINDSPEED_LLM_DIR:-}" || -n "${MINDSPEED_PYTHONPATH:-}" ]] ||
  { echo "check-exports-with-engines: MINDSPEED_LLM_DIR needs MINDSPEED_PYTHONPATH (see the header)" >&2; exit 2; }
if ! "$py" -c 'import torch' 2>/dev/null; then echo "check-exports-with-engines: $py cannot import torch" >&2; exit 2; fi

# Step 1: the (export dir, HF config) pairs.
pairs=()
if [[ $# -eq 1 && "$1" == *.json ]]; then
  data="$(cd "$(dirname "$1")/.." && pwd)"
  while read -r name cfg; do pairs+=("$(dirname "$1")/$name" "$data/$cfg"); done < <(
    "$py" -c 'import json,sys; [print(c["name"], c["config"]) for c in json.load(open(sys.argv[1]))["cases"]]' "$1")
elif [[ $# -ge 2 && $(( $# % 2 )) -eq 0 ]]; then
  pairs=("$@")
else
  sed -n '4,6p' "$0" >&2; exit 2
fi

unexpected=0
# report ENGINE CASE FILE EXPECT(accepted|refused) VERDICT_LINE
report() {
  local got=refused
  [[ "$5" == "VERDICT accepted"* ]] && got=accepted
  local mark=ok
  if [[ "$got" != "$4" ]]; then mark="UNEXPECTED (expected $4)"; unexpected=$((unexpected + 1)); fi
  printf '%-15s %-20s %-26s %s -> %s\n' "$1" "$2" "$3" "${5:-VERDICT missing (the check crashed)}" "$mark"
}
# refused where the export stops the engine itself: the TOML's [onboard_not_launchable] section,
# the config function's raise NotImplementedError, the Bridge recipe's UNSUPPORTED count
expect_for() {
  if grep -q '^\[onboard_not_launchable\]\|raise NotImplementedError\|^UNSUPPORTED = [1-9]' "$1"; then echo refused; else echo accepted; fi
}
world_of() {
  HF_MODEL_PATH=x MEGATRON_CHECKPOINT_DIR=x SAVE_DIR=x DATA_PREFIX=x bash -c 'source "$1" >/dev/null 2>&1; echo $((NNODES * GPUS_PER_NODE))' _ "$1"
}
verdict() { "$py" "$@" 2>&1 | grep '^VERDICT' | tail -1; }
bridge_verdict() {  # RECIPE HF_CONFIG WORLD
  verdict "$here/engine_checks/megatron_bridge_validate.py" "$MEGATRON_BRIDGE_DIR" "$@"
}
mindspeed_verdict() { verdict "$here/engine_checks/mindspeed_validate.py" "$MINDSPEED_LLM_DIR" "$@"; }  # SCRIPT HF_CONFIG

# Step 2: each export through each engine given.
check_dir() {  # DIR HF_CONFIG LABEL
  local d="$1" cfg="$2" name="$3" world
  world="$(world_of "$d/plan.megatron.sh")"
  if [[ -n "${MEGATRON_LM_DIR:-}" ]]; then
    report megatron-lm "$name" plan.megatron.sh accepted \
      "$(verdict "$here/engine_checks/megatron_validate.py" "$MEGATRON_LM_DIR" "$d/plan.megatron.sh" "$cfg")"
  fi
  if [[ -n "${TORCHTITAN_V02_DIR:-}" ]]; then
    report torchtitan-v0.2 "$name" plan.torchtitan-v0.2.toml "$(expect_for "$d/plan.torchtitan-v0.2.toml")" \
      "$(verdict "$here/engine_checks/torchtitan_v02_validate.py" "$TORCHTITAN_V02_DIR" "$d/plan.torchtitan-v0.2.toml" "$world")"
  fi
  if [[ -n "${TORCHTITAN_DIR:-}" ]]; then
    report torchtitan "$name" plan_torchtitan.py "$(expect_for "$d/plan_torchtitan.py")" \
      "$(verdict "$here/engine_checks/torchtitan_main_validate.py" "$TORCHTITAN_DIR" "$d/plan_torchtitan.py" "$world")"
  fi
  if [[ -n "${MEGATRON_BRIDGE_DIR:-}" ]]; then
    report megatron-bridge "$name" plan_megatron_bridge.py "$(expect_for "$d/plan_megatron_bridge.py")" \
      "$(bridge_verdict "$d/plan_megatron_bridge.py" "$cfg" "$world")"
  fi
  if [[ -n "${MINDSPEED_LLM_DIR:-}" ]]; then   # like Megatron: what it cannot build is left out, the script refuses to launch
    report mindspeed-llm "$name" plan.mindspeed.sh accepted "$(mindspeed_verdict "$d/plan.mindspeed.sh" "$cfg")"
  fi
}
for ((i = 0; i < ${#pairs[@]}; i += 2)); do check_dir "${pairs[i]}" "${pairs[i + 1]}" "$(basename "${pairs[i]}")"; done

# Step 3 (--self-test): a broken copy of the first export per engine must be refused.
if [[ $self_test == 1 ]]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  pick=0   # the first export every engine accepts
  for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    if [[ $(expect_for "${pairs[i]}/plan_torchtitan.py") == accepted && $(expect_for "${pairs[i]}/plan.torchtitan-v0.2.toml") == accepted && $(expect_for "${pairs[i]}/plan_megatron_bridge.py") == accepted ]]; then
      pick=$i; break
    fi
  done
  cp -r "${pairs[pick]}" "$tmp/broken"; b="$tmp/broken"
  sed -i 's/^  --bf16$/  --bf16\n  --overlap-p2p-comm/' "$b/plan.megatron.sh"          # a flag Megatron does not have
  sed -i 's/^\[training\]$/[training]\nbatch_size = 8/' "$b/plan.torchtitan-v0.2.toml"   # a key torchtitan v0.2 does not have
  sed -i 's/^    config.training = TrainingConfig($/&\n        seq_len=4096,/' "$b/plan_torchtitan.py"  # a field main removed
  [[ -n "${MEGATRON_LM_DIR:-}" ]] && report megatron-lm broken-copy plan.megatron.sh refused \
    "$(verdict "$here/engine_checks/megatron_validate.py" "$MEGATRON_LM_DIR" "$b/plan.megatron.sh" "${pairs[pick + 1]}")"
  world="$(world_of "$b/plan.megatron.sh")"
  [[ -n "${TORCHTITAN_V02_DIR:-}" ]] && report torchtitan-v0.2 broken-copy plan.torchtitan-v0.2.toml refused \
    "$(verdict "$here/engine_checks/torchtitan_v02_validate.py" "$TORCHTITAN_V02_DIR" "$b/plan.torchtitan-v0.2.toml" "$world")"
  [[ -n "${TORCHTITAN_DIR:-}" ]] && report torchtitan broken-copy plan_torchtitan.py refused \
    "$(verdict "$here/engine_checks/torchtitan_main_validate.py" "$TORCHTITAN_DIR" "$b/plan_torchtitan.py" "$world")"
  # torchtitan main, the model-level check (Step 3, update_from_config): every rank in one TP group,
  # more ranks than the model has attention heads. Only update_from_config refuses this, so the
  # verdict must name it.
  if [[ -n "${TORCHTITAN_DIR:-}" ]]; then
    cp -r "${pairs[pick]}" "$tmp/tp-heads"; t="$tmp/tp-heads/plan_torchtitan.py"
    sed -i -E 's/^( +)(data_parallel_replicate|data_parallel_shard|context_parallel|expert_parallel|pipeline_parallel|expert_tensor_parallel)_degree=[0-9-]+,/\1\2_degree=1,/' "$t"
    sed -i -E "s/^( +)tensor_parallel_degree=[0-9]+,/\1tensor_parallel_degree=$world,/" "$t"
    v="$(verdict "$here/engine_checks/torchtitan_main_validate.py" "$TORCHTITAN_DIR" "$t" "$world")"
    [[ "$v" == *update_from_config* ]] || v="VERDICT accepted by update_from_config (so reported UNEXPECTED): $v"
    report torchtitan tp-over-heads plan_torchtitan.py refused "$v"
  fi
  # Megatron-Bridge (the pick is one whose recipe Bridge accepts): (a) every non-pipeline rank in
  # one TP group, more than the model's attention heads: Megatron-Core's TransformerConfig must
  # refuse it (the verdict must name num_attention_heads); (b) a global batch one sample over the
  # plan's: ConfigContainer.validate's batch divisibility must refuse it (the verdict must name
  # batch_size).
  if [[ -n "${MEGATRON_BRIDGE_DIR:-}" ]]; then
    r="$b/plan_megatron_bridge.py"; cp "${pairs[pick]}/plan_megatron_bridge.py" "$r"
    world="$(world_of "${pairs[pick]}/plan.megatron.sh")"
    pp="$(sed -n -E 's/^ +model.pipeline_model_parallel_size = ([0-9]+)$/\1/p' "$r")"
    sed -i -E "s/^( +model.tensor_model_parallel_size = )[0-9]+$/\1$((world / pp))/" "$r"
    v="$(bridge_verdict "$r" "${pairs[pick + 1]}" "$world")"
    [[ "$v" == *num_attention_heads* ]] || v="VERDICT accepted by the heads rule (so reported UNEXPECTED): $v"
    report megatron-bridge tp-over-heads plan_megatron_bridge.py refused "$v"
    cp "${pairs[pick]}/plan_megatron_bridge.py" "$r"
    sed -i -E 's/^( +cfg.train.global_batch_size = )([0-9]+)$/echo "\1$((\2 + 1))"/e' "$r"
    v="$(bridge_verdict "$r" "${pairs[pick + 1]}" "$world")"
    [[ "$v" == *batch_size* ]] || v="VERDICT accepted by a batch rule (so reported UNEXPECTED): $v"
    report megatron-bridge batch-plus-one plan_megatron_bridge.py refused "$v"
    # (c) the first LoRA recipe Bridge accepts, with an HF module name (q_proj) among its targets:
    # Bridge's matcher finds no Megatron module of that name (the verdict names target_modules).
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      l="${pairs[i]}/plan_megatron_bridge.py"
      grep -q 'LoRA(target_modules=\[' "$l" && [[ $(expect_for "$l") == accepted ]] || continue
      sed -E 's/LoRA\(target_modules=\[/&"q_proj", /' "$l" > "$r"
      v="$(bridge_verdict "$r" "${pairs[i + 1]}" "$(world_of "${pairs[i]}/plan.megatron.sh")")"
      [[ "$v" == *"target_modules"*q_proj* ]] || v="VERDICT accepted by the target-module match (so reported UNEXPECTED): $v"
      report megatron-bridge lora-hf-target plan_megatron_bridge.py refused "$v"
      break
    done
  fi
  # MindSpeed-LLM: (a) a flag neither Megatron-LM nor MindSpeed has, on the pick; (b) the first
  # export with --num-layer-list, its last stage dropped: one entry fewer than pipeline stages, which
  # MindSpeed-LLM's own code must refuse (the verdict names num_layer_list or a mindspeed_llm/ frame;
  # measured: its arguments wrapper, "layers divisible by pp"). Its validate_args does not check that
  # the list sums to --num-layers: a list one layer over was accepted. A guarded negative refused by
  # another rule is turned into an accepted verdict, so it is reported UNEXPECTED.
  if [[ -n "${MINDSPEED_LLM_DIR:-}" ]]; then
    m="$tmp/plan.mindspeed.sh"; cp "${pairs[pick]}/plan.mindspeed.sh" "$m"
    sed -i 's/^ARGS=($/&\n  --onboard-no-such-flag/' "$m"
    report mindspeed-llm broken-copy plan.mindspeed.sh refused "$(mindspeed_verdict "$m" "${pairs[pick + 1]}")"
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      grep -q -- '--num-layer-list' "${pairs[i]}/plan.mindspeed.sh" || continue
      cp "${pairs[i]}/plan.mindspeed.sh" "$m"
      sed -i -E 's/^(  --num-layer-list [0-9,]*),[0-9]+$/\1/' "$m"
      v="$(mindspeed_verdict "$m" "${pairs[i + 1]}")"
      [[ "$v" == *num_layer_list* || "$v" == *"(mindspeed_llm/"* ]] || v="VERDICT accepted by the layer-list rule (so reported UNEXPECTED): $v"
      report mindspeed-llm layer-list-short plan.mindspeed.sh refused "$v"
      break
    done
    # (c) the first export with --noop-layers, its last noop layer moved to --num-layers itself (out of
    # range): MindSpeed's noop-layers feature must refuse it (the verdict names noop_layers).
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      grep -q -- '--noop-layers' "${pairs[i]}/plan.mindspeed.sh" || continue
      cp "${pairs[i]}/plan.mindspeed.sh" "$m"
      n="$(sed -n -E 's/^  --num-layers ([0-9]+)$/\1/p' "$m")"
      sed -i -E "s/^(  --noop-layers ([0-9]+,)*)[0-9]+$/\1$n/" "$m"
      v="$(mindspeed_verdict "$m" "${pairs[i + 1]}")"
      [[ "$v" == *noop_layers* ]] || v="VERDICT accepted by the noop-layers rule (so reported UNEXPECTED): $v"
      report mindspeed-llm noop-out-of-range plan.mindspeed.sh refused "$v"
      break
    done
    # (d) the first LoRA export, an HF module name (q_proj) first among its targets: not a LoRA name
    # MindSpeed-LLM maps (the verdict names its lora_cfg.json).
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      grep -q -- '--lora-target-modules' "${pairs[i]}/plan.mindspeed.sh" || continue
      sed 's/^  --lora-target-modules /&q_proj /' "${pairs[i]}/plan.mindspeed.sh" > "$m"
      v="$(mindspeed_verdict "$m" "${pairs[i + 1]}")"
      [[ "$v" == *lora_cfg.json*q_proj* ]] || v="VERDICT accepted by the LoRA-name check (so reported UNEXPECTED): $v"
      report mindspeed-llm lora-hf-target plan.mindspeed.sh refused "$v"
      break
    done
  fi
fi

echo "check-exports-with-engines: $unexpected unexpected verdict(s)"
[[ $unexpected == 0 ]]
