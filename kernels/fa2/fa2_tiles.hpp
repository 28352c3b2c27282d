// fa2's tuning in one place (as flash-attention's tile_size.h): the compiled tiles of the forward
// and backward kernels, the first of each head dim the default (the fastest measured), and the
// numbers their schedules are built from. --block-q/--block-kv pick any listed tile at run time;
// to make another the default, move its line to the top of its head dim. Pure C++: the registry
// and the IO model read it too.
#pragma once

#include "kernels/common/tile_list.hpp"

namespace fa {

// A forward configuration: the tile (Br x Bc at head dim D) and the query rows per warp WR
// (16: one m16 tile; 32: two, FlashAttention-2's layout, each K/V fragment feeding both), so
// Br / WR warps per thread block. One WR per tile, so the tile names the configuration.
template <int D_, int BR_, int BC_, int WR_>
struct Fa2Shape : TileShape<D_, BR_, BC_> {
  static constexpr int WR = WR_;
};

// The forward tiles. The defaults are FlashAttention-2's own Hopper layout, 4 warps of 32 rows
// per 128 query rows, two blocks per SM: while one block waits at a barrier the other computes
// (an 8-warp block fills an SM alone, and each barrier stalls all of its warps).
using Fa2Tiles = TileList<Fa2Shape<64, 128, 64, 32>,    // d=64 default: Q in registers, no spills
                          Fa2Shape<64, 256, 64, 32>,    // 8 warps x 32 rows, Q in registers
                          Fa2Shape<64, 128, 128, 32>,   // FlashAttention-2's d=64 tile
                          Fa2Shape<64, 64, 64, 16>,     // 4 warps x 16 rows
                          Fa2Shape<128, 128, 64, 32>,   // d=128 default: FlashAttention-2's tile
                          Fa2Shape<128, 256, 32, 32>,   // 8 warps x 32 rows
                          Fa2Shape<128, 64, 64, 16>,    // 4 warps x 16 rows
                          Fa2Shape<128, 128, 32, 16>>;  // 8 warps x 16 rows

// Registers per thread (of 255) that Q's fragments, O and S may take together for Q to stay in
// registers for the whole K/V loop (estimate: fa2_q_in_registers); above it each k-step of
// Q K^T re-reads Q from shared memory, as FlashAttention-2 does at d=128, instead of spilling.
inline constexpr int kFa2QRegisterBudget = 168;

// The backward's main kernel: Br x Bc, Bc/16 warps, each tile compiled with both dq modes.
template <int D>
struct Fa2BwdTiles;
template <>
struct Fa2BwdTiles<64> {
  using type = TileList<TileShape<64, 128, 128>, TileShape<64, 64, 64>, TileShape<64, 64, 128>>;
};
template <>
struct Fa2BwdTiles<128> {
  using type = TileList<TileShape<128, 64, 128>, TileShape<128, 32, 64>, TileShape<128, 32, 128>>;
};

// dq=dq-atomic: the dQ columns a warp sums over the block's keys before sending them to the fp32
// accumulator. 32 without the mask (faster than the whole width and than 16); causal kernels
// take the whole width, as narrower chunks spilled there and ran slower.
inline constexpr int kFa2BwdDqChunk = 32;

// dq=dq-separate: the dQ kernel's tiles (query blocks outer, Br'/16 warps, Q and dO held as A
// fragments), fixed per head dim whatever the main kernel's tiles; the IO model
// (profiler/io_model.cpp) uses them too.
constexpr int fa2_bwd_dq_block_q(int /*d*/) {
  return 64;
}
constexpr int fa2_bwd_dq_block_kv(int d) {
  return d <= 64 ? 64 : 32;
}

}  // namespace fa
