// Canonical pairwise summation order (see ordered_sum.h).
#include "backends/ordered_sum.h"

namespace onboard::backends {

void TreeAccumulator::Push(at::Tensor item) {
  stack_.emplace_back(1, std::move(item));
  // Merge while the two newest partials cover equally many items (a binary counter's carries).
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].first == stack_[stack_.size() - 2].first) {
    auto newer = std::move(stack_.back());
    stack_.pop_back();
    auto& older = stack_.back();
    older.second = older.second + newer.second;
    older.first += newer.first;
  }
}

at::Tensor TreeAccumulator::Take() {
  if (stack_.empty()) return at::Tensor();
  at::Tensor sum = stack_[0].second;
  for (size_t i = 1; i < stack_.size(); ++i) sum = sum + stack_[i].second;
  stack_.clear();
  return sum;
}

at::Tensor TreeSumRows(const at::Tensor& rows) {
  TreeAccumulator acc;
  for (int64_t i = 0; i < rows.size(0); ++i) acc.Push(rows[i]);
  at::Tensor s = acc.Take();
  return s.defined() ? s.contiguous() : at::zeros(rows.sizes().slice(1), rows.options());
}

}  // namespace onboard::backends
