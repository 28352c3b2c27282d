#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {
std::vector<Tiles> fa2_tile_options(int d);  // default first
// Option block_order "heads": consecutive thread blocks walk heads instead of the query blocks of
// one head; o.fault: verification tests only.
std::unique_ptr<Launcher> make_fa2_launcher(const LaunchOptions& o = {});

// The backward pass (kernels/fa2/fa2_bwd.cu): its compiled tiles (Br x Bc, default first), its
// workspace (the fp32 dQ accumulator and D), and one enqueued pass (three kernels, each bracketed
// by the hooks). heads_fastest: option block_order "heads"; fault: verification tests only.
std::vector<Tiles> fa2_backward_tile_options(int d);
std::size_t fa2_backward_workspace_bytes(const Shape& s);
struct Fa2BwdPhaseHooks {
  std::function<void(const char*)> begin;
  std::function<void()> end;
};
std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             StreamHandle stream, bool heads_fastest, const FaultInjection& fault,
                             const Fa2BwdPhaseHooks& phases);
}  // namespace fa
