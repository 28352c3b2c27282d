// The sm_90a attention forward skeleton that fa3 (kernels/fa3/fa3_kernel.cuh: 16-bit) and fp8
// (kernels/fp8/fp8_sm90_kernel.cuh: E4M3) instantiate, in the roles of FlashAttention-3's hopper/
// and CUTLASS's FMHA: the tile scheduler (tile_scheduler.cuh), the producer (TMA loads through
// the rings of pipeline.cuh), the consumers' mainloop, and the epilogue (epilogue.cuh); the host
// launch step is launch.cuh. fa3_kernel.cuh's top comment tells the schedule.
//
// A kernel brings two types:
//   Traits   shapes and layouts: ForwardShape's numbers (its base); E (the products' element),
//            OutT (O's);
//            SmemLayoutQ/K/V (as TMA writes them), SmemLayoutVB (V as P V's B operand), PFrag (P
//            in registers, P V's A operand); MmaS, MmaO; TmaQ/K/V/O; kBytesQ, kBytesKV;
//            SharedStorage (ForwardStorage), SharedStorageO (with the O buffer), kSmemBytes,
//            kSmemBytesO; gmem_v_blocks(p, bh): V's K/V blocks in global memory, (box, block).
//   Softmax  the consumer's per-kernel arithmetic on one tile, constructed per tile as
//            Softmax(p, tile, cwg, s, o, P) (s, o: the S and O accumulators in mma.m16n8's
//            per-thread order; P: the PFrag; O is already zero):
//              Block          what a step's issue leaves for its softmax and O's rescale
//              first()        block 0's (its Q K^T issued alone)
//              issued(i)      block i's, called right after the products of step i are issued and
//                             before they are waited for (fp8: the descale division and the next
//                             block's amax loads; the no-overlap schedule calls it for every
//                             block, 0 included)
//              block(b)       the scores in s (already masked) -> P in s; m, l and alpha move on
//              rescale_o(b)   O *= alpha (after the P V that wrote O has landed)
//              convert_p()    s -> P's registers (16-bit conversion, or fp8's quantisation)
//              finish(inv_l)  the deferred 1/l per row (times any descale)
//              state          its OnlineSoftmax (m, l: the epilogue's lse)
#pragma once

// clang-format off
#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/detail/helper_macros.hpp>
// clang-format on

#include <cstdint>
#include <type_traits>

#include "kernels/common/fault.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/hopper/epilogue.cuh"
#include "kernels/hopper/pipeline.cuh"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/sm90_common.cuh"
#include "kernels/hopper/tile_scheduler.cuh"

namespace fa::hopper {

using namespace cute;

// The numbers every forward's Traits start from (derive from it): the tile (BR query rows, BC
// keys, head dim D), the K/V ring's stages, BR / 64 consumer warpgroups of 128 threads and one
// producer warpgroup, and setmaxnreg's registers per thread of each.
template <int D_, int BR_, int BC_, int STAGES, int PRODUCER_REGS, int CONSUMER_REGS>
struct ForwardShape {
  static constexpr int D = D_, BR = BR_, BC = BC_;
  static constexpr int kStages = STAGES;
  static constexpr int kConsumerWarpgroups = BR / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = PRODUCER_REGS, kConsumerRegs = CONSUMER_REGS;
  static_assert(BR % 64 == 0 && kConsumerWarpgroups >= 2 && kConsumerWarpgroups <= 3);
  // setmaxnreg: the producer's registers pay for the consumers' (launch bounds give
  // 65536 / kThreads each, rounded down to 8; setmaxnreg.inc would wait forever otherwise).
  static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumerThreads <= 65536);
  static_assert(kConsumerRegs % 8 == 0 && kProducerRegs % 8 == 0);
};

// A forward's shared memory: Q, the K and V rings, their barriers and the dynamic grid's tile
// slots (tile n's index and its successor in slot n % 2: the producer writes tile n's while the
// consumers may still read tile n-1's).
template <typename E, typename LayoutQ, typename LayoutK, typename LayoutV, int kStages>
struct ForwardStorage {
  array_aligned<E, cosize_v<LayoutQ>, 1024> q;
  array_aligned<E, cosize_v<LayoutK>, 1024> k;
  array_aligned<E, cosize_v<LayoutV>, 1024> v;
  PipelineBarriers<kStages> bar;
  int tile_slot[2][2];
};
// The TMA-store kernels' shared memory: O after the rest, so the others keep their layout.
template <typename Main, typename OutE, typename LayoutO>
struct ForwardStorageO {
  Main main;
  array_aligned<OutE, cosize_v<LayoutO>, 1024> o;
};

// The parameters every forward takes (a kernel's Params derive from it and add their own).
template <typename Traits>
struct ForwardParams {
  typename Traits::TmaQ tma_q;
  typename Traits::TmaK tma_k;
  typename Traits::TmaV tma_v;
  void* o;     // Traits::OutT, [B*H][N][D]
  float* lse;  // [B*H][N]
  int N;
  int heads;         // B*H
  int group;         // query heads per K/V head: query head bh reads K/V head bh / group
  float scale_log2;  // softmax scale * log2(e) (times the fault's factor)
  int num_q_blocks;
  int section_heads;            // persistent grids: heads whose K and V share the L2 at a time
  FaultInjection fault;         // read only by the FAULTS instantiations (verification tests)
  typename Traits::TmaO tma_o;  // the TMA-store epilogue's (else unset)
  unsigned* tile_counter;  // dynamic grid: [0] tiles taken past the first wave, [1] blocks done
};

// The producer (one thread): for each tile of the block, Q once, then K_j and V_j for j = n-1 ...
// 0 (last block first: TileList) of its K/V head through the K and V rings. FAULTS: V's block
// may be another (faulty_v_row), the K/V head another (faulty_kv_head).
template <typename Traits, bool FAULTS, Grid GRID, typename Params, typename List, typename Storage>
__device__ __forceinline__ void produce(const Params& p, const List& tiles, Storage& smem) {
  constexpr bool PERSISTENT = GRID != Grid::tiles;
  constexpr int D = Traits::D, BR = Traits::BR, BC = Traits::BC;
  prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
  prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
  prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutV{});
  Tensor mQ = p.tma_q.get_tma_tensor(make_shape(p.N, Int<D>{}, p.heads));
  Tensor mK = p.tma_k.get_tma_tensor(make_shape(p.N, Int<D>{}, p.heads / p.group));
  auto tma_q = p.tma_q.get_slice(_0{});
  auto tma_k = p.tma_k.get_slice(_0{});
  auto tma_v = p.tma_v.get_slice(_0{});
  Tensor tQs = tma_q.partition_D(sQ);
  Tensor tKs = tma_k.partition_D(sK);  // (TMA, m, k, stage)
  Tensor tVs = tma_v.partition_D(sV);
  auto& bar = smem.bar;
  using KV = std::remove_reference_t<decltype(bar.k)>;
  int it = 0;  // K/V blocks loaded so far: the rings' position
  TileScheduler<GRID>::produce(
      tiles, p.tile_counter, smem.tile_slot, [&](const Tile& tl, int n) CUTLASS_LAMBDA_FUNC_INLINE {
        // The K/V head: b H_kv + h / g = bh / g, as H is a multiple of g.
        int kv_bh = tl.bh / p.group;
        if constexpr (FAULTS) kv_bh = faulty_kv_head(p.fault, tl.bh, p.group, p.heads);
        Tensor gQ = local_tile(mQ(_, _, tl.bh), cute::Shape<Int<BR>, Int<D>>{},
                               make_coord(tl.q_block, _0{}));
        Tensor gK =
            local_tile(mK(_, _, kv_bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(_, _0{}));
        Tensor tQg = tma_q.partition_S(gQ);
        Tensor tKg = tma_k.partition_S(gK);  // (TMA, m, k, block)
        Tensor tVg = tma_v.partition_S(Traits::gmem_v_blocks(p, kv_bh));
        // Q's buffer is free once every consumer has issued its last Q K^T of the previous tile
        // (a tile grid's block loads one Q).
        bar.q.template load<PERSISTENT>(n, p.tma_q, Traits::kBytesQ, tQg, tQs, "q");
        for (int i = 0; i < tl.num_kv; ++i, ++it) {
          const int j = tl.num_kv - 1 - i;  // last block first (TileList)
          bar.k.load(it, p.tma_k, Traits::kBytesKV, tKg(_, _, _, j), tKs(_, _, _, KV::stage(it)),
                     "k");
          int v_block = j;
          if constexpr (FAULTS)
            v_block = static_cast<int>(faulty_v_row<BC>(p.fault, j, tiles.total_kv) / BC);
          bar.v.load(it, p.tma_v, Traits::kBytesKV, tVg(_, _, _, v_block),
                     tVs(_, _, _, KV::stage(it)), "v");
        }
      });
}

// The forward's body: the block's barriers, then the producer warpgroup (TMA) and the consumer
// warpgroups (wgmma, Softmax, epilogue). OVERLAP: Q K_i^T issued with P_i-1 V_i-1 (FA3's
// Algorithm 2), else one product at a time; PINGPONG: the consumer warpgroups take turns issuing.
template <typename Traits, typename Softmax, bool CAUSAL, bool FAULTS, bool PINGPONG, bool OVERLAP,
          Grid GRID, Epilogue EPILOGUE, typename Params>
__device__ __forceinline__ void forward(const Params& p) {
  constexpr bool PERSISTENT = GRID != Grid::tiles;  // one thread block per SM walks the tiles
  constexpr bool TMA_STORE = EPILOGUE == Epilogue::tma_store;
  using OutT = typename Traits::OutT;
  constexpr int D = Traits::D, BR = Traits::BR, BC = Traits::BC;
  constexpr int kWG = Traits::kConsumerWarpgroups;
  constexpr int NT = BC / 8, DT = D / 8;  // 8-column tiles of S and O per thread

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  const int warpgroup = threadIdx.x / 128;
  const int N = p.N;
  // The tiles this thread block computes (TileList: its own, or a share of one list, heads in
  // L2-sized sections, longest query blocks first). Blocks are loaded and consumed last first,
  // so the ones that need a mask (N tail, diagonal) lead; the fault build masks every block.
  const TileList<BR, BC, CAUSAL, FAULTS, GRID, Params> tiles(p);

  // Barrier protocol (pipeline.cuh's Ring):
  //   full barriers: 1 arrival (the producer's arrive_and_expect_tx) + the box's bytes;
  //   empty barriers: kConsumerThreads arrivals (every thread of every consumer warpgroup arrives
  //     once per block: K after its Q K^T, V after its P V; Q after the tile's last Q K^T,
  //     persistent grids only);
  //   the i-th K/V block loaded since the launch (it, running on across a persistent block's
  //     tiles) is Ring position it, the block's n-th Q position n; producer and consumers walk
  //     the same tiles and the same [0, num_kv);
  //   ping-pong (PingPong): named barrier w counts 256 = warpgroup w's sync + its predecessor's
  //     arrive; the last warpgroup opens the first turn and skips its very last arrive (the
  //     block's last tile).
  auto& bar = smem.bar;
  using KV = std::remove_reference_t<decltype(bar.k)>;
  if (threadIdx.x == 0) bar.init(Traits::kConsumerThreads);
  __syncthreads();

  // ---------------------------------------------------------------- producer: TMA loads
  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x == 0) produce<Traits, FAULTS, GRID>(p, tiles, smem);
    return;
  }

  // ---------------------------------------------------------------- consumers: wgmma + softmax
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
  const int ct = threadIdx.x - 128;  // consumer thread
  const int cwg = ct / 128;          // consumer warpgroup: query rows [64 cwg, 64 cwg + 64)
  const int lane = ct % 32, t = lane & 3;
  const int row_in_tile = cwg * 64 + (ct % 128) / 32 * 16 + lane / 4;  // rows g; g + 8: +8

  typename Traits::MmaS mma_s;
  typename Traits::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(ct);
  auto thr_o = mma_o.get_thread_slice(ct);
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
  Tensor sVB = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVB{});
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // (MMA, 1, D/k) descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (MMA, 1, D/k, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVB);  // (MMA, 1, BC/k, stage)
  Tensor tSrS = partition_fragment_C(mma_s, cute::Shape<Int<BR>, Int<BC>>{});  // ((2,2,BC/8),1,1)
  Tensor tOrO = partition_fragment_C(mma_o, cute::Shape<Int<BR>, Int<D>>{});   // ((2,2,D/8),1,1)
  typename Traits::PFrag tOrP;  // P as the A operand of P V
  static_assert(decltype(size(tSrS))::value == NT * 4 && decltype(size(tOrO))::value == DT * 4);
  // The accumulators in mma.m16n8's C-fragment order (FragC16x8): element c + 2r of 8-column tile
  // n is row r (g or g+8), column 8n + 2t + c, the order of wgmma's ((2,2,n)) value mode.
  float(&s)[NT][4] = *reinterpret_cast<float(*)[NT][4]>(raw_pointer_cast(tSrS.data()));
  float(&o)[DT][4] = *reinterpret_cast<float(*)[DT][4]>(raw_pointer_cast(tOrO.data()));

  const PingPong<PINGPONG, kWG> turns(cwg);

  int it = 0;  // K/V blocks consumed so far: the rings' position
  // One tile: the n-th this thread block computes; last_tile: its last (the ping-pong turns end).
  // Inlined by force: as a call (the inliner's size limit), S and O went to local memory.
  auto consume_tile = [&](const Tile& tl, int n, bool last_tile) CUTLASS_LAMBDA_FUNC_INLINE {
    const int num_kv = tl.num_kv, num_masked = tl.num_masked;
    const int row_a = tl.q0 + row_in_tile, row_b = row_a + 8;
    auto block_of = [&](int i) { return num_kv - 1 - i; };  // the i-th block loaded
    auto stage = [&](int i) { return KV::stage(it + i); };

#pragma unroll
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    Softmax softmax(p, tl, cwg, s, o, tOrP);
    // Block j's scores -> P: the mask (N tail, causal) on the blocks that need it, then the
    // kernel's softmax.
    auto softmax_block = [&](int j, auto masked, const auto& b) {
      if constexpr (decltype(masked)::value) {
        const KeyMask<CAUSAL, BC, FAULTS> mask{
            static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
            j == p.fault.drop_kv_block};
        mask_keys(s, mask, t);
      }
      softmax.block(b);
    };
    // After the tile's last Q K^T: the producer may load the next tile's Q (persistent grids).
    auto release_k = [&](int i) {
      bar.k.release(it + i);
      if (PERSISTENT && i == num_kv - 1) bar.q.release(n);
    };

    if constexpr (!TileScheduler<GRID>::kDynamic) bar.q.wait_full(n, "q");
    if constexpr (OVERLAP) {
      // i = 0: Q K^T alone.
      bar.k.wait_full(it, "k");
      turns.begin();
      wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(0)), tSrS);
      turns.end(false);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      release_k(0);
      const auto b0 = softmax.first();
      if (num_masked > 0)
        softmax_block(block_of(0), std::true_type{}, b0);
      else
        softmax_block(block_of(0), std::false_type{}, b0);
      softmax.convert_p();
      // i: Q K_i^T and P_i-1 V_i-1 issued together; the softmax of i runs while P V does.
      auto step = [&](int i, auto masked) {
        bar.k.wait_full(it + i, "k");
        bar.v.wait_full(it + i - 1, "v");
        turns.begin();
        wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(i)), tSrS);
        wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(i - 1)), tOrO);
        turns.end(false);
        const auto b = softmax.issued(i);
        warpgroup_wait<1>();  // Q K_i^T done (batches complete in order)
        warpgroup_fence_operand(tSrS);
        release_k(i);
        softmax_block(block_of(i), masked, b);
        warpgroup_wait<0>();  // P_i-1 V_i-1 done: O and the P registers are free
        warpgroup_fence_operand(tOrO);
        bar.v.release(it + i - 1);
        softmax.rescale_o(b);
        softmax.convert_p();
      };
      int i = 1;
      for (; i < num_masked; ++i) step(i, std::true_type{});
      for (; i < num_kv; ++i) step(i, std::false_type{});
      const int last = num_kv - 1;
      bar.v.wait_full(it + last, "v");
      turns.begin();
      wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(last)), tOrO);
      turns.end(last_tile);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      bar.v.release(it + last);
    } else {
      auto step = [&](int i, auto masked) {
        bar.k.wait_full(it + i, "k");
        turns.begin();
        wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(i)), tSrS);
        turns.end(last_tile && i == num_kv - 1);
        const auto b = softmax.issued(i);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tSrS);
        release_k(i);
        softmax_block(block_of(i), masked, b);
        softmax.rescale_o(b);
        softmax.convert_p();
        bar.v.wait_full(it + i, "v");
        wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(i)), tOrO);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        bar.v.release(it + i);
      };
      int i = 0;
      for (; i < num_masked; ++i) step(i, std::true_type{});
      for (; i < num_kv; ++i) step(i, std::false_type{});
    }

    // Epilogue: the deferred 1/l, then O and lse (rows >= N skipped).
    float inv_l[2];
    softmax.finish(inv_l);
    const std::int64_t head_offset = static_cast<std::int64_t>(tl.bh) * N;
    if constexpr (TMA_STORE) {
      // O through shared memory and a TMA store per warpgroup (store_o_tma).
      auto& storage = *reinterpret_cast<typename Traits::SharedStorageO*>(smem_raw);
      store_o_tma<OutT, typename Traits::SmemLayoutO, D, kWG>(
          storage.o.data(), p.tma_o, o, inv_l, row_in_tile - cwg * 64, t, cwg, ct % 128 == 0,
          PERSISTENT && n > 0, N, p.heads, tl.bh, tl.q_block);
      softmax.state.store_lse(p.lse + head_offset, row_a, row_b, N, t);
    } else {
      softmax.state.template store<OutT, D>(static_cast<OutT*>(p.o) + head_offset * D,
                                            p.lse + head_offset, o, inv_l, row_a, row_b, N, t);
    }
    it += num_kv;
  };
  TileScheduler<GRID>::consume(tiles, bar.q, smem.tile_slot, consume_tile);
  // Shared memory must outlive the last store's read of it.
  if constexpr (TMA_STORE) {
    if (ct % 128 == 0) tma_store_wait<0>();
  }
}

}  // namespace fa::hopper
