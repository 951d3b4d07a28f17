// CrossCheckInventory: compares a checkpoint's tensor inventory with the ModelIR from config.json.
// Name sets always; shapes and parameter counts when every tensor's header was read.
// Units: parameters are scalar counts (MXFP4 unpacked).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "parsers/safetensors.h"

namespace onboard {
namespace {

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Tensors a checkpoint may hold that the IR deliberately does not model.
bool Ignorable(const std::string& name, const ModelIR& model, std::vector<std::string>* warnings) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".rotary_emb.inv_freq")) return true;  // old checkpoints saved the RoPE buffer
  if (model.vision && (name.rfind("visual.", 0) == 0 || name.rfind("vision_tower.", 0) == 0 ||
                       name.rfind("model.visual.", 0) == 0 || name.rfind("model.vision_tower.", 0) == 0 ||
                       name.rfind("multi_modal_projector.", 0) == 0 || name.rfind("mm_projector.", 0) == 0))
    return true;
  // Multi-token-prediction layers sit after the last decoder layer.
  const std::string layers = "model.layers.";
  if (model.mtp_layers > 0 && name.rfind(layers, 0) == 0) {
    const size_t dot = name.find('.', layers.size());
    const std::string idx = name.substr(layers.size(), dot - layers.size());
    if (!idx.empty() && idx.size() < 10 && idx.find_first_not_of("0123456789") == std::string::npos &&
        std::stoll(idx) >= int64_t(model.layers.size())) {
      (void)warnings;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string CrossCheckReport::Summary() const {
  std::ostringstream os;
  os << inventory_tensors << " tensors (" << expected_tensors << " expected), " << missing.size() << " missing, "
     << extra.size() << " extra";
  if (shapes_known) {
    os << ", " << shape_mismatch.size() << " shape mismatches, params " << inventory_params << " vs IR " << ir_params
       << " (diff " << param_diff << ")";
  } else {
    os << ", shapes unknown (index only)";
  }
  os << (agree ? ": agree" : ": DISAGREE");
  return os.str();
}

CrossCheckReport CrossCheckInventory(const TensorInventory& inventory, const ModelIR& model) {
  CrossCheckReport r;
  // Step 1: the names (and shapes) the IR implies.
  const std::vector<ExpectedTensor> expected = ExpectedTensorNames(model, &r.warnings);
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const auto& t : expected) by_name[t.name] = &t;
  r.expected_tensors = int64_t(by_name.size());
  r.inventory_tensors = int64_t(inventory.tensors.size());
  for (const auto& t : expected) r.expected_params += t.params;

  // Step 2: missing / extra by name; shape comparison when the header was read.
  std::set<std::string> present;
  for (const TensorInfo& t : inventory.tensors) {
    present.insert(t.name);
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      // fp8 checkpoints (DeepSeek-V3) store a block scale beside each quantised weight.
      const std::string suffix = "_scale_inv";
      const bool fp8_scale = t.name.size() > suffix.size() &&
                             t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                             by_name.count(t.name.substr(0, t.name.size() - suffix.size()));
      if (!fp8_scale && !Ignorable(t.name, model, &r.warnings)) r.extra.push_back(t.name);
      continue;
    }
    if (t.has_header && t.shape != it->second->shape)
      r.shape_mismatch.push_back(t.name + ": expected " + ShapeText(it->second->shape) + " got " + ShapeText(t.shape));
  }
  for (const auto& [name, t] : by_name)
    if (!present.count(name)) r.missing.push_back(name);
  std::sort(r.extra.begin(), r.extra.end());

  // Step 3: parameter counts (only meaningful with every header read).
  if (ModelSizeFitsInt64(model)) {
    r.ir_params = ComputeStats(model, 1).total_params;
  } else {
    r.warnings.push_back("IR parameter count does not fit int64");
  }
  r.shapes_known = inventory.all_headers;
  if (r.shapes_known) {
    r.inventory_params = inventory.ParamCount();
    r.param_diff = r.inventory_params - r.ir_params;
  }
  r.agree = r.missing.empty() && r.extra.empty() && r.shape_mismatch.empty() && r.param_diff == 0;
  return r;
}

}  // namespace onboard
