// fp8 on sm_90a: FP8 (E4M3) attention forward with both products on FP8 warpgroup MMA, on fa3's
// skeleton (kernels/fa3/fa3_kernel.cuh: read its top comment first). Inputs: the quantisation
// pass's Q8, K8 (rotated, row-major) and V8 ([d][Npad], keys permuted) with their amax per scale
// block (kernels/fp8/fp8_quant.hpp); output bf16 O and the fp32 lse.
//
// Schedule (one thread block per (query block of Br = 64 W rows, batch*head); W = 2 consumer
// warpgroups at d = 128 (Br 128), 3 at d = 64 (Br 192), one producer warpgroup):
//   producer  setmaxnreg 24 (32 with W = 3); one thread issues TMA: Q8 once, then K8_j and V8_j
//             for j = n-1 ... 0 (masked blocks first) through a 2-stage ring with full/empty
//             mbarriers, K and V with their own barriers. V8_j is the (d x Bc) box at column
//             j Bc of V8 [d][Npad]: already K-major (keys contiguous), which is the only B layout
//             8-bit wgmma reads, so the producer does no transpose (the quantise pass did it).
//   consumers setmaxnreg 240 (160 with W = 3); warpgroup w owns query rows [64 (w-1), 64 w):
//               S = Q8 K8_j^T   wgmma m64nBck32 e4m3 x e4m3 -> f32, both from shared memory (SS)
//               softmax         scale descale_q descale_k(j) softmax_scale log2(e) folded into the
//                               exp2 FFMA, with -8 in the exponent: P' = 256 P in [0, 256];
//                               l sums P' (divided by 256 at the end, exactly)
//               P8 = e4m3(P')   in registers, four scores per register in the order of
//                               fp8_layout.hpp (no shuffles: V8's keys are permuted to match)
//               O += P8 V8_j    wgmma m64nDk32 e4m3, A = P8 from registers (RS), B = V8_j
//             O is kept in units of the current V block's descale: the rescale after P V_j-1
//             multiplies alpha by descale_v(j-1) / descale_v(j); the epilogue multiplies by the
//             last block's descale_v and 1/l, and stores O (bf16) and lse from registers.
//   overlap   as fa3 (Algorithm 2): Q K_j+1^T issued with P_j V_j, softmax of j+1 meanwhile.
//   ping-pong as fa3: the consumer warpgroups take turns issuing their products (named barriers).
//   grid      (schedule tiles) (ceil(N/Br), B*H), one tile per thread block, causal longest
//             query blocks first; or (persistent-tma-store, dynamic-tma-store) fa3's
//             persistent grids: one thread block per SM walks hopper::TileList (heads in L2-sized
//             sections, longest query blocks first), statically or from an atomic tile counter,
//             the K/V ring and the ping-pong turns running on across tiles, and O leaves through
//             shared memory and a TMA store that drains while the next tile runs
//             (kernels/hopper/pipeline.cuh). Which schedule: option fp8_schedule (fp8_sm90.cu;
//             the default per shape and the other tuning numbers: fp8_tuning.hpp).
#pragma once

// clang-format off
#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
// clang-format on

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <climits>
#include <string>
#include <type_traits>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/online_softmax.cuh"
#include "kernels/fp8/e4m3.cuh"
#include "kernels/fp8/fp8_layout.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/fp8/fp8_sm90_launch.hpp"
#include "kernels/fp8/fp8_tuning.hpp"
#include "kernels/hopper/persistent_grid.hpp"
#include "kernels/hopper/pipeline.cuh"
#include "kernels/hopper/sm90_common.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/fp8: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::fp8::sm90 {

using namespace cute;
using hopper::EmptyBarrier;
using hopper::Epilogue;
using hopper::FullBarrier;
using hopper::Grid;
using hopper::smem_attribute_once;
using hopper::wait_barrier;
using hopper::wgmma_issue;

// The A operand of 8-bit wgmma from registers (CuTe's GMMA::ALayout_64x32: (thread, value) ->
// row + 64 col) is the layout fp8_layout.hpp assumes: thread (warp w, lane 4g + t), value
// (v0, v1, v2) holds row 16 w + g + 8 v1, column 16 v2 + 4 t + v0.
constexpr bool a_layout_is_assumed() {
  using AL = GMMA::ALayout_64x32;
  for (int thr = 0; thr < 128; ++thr) {
    for (int v = 0; v < 16; ++v) {
      const int lane = thr % 32, w = thr / 32, g = lane / 4, t = lane % 4;
      const int v0 = v % 4, v1 = (v / 4) % 2, v2 = v / 8;
      const int row = 16 * w + g + 8 * v1, col = 16 * v2 + 4 * t + v0;
      if (static_cast<int>(AL{}(thr, v)) != row + 64 * col) return false;
    }
  }
  return true;
}
static_assert(a_layout_is_assumed(), "wgmma's 8-bit A fragment differs from fp8_layout.hpp");

// The S accumulator (CuTe's GMMA::CLayout_64x8 per 8 columns): thread (w, 4g + t), value
// (c, r) holds row 16 w + g + 8 r, column 2 t + c: mma.m16n8's order (FragC16x8), which
// fp8_layout.hpp and online_softmax.cuh assume.
constexpr bool c_layout_is_assumed() {
  using CL = GMMA::CLayout_64x8;
  for (int thr = 0; thr < 128; ++thr) {
    for (int v = 0; v < 4; ++v) {
      const int lane = thr % 32, w = thr / 32, g = lane / 4, t = lane % 4;
      const int row = 16 * w + g + 8 * (v / 2), col = 2 * t + v % 2;
      if (static_cast<int>(CL{}(thr, v)) != row + 64 * col) return false;
    }
  }
  return true;
}
static_assert(c_layout_is_assumed(), "wgmma's accumulator differs from fp8_layout.hpp");

template <int D_, int BR_, int BC_>
struct Traits {
  static constexpr int D = D_, BR = BR_, BC = BC_;
  static constexpr int kStages = tuning::kSm90Stages;
  static constexpr int kConsumerWarpgroups = BR / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = tuning::sm90_producer_regs(kConsumerWarpgroups);
  static constexpr int kConsumerRegs = tuning::sm90_consumer_regs(kConsumerWarpgroups);
  static_assert(BR % 64 == 0 && kConsumerWarpgroups >= 2 && kConsumerWarpgroups <= 3);
  static_assert(D == 64 || D == 128);
  // One scale block per K/V block, whole warpgroups per Q scale block; V8's rows hold one
  // 128-byte swizzle row per block.
  static_assert(BC == kKvScaleRows && kQScaleRows == 64 && BC == 128);

  using E = cutlass::float_e4m3_t;
  // K-major everywhere: Q8 and K8 rows are d bytes (64: 64-byte swizzle, 128: 128-byte); V8's
  // rows are Bc = 128 keys (128-byte swizzle).
  using AtomQK =
      std::conditional_t<D == 128, GMMA::Layout_K_SW128_Atom<E>, GMMA::Layout_K_SW64_Atom<E>>;
  using AtomV = GMMA::Layout_K_SW128_Atom<E>;
  using SmemLayoutQ = decltype(tile_to_shape(AtomQK{}, cute::Shape<Int<BR>, Int<D>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(AtomQK{}, cute::Shape<Int<BC>, Int<D>, Int<kStages>>{}));
  using SmemLayoutV =
      decltype(tile_to_shape(AtomV{}, cute::Shape<Int<D>, Int<BC>, Int<kStages>>{}));

  using AtomLayout = Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<BC>, Int<D>>>(), AtomLayout{}));
  using MmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<E, E, float, cute::Shape<_64, Int<D>, Int<BC>>>(), AtomLayout{}));

  // Q8, K8 as (rows N, d, batch*heads); V8 as (d, Npad, batch*heads).
  static auto gmem_qk(const void* p, int N, int heads) {
    return make_tensor(
        make_gmem_ptr(static_cast<const E*>(p)), make_shape(N, Int<D>{}, heads),
        make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
  }
  static auto gmem_v(const void* p, int Npad, int heads) {
    return make_tensor(
        make_gmem_ptr(static_cast<const E*>(p)), make_shape(Int<D>{}, Npad, heads),
        make_stride(static_cast<std::int64_t>(Npad), _1{}, static_cast<std::int64_t>(Npad) * D));
  }
  static auto tma_q(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem_qk(p, N, heads), SmemLayoutQ{},
                         cute::Shape<Int<BR>, Int<D>>{}, _1{});
  }
  static auto tma_k(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem_qk(p, N, heads), take<0, 2>(SmemLayoutK{}),
                         cute::Shape<Int<BC>, Int<D>>{}, _1{});
  }
  static auto tma_v(const void* p, int Npad, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem_v(p, Npad, heads), take<0, 2>(SmemLayoutV{}),
                         cute::Shape<Int<D>, Int<BC>>{}, _1{});
  }
  using TmaQ = decltype(tma_q(nullptr, 1, 1));
  using TmaK = decltype(tma_k(nullptr, 1, 1));
  using TmaV = decltype(tma_v(nullptr, 128, 1));

  // expect-tx counts: box elements x sizeof(E) (1 byte: E4M3; a count copied from the bf16 kernel
  // would be 2x too large and the full barriers would never complete). Each tile is one TMA box
  // (CuTe's bits per TMA instruction == the tile), and the complete_tx of a box that runs past N
  // (zero fill) still counts the whole box, so these are the bytes every load delivers.
  static constexpr std::uint32_t kBytesQ = BR * D * sizeof(E);
  static constexpr std::uint32_t kBytesKV = BC * D * sizeof(E);
  static_assert(sizeof(E) == 1 && cute::sizeof_bits_v<E> == 8);
  template <typename Tma>
  static constexpr std::uint32_t kBytesPerTma =
      decltype(size(typename Tma::Traits::SrcLayout{}))::value / 8;
  static_assert(kBytesPerTma<TmaQ> == kBytesQ && kBytesQ == cosize_v<SmemLayoutQ> * sizeof(E),
                "Q: one TMA box must fill Q's buffer with exactly kBytesQ");
  static_assert(kBytesPerTma<TmaK> == kBytesKV &&
                    kBytesKV * kStages == cosize_v<SmemLayoutK> * sizeof(E),
                "K: one TMA box per stage of exactly kBytesKV");
  static_assert(kBytesPerTma<TmaV> == kBytesKV &&
                    kBytesKV * kStages == cosize_v<SmemLayoutV> * sizeof(E),
                "V: one TMA box per stage of exactly kBytesKV");
  // TMA box limits (<= 256 per dimension) and V8's padding: every V box lies inside [0, Npad).
  static_assert(BR <= 256 && BC <= 256 && D <= 256 && kPad % BC == 0);
  // setmaxnreg: the producer's registers pay for the consumers' (launch bounds give
  // 65536 / kThreads each, rounded down to 8; setmaxnreg.inc would wait forever otherwise).
  static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumerThreads <= 65536);
  static_assert(kConsumerRegs % 8 == 0 && kProducerRegs % 8 == 0);

  // The TMA-store epilogue's O (bf16): one 64 x D slice per consumer warpgroup, swizzled as
  // fa3's 16-bit tiles; one TMA store of 64 x D each.
  using OutE = cutlass::bfloat16_t;
  using SmemLayoutO = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<OutE>{},
                                             cute::Shape<_64, Int<D>, Int<kConsumerWarpgroups>>{}));
  static auto tma_o(void* p, int N, int heads) {
    Tensor g = make_tensor(
        make_gmem_ptr(static_cast<OutE*>(p)), make_shape(N, Int<D>{}, heads),
        make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
    return make_tma_copy(SM90_TMA_STORE{}, g, take<0, 2>(SmemLayoutO{}), cute::Shape<_64, Int<D>>{},
                         _1{});
  }
  using TmaO = decltype(tma_o(nullptr, 1, 1));

  struct SharedStorage {
    array_aligned<E, cosize_v<SmemLayoutQ>, 1024> q;
    array_aligned<E, cosize_v<SmemLayoutK>, 1024> k;
    array_aligned<E, cosize_v<SmemLayoutV>, 1024> v;
    hopper::PipelineBarriers<kStages> bar;
    int tile_slot[2][2];  // dynamic grid: tile n's index and successor in slot n % 2 (fa3's)
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  // The TMA-store kernels' shared memory: O after the rest.
  struct SharedStorageO {
    SharedStorage main;
    array_aligned<OutE, cosize_v<SmemLayoutO>, 1024> o;
  };
  static constexpr int kSmemBytesO = sizeof(SharedStorageO);
  static_assert(kSmemBytesO <= hopper::kMaxSmemBytes);
};

template <typename Tr>
struct Params {
  typename Tr::TmaQ tma_q;
  typename Tr::TmaK tma_k;
  typename Tr::TmaV tma_v;
  const float* amax_q;  // [B*H][q_blocks]
  const float* amax_k;  // [B*H][kv_blocks]
  const float* amax_v;  // [B*H][kv_blocks]
  __nv_bfloat16* o;
  float* lse;
  int N, Npad, heads, q_blocks, kv_blocks;
  float scale_log2;  // softmax scale * log2(e) (times the fault's factor)
  int num_q_blocks;
  FaultInjection fault;     // read only by the FAULTS instantiation (verification tests)
  int section_heads;        // persistent grids: heads whose K and V share the L2 at a time
  typename Tr::TmaO tma_o;  // the TMA-store epilogue's (else unset)
  unsigned* tile_counter;   // dynamic grid: hopper::kTileCounterBytes in the workspace
};

template <typename Tr, bool CAUSAL, bool FAULTS, Grid GRID, Epilogue EPILOGUE>
__device__ __forceinline__ void forward(const Params<Tr>& p) {
  constexpr bool PERSISTENT = GRID != Grid::tiles;
  constexpr bool DYNAMIC = GRID == Grid::dynamic;
  constexpr bool TMA_STORE = EPILOGUE == Epilogue::tma_store;
  using E = typename Tr::E;
  constexpr int D = Tr::D, BR = Tr::BR, BC = Tr::BC, kStages = Tr::kStages;
  constexpr int kWG = Tr::kConsumerWarpgroups;
  constexpr int NT = BC / 8, DT = D / 8;
  // The thread's row max and row sum as trees (tuning::sm90_softmax_tree) or as chains of NT and
  // 2 NT dependent operations; the sum's rounding order differs between the two.
  constexpr bool kSoftmaxTree = tuning::sm90_softmax_tree(D);

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>(smem_raw);

  const int warpgroup = threadIdx.x / 128;
  const int N = p.N;
  // The tiles this thread block computes (hopper::TileList: its own, or a share of the list).
  // Blocks are loaded and consumed last first, so the ones that need a mask (N tail, diagonal)
  // lead; the fault build masks every block.
  const hopper::TileList<BR, BC, CAUSAL, FAULTS, GRID, Params<Tr>> tiles(p);
  const int num_tiles = tiles.size();

  // Barrier protocol (as fa3_kernel.cuh's):
  //   full barriers: 1 arrival (the producer's arrive_and_expect_tx) + the box's bytes;
  //   empty barriers: kConsumerThreads arrivals (every thread of every consumer warpgroup arrives
  //     once per block: K after its Q K^T, V after its P V; Q after the tile's last Q K^T);
  //   the i-th block loaded since the launch (it, running on across a persistent block's tiles)
  //     uses stage it % kStages, consumer parity (it / kStages) & 1, producer parity that ^ 1
  //     (the first round passes); Q of a block's n-th tile: consumer parity n & 1, producer
  //     (n & 1) ^ 1; producer and consumers walk the same tiles and the same [0, num_kv);
  //   ping-pong (hopper::PingPong): named barrier w counts 256 = warpgroup w's sync + its
  //     predecessor's arrive; the last warpgroup opens the first turn and skips its very last
  //     arrive (the block's last tile).
  auto& bar = smem.bar;
  if (threadIdx.x == 0) bar.init(Tr::kConsumerThreads);
  __syncthreads();

  // ---------------------------------------------------------------- producer: TMA loads
  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
      Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemLayoutQ{});
      Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemLayoutK{});
      Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Tr::SmemLayoutV{});
      Tensor mQ = p.tma_q.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mK = p.tma_k.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mV = p.tma_v.get_tma_tensor(make_shape(Int<D>{}, p.Npad, p.heads));
      auto tma_q = p.tma_q.get_slice(_0{});
      auto tma_k = p.tma_k.get_slice(_0{});
      auto tma_v = p.tma_v.get_slice(_0{});
      Tensor tQs = tma_q.partition_D(sQ);
      Tensor tKs = tma_k.partition_D(sK);  // (TMA, m, k, stage)
      Tensor tVs = tma_v.partition_D(sV);
      int it = 0;  // K/V blocks loaded so far: the ring's position and phase
      for (int index = tiles.first(), n = 0; index < num_tiles; ++n) {
        int next = index + tiles.stride();
        if constexpr (DYNAMIC)
          next = hopper::take_next_tile(p.tile_counter, smem.tile_slot, n, index);
        const hopper::Tile tl = tiles.at(index);
        Tensor gQ = local_tile(mQ(_, _, tl.bh), cute::Shape<Int<BR>, Int<D>>{},
                               make_coord(tl.q_block, _0{}));
        Tensor gK =
            local_tile(mK(_, _, tl.bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(_, _0{}));
        Tensor gV =
            local_tile(mV(_, _, tl.bh), cute::Shape<Int<D>, Int<BC>>{}, make_coord(_0{}, _));
        Tensor tQg = tma_q.partition_S(gQ);
        Tensor tKg = tma_k.partition_S(gK);  // (TMA, m, k, block)
        Tensor tVg = tma_v.partition_S(gV);
        // Q's buffer is free once every consumer has issued its last Q K^T of the previous tile.
        if constexpr (PERSISTENT) wait_barrier(&bar.q_empty, (n & 1) ^ 1, "q_empty", 0);
        FullBarrier::arrive_and_expect_tx(&bar.q_full, Tr::kBytesQ);
        copy(p.tma_q.with(bar.q_full), tQg, tQs);
        for (int i = 0; i < tl.num_kv; ++i, ++it) {
          const int j = tl.num_kv - 1 - i;
          const int s = it % kStages;
          const std::uint32_t free_phase = ((it / kStages) & 1) ^ 1;  // first round: free
          wait_barrier(&bar.k_empty[s], free_phase, "k_empty", s);
          FullBarrier::arrive_and_expect_tx(&bar.k_full[s], Tr::kBytesKV);
          copy(p.tma_k.with(bar.k_full[s]), tKg(_, _, _, j), tKs(_, _, _, s));
          int v_block = j;
          if constexpr (FAULTS)
            v_block = static_cast<int>(faulty_v_row<BC>(p.fault, j, tiles.total_kv) / BC);
          wait_barrier(&bar.v_empty[s], free_phase, "v_empty", s);
          FullBarrier::arrive_and_expect_tx(&bar.v_full[s], Tr::kBytesKV);
          copy(p.tma_v.with(bar.v_full[s]), tVg(_, _, _, v_block), tVs(_, _, _, s));
        }
        if constexpr (DYNAMIC) next = smem.tile_slot[n & 1][1];
        index = next;
      }
      if constexpr (DYNAMIC) hopper::release_tile_counter(p.tile_counter);
    }
    return;
  }

  // ---------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Tr::kConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const int cwg = ct / 128;
  const int lane = ct % 32, t = lane & 3;
  const int row_in_tile = cwg * 64 + (ct % 128) / 32 * 16 + lane / 4;

  typename Tr::MmaS mma_s;
  typename Tr::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(ct);
  auto thr_o = mma_o.get_thread_slice(ct);
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Tr::SmemLayoutV{});
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);  // (MMA, 1, D/32) descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);  // (MMA, 1, D/32, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sV);  // (MMA, 1, BC/32, stage)
  Tensor tSrS = partition_fragment_C(mma_s, cute::Shape<Int<BR>, Int<BC>>{});
  Tensor tOrO = partition_fragment_C(mma_o, cute::Shape<Int<BR>, Int<D>>{});
  // P8 as the A operand: per 32 keys (kc), values (v0 4 bytes, v1 2 rows, v2 2 halves); as words,
  // register 4 kc + 2 v2 + v1 (fp8_layout.hpp: kc, h = v2, r = v1).
  Tensor tOrP = make_tensor<E>(Layout<cute::Shape<cute::Shape<_4, _2, _2>, _1, Int<BC / 32>>>{});
  static_assert(decltype(size(tSrS))::value == NT * 4 && decltype(size(tOrO))::value == DT * 4);
  static_assert(decltype(size(tOrP))::value == BC / 2);  // 16 bytes per 32 keys
  float(&s)[NT][4] = *reinterpret_cast<float(*)[NT][4]>(raw_pointer_cast(tSrS.data()));
  float(&o)[DT][4] = *reinterpret_cast<float(*)[DT][4]>(raw_pointer_cast(tOrO.data()));
  std::uint32_t(&pr)[BC / 32][4] =
      *reinterpret_cast<std::uint32_t(*)[BC / 32][4]>(raw_pointer_cast(tOrP.data()));

  const hopper::PingPong<true, kWG> turns(cwg);

  int it = 0;  // K/V blocks consumed so far: the ring's position and phase
  // One tile: the n-th this thread block computes; last_tile: its last (the ping-pong turns end).
  auto consume_tile = [&](const hopper::Tile& tl, int n, bool last_tile) {
    const int num_kv = tl.num_kv, num_masked = tl.num_masked;
    const int row_a = tl.q0 + row_in_tile, row_b = row_a + 8;

    // Descales: Q's for this warpgroup's 64 rows (clamped: a warpgroup wholly past N), K's and V's
    // per K/V block.
    // (Addresses recomputed from the parameters at each use: held in registers, the two pointers
    // made the 192-row causal kernel spill.)
    auto amax_k = [&](int j) {
      return __ldg(p.amax_k + static_cast<std::int64_t>(tl.bh) * p.kv_blocks + j);
    };
    auto amax_v = [&](int j) {
      return __ldg(p.amax_v + static_cast<std::int64_t>(tl.bh) * p.kv_blocks + j);
    };
    const int q_scale_block = min((tl.q0 + 64 * cwg) / kQScaleRows, p.q_blocks - 1);
    const float q_factor =
        __ldg(p.amax_q + static_cast<std::int64_t>(tl.bh) * p.q_blocks + q_scale_block) *
        (p.scale_log2 / (kE4m3Max * kE4m3Max));

    auto block_of = [&](int i) { return num_kv - 1 - i; };
    auto stage = [&](int i) { return (it + i) % kStages; };
    auto phase = [&](int i) { return static_cast<std::uint32_t>(((it + i) / kStages) & 1); };

#pragma unroll
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    OnlineSoftmax<> softmax;
    float alpha[2];
    // Block j's raw scores -> P' = 256 P in s; m, l move on (log2 domain); alpha rescales O.
    // factor: descale_q descale_k(j) softmax_scale log2(e), divided ahead (see step).
    auto softmax_block = [&](int j, auto masked, float factor) {
      if constexpr (decltype(masked)::value) {
        const KeyMask<CAUSAL, BC, FAULTS> mask{
            static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
            j == p.fault.drop_kv_block};
        mask_keys(s, mask, t);
      }
      // The raw scores' row maxima: trees at d=128 (both rows' quad shuffles together), else
      // chains (row_max, per row).
      float tree_mx[1][2];
      if constexpr (kSoftmaxTree) {
        quad_row_max_tiles(reinterpret_cast<const float(&)[1][NT][4]>(s), tree_mx);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float mx = kSoftmaxTree ? tree_mx[0][r] : row_max(s, r, -INFINITY);
        const float base = softmax.move_max(r, mx * factor, &alpha[r]);
        softmax.l[r] = softmax.l[r] * alpha[r] +
                       (kSoftmaxTree ? exp2_row_scaled_tree(s, r, factor, base - kPScaleLog2)
                                     : exp2_row_scaled(s, r, factor, base - kPScaleLog2));
      }
    };
    // Block i's descales (K's factor for the exponent, V's ratio for the rescale after
    // P_{i-1} V_{i-1}) are divided while the warpgroup waits for its S, from amax loaded one step
    // earlier: after the block's last MUFU.EX2 the division's MUFU.RCP would have delayed O's
    // rescale. Here: the amax of block i+1, loaded during step i (clamped to the tile's last
    // block), and block i's V amax.
    struct Prefetched {
      float amax_k, amax_v;
    };
    auto prefetch = [&](int i) {
      const int j = block_of(min(i, num_kv - 1));
      return Prefetched{amax_k(j), amax_v(j)};
    };
    float amax_v_now = amax_v(block_of(0));
    Prefetched next = prefetch(1);
    // After P_{i-1} V_{i-1}: O *= alpha_i ratio, ratio = descale_v(block i-1) / descale_v(block i).
    auto rescale_o = [&](float ratio) {
      if constexpr (FAULTS) {
        if (p.fault.o_rescale_skipped) return;
      }
      const float f0 = alpha[0] * ratio, f1 = alpha[1] * ratio;
#pragma unroll
      for (int d = 0; d < DT; ++d) {
        o[d][0] *= f0;
        o[d][1] *= f0;
        o[d][2] *= f1;
        o[d][3] *= f1;
      }
    };
    auto convert_p = [&] {
#pragma unroll
      for (int kc = 0; kc < BC / 32; ++kc) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const AccElement a0 = p_source(kc, h, r, 0), a1 = p_source(kc, h, r, 1);
            const AccElement a2 = p_source(kc, h, r, 2), a3 = p_source(kc, h, r, 3);
            pr[kc][2 * h + r] = e4m3x4(s[a0.n][a0.e], s[a1.n][a1.e], s[a2.n][a2.e], s[a3.n][a3.e]);
          }
        }
      }
    };
    // After the tile's last Q K^T: the producer may load the next tile's Q (persistent grids).
    auto release_k = [&](int i) {
      EmptyBarrier::arrive(&bar.k_empty[stage(i)]);
      if (PERSISTENT && i == num_kv - 1) EmptyBarrier::arrive(&bar.q_empty);
    };

    if constexpr (!DYNAMIC) wait_barrier(&bar.q_full, n & 1, "q_full", 0);
    // i = 0: Q K^T alone.
    wait_barrier(&bar.k_full[stage(0)], phase(0), "k_full", stage(0));
    turns.begin();
    wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(0)), tSrS);
    turns.end(false);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    release_k(0);
    const float factor_0 = q_factor * amax_k(block_of(0));
    if (num_masked > 0)
      softmax_block(block_of(0), std::true_type{}, factor_0);
    else
      softmax_block(block_of(0), std::false_type{}, factor_0);
    convert_p();
    auto step = [&](int i, auto masked) {
      wait_barrier(&bar.k_full[stage(i)], phase(i), "k_full", stage(i));
      wait_barrier(&bar.v_full[stage(i - 1)], phase(i - 1), "v_full", stage(i - 1));
      turns.begin();
      wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(i)), tSrS);
      wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(i - 1)), tOrO);
      turns.end(false);
      // From the amax step i-1 loaded: the empty asm keeps both before the wait for S in the
      // compiler's order (ptxas then issues the division even before the products, its inputs
      // being ready). Then block i+1's loads, which step i+1 uses.
      const float factor = q_factor * next.amax_k;
      const float ratio = amax_v_now / next.amax_v;
      asm volatile("" ::"f"(factor), "f"(ratio));
      amax_v_now = next.amax_v;
      next = prefetch(i + 1);
      warpgroup_wait<1>();  // Q K_i^T done (batches complete in order)
      warpgroup_fence_operand(tSrS);
      release_k(i);
      softmax_block(block_of(i), masked, factor);
      warpgroup_wait<0>();  // P_i-1 V_i-1 done: O and the P registers are free
      warpgroup_fence_operand(tOrO);
      EmptyBarrier::arrive(&bar.v_empty[stage(i - 1)]);
      rescale_o(ratio);
      convert_p();
    };
    int i = 1;
    for (; i < num_masked; ++i) step(i, std::true_type{});
    for (; i < num_kv; ++i) step(i, std::false_type{});
    const int last = num_kv - 1;
    wait_barrier(&bar.v_full[stage(last)], phase(last), "v_full", stage(last));
    turns.begin();
    wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(last)), tOrO);
    turns.end(last_tile);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    EmptyBarrier::arrive(&bar.v_empty[stage(last)]);

    // Epilogue: l sums 256 P (exact power of two back out), O in units of the last block's
    // (block 0's) V descale.
    // l is the true sum (for the lse); O summed 256 P V, so the numerator takes 1/256 as well.
    softmax.l[0] *= 1.0f / kPScale;
    softmax.l[1] *= 1.0f / kPScale;
    float inv_l[2];
    softmax.finish(amax_v(block_of(last)) / kE4m3Max / kPScale, inv_l);
    const std::int64_t head_offset = static_cast<std::int64_t>(tl.bh) * N;
    if constexpr (TMA_STORE) {
      // O through shared memory and a TMA store per warpgroup (hopper::store_o_tma).
      auto& storage = *reinterpret_cast<typename Tr::SharedStorageO*>(smem_raw);
      hopper::store_o_tma<__nv_bfloat16, typename Tr::SmemLayoutO, D, kWG>(
          storage.o.data(), p.tma_o, o, inv_l, row_in_tile - cwg * 64, t, cwg, ct % 128 == 0,
          PERSISTENT && n > 0, N, p.heads, tl.bh, tl.q_block);
      softmax.store_lse(p.lse + head_offset, row_a, row_b, N, t);
    } else {
      softmax.store<__nv_bfloat16, D>(p.o + head_offset * D, p.lse + head_offset, o, inv_l, row_a,
                                      row_b, N, t);
    }
    it += num_kv;
  };
  if constexpr (!PERSISTENT) {
    // One tile, no loop: inside a loop nvcc kept more live across the masked blocks (P2R of the
    // mask's predicates: more instructions in the causal kernel).
    consume_tile(tiles.at(0), 0, true);
  } else {
    for (int index = tiles.first(), n = 0; DYNAMIC || index < num_tiles; ++n) {
      int next = index + tiles.stride();
      if constexpr (DYNAMIC) {
        // The tile comes with its Q: the producer wrote its index before Q's barrier.
        wait_barrier(&bar.q_full, n & 1, "q_full", 0);
        asm volatile("" ::: "memory");  // the loads stay after the wait (no clobber there)
        index = smem.tile_slot[n & 1][0];
        next = smem.tile_slot[n & 1][1];
      }
      const bool last_tile = next >= num_tiles;
      consume_tile(tiles.at(index), n, last_tile);
      index = next;
      if (DYNAMIC && last_tile) break;
    }
  }
  // Shared memory must outlive the last store's read of it.
  if constexpr (TMA_STORE) {
    if (ct % 128 == 0) tma_store_wait<0>();
  }
}

template <typename Tr, bool CAUSAL, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    fp8_sm90_forward_kernel(const __grid_constant__ Params<Tr> p) {
  forward<Tr, CAUSAL, false, GRID, EPILOGUE>(p);
}

// The verification tests' build (fault hooks; own name: out of the SASS check's filter).
template <typename Tr, bool CAUSAL, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    fp8_sm90_fault_kernel(const __grid_constant__ Params<Tr> p) {
  forward<Tr, CAUSAL, true, GRID, EPILOGUE>(p);
}

template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
std::string prepare_launch(const Shape& s, const DeviceBuffers& b, Schedule schedule,
                           const FaultInjection& fault, hopper::Enqueue* out) {
  using Tr = Traits<D, BR, BC>;
  if (padded(s.N) > INT_MAX / D || s.heads_total() > 65535)
    return "fp8: shape too large (Npad*d must fit 31 bits and B*H <= 65535)";
  const int N = static_cast<int>(s.N), heads = static_cast<int>(s.heads_total());
  const int Npad = static_cast<int>(padded(s.N));
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) {
    *out = [](cudaStream_t) { return std::string(); };
    return "";
  }
  const Workspace w = carve(s, b.workspace);
  Params<Tr> p{Tr::tma_q(w.q8, N, heads),
               Tr::tma_k(w.k8, N, heads),
               Tr::tma_v(w.vt8, Npad, heads),
               w.amax_q,
               w.amax_k,
               w.amax_v,
               static_cast<__nv_bfloat16*>(b.o),
               b.lse,
               N,
               Npad,
               heads,
               static_cast<int>(q_scale_blocks(s.N)),
               static_cast<int>(kv_scale_blocks(s.N)),
               softmax_scale_log2(s, fault),
               static_cast<int>(q_blocks),
               fault,
               1,
               {},
               nullptr};
  // With NDEBUG, CuTe's make_tma_copy only prints when cuTensorMapEncodeTiled fails (its assert is
  // compiled out) and leaves the descriptor zeroed: a kernel launched with it would wait on its
  // full barriers forever. Refuse to launch instead.
  auto encoded = [](const auto* desc) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(desc);
    for (std::size_t i = 0; i < sizeof(*desc); ++i) {
      if (bytes[i] != 0) return true;
    }
    return false;
  };
  if (!encoded(p.tma_q.get_tma_descriptor()) || !encoded(p.tma_k.get_tma_descriptor()) ||
      !encoded(p.tma_v.get_tma_descriptor()))
    return "fp8: TMA descriptor encoding failed (cuTensorMapEncodeTiled: see stderr)";

  auto go = [&](auto kernel, hopper::Plan plan) -> std::string {
    const bool tma_store = plan.epilogue == Epilogue::tma_store;
    const int smem_bytes = tma_store ? Tr::kSmemBytesO : Tr::kSmemBytes;
    const cudaError_t st = smem_attribute_once(kernel, smem_bytes);
    if (st != cudaSuccess)
      return std::string("fp8: cudaFuncSetAttribute: ") + cudaGetErrorString(st);
    if (tma_store) {
      p.tma_o = Tr::tma_o(b.o, N, heads);
      if (!encoded(p.tma_o.get_tma_descriptor()))
        return "fp8: TMA descriptor encoding failed for O (cuTensorMapEncodeTiled: see stderr)";
    }
    dim3 grid(static_cast<unsigned>(q_blocks), static_cast<unsigned>(heads));
    if (plan.grid != Grid::tiles) {
      // K8 and V8 take 1 byte per element.
      constexpr std::int64_t kL2Share =
          CAUSAL ? tuning::kSm90L2ShareCausal : tuning::kSm90L2ShareNonCausal;
      hopper::PersistentShape shape;
      const std::string e =
          hopper::persistent_shape("fp8", q_blocks * heads, heads, 2LL * Npad * D, kL2Share, shape);
      if (!e.empty()) return e;
      grid = dim3(shape.blocks);
      p.section_heads = shape.section_heads;
    }
    if (plan.grid == Grid::dynamic) {
      const std::size_t offset = tile_counter_offset(s);
      if (b.workspace == nullptr || b.workspace_bytes < offset + hopper::kTileCounterBytes)
        return "fp8: the dynamic grid needs its tile counter (workspace)";
      p.tile_counter =
          reinterpret_cast<unsigned*>(static_cast<unsigned char*>(b.workspace) + offset);
    }
    *out = [kernel, grid, smem_bytes, p](cudaStream_t stream) {
      kernel<<<grid, Tr::kThreads, smem_bytes, stream>>>(p);
      return launch_status("fp8");
    };
    return std::string();
  };
  constexpr hopper::Plan kTiles = plan_of(Schedule::tiles);
  constexpr hopper::Plan kPersistent = plan_of(Schedule::persistent_tma_store);
  constexpr hopper::Plan kDynamic = plan_of(Schedule::dynamic_tma_store);
  // Both persistent grids or neither (grid_built; fp8_row_rule says so first).
  constexpr bool kPersistentBuilt = grid_built(Grid::persistent, BR, CAUSAL);
  static_assert(kPersistentBuilt == grid_built(Grid::dynamic, BR, CAUSAL));
  if (schedule != Schedule::tiles && !kPersistentBuilt)
    return "fp8: the persistent grids are not compiled for the causal 192-row tile (they spill)";
  if constexpr (FAULTS) {
    // The fault hooks: the default schedule and the dynamic grid (which runs every piece the
    // static one does, and the counter).
    if constexpr (kPersistentBuilt) {
      if (schedule == Schedule::dynamic_tma_store)
        return go(fp8_sm90_fault_kernel<Tr, CAUSAL, kDynamic.grid, kDynamic.epilogue>, kDynamic);
    }
    if (schedule == Schedule::tiles)
      return go(fp8_sm90_fault_kernel<Tr, CAUSAL, kTiles.grid, kTiles.epilogue>, kTiles);
    return "fp8: fault injection is compiled for schedules tiles and dynamic-tma-store";
  } else {
    if constexpr (kPersistentBuilt) {
      if (schedule == Schedule::persistent_tma_store)
        return go(fp8_sm90_forward_kernel<Tr, CAUSAL, kPersistent.grid, kPersistent.epilogue>,
                  kPersistent);
      if (schedule == Schedule::dynamic_tma_store)
        return go(fp8_sm90_forward_kernel<Tr, CAUSAL, kDynamic.grid, kDynamic.epilogue>, kDynamic);
    }
    return go(fp8_sm90_forward_kernel<Tr, CAUSAL, kTiles.grid, kTiles.epilogue>, kTiles);
  }
}

}  // namespace fa::fp8::sm90

// Explicit instantiations for one tile shape (both causal settings, with and without the fault
// hooks): one head dimension per translation unit.
#define FP8_SM90_INSTANTIATE_ONE(D, BR, BC, CAUSAL, FAULTS)                      \
  template std::string fa::fp8::sm90::prepare_launch<D, BR, BC, CAUSAL, FAULTS>( \
      const fa::Shape&, const fa::DeviceBuffers&, fa::fp8::sm90::Schedule,       \
      const fa::FaultInjection&, fa::hopper::Enqueue*);
#define FP8_SM90_INSTANTIATE(D, BR, BC)             \
  FP8_SM90_INSTANTIATE_ONE(D, BR, BC, false, false) \
  FP8_SM90_INSTANTIATE_ONE(D, BR, BC, true, false)  \
  FP8_SM90_INSTANTIATE_ONE(D, BR, BC, false, true)  \
  FP8_SM90_INSTANTIATE_ONE(D, BR, BC, true, true)
