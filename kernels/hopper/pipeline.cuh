// The pipeline of the sm_90a kernels (kernels/hopper/forward.cuh and the kernels built on it):
// rings of shared-memory buffers between the TMA producer and the consumer warpgroups, with
// their mbarriers and the bookkeeping of stage and phase; the forward's rings (Q, K, V); and the
// ping-pong turns between consumer warpgroups. Its includes bring the rest of the schedule's
// pieces: the tile scheduler (tile_scheduler.cuh) and the TMA-store epilogue (epilogue.cuh).
#pragma once

// clang-format off
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
// clang-format on

#include <cstdint>

#include "kernels/hopper/epilogue.cuh"
#include "kernels/hopper/sm90_common.cuh"
#include "kernels/hopper/tile_scheduler.cuh"

namespace fa::hopper {

using namespace cute;

using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// A ring of STAGES shared-memory buffers from the producer to the consumers. Each buffer has a
// full mbarrier (one arrival, the producer's, plus the TMA transaction bytes) and an empty one
// (`consumers` arrivals: every consumer thread arrives once it no longer reads the buffer).
// Buffers are taken in order: the n-th taken since the launch (n runs on across the tiles of a
// persistent block) is stage n % STAGES; the consumers wait for phase (n / STAGES) & 1 of its full
// barrier, the producer for the other parity of its empty one (a fresh barrier's preceding phase
// counts as complete, so the first round passes at once). STAGES = 1: a single buffer (the
// forward's Q; phase n & 1).
template <int STAGES>
struct Ring {
  static constexpr int kStages = STAGES;
  std::uint64_t full[STAGES];
  std::uint64_t empty[STAGES];

  __device__ __forceinline__ static int stage(int n) { return n % STAGES; }
  __device__ __forceinline__ static std::uint32_t phase(int n) {
    return static_cast<std::uint32_t>((n / STAGES) & 1);
  }
  __device__ __forceinline__ static std::uint32_t free_phase(int n) { return phase(n) ^ 1; }

  // By one thread, before the block's __syncthreads (and cutlass::arch::fence_barrier_init).
  __device__ __forceinline__ void init(int consumers) {
    for (int s = 0; s < STAGES; ++s) {
      FullBarrier::init(&full[s], 1);
      EmptyBarrier::init(&empty[s], consumers);
    }
  }

  // Consumer: waits until buffer n has landed; releases it once no longer read.
  __device__ __forceinline__ void wait_full(int n, const char* name) const {
    wait_barrier(&full[stage(n)], phase(n), name, "full", stage(n));
  }
  __device__ __forceinline__ void release(int n) { EmptyBarrier::arrive(&empty[stage(n)]); }

  // Producer (one thread): waits until stage(n) is free (WAIT_FREE false: the caller knows it
  // is, its first use) and announces `bytes` on its full barrier, which it returns: every copy
  // into the buffer completes on it (TMA: tma.with(barrier); bulk copies: &barrier), `bytes` in
  // all.
  template <bool WAIT_FREE = true>
  __device__ __forceinline__ std::uint64_t& acquire(int n, std::uint32_t bytes, const char* name) {
    const int s = stage(n);
    if constexpr (WAIT_FREE) wait_barrier(&empty[s], free_phase(n), name, "empty", s);
    FullBarrier::arrive_and_expect_tx(&full[s], bytes);
    return full[s];
  }
  // The TMA-load step: acquire, then one TMA copy of src into dst (stage(n)'s buffer) that
  // delivers `bytes`.
  template <bool WAIT_FREE = true, typename Tma, typename Src, typename Dst>
  __device__ __forceinline__ void load(int n, const Tma& tma, std::uint32_t bytes, const Src& src,
                                       Dst&& dst, const char* name) {
    copy(tma.with(acquire<WAIT_FREE>(n, bytes, name)), src, dst);
  }
};

// The forward's rings: Q's single buffer (its empty barrier is waited on only by the persistent
// grids, where the next tile's Q reuses the buffer) and kStages K and V buffers. K and V have
// their own barriers, so K_j+1 can land while V_j is still being read.
template <int kStages>
struct PipelineBarriers {
  Ring<1> q;
  Ring<kStages> k, v;

  // By one thread, before the block's __syncthreads.
  __device__ __forceinline__ void init(int consumer_threads) {
    q.init(consumer_threads);
    k.init(consumer_threads);
    v.init(consumer_threads);
    cutlass::arch::fence_barrier_init();
  }
};

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

}  // namespace fa::hopper
