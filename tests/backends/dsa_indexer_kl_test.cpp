// DSA indexer KL (proxy_forward.cpp, Mla Step 3): only the KL trains the indexer, the KL trains
// nothing else, its gradient matches finite differences (fp64), FSDP's recomputation neither loses
// nor doubles it, weight 0 freezes the indexer, and on the copy task the KL falls while it trains.
// Shapes: x [b, T, hidden]; flat buffers [numel] (proxy_model.h).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backends/c10d_compat.h"
#include "backends/fsdp_unit.h"
#include "backends/probe_data.h"
#include "backends/proxy_model.h"
#include "tests/backends/probe_test_util.h"

namespace onboard::backends {
namespace {

// Attention-only proxy (no KDA, no MoE): the tests' SmallSpec dims, MLA + DSA layers with dense
// SwiGLU channels.
ProxySpec MlaSpec(int64_t layers, double kl_weight) {
  ProxySpec s = testing_probe::SmallSpec();
  s.layers.assign(static_cast<size_t>(layers), {ProxyMixer::kMLA, ProxyChannel::kDense});
  s.indexer_kl_weight = kl_weight;
  return s;
}

bool IsIndexer(const ParamSlot& p) { return p.name.rfind("idx_", 0) == 0; }

// Max |v| over the slots of `layout` that are (indexer == true) or are not indexer weights.
double MaxAbs(const FlatLayout& layout, const at::Tensor& flat, bool indexer) {
  double m = 0;
  for (const ParamSlot& p : layout.slots)
    if (IsIndexer(p) == indexer)
      m = std::max(m, flat.narrow(0, p.offset, p.numel).abs().max().item<double>());
  return m;
}

// One MLA layer unit in fp64 with a fixed input; Forward returns the unit output and adds the
// recorded KL of this pass to *kl (when given).
struct LayerFixture {
  ProxySpec spec;
  ProbeConfig cfg;
  std::vector<UnitLayout> units;
  at::Tensor dense, x, none = at::zeros({0}, at::kDouble);
  MoeRouting routing;
  UnitInputs in;
  explicit LayerFixture(double kl_weight) : spec(MlaSpec(1, kl_weight)) {
    units = BuildLayout(spec, cfg);
    dense = InitFlat(units[1].dense, 77).to(at::kDouble);
    x = at::randn({2, 12, spec.hidden}, at::TensorOptions().dtype(at::kDouble));
    in.inv_global_tokens = 1.0 / 20.0;  // as if 20 tokens were counted over all ranks
  }
  at::Tensor Forward(const at::Tensor& d, const at::Tensor& xin, std::map<int64_t, double>* kl) {
    UnitInputs i = in;
    i.indexer_kl = kl;
    return UnitForward(spec, units[1], xin, d, none, none, none, 0.0, routing, i);
  }
  double RecordedKl(const at::Tensor& d) {
    at::NoGradGuard ng;
    std::map<int64_t, double> kl;
    Forward(d, x, &kl);
    return kl.at(0);
  }
};

TEST(DsaIndexerKl, GradientOnlyTrainsIndexerAndMatchesFiniteDifferences) {
  at::manual_seed(3);
  const double w = 0.7;
  LayerFixture f(w);
  const FlatLayout& L = f.units[1].dense;
  at::Tensor d = f.dense.clone().requires_grad_(true);
  at::Tensor xg = f.x.clone().requires_grad_(true);
  std::map<int64_t, double> kl;
  at::Tensor out = f.Forward(d, xg, &kl);
  ASSERT_EQ(kl.size(), 1u);
  EXPECT_GT(kl.at(0), 0.0);
  // Step 1: KL-only gradient (zero upstream gradient on the layer output) and LM-side gradient
  // (the rest of a random upstream gradient).
  auto g_kl = torch::autograd::grad({out}, {d, xg}, {at::zeros_like(out)}, /*retain_graph=*/true);
  auto g_all = torch::autograd::grad({out}, {d, xg}, {at::randn_like(out)});
  at::Tensor g_lm = g_all[0] - g_kl[0];
  EXPECT_GT(MaxAbs(L, g_kl[0], true), 1e-6);             // the KL reaches the indexer...
  EXPECT_EQ(MaxAbs(L, g_kl[0], false), 0.0);             // ...and nothing else,
  EXPECT_EQ(g_kl[1].abs().max().item<double>(), 0.0);    // not even the layer input;
  EXPECT_EQ(MaxAbs(L, g_lm, true), 0.0);                 // the LM side never reaches the indexer
  EXPECT_GT(MaxAbs(L, g_lm, false), 1e-6);
  // Step 2: central differences of w * recorded KL along indexer coordinates (fp64).
  const double eps = 1e-6;
  const double scale = g_kl[0].abs().max().item<double>();
  int64_t checked = 0;
  for (const ParamSlot& p : L.slots) {
    if (!IsIndexer(p)) continue;
    for (int64_t j = 0; j < p.numel; j += 7, ++checked) {
      const int64_t i = p.offset + j;
      at::Tensor plus = f.dense.clone(), minus = f.dense.clone();
      plus[i] += eps;
      minus[i] -= eps;
      const double fd = w * (f.RecordedKl(plus) - f.RecordedKl(minus)) / (2 * eps);
      ASSERT_NEAR(g_kl[0][i].item<double>(), fd, 1e-6 * scale) << p.name << "[" << j << "]";
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(DsaIndexerKl, FsdpRecomputationAddsTheKlGradientOnceAndRecordsOnce) {
  at::manual_seed(4);
  LayerFixture f(1.0);
  Rendezvous store("127.0.0.1", 0, /*is_server=*/true, 10.0);
  Group one(store, "fsdp", 0, 1, 10.0, "127.0.0.1");
  at::Tensor G = at::randn({2, 12, f.spec.hidden}, at::kDouble);
  // Direct: one forward with grad.
  at::Tensor d1 = f.dense.clone().requires_grad_(true);
  std::map<int64_t, double> kl_direct;
  (f.Forward(d1, f.x, &kl_direct) * G).sum().backward();
  // FSDP unit: no-grad forward (records), backward recomputes with grad (must not record again).
  std::map<int64_t, double> kl_fsdp;
  UnitInputs in = f.in;
  in.indexer_kl = &kl_fsdp;
  UnitRunner runner{&f.spec, &f.units[1], &one, &one, &f.routing, &in, 0.0};
  at::Tensor d2 = f.dense.clone().requires_grad_(true);
  at::Tensor out = RunFsdpUnit(&runner, f.x, d2, f.none, f.none, f.none);
  ASSERT_EQ(kl_fsdp.size(), 1u);
  const double after_forward = kl_fsdp.at(0);
  (out * G).sum().backward();
  EXPECT_EQ(kl_fsdp.at(0), after_forward);
  EXPECT_NEAR(kl_fsdp.at(0), kl_direct.at(0), 1e-12);
  EXPECT_LT((d2.grad() - d1.grad()).abs().max().item<double>(), 1e-12);
  EXPECT_GT(MaxAbs(f.units[1].dense, d2.grad(), true), 1e-6);
}

TEST(DsaIndexerKl, WeightZeroKeepsTheIndexerFrozen) {
  at::manual_seed(5);
  LayerFixture on(1.0), off(0.0);
  off.x = on.x;
  at::Tensor d_on = on.dense.clone().requires_grad_(true), d_off = on.dense.clone().requires_grad_(true);
  std::map<int64_t, double> kl_on, kl_off;
  at::Tensor y_on = on.Forward(d_on, on.x, &kl_on), y_off = off.Forward(d_off, on.x, &kl_off);
  EXPECT_TRUE(at::equal(y_on, y_off));           // the KL never changes the forward
  EXPECT_EQ(kl_on.at(0), kl_off.at(0));          // weight 0 still records it (diagnostic)
  at::Tensor G = at::randn_like(y_on);
  at::Tensor g_on = torch::autograd::grad({y_on}, {d_on}, {G})[0];
  at::Tensor g_off = torch::autograd::grad({y_off}, {d_off}, {G})[0];
  EXPECT_EQ(MaxAbs(on.units[1].dense, g_off, true), 0.0);   // indexer frozen, as before the KL
  EXPECT_GT(MaxAbs(on.units[1].dense, g_on, true), 1e-6);
  // Every other weight gets the same gradient with and without the KL.
  EXPECT_EQ(MaxAbs(on.units[1].dense, g_on - g_off, false), 0.0);
}

// Trains a 2-layer MLA+DSA proxy for `steps` on the copy task through the FSDP units (1 process)
// with Adam; returns the per-step KL summed over layers and the initial/final dense buffers.
struct TrainResult {
  std::vector<double> kl, loss;
  std::vector<at::Tensor> before, after;
  std::vector<UnitLayout> units;
};
TrainResult TrainCopy(double kl_weight, int64_t steps) {
  at::manual_seed(6);
  TrainResult r;
  ProxySpec spec = MlaSpec(2, kl_weight);
  ProbeConfig cfg;
  cfg.seq = 16;
  cfg.batch = 8;
  r.units = BuildLayout(spec, cfg);
  ProbeData data(spec, cfg);
  EXPECT_TRUE(data.status().ok());
  Rendezvous store("127.0.0.1", 0, /*is_server=*/true, 10.0);
  Group one(store, "fsdp", 0, 1, 10.0, "127.0.0.1");
  MoeRouting routing;
  std::vector<at::Tensor> params;
  for (size_t u = 0; u < r.units.size(); ++u) {
    params.push_back(InitFlat(r.units[u].dense, 1000 + u).requires_grad_(true));
    r.before.push_back(params.back().detach().clone());
  }
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-2));
  const at::Tensor none = at::zeros({0});
  for (int64_t step = 0; step < steps; ++step) {
    Batch batch = data.Get(step, 0, cfg.batch);
    std::map<int64_t, double> kl;
    UnitInputs in;
    in.targets = &batch.targets;
    in.loss_mask = &batch.mask;
    in.inv_global_tokens = 1.0 / static_cast<double>(data.CountedTokensPerStep());
    in.indexer_kl = &kl;
    std::vector<UnitRunner> runners(r.units.size());
    at::Tensor x = batch.tokens;
    for (size_t u = 0; u < r.units.size(); ++u) {
      runners[u] = {&spec, &r.units[u], &one, &one, &routing, &in, 0.0};
      x = RunFsdpUnit(&runners[u], x, params[u], none, none, none);
    }
    opt.zero_grad();
    x.backward();
    opt.step();
    double total = 0;
    for (auto& [layer, v] : kl) total += v;
    EXPECT_EQ(kl.size(), 2u);
    r.kl.push_back(total);
    r.loss.push_back(x.item<double>());
  }
  for (const at::Tensor& p : params) r.after.push_back(p.detach().clone());
  return r;
}

double Mean(const std::vector<double>& v, size_t from, size_t n) {
  double s = 0;
  for (size_t i = from; i < from + n; ++i) s += v[i];
  return s / static_cast<double>(n);
}

TEST(DsaIndexerKl, CopyTaskTrainingLowersTheKl) {
  const int64_t steps = 20;
  TrainResult on = TrainCopy(1.0, steps);
  TrainResult off = TrainCopy(0.0, steps);
  const double on_first = Mean(on.kl, 0, 3), on_last = Mean(on.kl, steps - 3, 3);
  const double off_last = Mean(off.kl, steps - 3, 3);
  std::printf("indexer KL (sum over 2 layers, per counted token): step 0 %.4f; mean of first/last 3: "
              "trained %.4f -> %.4f, frozen %.4f -> %.4f; LM loss trained %.4f -> %.4f, frozen %.4f -> %.4f\n",
              on.kl[0], on_first, on_last, Mean(off.kl, 0, 3), off_last, Mean(on.loss, 0, 3),
              Mean(on.loss, steps - 3, 3), Mean(off.loss, 0, 3), Mean(off.loss, steps - 3, 3));
  EXPECT_EQ(on.kl[0], off.kl[0]);  // same model, same batch before any update
  // Measured: trained 0.656 (step 0) -> 0.411 (last 3), frozen -> 0.755: the trained indexer
  // follows the main attention while it moves; the frozen one drifts away from it.
  EXPECT_LT(on_last, 0.8 * on.kl[0]);
  EXPECT_LT(on_last, 0.7 * off_last);
  for (size_t u = 1; u + 1 < on.units.size(); ++u) {
    const FlatLayout& L = on.units[u].dense;
    EXPECT_GT(MaxAbs(L, on.after[u] - on.before[u], true), 1e-4) << "trained indexer moved";
    EXPECT_EQ(MaxAbs(L, off.after[u] - off.before[u], true), 0.0) << "frozen indexer unchanged";
    EXPECT_GT(MaxAbs(L, off.after[u] - off.before[u], false), 1e-4);
  }
}

TEST(DsaIndexerKl, WeightIsValidatedAndRoundTripsThroughJson) {
  ProxySpec s = MlaSpec(1, 0.25);
  ProbeConfig c;
  ProxySpec back;
  ProbeConfig cback;
  ASSERT_TRUE(ProbeSpecConfigFromJson(ProbeSpecConfigToJson(s, c), &back, &cback).ok());
  EXPECT_EQ(back.indexer_kl_weight, 0.25);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    s.indexer_kl_weight = bad;
    Status st = s.Validate();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("indexer_kl_weight"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace onboard::backends
