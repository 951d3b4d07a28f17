// Shared by the real-weights probe's layout tests (probe_weights_layout_test.cpp,
// probe_weights_combos_test.cpp): the short run's options, a launch that must succeed, the worst
// relative difference of two runs (train curve and both held-out losses) and a layout's negative
// control (a fault that must move the frozen held-out loss off the one-rank run's).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_weights.h"
#include "tests/backends/probe_weights_options.h"

namespace onboard::hftest {

// fp32: the layouts differ only in where the adapters' gradients are summed (the world all-reduce)
// and, with micro-batches, in the order they accumulate: rounding-level differences, as the TP
// test's bound.
inline constexpr double kLayoutTol = 1e-5;
// The same bound in fp64: scaled by the ratio of the two machine epsilons (2^-52 / 2^-23).
inline constexpr double kLayoutTolFp64 = kLayoutTol * 0x1p-52 / 0x1p-23;
// The wrong experts / chunk / stage must miss that bound by far.
inline constexpr double kLayoutWrongAtLeast = 1e-3;

inline std::string Write(const Checkpoint& c) { return WriteCheckpoint(c); }

// 8 steps of `batch` windows (2 warm-up), 300 s for the slowest layouts on 2 shared cores.
inline WeightsProbeOptions LayoutOptions(const std::string& ckpt, int64_t ranks, int64_t batch) {
  WeightsProbeOptions o = ProbeWeightsOptions(ckpt, ranks);
  o.steps = 8;
  o.batch = batch;
  o.warmup = 2;
  o.timeout_s = 300;
  return o;
}

inline WeightsProbeResult Launch(const WeightsProbeOptions& o) {
  Expected<WeightsProbeResult> r = RunWeightsProbe(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : WeightsProbeResult{};
}

inline double Rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

// Largest relative difference of the train curves and both held-out losses.
inline double Worst(const WeightsProbeResult& a, const WeightsProbeResult& b) {
  EXPECT_EQ(a.train_loss.size(), b.train_loss.size());
  double w = std::max(Rel(a.held_out_frozen, b.held_out_frozen), Rel(a.held_out_final, b.held_out_final));
  for (size_t i = 0; i < std::min(a.train_loss.size(), b.train_loss.size()); ++i)
    w = std::max(w, Rel(a.train_loss[i], b.train_loss[i]));
  return w;
}

// A layout's negative control: the run with `fault` must move the frozen held-out loss off `one`'s.
inline void ExpectFaultMovesHeldOut(WeightsProbeOptions o, const char* fault, const WeightsProbeResult& one) {
  o.fault = fault;
  o.out_dir = TempDir();
  const WeightsProbeResult wrong = Launch(o);
  std::printf("%s: frozen held-out %.6g vs %.6g\n", fault, wrong.held_out_frozen, one.held_out_frozen);
  EXPECT_GT(Rel(wrong.held_out_frozen, one.held_out_frozen), kLayoutWrongAtLeast);
}

// Largest |x - y| / max|y| over every module's A and B of two PEFT adapters (infinite when their
// modules or target_parameters differ).
inline double AdapterDiff(const PeftLoraAdapter& x, const PeftLoraAdapter& y) {
  EXPECT_EQ(x.modules.size(), y.modules.size());
  EXPECT_EQ(x.target_parameters, y.target_parameters);
  if (x.modules.size() != y.modules.size() || x.target_parameters != y.target_parameters) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < x.modules.size(); ++i) {
    EXPECT_EQ(x.modules[i].module, y.modules[i].module);
    if (x.modules[i].module != y.modules[i].module) return INFINITY;
    for (auto [a, b] : {std::pair{x.modules[i].a, y.modules[i].a}, std::pair{x.modules[i].b, y.modules[i].b}})
      worst = std::max(worst, (a - b).abs().max().item<double>() / b.abs().max().item<double>());
  }
  return worst;
}

// A layout of the real-weights probe: ranks and degrees.
struct ProbeLayout {
  const char* name;
  int64_t ranks, tp, ep, fsdp, pp;
};

// `l` on `ckpt` (8 steps of 8 windows, fp64) against the one-rank run r1 and its PEFT file a1: the
// curve and both held-out losses within kLayoutTolFp64, every A / B of the file within kLayoutTol
// (F32 copies of the fp64 adapters). `family` labels the printed line.
inline WeightsProbeResult ExpectLayoutMatchesOneRank(const std::string& ckpt, const ProbeLayout& l,
                                                     const char* family, const WeightsProbeResult& r1,
                                                     const PeftLoraAdapter& a1) {
  WeightsProbeOptions o = LayoutOptions(ckpt, l.ranks, 8);
  o.fp64 = true;
  o.tp = l.tp;
  o.ep = l.ep;
  o.fsdp = l.fsdp;
  o.pp = l.pp;
  const WeightsProbeResult r = Launch(o);
  Expected<PeftLoraAdapter> a = ReadPeftAdapter(r.adapter_dir);
  EXPECT_TRUE(a.ok()) << l.name << ": " << a.status().message();
  if (!a.ok()) return r;
  const double diff = AdapterDiff(*a, a1);
  std::printf("%s fp64 %s vs 1 rank: worst relative %.3g (curve, held-out), PEFT A/B %.3g\n", family, l.name,
              Worst(r, r1), diff);
  EXPECT_LT(Worst(r, r1), kLayoutTolFp64) << l.name;
  EXPECT_LT(diff, kLayoutTol) << l.name;
  return r;
}

}  // namespace onboard::hftest
