// Megatron-LM / Megatron-Core export: the complete argument list of `pretrain_gpt.py` for one
// plan and model (export_megatron.cpp), the bash script it is written as, the parser that reads
// that script back, and a checker of the Megatron-LM rules the list relies on
// (export_megatron_rules.cpp: each rule cites the file and function of Megatron-LM it encodes).
//
// Target: NVIDIA/Megatron-LM main at commit d98e8a64 (2026-08-22). The checker encodes the rules
// as read from that source; it is not Megatron's own code (no Python torch here).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"

namespace onboard {

// The engine version each export names, in its header and in EXPORTS.md (one home each).
extern const char* const kMegatronTarget;   // "NVIDIA/Megatron-LM main @ d98e8a64 (2026-08-22)"
extern const char* const kBridgeTarget;     // export_bridge.cpp
extern const char* const kTitanMain;        // export_torchtitan.cpp: the Python config function
extern const char* const kTitanV02;         // export_torchtitan.cpp: the v0.2.x TOML
extern const char* const kMindSpeedTarget;  // export_mindspeed.cpp

// Nodes and devices per node a plan runs on (launchers and world-size checks).
struct LaunchShape {
  int64_t nnodes = 1;
  int64_t gpus_per_node = 8;
  int64_t world() const { return nnodes * gpus_per_node; }
};
// The shape of `plan` with `devices_per_node` devices on each node (last node may not be full:
// then nnodes rounds up and the checkers' world-size rules fail, as they should).
LaunchShape ShapeFor(const Plan& plan, int64_t devices_per_node);

// An argument list as Megatron's argparse sees it: flags in order; "" = store_true flag; a
// value with spaces is several tokens (nargs="+").
struct MegatronArgs {
  std::vector<std::pair<std::string, std::string>> flags;
  std::map<std::string, std::string> env;     // exported environment
  LaunchShape shape;
  void Add(const std::string& flag, const std::string& value = "");
  void Remove(const std::string& flag);
  bool Has(const std::string& flag) const;
  std::string Value(const std::string& flag) const;           // "" when absent
  int64_t Int(const std::string& flag, int64_t fallback) const;  // fallback when absent/not a number
  double Real(const std::string& flag, double fallback) const;
};

// What one export cannot express, and what the user must still supply.
struct ExportCaveats {
  std::vector<std::string> unsupported;       // the engine cannot do this: the script refuses to run
  std::vector<std::string> approximations;    // exported differently from the plan, and why
  std::vector<std::string> user_supplies;     // placeholders: NAME - what it is
};

struct MegatronExport {
  MegatronArgs args;
  ExportCaveats caveats;
};

// Builds the argument list (model, MoE, MLA, MTP, parallelism + pipeline layout, FSDP/optimizer,
// recompute, precision, batch, placeholders for checkpoint/tokenizer/data) and environment.
MegatronExport BuildMegatronExport(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
// The "exported differently" line of a zero-3 plan with pp > 1 and fsdp_pipelining per_step on an
// engine running Megatron-FSDP (Megatron-LM, Bridge).
std::string MegatronFsdpPerMicroBatchNote();

// A bash script: header (engine + version, unsupported, user-supplied), NNODES/GPUS_PER_NODE,
// exports, ARGS=( ... ), a guard that exits 3 when something is unsupported (ONBOARD_FORCE=1
// overrides), and a torchrun launch when executed (not when sourced). `title` and `target` name
// the engine and its version; `entry` is the training script path as bash expands it
// ("${MEGATRON_LM_DIR:?set MEGATRON_LM_DIR}/pretrain_gpt.py").
std::string RenderMegatronScript(const MegatronExport& e, const std::string& title, const std::string& target,
                                 const std::string& entry);

// Reads NNODES, GPUS_PER_NODE, `export K=V` and the ARGS=( ... ) block of such a script.
Expected<MegatronArgs> ParseMegatronScript(const std::string& text, const std::string& origin);

// ---- The checker (export_megatron_rules.cpp) ----

// How Megatron's argparse takes one flag: store_true (no value), one value, or nargs="+"; choices
// where argparse (or a Literal-typed config field) restricts them (export_megatron_flags.cpp).
struct MegatronFlagSpec {
  enum Kind { kSwitch, kOne, kMany } kind;
  std::vector<std::string> choices;   // empty = any
};
const std::map<std::string, MegatronFlagSpec>& MegatronKnownFlags();

struct MegatronRule {
  const char* id;        // "fsdp2_conflicts"
  const char* source;    // "megatron/training/arguments.py: validate_args (if args.use_torch_fsdp2)"
};
struct MegatronRuleFailure {
  std::string rule;      // MegatronRule::id
  std::string message;   // names the flags and values
  std::string source;
};
// One rule of a checker's table: its id/source and the function that calls `fail` once per breach.
// The Megatron-LM checker and the MindSpeed-LLM one (export_mindspeed_rules.h) are such tables.
struct MegatronRuleFn {
  MegatronRule rule;
  void (*fn)(const MegatronArgs&, const std::function<void(const std::string&)>&);
};
std::vector<MegatronRule> RulesOf(const std::vector<MegatronRuleFn>& table);
std::vector<MegatronRuleFailure> RunRules(const std::vector<MegatronRuleFn>& table, const MegatronArgs& args);
const std::vector<MegatronRule>& MegatronRules();
// Expands a --pipeline-model-parallel-layout string ("Et*3|(tt|)*2,m|L") into its stages' layer
// symbols ({"Ettt","tt","tt","mL"}); empty when it does not parse.
std::vector<std::string> LayoutStages(const std::string& layout);
std::vector<MegatronRuleFailure> CheckMegatronArgs(const MegatronArgs& args);
std::string FormatRuleFailures(const std::vector<MegatronRuleFailure>& failures);

}  // namespace onboard
