// fa3 kernel: FlashAttention-2's algorithm (Q outer, online softmax, deferred 1/l, lse) with
// FlashAttention-3's Hopper schedule. sm_90a only (wgmma, TMA, setmaxnreg): built in
// fa_kernels_hopper with CuTe (the nvidia-cutlass wheel) for TMA descriptors, swizzled
// shared-memory layouts and wgmma atoms; the schedule below is ours.
//
// Schedule (one thread block per (query block of Br = 64 x W rows, batch*head); W = 2 consumer
// warpgroups and one producer warpgroup, 128 (W + 1) threads; the traits also take W = 3):
//   producer  warpgroup 0 gives its registers away (setmaxnreg 24; 32 with W = 3); one thread
//             of its first warp issues every load: Q once (TMA, one mbarrier), then K_j and V_j
//             for each K/V block, last block first (j = n-1 ... 0: the masked blocks lead, so
//             the consumers' unmasked loop carries no mask code), through a ring of kStages
//             buffers, each with a full mbarrier (TMA transaction bytes) and an empty one (every
//             consumer thread arrives once it no longer reads the buffer). K and V have their own
//             barriers, so K_j+1 can land while V_j is still being read. Rows past N come in as
//             zeros (TMA out-of-bounds fill) and are masked.
//   consumers warpgroups 1..W take the registers (setmaxnreg 240; 160 with W = 3); warpgroup w
//             owns query rows [64 (w-1), 64 w) of the block. For each K/V block j:
//               S = Q K_j^T    wgmma m64nBck16, Q and K from swizzled shared memory (SS)
//               mask (N tail, causal) only on the leading blocks that straddle the edge or the
//               diagonal (a separate compile-time copy of the loop body);
//               online softmax as fa2 with the scale folded into exp2's FFMA
//               (kernels/common/online_softmax.cuh: the wgmma accumulator has mma.m16n8's
//               per-thread layout, so the same code runs unchanged)
//               O += P V_j     wgmma m64nDk16 with P converted to 16 bits in registers as the A
//                              operand (RS), V read MN-major from the same buffer TMA wrote
//             then O /= l (deferred), and the epilogue: O and lse from registers straight to
//             global memory, or (epilogue tma_store) O through shared memory: each warpgroup
//             writes its 64 rows into its own swizzled slice of an O buffer (after Q and the
//             ring), fences, syncs its 128 threads (named barrier), and its first thread issues
//             one TMA store of 64 x D without waiting for it: the store drains while the next
//             tile's products run. That thread waits for the store to have read the slice
//             before the slice is written again (next tile) and before the block exits.
//   overlap   (schedule full, no-pingpong, persistent) inside a warpgroup: Q K_j+1^T and
//             P_j V_j are issued together, the softmax of block j+1 runs while P_j V_j is still in
//             the tensor cores (FA3 Algorithm 2); O is rescaled once P_j V_j has landed. Off
//             (no-overlap): issue, wait, softmax, issue, wait.
//   ping-pong (schedule full, no-overlap, persistent) between warpgroups: each warpgroup issues its
//             products only on its turn (named barriers in a ring), so one warpgroup's softmax
//             runs while the other's products occupy the tensor cores. Off (no-pingpong): every
//             warpgroup issues when ready.
//   grid      (tiles) (ceil(N/Br), B*H), one tile per thread block; or (persistent) one
//             thread block per SM walks a list of the tiles (heads in L2-sized sections, query
//             blocks longest first inside one) with a stride of the grid; or (dynamic) the same
//             list, each block's next tile the list's next untaken one: the producer takes it
//             from an atomic counter in the workspace one tile ahead and passes index and
//             successor to the consumers in shared memory, released with Q's full barrier; the
//             last block to finish resets the counter. In the persistent grids the K/V ring and
//             the ping-pong turns run on across tiles, and Q's buffer has an empty barrier too.
//             Which grid and epilogue a schedule runs: fa3::plan_of (fa3_launch.hpp; the
//             defaults: fa3::default_plan).
//
// HBM traffic: FA2's (profiler/io_model.cpp): Q once, K and V once per query block (causal: up to
// the diagonal), O and lse once. Tiles and the other tuning numbers: fa3_tiles.hpp (Bc = 128 for
// d = 64 and 128; 128 x 80 at d = 256, where O's 128 registers per thread leave room for only 80
// columns of S).
#pragma once

// wgmma's n = 80 (d=256's Q K^T) is one of CuTe's "extended" shapes: without this, its selector
// would cover 80 columns with 5 atoms of n = 16. The selector's choice for n = 64, 128, 192 is
// the same either way (it tries the widest n that divides the tile first).
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif
// clang-format off
#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
// clang-format on

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/online_softmax.cuh"
#include "kernels/fa3/fa3_launch.hpp"
#include "kernels/hopper/persistent_grid.hpp"
#include "kernels/hopper/pipeline.cuh"
#include "kernels/hopper/sm90_common.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/fa3: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::fa3 {

using namespace cute;
using hopper::EmptyBarrier;
using hopper::FullBarrier;
using hopper::smem_attribute_once;
using hopper::wgmma_issue;

template <typename T>
struct CuteElement;
template <>
struct CuteElement<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct CuteElement<__half> {
  using type = cutlass::half_t;
};

// What shape: tiles, warpgroups, shared-memory layouts, MMA atoms, TMA copies. (The code is in the
// kernel below.)
template <int D_, int BR_, int BC_, typename T_>
struct Fa3Traits {
  static constexpr int D = D_, BR = BR_, BC = BC_;
  static constexpr int kStages = fa3::kStages;
  static constexpr int kConsumerWarpgroups = BR / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = producer_regs(kConsumerWarpgroups);  // setmaxnreg
  static constexpr int kConsumerRegs = consumer_regs(kConsumerWarpgroups);
  static_assert(BR % 64 == 0 && kConsumerWarpgroups >= 2 && kConsumerWarpgroups <= 3);
  static_assert(D % 64 == 0 && BC % 16 == 0);

  using T = T_;  // __nv_bfloat16 or __half: what the epilogue stores
  using E = typename CuteElement<T>::type;

  // 128-byte swizzle, K-major (head dim contiguous) for Q, K and V alike: TMA writes V row-major
  // and the P V product reads it as an MN-major operand through the transposed view VT.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<E>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BR>, Int<D>>{}));
  using SmemLayoutKV =
      decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BC>, Int<D>, Int<kStages>>{}));
  using SmemLayoutVT = decltype(composition(
      SmemLayoutKV{},
      make_ordered_layout(cute::Shape<Int<D>, Int<BC>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // One wgmma atom per consumer warpgroup, stacked along the query rows (n = Bc: with n = 80, an
  // extended shape, CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED above).
  using AtomLayout = Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<BC>, Int<D>>>(), AtomLayout{}));
  static_assert(decltype(size<1>(typename MmaS::AtomShape_MNK{}))::value == BC,
                "one wgmma atom covers the K/V block");
  using MmaO =
      decltype(make_tiled_mma(GMMA::rs_op_selector<E, E, float, cute::Shape<_64, Int<D>, Int<BC>>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              AtomLayout{}));

  // Q, K, V in global memory as (rows N, head dim, batch*heads).
  static auto gmem(const void* p, int N, int heads) {
    return make_tensor(
        make_gmem_ptr(static_cast<const E*>(p)), make_shape(N, Int<D>{}, heads),
        make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
  }
  static auto tma_q(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem(p, N, heads), SmemLayoutQ{},
                         cute::Shape<Int<BR>, Int<D>>{}, _1{});
  }
  static auto tma_kv(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem(p, N, heads), take<0, 2>(SmemLayoutKV{}),
                         cute::Shape<Int<BC>, Int<D>>{}, _1{});
  }
  using TmaQ = decltype(tma_q(nullptr, 1, 1));
  using TmaKV = decltype(tma_kv(nullptr, 1, 1));

  // The TMA-store epilogue's O: one 64 x D slice per consumer warpgroup (each stores its own
  // rows, so no warpgroup waits for another), swizzled as Q; one TMA store of 64 x D each.
  using SmemLayoutO =
      decltype(tile_to_shape(SmemAtom{}, cute::Shape<_64, Int<D>, Int<kConsumerWarpgroups>>{}));
  static auto tma_o(void* p, int N, int heads) {
    Tensor g = make_tensor(
        make_gmem_ptr(static_cast<E*>(p)), make_shape(N, Int<D>{}, heads),
        make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
    return make_tma_copy(SM90_TMA_STORE{}, g, take<0, 2>(SmemLayoutO{}), cute::Shape<_64, Int<D>>{},
                         _1{});
  }
  using TmaO = decltype(tma_o(nullptr, 1, 1));

  static constexpr std::uint32_t kBytesQ = BR * D * sizeof(E);
  static constexpr std::uint32_t kBytesKV = BC * D * sizeof(E);

  struct SharedStorage {
    array_aligned<E, cosize_v<SmemLayoutQ>, 1024> q;
    array_aligned<E, cosize_v<SmemLayoutKV>, 1024> k;
    array_aligned<E, cosize_v<SmemLayoutKV>, 1024> v;
    hopper::PipelineBarriers<kStages> bar;
    // Dynamic grid: tile n's index and its successor in slot n % 2 (the producer writes tile n's
    // while the consumers may still read tile n-1's).
    int tile_slot[2][2];
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  // The TMA-store kernels' shared memory: O after the rest, so the others keep their layout.
  struct SharedStorageO {
    SharedStorage main;
    array_aligned<E, cosize_v<SmemLayoutO>, 1024> o;
  };
  static constexpr int kSmemBytesO = sizeof(SharedStorageO);
  static constexpr bool kOBuffer = kSmemBytesO <= kMaxSmemBytes;
  static_assert(kOBuffer == o_buffer_fits(D, BR, BC), "o_buffer_fits (fa3_launch.hpp) is wrong");
  static_assert(kSmemBytes <= kMaxSmemBytes);
};

template <typename Traits>
struct Fa3Params {
  typename Traits::TmaQ tma_q;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
  void* o;
  float* lse;
  int N;
  int heads;         // B*H
  float scale_log2;  // softmax scale * log2(e)
  int num_q_blocks;
  int section_heads;            // persistent grids: heads whose K and V share the L2 at a time
  FaultInjection fault;         // read only by the FAULTS instantiation (verification tests)
  typename Traits::TmaO tma_o;  // the TMA-store epilogue's (else unset)
  unsigned* tile_counter;  // dynamic grid: [0] tiles taken past the first wave, [1] blocks done
};

// The kernel's body; the two __global__ entries below choose the schedule or the fault hooks.
template <typename Traits, bool CAUSAL, bool FAULTS, bool PINGPONG, bool OVERLAP, Grid GRID,
          Epilogue EPILOGUE>
__device__ __forceinline__ void fa3_forward(const Fa3Params<Traits>& p) {
  constexpr bool PERSISTENT = GRID != Grid::tiles;  // one thread block per SM walks the tiles
  constexpr bool DYNAMIC = GRID == Grid::dynamic;   // ... taking each next one from a counter
  constexpr bool TMA_STORE = EPILOGUE == Epilogue::tma_store;
  static_assert(!TMA_STORE || Traits::kOBuffer, "no shared memory left for O");
  using E = typename Traits::E;
  using T = typename Traits::T;
  constexpr int D = Traits::D, BR = Traits::BR, BC = Traits::BC, kStages = Traits::kStages;
  constexpr int kWG = Traits::kConsumerWarpgroups;
  constexpr int NT = BC / 8, DT = D / 8;  // 8-column tiles of S and O per thread

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  const int warpgroup = threadIdx.x / 128;
  const int N = p.N;
  // Tiles (query block, batch*head) this thread block computes (hopper::TileList): its own, or
  // (persistent, dynamic) a share of one list, heads in sections whose K and V fit in a share of
  // the L2 (1/2 causal, 1/16 non-causal, set by the launcher), longest query blocks first.
  const hopper::TileList<BR, BC, CAUSAL, FAULTS, GRID, Fa3Params<Traits>> tiles(p);
  const int num_tiles = tiles.size();
  const int first_tile = tiles.first();
  const int tile_stride = tiles.stride();
  const int total_kv = tiles.total_kv;
  auto tile_at = [&](int index) { return tiles.at(index); };

  auto& bar = smem.bar;
  if (threadIdx.x == 0) bar.init(Traits::kConsumerThreads);
  __syncthreads();

  // ---------------------------------------------------------------- producer: TMA loads
  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
      Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
      Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
      Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutKV{});
      Tensor mQ = p.tma_q.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mK = p.tma_k.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mV = p.tma_v.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      auto tma_q = p.tma_q.get_slice(_0{});
      auto tma_k = p.tma_k.get_slice(_0{});
      auto tma_v = p.tma_v.get_slice(_0{});
      Tensor tQs = tma_q.partition_D(sQ);
      Tensor tKs = tma_k.partition_D(sK);  // (TMA, m, k, stage)
      Tensor tVs = tma_v.partition_D(sV);
      int it = 0;  // K/V blocks loaded so far: the ring's position and phase
      for (int index = first_tile, n = 0; index < num_tiles; ++n) {
        // The tile after this one: taken now, so the consumers know whether this one is their
        // last (the ping-pong turns end with it) and the producer never waits on the counter.
        int next = index + tile_stride;
        // Dynamic: into slot n % 2, read by the consumers after q_full (the arrive below
        // releases the store), and read back here at the end of the tile.
        if constexpr (DYNAMIC)
          next = hopper::take_next_tile(p.tile_counter, smem.tile_slot, n, index);
        const hopper::Tile tl = tile_at(index);
        Tensor gQ = local_tile(mQ(_, _, tl.bh), cute::Shape<Int<BR>, Int<D>>{},
                               make_coord(tl.q_block, _0{}));
        Tensor gK =
            local_tile(mK(_, _, tl.bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(_, _0{}));
        Tensor gV =
            local_tile(mV(_, _, tl.bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(_, _0{}));
        Tensor tQg = tma_q.partition_S(gQ);
        Tensor tKg = tma_k.partition_S(gK);  // (TMA, m, k, block)
        Tensor tVg = tma_v.partition_S(gV);
        // Q's buffer is free once every consumer has issued its last Q K^T of the previous tile.
        hopper::wait_barrier(&bar.q_empty, (n & 1) ^ 1, "q_empty", 0);
        FullBarrier::arrive_and_expect_tx(&bar.q_full, Traits::kBytesQ);
        copy(p.tma_q.with(bar.q_full), tQg, tQs);
        for (int i = 0; i < tl.num_kv; ++i, ++it) {
          const int j = tl.num_kv - 1 - i;  // last block first (see tile_at)
          const int s = it % kStages;
          const std::uint32_t free_phase = ((it / kStages) & 1) ^ 1;  // first round: free
          hopper::wait_barrier(&bar.k_empty[s], free_phase, "k_empty", s);
          FullBarrier::arrive_and_expect_tx(&bar.k_full[s], Traits::kBytesKV);
          copy(p.tma_k.with(bar.k_full[s]), tKg(_, _, _, j), tKs(_, _, _, s));
          int v_block = j;
          if constexpr (FAULTS)
            v_block = static_cast<int>(faulty_v_row<BC>(p.fault, j, total_kv) / BC);
          hopper::wait_barrier(&bar.v_empty[s], free_phase, "v_empty", s);
          FullBarrier::arrive_and_expect_tx(&bar.v_full[s], Traits::kBytesKV);
          copy(p.tma_v.with(bar.v_full[s]), tVg(_, _, _, v_block), tVs(_, _, _, s));
        }
        if constexpr (DYNAMIC) next = smem.tile_slot[n & 1][1];
        index = next;
      }
      if constexpr (DYNAMIC) hopper::release_tile_counter(p.tile_counter);
    }
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
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
  Tensor sVT = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVT{});
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // (MMA, 1, D/16) descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (MMA, 1, D/16, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVT);  // (MMA, 1, BC/16, stage)
  Tensor tSrS = partition_fragment_C(mma_s, cute::Shape<Int<BR>, Int<BC>>{});  // ((2,2,BC/8),1,1)
  Tensor tOrO = partition_fragment_C(mma_o, cute::Shape<Int<BR>, Int<D>>{});   // ((2,2,D/8),1,1)
  // P as the A operand of P V: per 16 keys, (2 columns, 2 rows, 2 column halves) per thread.
  Tensor tOrP = make_tensor<E>(Layout<cute::Shape<cute::Shape<_2, _2, _2>, _1, Int<BC / 16>>>{});
  static_assert(decltype(size(tSrS))::value == NT * 4 && decltype(size(tOrO))::value == DT * 4);
  // The accumulators in mma.m16n8's C-fragment order (FragC16x8): element c + 2r of 8-column tile
  // n is row r (g or g+8), column 8n + 2t + c, the order of wgmma's ((2,2,n)) value mode.
  float(&s)[NT][4] = *reinterpret_cast<float(*)[NT][4]>(raw_pointer_cast(tSrS.data()));
  float(&o)[DT][4] = *reinterpret_cast<float(*)[DT][4]>(raw_pointer_cast(tOrO.data()));

  // Ping-pong (hopper::PingPong): the consumer warpgroups take turns issuing their products.
  const hopper::PingPong<PINGPONG, kWG> turns(cwg);
  auto turn_begin = [&] { turns.begin(); };
  auto turn_end = [&](bool last) { turns.end(last); };

  int it = 0;  // K/V blocks consumed so far: the ring's position and phase
  for (int index = first_tile, n = 0; DYNAMIC || index < num_tiles; ++n) {
    int next = index + tile_stride;
    if constexpr (DYNAMIC) {
      // The tile comes with its Q: the producer wrote its index before Q's barrier.
      hopper::wait_barrier(&bar.q_full, n & 1, "q_full", 0);
      asm volatile("" ::: "memory");  // the loads stay after the wait (no clobber there)
      index = smem.tile_slot[n & 1][0];
      next = smem.tile_slot[n & 1][1];
    }
    const hopper::Tile tl = tile_at(index);
    const bool last_tile = next >= num_tiles;
    const int num_kv = tl.num_kv;
    const int row_a = tl.q0 + row_in_tile, row_b = row_a + 8;
    const int num_masked = tl.num_masked;
    auto block_of = [&](int i) { return num_kv - 1 - i; };  // the i-th block loaded
    auto stage = [&](int j) { return (it + j) % kStages; };
    auto phase = [&](int j) { return static_cast<std::uint32_t>(((it + j) / kStages) & 1); };

#pragma unroll
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    OnlineSoftmax<> softmax;
    float alpha[2];
    // Lazy rescale (FlashAttention-4's; kRescaleThreshold, fa3_tiles.hpp): a block whose row max
    // (log2 domain) grew by at most T keeps the old max as the exponent base, so P = exp2(s -
    // m_old) <= 2^T and neither l nor O is rescaled; only when some row of the warp grew by more
    // does the warp take the eager update (new max, alpha, O *= alpha: DT * 4 FMULs per thread).
    // `rescale`: whether the last softmax_block moved this warp's max,
    // so that rescale_o must scale O. One value per warp (a vote), so the branch around the
    // accumulator registers is warp-uniform. It stays set from softmax_block(i) to the
    // rescale_o() of the same step (after P_i-1 V_i-1 has landed, in the overlapped loop).
    [[maybe_unused]] bool rescale = true;
    // Block j's raw scores -> P (fp32, in s), masked when MASKED; m, l move on (log2 domain);
    // alpha rescales O. The scale is folded into the exponent's FFMA (exp2_row_scaled).
    auto softmax_block = [&](int j, auto masked) {
      if constexpr (decltype(masked)::value) {
        const KeyMask<CAUSAL, BC, FAULTS> mask{
            static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
            j == p.fault.drop_kv_block};
        mask_keys(s, mask, t);
      }
      if constexpr (kRescaleThreshold > 0) {
        float mx[2];
        bool grow = false;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(softmax.m[r], row_max(s, r, -INFINITY) * p.scale_log2);
          // m = -inf (no key yet) and mx finite: +inf > T, so the first real max always moves m.
          // Both -inf (every key masked so far): NaN > T is false, and the row needs nothing.
          grow = grow || mx[r] - softmax.m[r] > static_cast<float>(kRescaleThreshold);
        }
        rescale = __any_sync(0xffffffffu, grow);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // Not rescaling: the old max stays the base (P <= 2^T), l and O stay relative to it,
          // and alpha is 1 exactly (not exp2(0) from MUFU: ex2.approx is not specified exact
          // there). exp_base keeps an all-masked row (m = -inf) at P = 0, as the eager update.
          const float m_new = rescale ? mx[r] : softmax.m[r];
          const float base = exp_base(m_new);
          alpha[r] = rescale ? fast_exp2(softmax.m[r] - base) : 1.0f;
          softmax.m[r] = m_new;
          softmax.l[r] = softmax.l[r] * alpha[r] + exp2_row_scaled(s, r, p.scale_log2, base);
        }
      } else {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float base =
              softmax.move_max(r, row_max(s, r, -INFINITY) * p.scale_log2, &alpha[r]);
          softmax.l[r] = softmax.l[r] * alpha[r] + exp2_row_scaled(s, r, p.scale_log2, base);
        }
      }
    };
    // O *= alpha: 32 FMULs per thread at d=64. Lazy: only after a block that moved the warp's max
    // (a warp-uniform branch; the P V wgmma that wrote O has been waited for).
    auto rescale_o = [&] {
      if constexpr (kRescaleThreshold > 0) {
        if (!rescale) return;
      }
      if constexpr (FAULTS) {
        if (p.fault.o_rescale_skipped) return;
      }
      scale_rows<FragC16x8>(o, alpha);
    };
    auto convert_p = [&] {
#pragma unroll
      for (int k = 0; k < BC / 16; ++k) {
#pragma unroll
        for (int v = 0; v < 8; ++v) tOrP(v, 0, k) = static_cast<E>(s[2 * k + v / 4][v % 4]);
      }
    };
    // After the tile's last Q K^T: the producer may load the next tile's Q.
    auto release_k = [&](int j) {
      EmptyBarrier::arrive(&bar.k_empty[stage(j)]);
      if (j == num_kv - 1) EmptyBarrier::arrive(&bar.q_empty);
    };

    if constexpr (!DYNAMIC) hopper::wait_barrier(&bar.q_full, n & 1, "q_full", 0);
    if constexpr (OVERLAP) {
      // i = 0: Q K^T alone.
      hopper::wait_barrier(&bar.k_full[stage(0)], phase(0), "k_full", stage(0));
      turn_begin();
      wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(0)), tSrS);
      turn_end(false);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      release_k(0);
      if (num_masked > 0)
        softmax_block(block_of(0), std::true_type{});
      else
        softmax_block(block_of(0), std::false_type{});
      convert_p();
      // i: Q K_i^T and P_i-1 V_i-1 issued together; the softmax of i runs while P V does.
      auto step = [&](int i, auto masked) {
        hopper::wait_barrier(&bar.k_full[stage(i)], phase(i), "k_full", stage(i));
        hopper::wait_barrier(&bar.v_full[stage(i - 1)], phase(i - 1), "v_full", stage(i - 1));
        turn_begin();
        wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(i)), tSrS);
        wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(i - 1)), tOrO);
        turn_end(false);
        warpgroup_wait<1>();  // Q K_i^T done (batches complete in order)
        warpgroup_fence_operand(tSrS);
        release_k(i);
        softmax_block(block_of(i), masked);
        warpgroup_wait<0>();  // P_i-1 V_i-1 done: O and the P registers are free
        warpgroup_fence_operand(tOrO);
        EmptyBarrier::arrive(&bar.v_empty[stage(i - 1)]);
        rescale_o();
        convert_p();
      };
      int i = 1;
      for (; i < num_masked; ++i) step(i, std::true_type{});
      for (; i < num_kv; ++i) step(i, std::false_type{});
      const int last = num_kv - 1;
      hopper::wait_barrier(&bar.v_full[stage(last)], phase(last), "v_full", stage(last));
      turn_begin();
      wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(last)), tOrO);
      turn_end(last_tile);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      EmptyBarrier::arrive(&bar.v_empty[stage(last)]);
    } else {
      auto step = [&](int i, auto masked) {
        hopper::wait_barrier(&bar.k_full[stage(i)], phase(i), "k_full", stage(i));
        turn_begin();
        wgmma_issue<true, false>(mma_s, tSrQ, tSrK(_, _, _, stage(i)), tSrS);
        turn_end(last_tile && i == num_kv - 1);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tSrS);
        release_k(i);
        softmax_block(block_of(i), masked);
        rescale_o();
        convert_p();
        hopper::wait_barrier(&bar.v_full[stage(i)], phase(i), "v_full", stage(i));
        wgmma_issue<false, true>(mma_o, tOrP, tOrV(_, _, _, stage(i)), tOrO);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        EmptyBarrier::arrive(&bar.v_empty[stage(i)]);
      };
      int i = 0;
      for (; i < num_masked; ++i) step(i, std::true_type{});
      for (; i < num_kv; ++i) step(i, std::false_type{});
    }

    // Epilogue: the deferred 1/l, then O and lse (rows >= N skipped).
    float inv_l[2];
    softmax.finish(1.0f, inv_l);
    const std::int64_t head_offset = static_cast<std::int64_t>(tl.bh) * N;
    if constexpr (TMA_STORE) {
      // O through shared memory and a TMA store per warpgroup (hopper::store_o_tma).
      auto& storage = *reinterpret_cast<typename Traits::SharedStorageO*>(smem_raw);
      hopper::store_o_tma<T, typename Traits::SmemLayoutO, D, kWG>(
          storage.o.data(), p.tma_o, o, inv_l, row_in_tile - cwg * 64, t, cwg, ct % 128 == 0,
          PERSISTENT && n > 0, N, p.heads, tl.bh, tl.q_block);
      softmax.store_lse(p.lse + head_offset, row_a, row_b, N, t);
    } else {
      softmax.store<T, D>(static_cast<T*>(p.o) + head_offset * D, p.lse + head_offset, o, inv_l,
                          row_a, row_b, N, t);
    }
    it += num_kv;
    index = next;
    if (DYNAMIC && last_tile) break;
  }
  // Shared memory must outlive the last store's read of it.
  if constexpr (TMA_STORE) {
    if (ct % 128 == 0) tma_store_wait<0>();
  }
}

template <typename Traits, bool CAUSAL, bool PINGPONG, bool OVERLAP, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fa3_forward_kernel(const __grid_constant__ Fa3Params<Traits> p) {
  fa3_forward<Traits, CAUSAL, false, PINGPONG, OVERLAP, GRID, EPILOGUE>(p);
}

// The verification tests' build (kernels/common/fault.hpp): overlap on, ping-pong on (and, at
// d=64, where no-pingpong is the default schedule, also off: fa3_default_schedule), on the default
// plan's grid and epilogue. Its own name keeps it out of the SASS check (scripts/sass_check.py
// --filter fa3_forward_kernel).
template <typename Traits, bool CAUSAL, Grid GRID, Epilogue EPILOGUE, bool PINGPONG = true>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fa3_fault_kernel(const __grid_constant__ Fa3Params<Traits> p) {
  fa3_forward<Traits, CAUSAL, true, PINGPONG, true, GRID, EPILOGUE>(p);
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
std::string prepare_launch(const Shape& s, const DeviceBuffers& b, Schedule schedule,
                           const FaultInjection& fault, hopper::Enqueue* out) {
  using Traits = Fa3Traits<D, BR, BC, T>;
  constexpr int kWG = Traits::kConsumerWarpgroups;
  constexpr Plan kDefault = plan_of(Schedule::full, D, BC, CAUSAL, kWG, Traits::kOBuffer);
  // Grids with no build (they spill: grid_built, fa3_launch.hpp); fa3_row_rule says so first.
  constexpr bool kPersistentBuilt = grid_built(Grid::persistent, BR, BC, CAUSAL);
  if (s.N > INT_MAX / D || s.heads_total() > 65535)
    return "fa3: shape too large (N*d must fit 31 bits and B*H <= 65535)";
  const int N = static_cast<int>(s.N), heads = static_cast<int>(s.heads_total());
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) {
    *out = [](cudaStream_t) { return std::string(); };
    return "";
  }
  Fa3Params<Traits> p{Traits::tma_q(b.q, N, heads),
                      Traits::tma_kv(b.k, N, heads),
                      Traits::tma_kv(b.v, N, heads),
                      b.o,
                      b.lse,
                      N,
                      heads,
                      softmax_scale_log2(s, fault),
                      static_cast<int>(q_blocks),
                      1,
                      fault,
                      {},
                      nullptr};
  // grid: one thread block per tile, or (persistent, dynamic) one per SM walking the tiles.
  auto go = [&](auto kernel, Plan plan) -> std::string {
    const bool tma_store = plan.epilogue == Epilogue::tma_store;
    const int smem_bytes = tma_store ? Traits::kSmemBytesO : Traits::kSmemBytes;
    // Per device and per kernel: the attribute belongs to one kernel in one context. (A static
    // inside this lambda would be shared by every schedule's kernel, which all have one type:
    // only the first kernel launched got its attribute: "invalid argument" on the others.)
    const cudaError_t st = smem_attribute_once(kernel, smem_bytes);
    if (st != cudaSuccess)
      return std::string("fa3: cudaFuncSetAttribute: ") + cudaGetErrorString(st);
    if (tma_store) p.tma_o = Traits::tma_o(b.o, N, heads);
    dim3 grid(static_cast<unsigned>(q_blocks), static_cast<unsigned>(heads));
    if (plan.grid != Grid::tiles) {
      // The K and V of a section's heads may take this share of the L2 (fa3_tiles.hpp).
      constexpr std::int64_t kL2Share = CAUSAL ? kL2ShareCausal : kL2ShareNonCausal;
      hopper::PersistentShape shape;
      const std::string e =
          hopper::persistent_shape("fa3", q_blocks * heads, heads,
                                   2LL * N * D * sizeof(typename Traits::E), kL2Share, shape);
      if (!e.empty()) return e;
      grid = dim3(shape.blocks);
      p.section_heads = shape.section_heads;
    }
    if (plan.grid == Grid::dynamic) {
      if (b.workspace == nullptr || b.workspace_bytes < kTileCounterBytes)
        return "fa3: the dynamic grid needs its tile counter (workspace)";
      p.tile_counter = static_cast<unsigned*>(b.workspace);
    }
    *out = [kernel, grid, smem_bytes, p](cudaStream_t stream) {
      kernel<<<grid, Traits::kThreads, smem_bytes, stream>>>(p);
      return launch_status("fa3");
    };
    return std::string();
  };
  constexpr auto unbuilt = [](const char* what) { return std::string("fa3: ") + what; };
  if constexpr (FAULTS) {
    if (schedule == Schedule::full)
      return go(fa3_fault_kernel<Traits, CAUSAL, kDefault.grid, kDefault.epilogue>, kDefault);
    if constexpr (D == 64) {  // d=64's default schedule (fa3_default_schedule, fa3.hpp)
      if (schedule == Schedule::no_pingpong)
        return go(fa3_fault_kernel<Traits, CAUSAL, kDefault.grid, kDefault.epilogue, false>,
                  kDefault);
    }
    return unbuilt("fault injection is compiled for schedules full and no-pingpong (d=64)");
  } else {
    switch (schedule) {
      case Schedule::no_pingpong:
        return go(fa3_forward_kernel<Traits, CAUSAL, false, true, kDefault.grid, kDefault.epilogue>,
                  kDefault);
      case Schedule::no_overlap:
        return go(fa3_forward_kernel<Traits, CAUSAL, true, false, kDefault.grid, kDefault.epilogue>,
                  kDefault);
      case Schedule::persistent:
        if constexpr (kPersistentBuilt)
          return go(
              fa3_forward_kernel<Traits, CAUSAL, true, true, Grid::persistent, Epilogue::registers>,
              Plan{Grid::persistent, Epilogue::registers});
        else
          return unbuilt("causal persistent grids are not compiled for this tile (they spill)");
      default:
        return go(fa3_forward_kernel<Traits, CAUSAL, true, true, kDefault.grid, kDefault.epilogue>,
                  kDefault);
    }
  }
}

}  // namespace fa::fa3

// Explicit instantiations of fa3::prepare_launch for one tile shape (both causal settings, both
// 16-bit types, with and without the fault hooks): one head dimension per translation unit.
#define FA3_INSTANTIATE_ONE(D, BR, BC, CAUSAL, T, FAULTS)                                       \
  template std::string fa::fa3::prepare_launch<D, BR, BC, CAUSAL, T, FAULTS>(                   \
      const fa::Shape&, const fa::DeviceBuffers&, fa::fa3::Schedule, const fa::FaultInjection&, \
      fa::hopper::Enqueue*);
#define FA3_INSTANTIATE_TYPE(D, BR, BC, T)        \
  FA3_INSTANTIATE_ONE(D, BR, BC, false, T, false) \
  FA3_INSTANTIATE_ONE(D, BR, BC, true, T, false)  \
  FA3_INSTANTIATE_ONE(D, BR, BC, false, T, true)  \
  FA3_INSTANTIATE_ONE(D, BR, BC, true, T, true)
#define FA3_INSTANTIATE(D, BR, BC)               \
  FA3_INSTANTIATE_TYPE(D, BR, BC, __nv_bfloat16) \
  FA3_INSTANTIATE_TYPE(D, BR, BC, __half)
