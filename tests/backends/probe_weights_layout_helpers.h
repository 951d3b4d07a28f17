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

}  // namespace onboard::hftest
