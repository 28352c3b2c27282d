#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/fa2/fa2_tiles.hpp"  // fa2_bwd_dq_block_q/_kv: the IO model reads them
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
std::size_t fa2_backward_workspace_bytes(const Shape& s);  // dq=dq-atomic
// dq_separate: D only (no fp32 accumulator).
std::size_t fa2_backward_workspace_bytes(const Shape& s, bool dq_separate);
struct Fa2BwdPhaseHooks {
  std::function<void(const char*)> begin;
  std::function<void()> end;
};
// dq=dq-atomic (the fp32 accumulator, atomics at the L2).
std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             StreamHandle stream, bool heads_fastest, const FaultInjection& fault,
                             const Fa2BwdPhaseHooks& phases);
struct Fa2BwdOptions {
  bool heads_fastest = false;  // option block_order "heads"
  bool dq_separate = false;    // option dq "dq-separate": a second kernel, query blocks outer
};
std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             StreamHandle stream, const Fa2BwdOptions& o,
                             const FaultInjection& fault, const Fa2BwdPhaseHooks& phases);
// fa2's launcher with the backward's options (option dq); the registry makes fa2 with this one.
std::unique_ptr<Launcher> make_fa2_launcher_with_backward(const LaunchOptions& o);
}  // namespace fa
