// RMSNorm of the proxy (proxy_weights.h Rms): y = x * rsqrt(sum(x^2) / D + eps) * w over the last
// dim, as one autograd function that saves only x and w.
// Legend: x [..., D] rows, w [D], rstd [..., 1]; fp32; eps 1e-6.
//
// The composite ops keep, for backward, x (pow), rstd (rsqrt) and the normalised x * rstd (the mul
// by w), a full [..., D] copy per norm; a fused RMSNorm kernel (Apex, Transformer Engine) keeps x
// and rstd, and the memory model counts only the norm's input (search/memory_model.cpp). Here the
// backward recomputes the composite under autograd from the saved x and w and backpropagates it:
// values are the composite's and gradients the same maths (~1e-7 relative: the x-gradient's parts
// are summed in another order); the bytes kept are x (alive anyway as the previous op's output) and
// w (a view of the unit's weights).
// Not Checkpoint (checkpoint_fn.h): it drops its body after one backward, and a graph backpropagated
// twice with retain_graph (DsaIndexerKl.GradientOnlyTrainsIndexer...) needs a second one.
#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

// The composite RMSNorm. The mean of squares is sum / D, not mean(): LibTorch 1.13's mean backward
// saves its input (x^2); on CPU mean is sum then division by D, so the values are bit-identical.
at::Tensor RmsComposite(const at::Tensor& x, const at::Tensor& w) {
  return x * at::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true) / x.size(-1) + 1e-6) * w;
}

class RmsNormFn : public torch::autograd::Function<RmsNormFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    return RmsComposite(x, w);  // autograd is off inside a custom function's forward
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // Step 1: leaves for x and w; the composite again, under autograd.
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> leaves, wanted;
    for (size_t j = 0; j < 2; ++j) {
      leaves.push_back(saved[j].detach().requires_grad_(ctx->needs_input_grad(j)));
      if (ctx->needs_input_grad(j)) wanted.push_back(leaves[j]);
    }
    torch::autograd::variable_list result(2);
    if (wanted.empty()) return result;
    at::Tensor y;
    {
      at::AutoGradMode enable(true);
      y = RmsComposite(leaves[0], leaves[1]);
    }
    // Step 2: backpropagate the output's gradient to the inputs that want one.
    const torch::autograd::variable_list g = torch::autograd::grad({y}, wanted, {grads[0]});
    for (size_t j = 0, k = 0; j < 2; ++j)
      if (ctx->needs_input_grad(j)) result[j] = g[k++];
    return result;
  }
};

}  // namespace

at::Tensor Rms(const at::Tensor& x, const at::Tensor& w) { return RmsNormFn::apply(x, w); }

}  // namespace onboard::backends
