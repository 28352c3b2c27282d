// The sm_90a forward's TMA-store epilogue (kernels/hopper/forward.cuh): O's shared-memory buffer,
// its TMA store descriptor, and the store of one consumer warpgroup's rows.
#pragma once

// clang-format off
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
// clang-format on

#include <cstdint>

#include "kernels/common/mma_sm80.cuh"
#include "kernels/hopper/sm90_common.cuh"

namespace fa::hopper {

using namespace cute;

// Named barriers (cutlass numbers them after its reserved ones): the ping-pong turns use 0 .. W-1,
// the TMA-store epilogue of consumer warpgroup w uses kEpilogueBarrier + w.
inline constexpr int kEpilogueBarrier = 3;

// O's buffer: one 64 x D slice of OutE per consumer warpgroup (each stores its own rows, so no
// warpgroup waits for another), 128-byte swizzled; one TMA store of 64 x D each, into O as (rows
// N, D, batch*heads).
template <typename OutE, int D, int kWG>
struct OBuffer {
  using SmemLayout = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<OutE>{},
                                            cute::Shape<_64, Int<D>, Int<kWG>>{}));
  static auto tma(void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_STORE{}, gmem_rows<D>(static_cast<OutE*>(p), N, heads),
                         take<0, 2>(SmemLayout{}), cute::Shape<_64, Int<D>>{}, _1{});
  }
  using Tma = decltype(tma(nullptr, 1, 1));
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
