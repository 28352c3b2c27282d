// The schedule pieces the sm_90a forward kernels share (fa3: kernels/fa3/fa3_kernel.cuh, fp8:
// kernels/fp8/fp8_sm90_kernel.cuh): the pipeline's mbarriers, the list of tiles a thread block
// walks (grid over the tiles, persistent or dynamic), the dynamic grid's tile counter, the
// ping-pong turns between consumer warpgroups, and the TMA-store epilogue. Each kernel keeps its
// own products, softmax and loads; fa3_kernel.cuh's top comment tells the schedule these serve.
#pragma once

// clang-format off
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
// clang-format on

#include <cstdint>

#include "kernels/common/mma_sm80.cuh"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/sm90_common.cuh"

namespace fa::hopper {

using namespace cute;

using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// Named barriers (cutlass numbers them after its reserved ones): the ping-pong turns use 0 .. W-1,
// the TMA-store epilogue of consumer warpgroup w uses kEpilogueBarrier + w.
inline constexpr int kEpilogueBarrier = 3;

// The mbarriers of a thread block's pipeline: Q's buffer and a ring of kStages K and V buffers,
// each with a full barrier (one arrival, the producer's, plus the TMA transaction bytes) and an
// empty one (every consumer thread arrives once it no longer reads the buffer). K and V have their
// own, so K_j+1 can land while V_j is still being read. Q's empty barrier is waited on only by the
// persistent grids (the next tile's Q reuses the buffer).
template <int kStages>
struct PipelineBarriers {
  std::uint64_t q_full, q_empty;
  std::uint64_t k_full[kStages], v_full[kStages];
  std::uint64_t k_empty[kStages], v_empty[kStages];

  // By one thread, before the block's __syncthreads.
  __device__ __forceinline__ void init(int consumer_threads) {
    FullBarrier::init(&q_full, 1);
    EmptyBarrier::init(&q_empty, consumer_threads);
    for (int s = 0; s < kStages; ++s) {
      FullBarrier::init(&k_full[s], 1);
      FullBarrier::init(&v_full[s], 1);
      EmptyBarrier::init(&k_empty[s], consumer_threads);
      EmptyBarrier::init(&v_empty[s], consumer_threads);
    }
    cutlass::arch::fence_barrier_init();
  }
};

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

  __device__ __forceinline__ explicit TileList(const Params& p_)
      : p(p_), N(p_.N), total_kv((p_.N + BC - 1) / BC) {}

  __device__ __forceinline__ int size() const { return kPersistent ? p.num_q_blocks * p.heads : 1; }
  __device__ __forceinline__ int first() const {
    return kPersistent ? static_cast<int>(blockIdx.x) : 0;
  }
  __device__ __forceinline__ int stride() const {
    return kPersistent ? static_cast<int>(gridDim.x) : 1;
  }

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
// index and its successor into slot n % 2, released to the consumers with Q's full barrier. Into
// the slot at once, and read back at the end of the tile: no register carries it through the K/V
// loop (the producer has 24; carried, they spilled). The slot is free: its last reader, tile
// n-2's consumers, released that Q before the previous tile's q_empty wait returned.
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

// Ping-pong between kWG consumer warpgroups (ON): warpgroup w issues its products only after
// warpgroup w-1 (cyclically) issued its own; named barrier w counts w's 128 threads (sync) and its
// predecessor's 128 (arrive). The last warpgroup opens the first turn and skips its very last
// arrive, so no barrier is left half-arrived when the block exits. Turns run on across the tiles
// of a persistent block. Off: every warpgroup issues when ready.
template <bool ON, int kWG>
struct PingPong {
  int cwg;  // this thread's consumer warpgroup

  __device__ __forceinline__ explicit PingPong(int cwg_) : cwg(cwg_) {
    if constexpr (ON) {
      if (cwg == kWG - 1) cutlass::arch::NamedBarrier::arrive(256, 0);
    }
  }
  __device__ __forceinline__ void begin() const {
    if constexpr (ON) cutlass::arch::NamedBarrier::sync(256, cwg);
  }
  __device__ __forceinline__ void end(bool last) const {
    if constexpr (ON) {
      if (!(last && cwg == kWG - 1)) cutlass::arch::NamedBarrier::arrive(256, (cwg + 1) % kWG);
    }
  }
};

// The TMA-store epilogue of one consumer warpgroup: its 64 rows of O (o * inv_l per row) into its
// own swizzled slice of the O buffer (o_smem, laid out as SmemLayoutO: (64, D, warpgroups)), then
// one TMA store of 64 x D to rows [64 (kWG q_block + cwg), +64) of head bh of O (rows >= N are
// clipped by TMA), issued by the warpgroup's first thread and not waited for: it drains while the
// next tile's products run. Before the slice is written again (wait: a persistent block's later
// tile) that thread waits until the previous store has read it. r: the thread's first row in the
// slice (g; g + 8 is its second).
template <typename T, typename SmemLayoutO, int D, int kWG, int DT, typename OutE, typename TmaO>
__device__ __forceinline__ void store_o_tma(OutE* o_smem, const TmaO& tma_o,
                                            const float (&o)[DT][4], const float (&inv_l)[2], int r,
                                            int t, int cwg, bool issuer, bool wait, int N,
                                            int heads, int bh, int q_block) {
  Tensor sO = make_tensor(make_smem_ptr(o_smem), SmemLayoutO{});
  Tensor sOw = sO(_, _, cwg);  // (64, D)
  if (wait) {
    if (issuer) tma_store_wait<0>();
    cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + cwg);
  }
  // The row laundered through an empty asm volatile: every swizzled address below depends on it,
  // so nvcc cannot hoist them out of a persistent tile loop and keep 2 D/8 addresses live through
  // the main loop (fa3's 192-row persistent kernels spilled so).
  asm volatile("" : "+r"(r));
#pragma unroll
  for (int i = 0; i < DT; ++i) {
    const int col = i * 8 + 2 * t;
    *reinterpret_cast<std::uint32_t*>(&sOw(r, col)) =
        sm80::pack2<T>(o[i][0] * inv_l[0], o[i][1] * inv_l[0]);
    *reinterpret_cast<std::uint32_t*>(&sOw(r + 8, col)) =
        sm80::pack2<T>(o[i][2] * inv_l[1], o[i][3] * inv_l[1]);
  }
  cutlass::arch::fence_view_async_shared();  // the writes, visible to the TMA unit
  cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + cwg);
  if (issuer) {
    Tensor mO = tma_o.get_tma_tensor(make_shape(N, Int<D>{}, heads));
    Tensor gO =
        local_tile(mO(_, _, bh), cute::Shape<_64, Int<D>>{}, make_coord(q_block * kWG + cwg, _0{}));
    auto slice = tma_o.get_slice(_0{});
    Tensor tOs = slice.partition_S(sO);  // (TMA, m, k, warpgroup)
    copy(tma_o, tOs(_, _, _, cwg), slice.partition_D(gO));
    tma_store_arrive();
  }
}

}  // namespace fa::hopper
