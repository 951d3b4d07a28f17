// The loss implementations' bytes per logit element (search/cross_entropy_cost.h: sources and the
// count behind each number).
#include "search/cross_entropy_cost.h"

namespace onboard {
namespace {

// name, held, traffic (38 + 14, 8 + 14, 10, 22 + 26), then held and traffic at t > 1: the same kernels
// except torch's (loss parallel, 38 + 38)
constexpr CrossEntropyCost kLosses[] = {
    {"megatron", 6, 52, 6, 52},    // Megatron-Core vocab_parallel_cross_entropy (fp32 softmax in place)
    {"te", 6, 22, 6, 22},          // Transformer Engine parallel_cross_entropy, TE >= 2.18 (fp32 gradient)
    {"te_inplace", 2, 10, 2, 10},  // the same, TE <= 2.17.1 (the gradient in the bf16 logits)
    {"torch", 12, 48, 16, 76},     // torch cross_entropy over fp32 logits (torchtitan); t > 1: loss parallel
};

}  // namespace

const CrossEntropyCost* FindCrossEntropy(const std::string& name) {
  for (const CrossEntropyCost& c : kLosses)
    if (name == c.name) return &c;
  return nullptr;
}

std::string CrossEntropyNames() {
  std::string s;
  for (const CrossEntropyCost& c : kLosses) s += (s.empty() ? "" : " | ") + std::string(c.name);
  return s;
}

}  // namespace onboard
