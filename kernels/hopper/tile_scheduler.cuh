// Which tiles a thread block of an sm_90a kernel computes, and in which order: the grid over the
// tiles, the persistent grid (a static share of one list) and the dynamic grid (the list's next
// untaken tile, from an atomic counter); the producer's and the consumers' walks over them
// (TileScheduler, over any list with size/first/stride/at); and the forward's list of query
// blocks (TileList).
#pragma once

// clang-format off
#include <cute/tensor.hpp>
// clang-format on

#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/sm90_common.cuh"

namespace fa::hopper {

// One tile: a query block of one batch*head, and its K/V blocks.
struct Tile {
  int q_block, bh, q0, num_kv;
  int num_masked;  // blocks that need a mask: the first ones in the loading order (below)
};

// The tiles a thread block computes: its own (grid over tiles), or, persistent, every gridDim.x-th
// of one list. The list walks the heads in sections of section_heads (their K and V fit in a share
// of the L2, set by the launcher: persistent_shape) and, inside a section, the query blocks longest
// first (causal), the section's heads interleaved: the tiles in flight at once have about the same
// length and read the K and V of a few heads. (Head after head, with the causal blocks of each
// head longest first, the short tiles ran ahead into later heads and DRAM read several times the
// compulsory bytes.)
// Dynamic: the same list, but a block's next tile is the list's next untaken one (an atomic
// counter; the first wave takes tiles 0 .. gridDim.x-1), so a block that drew short tiles takes
// more of them and no SM idles while tiles are left.
// Params: the kernel's parameters (N, heads, num_q_blocks, section_heads), read where used, as
// the __grid_constant__ parameter space (held in registers, they changed fa3's register
// allocation).
template <int BR, int BC, bool CAUSAL, bool FAULTS, Grid GRID, typename Params>
struct TileList {
  // One thread block per SM walks the list (statically, or taking each next tile from a counter).
  static constexpr bool kPersistent = GRID != Grid::tiles;

  const Params& p;
  int N;
  int total_kv;  // K/V blocks of a whole head
  // The persistent walk, read once before the producer and consumer branches part (each reading
  // them again shifted fa3's register allocation and instruction order).
  int num_tiles, first_index, index_stride;

  __device__ __forceinline__ explicit TileList(const Params& p_)
      : p(p_),
        N(p_.N),
        total_kv((p_.N + BC - 1) / BC),
        num_tiles(kPersistent ? p_.num_q_blocks * p_.heads : 1),
        first_index(kPersistent ? static_cast<int>(blockIdx.x) : 0),
        index_stride(kPersistent ? static_cast<int>(gridDim.x) : 1) {}

  __device__ __forceinline__ int size() const { return kPersistent ? num_tiles : 1; }
  __device__ __forceinline__ int first() const { return kPersistent ? first_index : 0; }
  __device__ __forceinline__ int stride() const { return kPersistent ? index_stride : 1; }

  __device__ __forceinline__ Tile at(int index) const {
    Tile tl;
    int q_index = static_cast<int>(blockIdx.x);
    tl.bh = static_cast<int>(blockIdx.y);
    if constexpr (kPersistent) {
      const int section_tiles = p.section_heads * p.num_q_blocks;
      const int section = index / section_tiles, k = index % section_tiles;
      const int heads_here = min(p.section_heads, p.heads - section * p.section_heads);
      q_index = k / heads_here;
      tl.bh = section * p.section_heads + k % heads_here;
    }
    tl.q_block = CAUSAL ? p.num_q_blocks - 1 - q_index : q_index;
    tl.q0 = tl.q_block * BR;
    tl.num_kv = total_kv;
    if constexpr (CAUSAL) tl.num_kv = min(total_kv, (min(tl.q0 + BR, N) - 1) / BC + 1);
    // K/V blocks are loaded and consumed last first (j = num_kv-1 ... 0), so the blocks that
    // need a mask (the N tail, the causal diagonal: every block whose last key is past the tile's
    // first row) lead, and the rest run a loop with no mask code. With the mask checked inside
    // one loop, nvcc hoisted the 64 per-score comparisons of every block ahead of its wgmma issue
    // (hundreds of integer instructions per block); causal ran as long as non-causal. The fault
    // build masks every block (the knobs move the edges).
    int first_masked = CAUSAL ? (tl.q0 + 1) / BC : total_kv;
    if (N % BC != 0) first_masked = min(first_masked, total_kv - 1);
    tl.num_masked = FAULTS ? tl.num_kv : tl.num_kv - min(first_masked, tl.num_kv);
    return tl;
  }
};

// Dynamic grid, producer: takes the tile after this one from the counter and writes this tile's
// index and its successor into slot n % 2, released to the consumers with the tile's first full
// barrier. Into the slot at once, and read back at the end of the tile: no register carries it
// through the tile's loads (the producer has 24; carried, they spilled). The slot is free: its
// last reader, tile n-2's consumers, released that tile's first buffer before the previous
// tile's wait for it returned.
__device__ __forceinline__ int take_next_tile(unsigned* counter, int (&slot)[2][2], int n,
                                              int index) {
  const int next = static_cast<int>(gridDim.x) + static_cast<int>(atomicAdd(counter, 1u));
  slot[n & 1][0] = index;
  slot[n & 1][1] = next;
  asm volatile("" ::: "memory");  // the stores stay before the arrive (no clobber there)
  return next;
}

// Dynamic grid, producer, after its last tile: the last block to get here resets the counter for
// the next launch (every block's last atomicAdd on [0] is ordered before its arrival on [1]).
__device__ __forceinline__ void release_tile_counter(unsigned* counter) {
  __threadfence();
  if (atomicAdd(counter + 1, 1u) == gridDim.x - 1) {
    __threadfence();
    atomicExch(counter, 0u);
    atomicExch(counter + 1, 0u);
  }
}

// The walks of one thread block over its tiles, for a list with size(), first(), stride() and
// at(index) (TileList, or a backward's list of K/V blocks). The producer's tile n and the
// consumers' tile n are the same tile.
// Dynamic grid: the producer takes each next tile from `counter` one tile ahead (so the consumers
// know whether a tile is their last: the ping-pong turns end with it, and the producer never
// waits on the counter) and hands index and successor to the consumers in shared memory (`slot`),
// released with the tile's first buffer: `announce`, a Ring<1> whose n-th buffer belongs to tile
// n (the forward's Q), whose full barrier the consumers wait on here.
template <Grid GRID>
struct TileScheduler {
  static constexpr bool kPersistent = GRID != Grid::tiles;
  static constexpr bool kDynamic = GRID == Grid::dynamic;

  // Producer: body(tile, n) for the block's n-th tile.
  template <typename List, typename Body>
  __device__ __forceinline__ static void produce(const List& tiles, unsigned* counter,
                                                 int (&slot)[2][2], Body&& body) {
    const int num_tiles = tiles.size();
    for (int index = tiles.first(), n = 0; index < num_tiles; ++n) {
      int next = index + tiles.stride();
      // Dynamic: into slot n % 2, read by the consumers after the announcing barrier (the
      // arrive in body releases the store), and read back here at the end of the tile.
      if constexpr (kDynamic) next = take_next_tile(counter, slot, n, index);
      body(tiles.at(index), n);
      if constexpr (kDynamic) next = slot[n & 1][1];
      index = next;
    }
    if constexpr (kDynamic) release_tile_counter(counter);
  }

  // Consumers: body(tile, n, last) for the block's n-th tile; last: its last one. Dynamic: the
  // tile's `announce` buffer has been waited for (body must not wait again).
  template <typename List, typename Announce, typename Body>
  __device__ __forceinline__ static void consume(const List& tiles, const Announce& announce,
                                                 const int (&slot)[2][2], Body&& body) {
    if constexpr (!kPersistent) {
      // One tile, no loop: inside a loop nvcc kept more live across the masked blocks (P2R of the
      // mask's predicates: more instructions in fp8's causal kernel).
      body(tiles.at(0), 0, true);
    } else {
      const int num_tiles = tiles.size();
      for (int index = tiles.first(), n = 0; kDynamic || index < num_tiles; ++n) {
        int next = index + tiles.stride();
        if constexpr (kDynamic) {
          // The tile comes with its first buffer: the producer wrote its index before that
          // buffer's barrier.
          announce.wait_full(n, "announce");
          asm volatile("" ::: "memory");  // the loads stay after the wait (no clobber there)
          index = slot[n & 1][0];
          next = slot[n & 1][1];
        }
        const bool last = next >= num_tiles;
        body(tiles.at(index), n, last);
        index = next;
        if (kDynamic && last) break;
      }
    }
  }
};

}  // namespace fa::hopper
