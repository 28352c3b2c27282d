// How the fa3 launcher (fa3.cu) reaches its kernels (fa3_kernel.cuh), which are compiled one tile
// shape per translation unit (fa3_d64.cu, fa3_d64_192.cu, fa3_d128.cu, fa3_d128_176.cu,
// fa3_d256.cu) and instantiated there explicitly.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/problem.hpp"

// CMake's FA_FA3_ALTERNATIVES: whether the pinned alternatives are compiled (bf16 only).
#ifndef FA3_ALTERNATIVES
#define FA3_ALTERNATIVES 1
#endif

namespace fa::fa3 {

inline constexpr bool kAlternativesBuilt = FA3_ALTERNATIVES != 0;

// Which schedule runs (option kOptionFa3Schedule). full, no-pingpong and no-overlap are FA3's
// ablation (the paper's Table 2) on the default grid and epilogue below; the others pin the grid
// and the epilogue, so that one run measures each against the default (scripts/fa3_tune.sh).
enum class Schedule {
  full,
  no_pingpong,
  no_overlap,
  persistent,            // static persistent grid, register epilogue
  tma_store,             // grid over the tiles, TMA-store epilogue
  persistent_tma_store,  // static persistent grid, TMA-store epilogue
  dynamic,               // dynamic persistent grid (atomic tile counter), register epilogue
  dynamic_tma_store,     // dynamic persistent grid, TMA-store epilogue
};

using hopper::Epilogue;
using hopper::Grid;
using hopper::kMaxSmemBytes;
using hopper::kTileCounterBytes;
using hopper::Plan;

// Whether a (d, br x bc) kernel has room for the TMA-store epilogue's O buffer (br x d) beside Q
// and the two-stage K/V ring, at 16-bit elements (each buffer 1024-byte aligned; the barriers take
// less than 1 KB). fa3_kernel.cuh checks it against the real shared-storage size.
constexpr bool o_buffer_fits(int d, int br, int bc) {
  return 2 * (2 * br * d + 2 * 2 * bc * d) + 1024 <= kMaxSmemBytes;
}

// THE DEFAULTS: what `full` (and no-pingpong, no-overlap and the fault-injection build) runs, per
// (head dim, causal, query rows of the tile); one line each. Set them from scripts/fa3_tune.sh's
// "winner" lines (docs/perf-notes.md, "Fourth step"). Where a tile has no such build, plan_of
// falls back (below).
constexpr Plan default_plan(int d, bool causal, int br) {
  if (d == 64 && !causal) return {Grid::dynamic, Epilogue::tma_store};  // 0.915x, 192x128
  // d=64 causal: 192 rows on the tile grid (0.827x at N=4096); the 128-row tile (the default at
  // N <= 2048: fa3_shape_default_tiles, fa3.cu) on the dynamic grid (0.88x at N=1024).
  if (d == 64 && causal) return {br == 128 ? Grid::dynamic : Grid::tiles, Epilogue::tma_store};
  if (d == 128 && !causal) return {Grid::persistent, Epilogue::tma_store};  // 0.972x, 128x128
  if (d == 128) return {Grid::dynamic, Epilogue::tma_store};  // causal: 0.971x, 128x128
  // d=256 (128x80; no room for O's buffer: the register epilogue): the dynamic grid as d=128
  // causal (the static persistent one ran 0.98-1.00x of it, H100, docs/perf-notes.md "Eleventh
  // step"); causal on the tile grid, the one it builds (grid_built).
  return {causal ? Grid::tiles : Grid::dynamic, Epilogue::registers};
}

// The schedules that run the default plan (the ablation rows with it).
constexpr bool runs_default(Schedule s) {
  return s == Schedule::full || s == Schedule::no_pingpong || s == Schedule::no_overlap;
}

// Whether a (d, br x bc) kernel has a build of grid g (nvcc 13.0, -Xptxas -v, SASS): the
// persistent and dynamic grids spill with 3 consumer warpgroups (160 registers) when causal (96
// bytes), at Bc = 176 when causal (persistent: 96 bytes of stack) or dynamic (120 bytes), and at
// Bc = 80 (d=256) when causal (persistent 8 bytes, dynamic 16): those are not compiled.
constexpr bool grid_built(Grid g, int br, int bc, bool causal) {
  if (g == Grid::tiles) return true;
  if (causal && (br == 192 || bc == 80)) return false;
  return bc <= 128 || (!causal && g != Grid::dynamic);
}

// The plan a schedule runs for a kernel of head dim d, Bc = bc, with `warpgroups` consumer
// warpgroups; o_buffer: its shared memory has room for O (the TMA-store epilogue). The default
// plan falls back where a tile has no build of it: the grid to tiles (grid_built), the epilogue
// to registers (no room for O).
constexpr Plan plan_of(Schedule s, int d, int bc, bool causal, int warpgroups, bool o_buffer) {
  switch (s) {
    case Schedule::persistent:
      return {Grid::persistent, Epilogue::registers};
    case Schedule::tma_store:
      return {Grid::tiles, Epilogue::tma_store};
    case Schedule::persistent_tma_store:
      return {Grid::persistent, Epilogue::tma_store};
    case Schedule::dynamic:
      return {Grid::dynamic, Epilogue::registers};
    case Schedule::dynamic_tma_store:
      return {Grid::dynamic, Epilogue::tma_store};
    default:
      break;
  }
  Plan p = default_plan(d, causal, 64 * warpgroups);
  if (!grid_built(p.grid, 64 * warpgroups, bc, causal)) p.grid = Grid::tiles;
  if (!o_buffer) p.epilogue = Epilogue::registers;
  return p;
}

// Prepares one forward pass of the (D, BR x BC) kernel on b: encodes its TMA descriptors, sizes
// its grid, sets its shared-memory attribute, and sets *out to the launch alone (no host work but
// the launch); "" or a one-line reason. workspace: the dynamic grid's tile counter
// (kTileCounterBytes), zero before the first launch; every launch leaves it zero again.
template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
std::string prepare_launch(const Shape& s, const DeviceBuffers& b, Schedule schedule,
                           const FaultInjection& fault, hopper::Enqueue* out);

}  // namespace fa::fa3
