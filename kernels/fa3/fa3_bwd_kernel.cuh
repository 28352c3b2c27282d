// fa3 backward kernel: FlashAttention-2's backward algorithm (K/V blocks outer, P recomputed from
// Q, K and the forward's lse) with FlashAttention-3's Hopper pieces: TMA loads through a ring of
// mbarriers filled by a producer warpgroup, every product on wgmma, dQ added to an fp32
// accumulator by TMA bulk reductions. sm_90a only; CuTe (the nvidia-cutlass wheel) for the
// swizzled shared-memory layouts, the wgmma atoms and the TMA descriptors.
//
// Algorithm (per head; scale = 1/sqrt(d), lse the forward's natural-log log-sum-exp per row):
//   P = exp(scale Q K^T - lse), dV = P^T dO, dP = dO V^T, D = rowsum(dO o O), dS = P o (dP - D),
//   dQ = scale dS K, dK = scale dS^T Q.
//
// Schedule:
//   pre-pass  one warp per (padded) query row: D and lse log2(e) into the workspace, padded to
//             whole query blocks (padding rows: D = 0, lse = +inf, so P = 0 there), and the
//             fp32 dQ accumulator zeroed, d floats per padded row (the rows together cover it).
//   main      grid (ceil(N/Bc) K/V blocks of Bc = 128 keys, B*H), query blocks of Br = 64 rows
//             (fa3_bwd.hpp: the tuning numbers); 384 threads: one producer
//             warpgroup (setmaxnreg 24) and two consumer warpgroups (240), consumer warpgroup w
//             owning keys [64 w, 64 w + 64) of the block, so its dK and dV (64 x d, fp32) stay in
//             its registers for the whole run.
//     producer  one thread: K_j and V_j once (TMA, one barrier); then, for each query block i the
//               K/V block sees (causal: from the diagonal on), Q_i with its lse and dO_i with its
//               D (TMA tiles plus 1-D bulk copies) into a ring of kStages buffers, Q and dO with
//               their own full and empty barriers.
//     consumers for each query block i (Br rows):
//               S^T = K_w Q_i^T, dP^T = V_w dO_i^T   wgmma SS, issued together; the exponentials
//                                                   of S^T run while dP^T is in the tensor cores
//               P^T = exp2(S^T scale log2e - lse_i)  masked (causal key > query) only on the
//                                                   query blocks that reach the diagonal
//               dS^T = P^T o (dP^T - D_i)
//               dV_w += P^T dO_i                     wgmma RS: P^T, converted to 16 bits, is the
//                                                   A operand from registers; dO_i is read
//                                                   MN-major from its buffer
//               dS^T -> shared memory (double-buffered), named barrier of both warpgroups
//               dQ_i = dS K_j                        wgmma SS (dS MN-major): warpgroup w takes
//                                                   half of dQ_i's columns
//               dK_w += dS^T Q_i                     wgmma RS, as dV's
//               dQ_i -> shared memory (dq_share_index) while dK's product runs
//               (two buffers: block i waits only for the reads of block i-2's), handed to the
//               dQ writer; at d = 64 dK's product is not waited for here: it runs on while
//               block i+1's S^T and dP^T are issued (block i's Q and dO freed once it is done)
//     dQ writer producer warp 1: for each query block, once both consumer warpgroups wrote
//               their dQ shares, TMA bulk reduce-adds (cp.reduce.async.bulk .add.f32) of them
//               into the fp32 accumulator; when the copies have read the buffer, it is free
//               again. The consumers never wait on a reduction (FlashAttention-3's dQ warp).
//             epilogue: dK *= scale; dK, dV written once from registers.
//   post-pass dQ = scale * accumulator, read back from the shares' layout, in the input type.
//
// Keys past N need no mask: TMA fills their K and V rows with zeros, so they add nothing to dQ,
// and their dK, dV rows are never written. Query rows past N have P = 0 (lse = +inf).
// HBM traffic: profiler/io_model.cpp (fa2_backward_model, its bulk-reduce terms). Tuning numbers:
// fa3_bwd.hpp. Fault hooks (verification tests): drop_kv_block, mask_shift, the scale,
// delta_factor (a wrong D), drop_dq_block (lost dQ contributions).
#pragma once

// clang-format off
#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/memory.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
// clang-format on

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/fast_exp2.cuh"
#include "kernels/common/fault.hpp"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/fa3/fa3_bwd.hpp"
#include "kernels/fa3/fa3_bwd_layout.hpp"
#include "kernels/fa3/fa3_bwd_smem.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/hopper/sm90_common.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/fa3: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::fa3_bwd {

using namespace cute;
using hopper::wait_barrier;
using hopper::wgmma_issue;
using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// Named barriers: both consumer warpgroups' dS tile (kDsBarrier); per dQ buffer b, the consumers'
// shares written (kDqFull + b) and read by the reductions (kDqEmpty + b), each between the
// consumers and the dQ writer warp. CUTLASS's NamedBarrier takes ids 0-7 (8 are reserved).
inline constexpr int kDsBarrier = 1, kDqFull = 2, kDqEmpty = 4;

template <int D_, int BR_, typename T_>
struct Traits {
  static constexpr int D = D_, BR = BR_, BC = kBlockKv;
  // The next query block's S^T and dP^T issued while this one's dK runs (fa3_bwd.hpp).
  static constexpr bool kIssueAhead = D <= kIssueAheadMaxHeadDim;
  static constexpr int kStages = kQueryStages;
  static constexpr int kConsumerWarpgroups = 2;  // 64 keys each
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = kConsumerThreads + 128;
  static_assert(BC == 64 * kConsumerWarpgroups && BR % 64 == 0 && D % 64 == 0);

  using T = T_;
  using E =
      std::conditional_t<std::is_same_v<T, __nv_bfloat16>, cutlass::bfloat16_t, cutlass::half_t>;

  // Q, dO, K, V: 128-byte swizzle, head dim contiguous (as TMA writes them). The products that
  // read Q, dO and K with the head dim as their N take them MN-major through transposed views.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<E>;
  using SmemLayoutQ =
      decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BR>, Int<D>, Int<kStages>>{}));
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{},
      make_ordered_layout(cute::Shape<Int<D>, Int<BR>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BC>, Int<D>>{}));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(cute::Shape<Int<D>, Int<BC>>{}, Step<_2, _1>{})));
  // dS as dQ's A operand (fa3_bwd_smem.hpp): each thread's dS^T pair (two adjacent queries) is
  // one 32-bit store.
  using SmemLayoutDs = SmemLayoutDsOf<E, BR, BC>;
  // store_ds's addressing (fa3_bwd_layout.hpp: ds_offset) is this layout's at 64 x 128, 16-bit.
  static_assert(BR == 64 && BC == 128 && sizeof(E) == 2);
  static constexpr std::uint32_t kDsBufferBytes = BR * BC * sizeof(E);

  // S^T and dP^T: (Bc keys, Br queries, d), one atom row of 64 keys per consumer warpgroup.
  using MmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<BR>, Int<D>>>(),
      Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>{}));
  // dV += P^T dO and dK += dS^T Q: (Bc keys, d, Br queries), A from registers.
  using MmaDkv =
      decltype(make_tiled_mma(GMMA::rs_op_selector<E, E, float, cute::Shape<_64, Int<D>, Int<BR>>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>{}));
  // dQ = dS K: (Br queries, d, Bc keys); the warpgroups split the rows in 64s, then the columns.
  static constexpr int kDqRowGroups = BR / 64;
  static constexpr int kDqColGroups = kConsumerWarpgroups / kDqRowGroups;
  static constexpr int kDqCols = D / kDqColGroups;  // dQ columns of one warpgroup
  static_assert(kDqRowGroups * kDqColGroups == kConsumerWarpgroups);
  using MmaDq = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<kDqCols>, Int<BC>>, GMMA::Major::MN,
                           GMMA::Major::MN>(),
      Layout<cute::Shape<Int<kDqRowGroups>, Int<kDqColGroups>, _1>>{}));
  // One warpgroup's dQ share: 64 rows x kDqCols, row-major, each row's 8-column groups
  // permuted (dq_share_index).
  static constexpr int kDqShare = 64 * kDqCols;
  static_assert(kDqCols % 32 == 0);

  static auto gmem(const void* p, int N, int heads) {
    return make_tensor(
        make_gmem_ptr(static_cast<const E*>(p)), make_shape(N, Int<D>{}, heads),
        make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
  }
  static auto tma_q(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem(p, N, heads), take<0, 2>(SmemLayoutQ{}),
                         cute::Shape<Int<BR>, Int<D>>{}, _1{});
  }
  static auto tma_k(const void* p, int N, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem(p, N, heads), SmemLayoutK{},
                         cute::Shape<Int<BC>, Int<D>>{}, _1{});
  }
  using TmaQ = decltype(tma_q(nullptr, 1, 1));
  using TmaK = decltype(tma_k(nullptr, 1, 1));

  static constexpr std::uint32_t kBytesQ = BR * D * sizeof(E);
  static constexpr std::uint32_t kBytesK = BC * D * sizeof(E);
  static constexpr std::uint32_t kBytesRow = BR * sizeof(float);  // lse or D of a query block

  struct SharedStorage {
    array_aligned<E, cosize_v<SmemLayoutK>, 1024> k;
    array_aligned<E, cosize_v<SmemLayoutK>, 1024> v;
    array_aligned<E, cosize_v<SmemLayoutQ>, 1024> q;
    array_aligned<E, cosize_v<SmemLayoutQ>, 1024> d_o;
    array_aligned<E, cosize_v<SmemLayoutDs>, 1024> ds;
    // [buffer][warpgroup]; aligned to at least 4 cols bytes (256 at d=128): stage_dq's XOR flips
    // byte-address bits 5-7, which must be zero in every share's base.
    array_aligned<float, 2 * kConsumerWarpgroups * kDqShare, 1024> dq;
    alignas(16) float lse[kStages][BR];
    alignas(16) float delta[kStages][BR];
    std::uint64_t kv_full;
    std::uint64_t q_full[kStages], q_empty[kStages];
    std::uint64_t do_full[kStages], do_empty[kStages];
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  static_assert(kSmemBytes <= 227 * 1024);
};

template <typename Tr>
struct Params {
  typename Tr::TmaQ tma_q;
  typename Tr::TmaQ tma_do;
  typename Tr::TmaK tma_k;
  typename Tr::TmaK tma_v;
  const float* lse_log2;  // [B*H][num_q_blocks * Br]: lse log2(e); +inf past N
  const float* delta;     // [B*H][num_q_blocks * Br]: D; 0 past N
  float* dq_accum;        // [B*H][num_q_blocks][warpgroups][Tr::kDqShare]
  void* dk;
  void* dv;
  int N;
  int heads;  // B*H
  int num_q_blocks;
  float scale_log2;  // softmax scale * log2(e), fault hooks folded in
  float scale;       // softmax scale, for dK
  FaultInjection fault;
};

// 1-D bulk reduce-add of `bytes` of fp32 from shared memory into global memory (sm_90), in the
// issuing thread's bulk group.
__device__ __forceinline__ void bulk_reduce_add(float* gmem, const float* smem, int bytes) {
  const std::uint32_t s = cute::cast_smem_ptr_to_uint(smem);
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem),
      "r"(s), "r"(bytes)
      : "memory");
}

// An accumulator of 8-column tiles (mma.m16n8's C order) as the 16-bit A operand of an RS
// wgmma: per 16 columns, (2 columns, 2 rows, 2 column halves) per thread.
template <int QT, typename Frag>
__device__ __forceinline__ void to_operand(const float (&acc)[QT][4], Frag& frag) {
  using E = typename Frag::value_type;
#pragma unroll
  for (int k = 0; k < QT / 2; ++k) {
#pragma unroll
    for (int v = 0; v < 8; ++v) frag(v, 0, k) = static_cast<E>(acc[2 * k + v / 4][v % 4]);
  }
}

// Which query blocks K/V block kb sees and which of them need the causal mask.
template <int BR, int BC, bool CAUSAL, bool FAULTS>
struct QueryBlocks {
  int first, count, masked;  // masked: the first `masked` of them

  __device__ __forceinline__ QueryBlocks(int kb, int num_q_blocks) {
    const int k0 = kb * BC;
    first = CAUSAL ? k0 / BR : 0;
    count = num_q_blocks - first;
    // Block i needs the mask when its first query is below the K/V block's last key.
    masked = CAUSAL ? min(count, (k0 + BC - 1 + BR - 1) / BR - first) : 0;
    if constexpr (FAULTS) masked = count;  // the fault hooks move the mask's edge
  }
};

// Threads at the dQ buffers' barriers: the consumers and the dQ writer warp.
template <typename Tr>
inline constexpr int kDqThreads = Tr::kConsumerThreads + 32;

// The dQ writer (one warp): for each of the K/V block's query blocks, the consumers' dQ shares
// bulk-added into the accumulator (lane 0 issues), then the buffer released once read. The last
// two blocks' buffers are not released: no consumer waits for them.
template <typename Tr, bool FAULTS>
__device__ __forceinline__ void dq_writer(const Params<Tr>& p, const float* dq_buffers, int bh,
                                          int first_block, int num_blocks) {
  const bool issuer = threadIdx.x % 32 == 0;
  const std::int64_t head = static_cast<std::int64_t>(bh) * p.num_q_blocks;
  for (int i = 0; i < num_blocks; ++i) {
    const int buffer = i & 1, m = first_block + i;
    cutlass::arch::NamedBarrier::sync(kDqThreads<Tr>, kDqFull + buffer);
    if (issuer && !(FAULTS && m == p.fault.drop_dq_block)) {
      const float* shares = dq_buffers + buffer * Tr::kConsumerWarpgroups * Tr::kDqShare;
      bulk_reduce_add(p.dq_accum + (head + m) * Tr::kConsumerWarpgroups * Tr::kDqShare, shares,
                      Tr::kConsumerWarpgroups * Tr::kDqShare * static_cast<int>(sizeof(float)));
      tma_store_arrive();
    }
    if (issuer) tma_store_wait<0>();  // the buffer has been read (and, last, before the exit)
    __syncwarp();
    if (i + 2 < num_blocks) cutlass::arch::NamedBarrier::arrive(kDqThreads<Tr>, kDqEmpty + buffer);
  }
}

template <typename Tr, bool CAUSAL, bool FAULTS>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    fa3_backward_kernel(const __grid_constant__ Params<Tr> p) {
  using E = typename Tr::E;
  using T = typename Tr::T;
  constexpr int D = Tr::D, BR = Tr::BR, BC = Tr::BC, kStages = Tr::kStages;
  constexpr int QT = BR / 8, DT = D / 8, QC = Tr::kDqCols / 8;  // 8-column tiles per thread

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>(smem_raw);

  const int kb = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int N = p.N;
  const bool dropped = FAULTS && kb == p.fault.drop_kv_block;
  const QueryBlocks<BR, BC, CAUSAL, FAULTS> blocks(kb, p.num_q_blocks);
  const int num_blocks = dropped ? 0 : blocks.count;

  if (threadIdx.x == 0) {
    FullBarrier::init(&smem.kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      FullBarrier::init(&smem.q_full[s], 1);
      FullBarrier::init(&smem.do_full[s], 1);
      EmptyBarrier::init(&smem.q_empty[s], Tr::kConsumerThreads);
      EmptyBarrier::init(&smem.do_empty[s], Tr::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // ---------------------------------------------------------------- producer: TMA loads
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
    if (threadIdx.x == 0 && num_blocks > 0) {
      prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
      prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
      Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemLayoutK{});
      Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Tr::SmemLayoutK{});
      Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemLayoutQ{});
      Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Tr::SmemLayoutQ{});
      Tensor mK = p.tma_k.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mV = p.tma_v.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mQ = p.tma_q.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      Tensor mdO = p.tma_do.get_tma_tensor(make_shape(N, Int<D>{}, p.heads));
      auto tma_k = p.tma_k.get_slice(_0{});
      auto tma_v = p.tma_v.get_slice(_0{});
      auto tma_q = p.tma_q.get_slice(_0{});
      auto tma_do = p.tma_do.get_slice(_0{});
      Tensor gK = local_tile(mK(_, _, bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(kb, _0{}));
      Tensor gV = local_tile(mV(_, _, bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(kb, _0{}));
      Tensor gQ = local_tile(mQ(_, _, bh), cute::Shape<Int<BR>, Int<D>>{}, make_coord(_, _0{}));
      Tensor gdO = local_tile(mdO(_, _, bh), cute::Shape<Int<BR>, Int<D>>{}, make_coord(_, _0{}));
      Tensor tQg = tma_q.partition_S(gQ);  // (TMA, m, k, block)
      Tensor tQs = tma_q.partition_D(sQ);  // (TMA, m, k, stage)
      Tensor tdOg = tma_do.partition_S(gdO);
      Tensor tdOs = tma_do.partition_D(sdO);

      FullBarrier::arrive_and_expect_tx(&smem.kv_full, 2 * Tr::kBytesK);
      copy(p.tma_k.with(smem.kv_full), tma_k.partition_S(gK), tma_k.partition_D(sK));
      copy(p.tma_v.with(smem.kv_full), tma_v.partition_S(gV), tma_v.partition_D(sV));
      const std::int64_t rows_head = static_cast<std::int64_t>(p.num_q_blocks) * BR;
      const float* lse_head = p.lse_log2 + bh * rows_head;
      const float* delta_head = p.delta + bh * rows_head;
      for (int i = 0; i < num_blocks; ++i) {
        const int m = blocks.first + i, s = i % kStages;
        const std::uint32_t free_phase = ((i / kStages) & 1) ^ 1;  // first round: free
        wait_barrier(&smem.q_empty[s], free_phase, "q_empty", s);
        FullBarrier::arrive_and_expect_tx(&smem.q_full[s], Tr::kBytesQ + Tr::kBytesRow);
        copy(p.tma_q.with(smem.q_full[s]), tQg(_, _, _, m), tQs(_, _, _, s));
        SM90_BULK_COPY_G2S::copy(lse_head + static_cast<std::int64_t>(m) * BR, &smem.q_full[s],
                                 smem.lse[s], Tr::kBytesRow);
        wait_barrier(&smem.do_empty[s], free_phase, "do_empty", s);
        FullBarrier::arrive_and_expect_tx(&smem.do_full[s], Tr::kBytesQ + Tr::kBytesRow);
        copy(p.tma_do.with(smem.do_full[s]), tdOg(_, _, _, m), tdOs(_, _, _, s));
        SM90_BULK_COPY_G2S::copy(delta_head + static_cast<std::int64_t>(m) * BR, &smem.do_full[s],
                                 smem.delta[s], Tr::kBytesRow);
      }
    } else if (threadIdx.x / 32 == 1) {
      dq_writer<Tr, FAULTS>(p, smem.dq.data(), bh, blocks.first, num_blocks);
    }
    return;
  }

  // ---------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
  const int ct = threadIdx.x - 128;  // consumer thread
  const int cwg = ct / 128;          // consumer warpgroup: keys [64 cwg, 64 cwg + 64)
  const int lane = ct % 32, g = lane / 4, t = lane % 4;
  const int key_a = (ct / 32) * 16 + g;  // this thread's keys in the block: key_a, key_a + 8
  const int k0 = kb * BC;

  typename Tr::MmaSdP mma_sdp;
  typename Tr::MmaDkv mma_dkv;
  typename Tr::MmaDq mma_dq;
  auto thr_sdp = mma_sdp.get_thread_slice(ct);
  auto thr_dkv = mma_dkv.get_thread_slice(ct);
  auto thr_dq = mma_dq.get_thread_slice(ct);
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Tr::SmemLayoutK{});
  Tensor sKt = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemLayoutKt{});
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Tr::SmemLayoutQ{});
  Tensor sQt = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemLayoutQt{});
  Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o.data()), typename Tr::SmemLayoutQt{});
  Tensor sdS = make_tensor(make_smem_ptr(smem.ds.data()), typename Tr::SmemLayoutDs{});

  Tensor tSrK = thr_sdp.partition_fragment_A(sK);    // (MMA, 1, D/16)
  Tensor tSrV = thr_sdp.partition_fragment_A(sV);    // (MMA, 1, D/16)
  Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);    // (MMA, 1, D/16, stage)
  Tensor tSrdO = thr_sdp.partition_fragment_B(sdO);  // (MMA, 1, D/16, stage)
  Tensor tSrS = partition_fragment_C(mma_sdp, cute::Shape<Int<BC>, Int<BR>>{});
  Tensor tSrdP = partition_fragment_C(mma_sdp, cute::Shape<Int<BC>, Int<BR>>{});
  Tensor tVrdOt = thr_dkv.partition_fragment_B(sdOt);  // (MMA, 1, BR/16, stage)
  Tensor tKrQt = thr_dkv.partition_fragment_B(sQt);    // (MMA, 1, BR/16, stage)
  Tensor tVrdV = partition_fragment_C(mma_dkv, cute::Shape<Int<BC>, Int<D>>{});
  Tensor tKrdK = partition_fragment_C(mma_dkv, cute::Shape<Int<BC>, Int<D>>{});
  // P^T and dS^T as A operands: per 16 queries, (2 columns, 2 rows, 2 column halves) per thread.
  Tensor tVrP = make_tensor<E>(Layout<cute::Shape<cute::Shape<_2, _2, _2>, _1, Int<BR / 16>>>{});
  Tensor tKrdS = make_tensor<E>(Layout<cute::Shape<cute::Shape<_2, _2, _2>, _1, Int<BR / 16>>>{});
  Tensor tQrdS = thr_dq.partition_fragment_A(sdS);  // (MMA, 1, BC/16, buffer)
  Tensor tQrKt = thr_dq.partition_fragment_B(sKt);  // (MMA, 1, BC/16)
  Tensor tQrdQ = partition_fragment_C(mma_dq, cute::Shape<Int<BR>, Int<D>>{});
  static_assert(decltype(size(tSrS))::value == QT * 4 && decltype(size(tVrdV))::value == DT * 4 &&
                decltype(size(tQrdQ))::value == QC * 4);
  // The accumulators in mma.m16n8's C-fragment order: element c + 2r of 8-column tile n is row
  // g + 8r, column 8n + 2t + c (rows: keys for S^T, dP^T, dK, dV; queries for dQ).
  float(&s)[QT][4] = *reinterpret_cast<float(*)[QT][4]>(raw_pointer_cast(tSrS.data()));
  float(&dp)[QT][4] = *reinterpret_cast<float(*)[QT][4]>(raw_pointer_cast(tSrdP.data()));
  float(&dv)[DT][4] = *reinterpret_cast<float(*)[DT][4]>(raw_pointer_cast(tVrdV.data()));
  float(&dk)[DT][4] = *reinterpret_cast<float(*)[DT][4]>(raw_pointer_cast(tKrdK.data()));
  float(&dq)[QC][4] = *reinterpret_cast<float(*)[QC][4]>(raw_pointer_cast(tQrdQ.data()));

#pragma unroll
  for (int i = 0; i < DT; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dv[i][e] = dk[i][e] = 0.0f;
  }
  const int shift = FAULTS ? p.fault.mask_shift : 0;

  // P^T (in s) from the scores: exp2(s scale log2e - lse), masked where the key is past the query.
  auto probabilities = [&](const float* lse, int q0, auto masked) {
#pragma unroll
    for (int n = 0; n < QT; ++n) {
      const float2 l = *reinterpret_cast<const float2*>(lse + 8 * n + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = fast_exp2(s[n][e] * p.scale_log2 - ((e & 1) ? l.y : l.x));
        if constexpr (decltype(masked)::value) {
          const int key = k0 + key_a + 8 * (e >> 1), query = q0 + 8 * n + 2 * t + (e & 1);
          if (key > query + shift) x = 0.0f;
        }
        s[n][e] = x;
      }
    }
  };
  // dS^T (in dp) = P^T o (dP^T - D).
  auto score_gradients = [&](const float* delta) {
#pragma unroll
    for (int n = 0; n < QT; ++n) {
      const float2 d2 = *reinterpret_cast<const float2*>(delta + 8 * n + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - ((e & 1) ? d2.y : d2.x));
    }
  };
  // dS^T into dS's buffer: each (query pair, key) as one 32-bit store, at one base XOR 16 n
  // (fa3_bwd_layout.hpp: ds_offset, SmemLayoutDs's swizzle): no address arithmetic per store.
  const std::uint32_t ds_base =
      cute::cast_smem_ptr_to_uint(smem.ds.data()) + ds_thread_base(key_a, t);
  auto store_ds = [&](int buffer) {
    const std::uint32_t base = ds_base + buffer * Tr::kDsBufferBytes;
#pragma unroll
    for (int n = 0; n < QT; ++n) {
      const std::uint32_t at = base ^ (16u * n);
      const std::uint32_t upper = sm80::pack2<T>(dp[n][0], dp[n][1]),
                          lower = sm80::pack2<T>(dp[n][2], dp[n][3]);
      cutlass::arch::shared_store<4>(at, &upper);
      cutlass::arch::shared_store<4>(at + 1024u, &lower);
    }
  };
  // Block i's dQ share into its buffer (fa3_bwd_layout.hpp: conflict-free, one base XOR 32 n per
  // store), for the dQ writer; the buffer's previous contents (block i-2) must have been read by
  // their reduction first.
  const std::uint32_t dq_base = cute::cast_smem_ptr_to_uint(smem.dq.data()) +
                                cwg * Tr::kDqShare * 4u +
                                dq_share_thread_base(16 * ((ct % 128) / 32) + g, t, Tr::kDqCols);
  auto stage_dq = [&](int i) {
    const int buffer = i & 1;
    if (i >= 2) cutlass::arch::NamedBarrier::sync(kDqThreads<Tr>, kDqEmpty + buffer);
    const std::uint32_t base = dq_base + buffer * (Tr::kConsumerWarpgroups * Tr::kDqShare * 4u);
#pragma unroll
    for (int n = 0; n < QC; ++n) {
      const std::uint32_t at = base ^ (32u * n);
      const float2 upper = make_float2(dq[n][0], dq[n][1]), lower = make_float2(dq[n][2], dq[n][3]);
      cutlass::arch::shared_store<8>(at, &upper);
      cutlass::arch::shared_store<8>(at + 32u * Tr::kDqCols, &lower);
    }
    cutlass::arch::fence_view_async_shared();  // the writes, visible to the bulk copies
    cutlass::arch::NamedBarrier::arrive(kDqThreads<Tr>, kDqFull + buffer);
  };

  // Query block i's Q and dO buffers free again, once the products that read them are done.
  auto release = [&](int i) {
    EmptyBarrier::arrive(&smem.q_empty[i % kStages]);
    EmptyBarrier::arrive(&smem.do_empty[i % kStages]);
  };

  if (num_blocks > 0) wait_barrier(&smem.kv_full, 0, "kv_full", 0);
  // Inlined by force: at d = 64 nvcc kept the masked copy out of line, its accumulators on the
  // stack (a 1.6 KB frame, 30x slower).
  auto step = [&](int i, bool masked) __attribute__((always_inline)) {
    const int m = blocks.first + i, s_ = i % kStages, buffer = i & 1;
    const std::uint32_t phase = (i / kStages) & 1;
    const int q0 = m * BR;
    wait_barrier(&smem.q_full[s_], phase, "q_full", s_);
    wgmma_issue<true, false>(mma_sdp, tSrK, tSrQ(_, _, _, s_), tSrS);
    wait_barrier(&smem.do_full[s_], phase, "do_full", s_);
    wgmma_issue<true, false>(mma_sdp, tSrV, tSrdO(_, _, _, s_), tSrdP);
    warpgroup_wait<1>();  // S^T done (kIssueAhead: and the previous block's dK before it)
    warpgroup_fence_operand(tSrS);
    if constexpr (Tr::kIssueAhead) {
      warpgroup_fence_operand(tKrdK);
      if (i > 0) release(i - 1);
    }
    if (masked)
      probabilities(smem.lse[s_], q0, std::true_type{});
    else
      probabilities(smem.lse[s_], q0, std::false_type{});
    warpgroup_wait<0>();  // dP^T done
    warpgroup_fence_operand(tSrdP);
    score_gradients(smem.delta[s_]);
    to_operand(s, tVrP);
    wgmma_issue<false, true>(mma_dkv, tVrP, tVrdOt(_, _, _, s_), tVrdV);
    to_operand(dp, tKrdS);
    store_ds(buffer);
    cutlass::arch::fence_view_async_shared();  // dS, visible to wgmma
    cutlass::arch::NamedBarrier::sync(Tr::kConsumerThreads, kDsBarrier);
    // dQ before dK (FlashAttention-3's order): dQ's staging then runs while dK's product does.
    Tensor tQrdSb = tQrdS(_, _, _, buffer);
    wgmma_issue<true, false>(mma_dq, tQrdSb, tQrKt, tQrdQ);
    wgmma_issue<false, true>(mma_dkv, tKrdS, tKrQt(_, _, _, s_), tKrdK);
    warpgroup_wait<1>();  // dV and dQ done
    warpgroup_fence_operand(tQrdQ);
    stage_dq(i);
    if constexpr (!Tr::kIssueAhead) {  // else dK runs on while the next block's S^T, dP^T issue
      warpgroup_wait<0>();             // dK done
      warpgroup_fence_operand(tVrdV);
      warpgroup_fence_operand(tKrdK);
      release(i);
    }
  };
  if (num_blocks > 0) {
    for (int i = 0; i < num_blocks; ++i) step(i, i < blocks.masked);
    if constexpr (Tr::kIssueAhead) {
      warpgroup_wait<0>();  // the last dK
      warpgroup_fence_operand(tVrdV);
      warpgroup_fence_operand(tKrdK);
      release(num_blocks - 1);
    }
  }

  // Epilogue: dK = scale dS^T Q, dV; keys past N are not written.
  T* dk_head = static_cast<T*>(p.dk) + static_cast<std::int64_t>(bh) * N * D;
  T* dv_head = static_cast<T*>(p.dv) + static_cast<std::int64_t>(bh) * N * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = k0 + key_a + 8 * r;
    if (key >= N) continue;
#pragma unroll
    for (int n = 0; n < DT; ++n) {
      const std::int64_t at = static_cast<std::int64_t>(key) * D + 8 * n + 2 * t;
      *reinterpret_cast<std::uint32_t*>(dk_head + at) =
          sm80::pack2<T>(dk[n][2 * r] * p.scale, dk[n][2 * r + 1] * p.scale);
      *reinterpret_cast<std::uint32_t*>(dv_head + at) =
          sm80::pack2<T>(dv[n][2 * r], dv[n][2 * r + 1]);
    }
  }
}

// Pre-pass: one warp per padded query row: D = rowsum(dO o O), lse log2(e), and d floats of the
// dQ accumulator zeroed (floats [row d, row d + d): the rows together clear all of it, whatever
// the shares' order); rows past N get D = 0 and lse = +inf (P = 0).
template <int D, typename T>
__global__ void __launch_bounds__(256)
    fa3_backward_prepass_kernel(const T* o, const T* d_o, const float* lse, float* lse_log2,
                                float* delta, float* dq_accum, int N, int rows_head,
                                std::int64_t rows, float delta_factor) {
  static_assert(D == 64 || D == 128);
  constexpr int kPerLane = D / 32;  // one 4- or 8-byte load per lane and tensor
  using Vec = std::conditional_t<kPerLane == 4, uint2, std::uint32_t>;
  using Zeros = std::conditional_t<kPerLane == 4, float4, float2>;
  const std::int64_t row = blockIdx.x * std::int64_t{8} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const std::int64_t bh = row / rows_head;
  const int q = static_cast<int>(row % rows_head);
  float acc = 0.0f;
  if (q < N) {
    const std::int64_t at = (bh * N + q) * D + lane * kPerLane;
    const Vec ov = *reinterpret_cast<const Vec*>(o + at);
    const Vec gv = *reinterpret_cast<const Vec*>(d_o + at);
    const T* oe = reinterpret_cast<const T*>(&ov);
    const T* ge = reinterpret_cast<const T*>(&gv);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) acc += static_cast<float>(oe[c]) * static_cast<float>(ge[c]);
  }
  *reinterpret_cast<Zeros*>(dq_accum + row * D + lane * kPerLane) = Zeros{};
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    delta[row] = acc * delta_factor;
    lse_log2[row] = q < N ? lse[bh * N + q] * 1.4426950408889634f : INFINITY;
  }
}

// Post-pass: dQ = scale * accumulator, four adjacent columns per thread (one float4 read, one
// 8-byte write), read from where the main kernel's dQ shares put them (dq_share_index).
template <typename Tr>
__global__ void __launch_bounds__(256)
    fa3_backward_dq_kernel(const float* dq_accum, void* dq, int N, int num_q_blocks,
                           std::int64_t quads, float scale) {
  constexpr int D = Tr::D, BR = Tr::BR, kCols = Tr::kDqCols;
  using T = typename Tr::T;
  for (std::int64_t i = blockIdx.x * std::int64_t{256} + threadIdx.x; i < quads;
       i += std::int64_t{gridDim.x} * 256) {
    const int c = static_cast<int>(i % (D / 4)) * 4;
    const std::int64_t row = i / (D / 4);
    const int q = static_cast<int>(row % N);
    const std::int64_t bh = row / N;
    const int m = q / BR, r = q % BR;
    const int w = r / 64 + Tr::kDqRowGroups * (c / kCols);  // the consumer warpgroup
    const std::int64_t share = (bh * num_q_blocks + m) * Tr::kConsumerWarpgroups + w;
    const float4 a = *reinterpret_cast<const float4*>(dq_accum + share * Tr::kDqShare +
                                                      dq_share_index(r % 64, c % kCols, kCols));
    reinterpret_cast<uint2*>(dq)[i] = make_uint2(sm80::pack2<T>(a.x * scale, a.y * scale),
                                                 sm80::pack2<T>(a.z * scale, a.w * scale));
  }
}

template <int D, int BR, bool CAUSAL, typename T, bool FAULTS>
std::string prepare_launch(const Shape& s, const BackwardBuffers& b, const FaultInjection& fault,
                           hopper::Enqueue* out) {
  using Tr = Traits<D, BR, T>;
  if (s.N > INT_MAX / D || s.heads_total() > 65535)
    return "fa3 backward: shape too large (N*d must fit 31 bits and B*H <= 65535)";
  const int N = static_cast<int>(s.N), heads = static_cast<int>(s.heads_total());
  const int num_q_blocks = (N + BR - 1) / BR;
  const WorkspaceLayout layout = workspace_layout(s, BR);
  if (b.workspace == nullptr || b.workspace_bytes < layout.bytes)
    return "fa3 backward: workspace too small";
  // The passes read O and write dQ in D/32 and 4 elements per thread (TMA checks Q, K, V, dO).
  auto aligned = [](const void* ptr, std::size_t bytes) {
    return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0;
  };
  if (!aligned(b.o, D / 32 * sizeof(T)) || !aligned(b.d_o, D / 32 * sizeof(T)) ||
      !aligned(b.dq, 4 * sizeof(T)))
    return "fa3 backward: O and dO must be " + std::to_string(D / 32 * sizeof(T)) +
           "-byte aligned and dQ " + std::to_string(4 * sizeof(T)) + "-byte aligned";
  auto* base = static_cast<unsigned char*>(b.workspace);
  float* const lse_log2 = reinterpret_cast<float*>(base);
  float* const delta = reinterpret_cast<float*>(base + layout.delta_offset);
  float* const dq_accum = reinterpret_cast<float*>(base + layout.dq_offset);
  Params<Tr> p{Tr::tma_q(b.q, N, heads),
               Tr::tma_q(b.d_o, N, heads),
               Tr::tma_k(b.k, N, heads),
               Tr::tma_k(b.v, N, heads),
               lse_log2,
               delta,
               dq_accum,
               b.dk,
               b.dv,
               N,
               heads,
               num_q_blocks,
               softmax_scale_log2(s, fault),
               static_cast<float>(s.scale()),
               fault};
  auto kernel = fa3_backward_kernel<Tr, CAUSAL, FAULTS>;
  const cudaError_t st = hopper::smem_attribute_once(kernel, Tr::kSmemBytes);
  if (st != cudaSuccess)
    return std::string("fa3 backward: cudaFuncSetAttribute: ") + cudaGetErrorString(st);
  const std::int64_t rows = static_cast<std::int64_t>(heads) * num_q_blocks * BR;
  const std::int64_t quads = static_cast<std::int64_t>(heads) * N * (D / 4);
  const float delta_factor = FAULTS ? fault.delta_factor : 1.0f;
  const float dq_scale = p.scale;
  *out = [=](cudaStream_t stream) -> std::string {
    fa3_backward_prepass_kernel<D, T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
        static_cast<const T*>(b.o), static_cast<const T*>(b.d_o), b.lse, lse_log2, delta, dq_accum,
        N, num_q_blocks * BR, rows, delta_factor);
    if (std::string e = launch_status("fa3 backward pre-pass"); !e.empty()) return e;
    const dim3 grid(static_cast<unsigned>((N + Tr::BC - 1) / Tr::BC), static_cast<unsigned>(heads));
    kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
    if (std::string e = launch_status("fa3 backward"); !e.empty()) return e;
    const unsigned convert_blocks =
        static_cast<unsigned>(std::min<std::int64_t>((quads + 255) / 256, 65535 * 8));
    fa3_backward_dq_kernel<Tr>
        <<<convert_blocks, 256, 0, stream>>>(dq_accum, b.dq, N, num_q_blocks, quads, dq_scale);
    return launch_status("fa3 backward dQ");
  };
  return "";
}

}  // namespace fa::fa3_bwd

// Explicit instantiations for one head dimension (both masks, both 16-bit types, and the fault
// hooks).
#define FA3_BWD_INSTANTIATE_ONE(D, BR, CAUSAL, T, FAULTS)                      \
  template std::string fa::fa3_bwd::prepare_launch<D, BR, CAUSAL, T, FAULTS>(  \
      const fa::Shape&, const fa::BackwardBuffers&, const fa::FaultInjection&, \
      fa::hopper::Enqueue*);
// The fault hooks are compiled for bf16 only (the fault tests' type): fewer kernels to compile.
#define FA3_BWD_INSTANTIATE_TYPE(D, BR, T)        \
  FA3_BWD_INSTANTIATE_ONE(D, BR, false, T, false) \
  FA3_BWD_INSTANTIATE_ONE(D, BR, true, T, false)
#define FA3_BWD_INSTANTIATE(D, BR)                           \
  FA3_BWD_INSTANTIATE_TYPE(D, BR, __nv_bfloat16)             \
  FA3_BWD_INSTANTIATE_TYPE(D, BR, __half)                    \
  FA3_BWD_INSTANTIATE_ONE(D, BR, false, __nv_bfloat16, true) \
  FA3_BWD_INSTANTIATE_ONE(D, BR, true, __nv_bfloat16, true)
