// The vocabulary of the sm_90a kernels' grids and epilogues (fa3, fp8), host-visible: which thread
// block computes which tile, and how O leaves. kernels/hopper/tile_scheduler.cuh and epilogue.cuh
// hold the device side.
#pragma once

#include <cstddef>

namespace fa::hopper {

// Which thread block computes which tile: one per tile (tiles); one per SM walking a fixed list
// with a stride of the grid (persistent); one per SM taking the next tile of the list from an
// atomic counter (dynamic). The list is the same: heads in L2-sized sections, longest query blocks
// first.
enum class Grid { tiles, persistent, dynamic };
// How O leaves: from registers straight to global memory, or through shared memory and one TMA
// store per consumer warpgroup (issued, not waited for: it overlaps the next tile).
enum class Epilogue { registers, tma_store };

struct Plan {
  Grid grid;
  Epilogue epilogue;
};

// Dynamic shared memory one thread block may have on sm_90 (227 KB).
inline constexpr int kMaxSmemBytes = 227 * 1024;

// The dynamic grid's tile counter in the workspace: [0] tiles taken past the first wave, [1] blocks
// done. Zero before the first launch; every launch leaves it zero again.
inline constexpr std::size_t kTileCounterBytes = 2 * sizeof(unsigned);

}  // namespace fa::hopper
