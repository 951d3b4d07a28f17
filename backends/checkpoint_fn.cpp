// Activation checkpointing of a forward region (see checkpoint_fn.h).
#include "backends/checkpoint_fn.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The body and the routing it records into, kept alive by the autograd node until its backward.
struct BodyHolder : torch::CustomClassHolder {
  CheckpointBody body;
  MoeRouting* routing = nullptr;
};

class CheckpointFn : public torch::autograd::Function<CheckpointFn> {
 public:
  // inputs: a TensorList, so that autograd sees each tensor as an input (a std::vector would
  // be taken as one non-tensor argument: custom_function.h ExtractVariables).
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, int64_t holder_ptr) {
    auto* h = reinterpret_cast<BodyHolder*>(holder_ptr);
    ctx->saved_data["body"] = c10::IValue::make_capsule(c10::intrusive_ptr<BodyHolder>::reclaim(h));
    const std::vector<at::Tensor> in = inputs.vec();
    ctx->save_for_backward(in);
    return h->body(in);  // autograd is off inside a custom function's forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto holder = c10::static_intrusive_pointer_cast<BodyHolder>(ctx->saved_data["body"].toCapsule());
    variable_list saved = ctx->get_saved_variables();
    // Step 1: leaves for the inputs; rebuild the region's graph with record off.
    std::vector<at::Tensor> leaves;
    for (size_t i = 0; i < saved.size(); ++i) {
      at::Tensor l = saved[i].detach();
      if (ctx->needs_input_grad(i) && l.is_floating_point() && l.numel() > 0) l.requires_grad_(true);
      leaves.push_back(l);
    }
    std::vector<at::Tensor> outs;
    {
      at::AutoGradMode enable(true);
      const bool record = holder->routing->record;
      holder->routing->record = false;
      outs = holder->body(leaves);
      holder->routing->record = record;
    }
    // Step 2: backpropagate the outputs that carry a gradient.
    std::vector<at::Tensor> ys, gys, xs;
    std::vector<size_t> where;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].requires_grad() && i < grads.size() && grads[i].defined()) {
        ys.push_back(outs[i]);
        gys.push_back(grads[i]);
      }
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].requires_grad()) {
        xs.push_back(leaves[i]);
        where.push_back(i);
      }
    variable_list result(saved.size() + 1);
    ctx->saved_data.erase("body");
    if (ys.empty() || xs.empty()) return result;
    variable_list g = torch::autograd::grad(ys, xs, gys, /*retain_graph=*/false, /*create_graph=*/false,
                                            /*allow_unused=*/true);
    for (size_t j = 0; j < where.size(); ++j) result[where[j]] = g[j];
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> Checkpoint(CheckpointBody body, const std::vector<at::Tensor>& inputs,
                                   MoeRouting& routing) {
  auto holder = c10::make_intrusive<BodyHolder>();
  holder->body = std::move(body);
  holder->routing = &routing;
  return CheckpointFn::apply(at::TensorList(inputs), reinterpret_cast<int64_t>(holder.release()));
}

}  // namespace onboard::backends
