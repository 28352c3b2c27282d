// How the fp8 launcher (fp8_sm90.cu) reaches its sm_90a kernels (fp8_sm90_kernel.cuh), compiled one
// head dimension per translation unit (fp8_sm90_d64.cu, fp8_sm90_d128.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/problem.hpp"

namespace fa::fp8::sm90 {

// Which grid and epilogue the kernel runs (option fp8_schedule, --fp8-schedule; kFp8Schedules in
// fp8.hpp; the default per shape: fp8_tuning.hpp): tiles (grid over the tiles, O from registers);
// persistent-tma-store and dynamic-tma-store: fa3's persistent grids (static, or fed by an atomic
// tile counter) with the TMA-store epilogue (kernels/hopper/tile_scheduler.cuh, epilogue.cuh).
enum class Schedule { tiles, persistent_tma_store, dynamic_tma_store };

constexpr hopper::Plan plan_of(Schedule s) {
  switch (s) {
    case Schedule::persistent_tma_store:
      return {hopper::Grid::persistent, hopper::Epilogue::tma_store};
    case Schedule::dynamic_tma_store:
      return {hopper::Grid::dynamic, hopper::Epilogue::tma_store};
    default:
      return {hopper::Grid::tiles, hopper::Epilogue::registers};
  }
}

// Whether a kernel of br query rows has a build of grid g: the persistent grids spill with 3
// consumer warpgroups (160 registers) when causal, as fa3's do: not compiled.
constexpr bool grid_built(hopper::Grid g, int br, bool causal) {
  return g == hopper::Grid::tiles || !(causal && br == 192);
}

// Prepares the attention of one forward pass of the (D, BR x BC) kernel on the quantised
// workspace (fp8_quant.hpp) of b: encodes its TMA descriptors, sizes its grid, sets its
// shared-memory attribute, and sets *out to the launch alone; "" or a one-line reason. The
// dynamic grid's tile counter lies at b.workspace + tile_counter_offset(s), zero before the first
// launch (every launch leaves it zero).
template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
std::string prepare_launch(const Shape& s, const DeviceBuffers& b, Schedule schedule,
                           const FaultInjection& fault, hopper::Enqueue* out);

// Where the tile counter lies in the workspace: after the quantisation's (16-byte aligned).
std::size_t tile_counter_offset(const Shape& s);

}  // namespace fa::fp8::sm90
