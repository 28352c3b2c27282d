// How the fa3 launcher (fa3.cu) reaches its kernels (fa3_kernel.cuh), which are compiled one tile
// shape per translation unit (fa3_d64.cu, fa3_d64_192.cu, fa3_d128.cu, fa3_d256.cu) and
// instantiated there explicitly.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/fa3/fa3_tiles.hpp"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/problem.hpp"

namespace fa::fa3 {

// Which schedule runs (option kOptionFa3Schedule). full, no-pingpong and no-overlap are FA3's
// ablation (the paper's Table 2) on the default grid and epilogue (default_plan, fa3_tiles.hpp);
// persistent pins the static persistent grid with the register epilogue.
enum class Schedule { full, no_pingpong, no_overlap, persistent };

// The head dim's default schedule (default_schedule, fa3_tiles.hpp).
constexpr Schedule default_schedule_of(int d) {
  return default_pingpong(d) ? Schedule::full : Schedule::no_pingpong;
}

// Where the ablation (every schedule) is compiled: bf16 at d = 64 and 128, the head dims the
// ablation table explains; elsewhere (fp16, d = 256) the head dim's default schedule alone. The
// element type and d=256's wider tile do not change what the ablation shows, and each copy of it
// cost its translation unit 5 to 6 kernels (about 50 CPU-seconds at d=256) in every build.
constexpr bool ablation_built(int d, DType dtype) {
  return dtype == DType::bf16 && d <= 128;
}
constexpr bool schedule_built(Schedule s, int d, DType dtype) {
  return ablation_built(d, dtype) || s == default_schedule_of(d);
}

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

// Whether a (d, br x bc) kernel has a build of grid g: the persistent and dynamic grids spill with
// 3 consumer warpgroups (160 registers) and at Bc = 80 (d=256) when causal: not compiled.
constexpr bool grid_built(Grid g, int br, int bc, bool causal) {
  return g == Grid::tiles || !(causal && (br == 192 || bc == 80));
}

// The plan a schedule runs for a kernel of head dim d, Bc = bc, with `warpgroups` consumer
// warpgroups; o_buffer: its shared memory has room for O (the TMA-store epilogue). The default
// plan falls back where a tile has no build of it: the grid to tiles (grid_built), the epilogue
// to registers (no room for O).
constexpr Plan plan_of(Schedule s, int d, int bc, bool causal, int warpgroups, bool o_buffer) {
  if (s == Schedule::persistent) return {Grid::persistent, Epilogue::registers};
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
