// fa3 kernel: FlashAttention-2's algorithm (Q outer, online softmax, deferred 1/l, lse) with
// FlashAttention-3's Hopper schedule. sm_90a only (wgmma, TMA, setmaxnreg): built in
// fa_kernels_hopper with CuTe (the nvidia-cutlass wheel) for TMA descriptors, swizzled
// shared-memory layouts and wgmma atoms; the schedule below is ours. Its code is the sm_90a
// forward skeleton (kernels/hopper/forward.cuh: producer, tile scheduler, mainloop, epilogue,
// launch step), which fp8 shares; this file holds fa3's traits (16-bit tiles and layouts), its
// softmax (Fa3Softmax: the lazy rescale, P converted to 16 bits) and its schedules' kernels.
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

// clang-format off
#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
// clang-format on

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/online_softmax.cuh"
#include "kernels/fa3/fa3_launch.hpp"
#include "kernels/hopper/forward.cuh"
#include "kernels/hopper/launch.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/fa3: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::fa3 {

using namespace cute;

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

// What shape: tiles, warpgroups, shared-memory layouts, MMA atoms, TMA copies (hopper::forward's
// Traits).
template <int D_, int BR_, int BC_, typename T_>
struct Fa3Traits : hopper::ForwardShape<D_, BR_, BC_, kStages, producer_regs(BR_ / 64),
                                        consumer_regs(BR_ / 64)> {
  // The base's numbers by name (a dependent base's members are not found unqualified).
  using Shape = typename Fa3Traits::ForwardShape;
  using Shape::D, Shape::BR, Shape::BC, Shape::kStages, Shape::kConsumerWarpgroups;
  static_assert(D % 64 == 0 && BC % 16 == 0);
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
  static_assert(BC % 64 == 0, "Bc = 80 needs CuTe's extended wgmma shapes (fa3_d256.cu)");
#endif

  using T = T_;     // __nv_bfloat16 or __half: what the epilogue stores
  using OutT = T_;  // (hopper::forward's name)
  using E = typename CuteElement<T>::type;

  // 128-byte swizzle, K-major (head dim contiguous) for Q, K and V alike: TMA writes V row-major
  // and the P V product reads it as an MN-major operand through the transposed view VB.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<E>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BR>, Int<D>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(SmemAtom{}, cute::Shape<Int<BC>, Int<D>, Int<kStages>>{}));
  using SmemLayoutV = SmemLayoutK;
  using SmemLayoutVB = decltype(composition(
      SmemLayoutV{},
      make_ordered_layout(cute::Shape<Int<D>, Int<BC>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  // One wgmma atom per consumer warpgroup, stacked along the query rows (n = Bc: with n = 80, an
  // extended shape, which fa3_d256.cu turns on).
  using AtomLayout = Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<BC>, Int<D>>>(), AtomLayout{}));
  static_assert(decltype(size<1>(typename MmaS::AtomShape_MNK{}))::value == BC,
                "one wgmma atom covers the K/V block");
  using MmaO =
      decltype(make_tiled_mma(GMMA::rs_op_selector<E, E, float, cute::Shape<_64, Int<D>, Int<BC>>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              AtomLayout{}));
  // P as the A operand of P V: per 16 keys, (2 columns, 2 rows, 2 column halves) per thread.
  using PFrag =
      decltype(make_tensor<E>(Layout<cute::Shape<cute::Shape<_2, _2, _2>, _1, Int<BC / 16>>>{}));

  // Q, K, V in global memory as (rows N, head dim, batch*heads) (hopper::gmem_rows).
  static auto tma_q(const void* p, int N, int heads) {
    return hopper::tma_load_rows<E, D, BR>(p, N, heads, SmemLayoutQ{});
  }
  static auto tma_kv(const void* p, int N, int heads) {
    return hopper::tma_load_rows<E, D, BC>(p, N, heads, take<0, 2>(SmemLayoutK{}));
  }
  using TmaQ = decltype(tma_q(nullptr, 1, 1));
  using TmaK = decltype(tma_kv(nullptr, 1, 1));
  using TmaV = TmaK;
  // V's K/V blocks of K/V head kv_bh as TMA reads them: (Bc, D) boxes of the rows.
  template <typename Params>
  __device__ static auto gmem_v_blocks(const Params& p, int kv_bh) {
    Tensor mV = p.tma_v.get_tma_tensor(make_shape(p.N, Int<D>{}, p.heads / p.group));
    return local_tile(mV(_, _, kv_bh), cute::Shape<Int<BC>, Int<D>>{}, make_coord(_, _0{}));
  }

  // The TMA-store epilogue's O (hopper::OBuffer), swizzled as Q.
  using OBuffer = hopper::OBuffer<E, D, kConsumerWarpgroups>;
  using SmemLayoutO = typename OBuffer::SmemLayout;
  using TmaO = typename OBuffer::Tma;
  static auto tma_o(void* p, int N, int heads) {
    return OBuffer::tma(p, N, heads);
  }

  static constexpr std::uint32_t kBytesQ = BR * D * sizeof(E);
  static constexpr std::uint32_t kBytesKV = BC * D * sizeof(E);

  using SharedStorage = hopper::ForwardStorage<E, SmemLayoutQ, SmemLayoutK, SmemLayoutV, kStages>;
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  using SharedStorageO = hopper::ForwardStorageO<SharedStorage, E, SmemLayoutO>;
  static constexpr int kSmemBytesO = sizeof(SharedStorageO);
  static constexpr bool kOBuffer = kSmemBytesO <= kMaxSmemBytes;
  static_assert(kOBuffer == o_buffer_fits(D, BR, BC), "o_buffer_fits (fa3_launch.hpp) is wrong");
  static_assert(kSmemBytes <= kMaxSmemBytes);
};

template <typename Traits>
struct Fa3Params : hopper::ForwardParams<Traits> {};

// fa3's part of the consumer (hopper::forward's Softmax): FA2's online softmax with the lazy
// rescale, O's rescale, and P converted to 16 bits.
template <typename Traits, bool FAULTS>
struct Fa3Softmax {
  static constexpr int NT = Traits::BC / 8, DT = Traits::D / 8;
  using E = typename Traits::E;
  struct Block {};  // nothing: the scale is one number

  const Fa3Params<Traits>& p;
  float (&s)[NT][4];
  float (&o)[DT][4];
  typename Traits::PFrag& tOrP;
  OnlineSoftmax<> state;
  float alpha[2];
  // Lazy rescale (FlashAttention-4's; kRescaleThreshold, fa3_tiles.hpp): a block whose row max
  // (log2 domain) grew by at most T keeps the old max as the exponent base, so P = exp2(s -
  // m_old) <= 2^T and neither l nor O is rescaled; only when some row of the warp grew by more
  // does the warp take the eager update (new max, alpha, O *= alpha: DT * 4 FMULs per thread).
  // `rescale`: whether the last block() moved this warp's max, so that rescale_o must scale O.
  // One value per warp (a vote), so the branch around the accumulator registers is warp-uniform.
  // It stays set from block(i) to the rescale_o() of the same step (after P_i-1 V_i-1 has
  // landed, in the overlapped loop).
  [[maybe_unused]] bool rescale = true;

  __device__ __forceinline__ Fa3Softmax(const Fa3Params<Traits>& p_, const hopper::Tile&, int,
                                        float (&s_)[NT][4], float (&o_)[DT][4],
                                        typename Traits::PFrag& p_regs)
      : p(p_), s(s_), o(o_), tOrP(p_regs) {}

  __device__ __forceinline__ Block first() const { return {}; }
  __device__ __forceinline__ Block issued(int) const { return {}; }

  // The block's scores -> P (fp32, in s); m, l move on (log2 domain); alpha rescales O. The scale
  // is folded into the exponent's FFMA (exp2_row_scaled).
  __device__ __forceinline__ void block(const Block&) {
    if constexpr (kRescaleThreshold > 0) {
      float mx[2];
      bool grow = false;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(state.m[r], row_max(s, r, -INFINITY) * p.scale_log2);
        // m = -inf (no key yet) and mx finite: +inf > T, so the first real max always moves m.
        // Both -inf (every key masked so far): NaN > T is false, and the row needs nothing.
        grow = grow || mx[r] - state.m[r] > static_cast<float>(kRescaleThreshold);
      }
      rescale = __any_sync(0xffffffffu, grow);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // Not rescaling: the old max stays the base (P <= 2^T), l and O stay relative to it,
        // and alpha is 1 exactly (not exp2(0) from MUFU: ex2.approx is not specified exact
        // there). exp_base keeps an all-masked row (m = -inf) at P = 0, as the eager update.
        const float m_new = rescale ? mx[r] : state.m[r];
        const float base = exp_base(m_new);
        alpha[r] = rescale ? fast_exp2(state.m[r] - base) : 1.0f;
        state.m[r] = m_new;
        state.l[r] = state.l[r] * alpha[r] + exp2_row_scaled(s, r, p.scale_log2, base);
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float base = state.move_max(r, row_max(s, r, -INFINITY) * p.scale_log2, &alpha[r]);
        state.l[r] = state.l[r] * alpha[r] + exp2_row_scaled(s, r, p.scale_log2, base);
      }
    }
  }
  // O *= alpha: 32 FMULs per thread at d=64. Lazy: only after a block that moved the warp's max
  // (a warp-uniform branch; the P V wgmma that wrote O has been waited for).
  __device__ __forceinline__ void rescale_o(const Block&) {
    if constexpr (kRescaleThreshold > 0) {
      if (!rescale) return;
    }
    if constexpr (FAULTS) {
      if (p.fault.o_rescale_skipped) return;
    }
    scale_rows<FragC16x8>(o, alpha);
  }
  __device__ __forceinline__ void convert_p() {
#pragma unroll
    for (int k = 0; k < Traits::BC / 16; ++k) {
#pragma unroll
      for (int v = 0; v < 8; ++v) tOrP(v, 0, k) = static_cast<E>(s[2 * k + v / 4][v % 4]);
    }
  }
  __device__ __forceinline__ void finish(float (&inv_l)[2]) {
    state.finish(1.0f, inv_l);
  }
};

template <typename Traits, bool CAUSAL, bool PINGPONG, bool OVERLAP, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fa3_forward_kernel(const __grid_constant__ Fa3Params<Traits> p) {
  static_assert(EPILOGUE == Epilogue::registers || Traits::kOBuffer, "no shared memory for O");
  hopper::forward<Traits, Fa3Softmax<Traits, false>, CAUSAL, false, PINGPONG, OVERLAP, GRID,
                  EPILOGUE>(p);
}

// The verification tests' build (kernels/common/fault.hpp): overlap on, ping-pong on (and, at
// d=64, where no-pingpong is the default schedule, also off: fa3_default_schedule), on the default
// plan's grid and epilogue. Its own name keeps it out of the SASS check (scripts/sass_check.py
// --filter fa3_forward_kernel).
template <typename Traits, bool CAUSAL, Grid GRID, Epilogue EPILOGUE, bool PINGPONG = true>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fa3_fault_kernel(const __grid_constant__ Fa3Params<Traits> p) {
  static_assert(EPILOGUE == Epilogue::registers || Traits::kOBuffer, "no shared memory for O");
  hopper::forward<Traits, Fa3Softmax<Traits, true>, CAUSAL, true, PINGPONG, true, GRID, EPILOGUE>(
      p);
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
  const int kv_heads = static_cast<int>(s.kv_heads_total());
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) return hopper::no_launch(out);
  const Fa3Params<Traits> p{
      hopper::forward_params<Traits>(Traits::tma_q(b.q, N, heads), Traits::tma_kv(b.k, N, kv_heads),
                                     Traits::tma_kv(b.v, N, kv_heads), s, b, fault, q_blocks)};
  if (std::string e = hopper::check_inputs_encoded("fa3", p); !e.empty()) return e;
  // The K and V of a section's heads may take this share of the L2 (fa3_tiles.hpp).
  const hopper::ForwardLaunch launch{"fa3", 2LL * N * D * std::int64_t{sizeof(typename Traits::E)},
                                     CAUSAL ? kL2ShareCausal : kL2ShareNonCausal, b.o,
                                     hopper::tile_counter_at(b, 0)};
  auto go = [&](auto kernel, Plan plan) {
    return hopper::prepare_forward<Traits>(kernel, plan, p, launch, out);
  };
  constexpr auto unbuilt = [](const char* what) { return std::string("fa3: ") + what; };
  constexpr DType kType = std::is_same_v<T, __half> ? DType::fp16 : DType::bf16;
  if constexpr (FAULTS) {
    // The fault builds of the schedules the type has (schedule_built): full, d=64's no-pingpong.
    if constexpr (schedule_built(Schedule::full, D, kType)) {
      if (schedule == Schedule::full)
        return go(fa3_fault_kernel<Traits, CAUSAL, kDefault.grid, kDefault.epilogue>, kDefault);
    }
    if constexpr (D == 64) {  // d=64's default schedule (fa3_default_schedule, fa3.hpp)
      if (schedule == Schedule::no_pingpong)
        return go(fa3_fault_kernel<Traits, CAUSAL, kDefault.grid, kDefault.epilogue, false>,
                  kDefault);
    }
    return unbuilt(
        "fault injection is compiled for the type's schedules: full (bf16 at d=64), no-pingpong");
  } else if constexpr (!ablation_built(D, kType)) {
    if (!schedule_built(schedule, D, kType))
      return unbuilt("the ablation is compiled for bf16 at d=64 and 128 (schedule_built)");
    constexpr bool kPingPong = default_pingpong(D);
    return go(fa3_forward_kernel<Traits, CAUSAL, kPingPong, true, kDefault.grid, kDefault.epilogue>,
              kDefault);
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
