// The probe benches' default proxy (bench_probe, bench_probe_memory, bench_probe_saved_tensors):
// ProxySpec's default sizes with 4 layers, KDA/MLP, KDA/MoE, KDA/MoE, MLA+DSA/MoE ("K K K M |
// dense,moe,moe,moe"), so that the three benches measure one model.
#pragma once

#include "backends/probe.h"

namespace onboard::bench {

inline ProxySpec DefaultProxy() {
  ProxySpec spec;
  spec.source_model = "default-proxy";
  spec.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense},
                 {ProxyMixer::kKDA, ProxyChannel::kMoE},
                 {ProxyMixer::kKDA, ProxyChannel::kMoE},
                 {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  return spec;
}

}  // namespace onboard::bench
