// fa3's tuning numbers in one place: the tiles per head dim, the default tile, schedule, grid and
// epilogue per shape, and the kernel's constants (fa3_kernel.cuh). Each is the measured choice
// (docs/performance.md); changing one is an A/B, not a build option. Host-visible (pure C++): the
// registry plans with the tiles and default schedules below, with or without CuTe.
#pragma once

#include <cstdint>

#include "kernels/hopper/plan.hpp"
#include "kernels/variant.hpp"

namespace fa::fa3 {

// ---- tiles (query rows x keys per K/V block) -------------------------------------------------

// d=64: 192 rows, three consumer warpgroups (FlashAttention-3's and ThunderKittens' d=64 tile):
// faster than 128 rows except causal at small N.
inline constexpr Tiles kTileD64{192, 128};
// d=64 causal at N <= kTileD64SmallMaxN: 128 rows on the dynamic grid beat 192 on the tile grid
// (the 192-row tile has no causal persistent build).
inline constexpr Tiles kTileD64Small{128, 128};
inline constexpr std::int64_t kTileD64SmallMaxN = 2048;
inline constexpr Tiles kTileD128{128, 128};
// d=256: O takes 128 of a consumer thread's 240 registers, so Bc is what is left (S 40, P 20);
// Q and the K/V ring then fill the shared memory (no room for the TMA-store epilogue's O).
inline constexpr Tiles kTileD256{128, 80};

// The default tile where it depends on more than d; {0, 0}: the first tile of the head dim.
inline Tiles shape_default_tiles(const Shape& s) {
  if (s.d == 64 && s.causal && s.N <= kTileD64SmallMaxN) return kTileD64Small;
  return Tiles{};
}

// ---- schedule --------------------------------------------------------------------------------

// The default schedule (option fa3_schedule) per head dim: at d=64 the lazy rescale leaves a
// softmax too short for the warpgroups' ping-pong turns to pay (no-pingpong); full elsewhere.
constexpr bool default_pingpong(std::int64_t d) {
  return d != 64;
}
inline const char* default_schedule(std::int64_t d) {
  return default_pingpong(d) ? "full" : "no-pingpong";
}

// The grid and epilogue of the default schedules (full, no-pingpong, no-overlap and the fault
// build) per (head dim, causal, query rows of the tile): the fastest measured on the H200. Where
// a tile has no build of it, plan_of (fa3_launch.hpp) falls back.
constexpr hopper::Plan default_plan(int d, bool causal, int br) {
  using hopper::Epilogue;
  using hopper::Grid;
  if (d == 64 && !causal) return {Grid::dynamic, Epilogue::tma_store};
  // d=64 causal: 192 rows on the tile grid; the 128-row tile (kTileD64Small) on the dynamic grid.
  if (d == 64) return {br == 128 ? Grid::dynamic : Grid::tiles, Epilogue::tma_store};
  if (d == 128 && !causal) return {Grid::persistent, Epilogue::tma_store};
  if (d == 128) return {Grid::dynamic, Epilogue::tma_store};
  // d=256 (no room for O's buffer: the register epilogue): the dynamic grid; causal on the tile
  // grid, the one its tile builds (grid_built).
  return {causal ? Grid::tiles : Grid::dynamic, Epilogue::registers};
}

// ---- kernel constants (fa3_kernel.cuh) --------------------------------------------------------

// K/V ring stages: two (Q and the ring fill the shared memory at 192 rows and at d=256).
inline constexpr int kStages = 2;
// setmaxnreg: the producer warpgroup gives its registers to the consumers (FlashAttention-3's
// 24/240 with two consumer warpgroups, 32/160 with three); the totals fit the 64K-register file.
constexpr int producer_regs(int consumer_warpgroups) {
  return consumer_warpgroups == 2 ? 24 : 32;
}
constexpr int consumer_regs(int consumer_warpgroups) {
  return consumer_warpgroups == 2 ? 240 : 160;
}
// Lazy rescale (FlashAttention-4's): O is rescaled only when some row max of the warp (log2
// domain) grew by more than this; P <= 2^8 still fits bf16/fp16 P and the fp32 accumulators, and
// the skipped FMULs matter because the softmax is issue-bound. 0 would be the eager update.
inline constexpr int kRescaleThreshold = 8;
static_assert(kRescaleThreshold >= 0 && kRescaleThreshold <= 12, "P <= 2^12 at most");
// Persistent grids: the share of the L2 the K and V of a section's heads may take. Non-causal
// 1/16: the tiles in flight then read the K/V of one to three heads and DRAM falls to the
// compulsory bytes; causal 1/2, where a section's heads interleave so the tiles in flight have
// about the same length.
inline constexpr std::int64_t kL2ShareCausal = 2;
inline constexpr std::int64_t kL2ShareNonCausal = 16;

}  // namespace fa::fa3
