// fp8 on sm_90a: FP8 (E4M3) attention forward with both products on FP8 warpgroup MMA, on the
// sm_90a forward skeleton fa3 runs on (kernels/hopper/forward.cuh; fa3's schedule:
// kernels/fa3/fa3_kernel.cuh's top comment, read it first); this file holds fp8's traits (E4M3
// tiles, V8's layout) and its softmax (Softmax: descales, P's quantisation). Inputs: the
// quantisation pass's Q8, K8 (rotated, row-major) and V8 ([d][Npad], keys permuted) with their amax
// per scale block (kernels/fp8/fp8_quant.hpp); output bf16 O and the fp32 lse.
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
//             (kernels/hopper/tile_scheduler.cuh, epilogue.cuh). Which schedule: option
//             fp8_schedule (fp8_sm90.cu; the default per shape and the other tuning numbers:
//             fp8_tuning.hpp).
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
#include "kernels/hopper/forward.cuh"
#include "kernels/hopper/launch.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/fp8: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::fp8::sm90 {

using namespace cute;
using hopper::Epilogue;
using hopper::Grid;

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
struct Traits
    : hopper::ForwardShape<D_, BR_, BC_, tuning::kSm90Stages, tuning::sm90_producer_regs(BR_ / 64),
                           tuning::sm90_consumer_regs(BR_ / 64)> {
  // The base's numbers by name (a dependent base's members are not found unqualified).
  using Shape = typename Traits::ForwardShape;
  using Shape::D, Shape::BR, Shape::BC, Shape::kStages, Shape::kConsumerWarpgroups;
  static_assert(D == 64 || D == 128);
  // One scale block per K/V block, whole warpgroups per Q scale block; V8's rows hold one
  // 128-byte swizzle row per block.
  static_assert(BC == kKvScaleRows && kQScaleRows == 64 && BC == 128);

  using E = cutlass::float_e4m3_t;
  using OutT = __nv_bfloat16;
  // K-major everywhere: Q8 and K8 rows are d bytes (64: 64-byte swizzle, 128: 128-byte); V8's
  // rows are Bc = 128 keys (128-byte swizzle), already the K-major B operand of P V.
  using AtomQK =
      std::conditional_t<D == 128, GMMA::Layout_K_SW128_Atom<E>, GMMA::Layout_K_SW64_Atom<E>>;
  using AtomV = GMMA::Layout_K_SW128_Atom<E>;
  using SmemLayoutQ = decltype(tile_to_shape(AtomQK{}, cute::Shape<Int<BR>, Int<D>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(AtomQK{}, cute::Shape<Int<BC>, Int<D>, Int<kStages>>{}));
  using SmemLayoutV =
      decltype(tile_to_shape(AtomV{}, cute::Shape<Int<D>, Int<BC>, Int<kStages>>{}));
  using SmemLayoutVB = SmemLayoutV;

  using AtomLayout = Layout<cute::Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, cute::Shape<_64, Int<BC>, Int<D>>>(), AtomLayout{}));
  using MmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<E, E, float, cute::Shape<_64, Int<D>, Int<BC>>>(), AtomLayout{}));
  // P8 as the A operand: per 32 keys (kc), values (v0 4 bytes, v1 2 rows, v2 2 halves); as words,
  // register 4 kc + 2 v2 + v1 (fp8_layout.hpp: kc, h = v2, r = v1).
  using PFrag =
      decltype(make_tensor<E>(Layout<cute::Shape<cute::Shape<_4, _2, _2>, _1, Int<BC / 32>>>{}));
  static_assert(decltype(size(PFrag{}))::value == BC / 2);  // 16 bytes per 32 keys

  // Q8, K8 as (rows N, d, batch*heads) (hopper::gmem_rows); V8 as (d, Npad, batch*heads).
  static auto gmem_v(const void* p, int Npad, int heads) {
    return make_tensor(
        make_gmem_ptr(static_cast<const E*>(p)), make_shape(Int<D>{}, Npad, heads),
        make_stride(static_cast<std::int64_t>(Npad), _1{}, static_cast<std::int64_t>(Npad) * D));
  }
  static auto tma_q(const void* p, int N, int heads) {
    return hopper::tma_load_rows<E, D, BR>(p, N, heads, SmemLayoutQ{});
  }
  static auto tma_k(const void* p, int N, int heads) {
    return hopper::tma_load_rows<E, D, BC>(p, N, heads, take<0, 2>(SmemLayoutK{}));
  }
  static auto tma_v(const void* p, int Npad, int heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, gmem_v(p, Npad, heads), take<0, 2>(SmemLayoutV{}),
                         cute::Shape<Int<D>, Int<BC>>{}, _1{});
  }
  using TmaQ = decltype(tma_q(nullptr, 1, 1));
  using TmaK = decltype(tma_k(nullptr, 1, 1));
  using TmaV = decltype(tma_v(nullptr, 128, 1));
  // V8_j: the (d x Bc) box at column j Bc of V8 [d][Npad].
  template <typename Params>
  __device__ static auto gmem_v_blocks(const Params& p, int kv_bh) {
    Tensor mV = p.tma_v.get_tma_tensor(make_shape(Int<D>{}, p.Npad, p.heads / p.group));
    return local_tile(mV(_, _, kv_bh), cute::Shape<Int<D>, Int<BC>>{}, make_coord(_0{}, _));
  }

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

  // The TMA-store epilogue's O (bf16, hopper::OBuffer): swizzled as fa3's 16-bit tiles.
  using OBuffer = hopper::OBuffer<cutlass::bfloat16_t, D, kConsumerWarpgroups>;
  using SmemLayoutO = typename OBuffer::SmemLayout;
  using TmaO = typename OBuffer::Tma;
  static auto tma_o(void* p, int N, int heads) { return OBuffer::tma(p, N, heads); }

  using SharedStorage = hopper::ForwardStorage<E, SmemLayoutQ, SmemLayoutK, SmemLayoutV, kStages>;
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  using SharedStorageO = hopper::ForwardStorageO<SharedStorage, cutlass::bfloat16_t, SmemLayoutO>;
  static constexpr int kSmemBytesO = sizeof(SharedStorageO);
  static_assert(kSmemBytesO <= hopper::kMaxSmemBytes);
};

template <typename Tr>
struct Params : hopper::ForwardParams<Tr> {
  const float* amax_q;  // [B*H][q_blocks]
  const float* amax_k;  // [B*H][kv_blocks]
  const float* amax_v;  // [B*H][kv_blocks]
  int Npad, q_blocks, kv_blocks;
};

// fp8's part of the consumer (hopper::forward's Softmax): the softmax with the descales folded
// into the exponent, P quantised to E4M3, and O kept in units of the current V block's descale.
template <typename Tr, bool FAULTS>
struct Softmax {
  static constexpr int D = Tr::D, BC = Tr::BC, NT = BC / 8, DT = D / 8;
  // The thread's row max and row sum as trees (tuning::sm90_softmax_tree) or as chains of NT and
  // 2 NT dependent operations; the sum's rounding order differs between the two.
  static constexpr bool kSoftmaxTree = tuning::sm90_softmax_tree(D);
  // factor: descale_q descale_k(j) softmax_scale log2(e) (the exponent's); ratio: descale_v of
  // the previous block over this one's (O's rescale after P_{i-1} V_{i-1}).
  struct Block {
    float factor, ratio;
  };
  struct Prefetched {
    float amax_k, amax_v;
  };

  const Params<Tr>& p;
  const hopper::Tile& tl;
  float (&s)[NT][4];
  float (&o)[DT][4];
  std::uint32_t (&pr)[BC / 32][4];  // P8 as words
  OnlineSoftmax<> state;
  float alpha[2];
  float q_factor;
  float amax_v_now;
  Prefetched next;

  // Descales: Q's for this warpgroup's 64 rows (clamped: a warpgroup wholly past N), K's and V's
  // per K/V block.
  // (Addresses recomputed from the parameters at each use: held in registers, the two pointers
  // made the 192-row causal kernel spill.)
  __device__ __forceinline__ float amax_k(int j) const {
    return __ldg(p.amax_k + static_cast<std::int64_t>(tl.bh) * p.kv_blocks + j);
  }
  __device__ __forceinline__ float amax_v(int j) const {
    return __ldg(p.amax_v + static_cast<std::int64_t>(tl.bh) * p.kv_blocks + j);
  }
  __device__ __forceinline__ int block_of(int i) const { return tl.num_kv - 1 - i; }
  // Block i's descales (K's factor for the exponent, V's ratio for the rescale after
  // P_{i-1} V_{i-1}) are divided while the warpgroup waits for its S, from amax loaded one step
  // earlier: after the block's last MUFU.EX2 the division's MUFU.RCP would have delayed O's
  // rescale. Here: the amax of block i+1, loaded during step i (clamped to the tile's last
  // block), and block i's V amax.
  __device__ __forceinline__ Prefetched prefetch(int i) const {
    const int j = block_of(min(i, tl.num_kv - 1));
    return Prefetched{amax_k(j), amax_v(j)};
  }

  __device__ __forceinline__ Softmax(const Params<Tr>& p_, const hopper::Tile& tl_, int cwg,
                                     float (&s_)[NT][4], float (&o_)[DT][4],
                                     typename Tr::PFrag& p_regs)
      : p(p_),
        tl(tl_),
        s(s_),
        o(o_),
        pr(*reinterpret_cast<std::uint32_t (*)[BC / 32][4]>(raw_pointer_cast(p_regs.data()))) {
    const int q_scale_block = min((tl.q0 + 64 * cwg) / kQScaleRows, p.q_blocks - 1);
    q_factor = __ldg(p.amax_q + static_cast<std::int64_t>(tl.bh) * p.q_blocks + q_scale_block) *
               (p.scale_log2 / (kE4m3Max * kE4m3Max));
    amax_v_now = amax_v(block_of(0));
    next = prefetch(1);
  }

  __device__ __forceinline__ Block first() const { return {q_factor * amax_k(block_of(0)), 1.0f}; }
  // From the amax step i-1 loaded: the empty asm keeps both before the wait for S in the
  // compiler's order (ptxas then issues the division even before the products, its inputs being
  // ready). Then block i+1's loads, which step i+1 uses.
  __device__ __forceinline__ Block issued(int i) {
    const float factor = q_factor * next.amax_k;
    const float ratio = amax_v_now / next.amax_v;
    asm volatile("" ::"f"(factor), "f"(ratio));
    amax_v_now = next.amax_v;
    next = prefetch(i + 1);
    return {factor, ratio};
  }

  // The block's raw scores -> P' = 256 P in s; m, l move on (log2 domain); alpha rescales O.
  __device__ __forceinline__ void block(const Block& b) {
    // The raw scores' row maxima: trees at d=128 (both rows' quad shuffles together), else
    // chains (row_max, per row).
    float tree_mx[1][2];
    if constexpr (kSoftmaxTree) {
      quad_row_max_tiles(reinterpret_cast<const float(&)[1][NT][4]>(s), tree_mx);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mx = kSoftmaxTree ? tree_mx[0][r] : row_max(s, r, -INFINITY);
      const float base = state.move_max(r, mx * b.factor, &alpha[r]);
      state.l[r] = state.l[r] * alpha[r] +
                   (kSoftmaxTree ? exp2_row_scaled_tree(s, r, b.factor, base - kPScaleLog2)
                                 : exp2_row_scaled(s, r, b.factor, base - kPScaleLog2));
    }
  }
  // After P_{i-1} V_{i-1}: O *= alpha_i ratio.
  __device__ __forceinline__ void rescale_o(const Block& b) {
    if constexpr (FAULTS) {
      if (p.fault.o_rescale_skipped) return;
    }
    const float f0 = alpha[0] * b.ratio, f1 = alpha[1] * b.ratio;
#pragma unroll
    for (int d = 0; d < DT; ++d) {
      o[d][0] *= f0;
      o[d][1] *= f0;
      o[d][2] *= f1;
      o[d][3] *= f1;
    }
  }
  __device__ __forceinline__ void convert_p() {
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
  }
  // l sums 256 P (exact power of two back out): l is the true sum (for the lse); O summed
  // 256 P V, so the numerator takes 1/256 as well, and O is in units of the last block's (block
  // 0's) V descale.
  __device__ __forceinline__ void finish(float (&inv_l)[2]) {
    state.l[0] *= 1.0f / kPScale;
    state.l[1] *= 1.0f / kPScale;
    state.finish(amax_v(0) / kE4m3Max / kPScale, inv_l);
  }
};

// Overlap and ping-pong always (Softmax::issued assumes the overlapped loop's i >= 1).
template <typename Tr, bool CAUSAL, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    fp8_sm90_forward_kernel(const __grid_constant__ Params<Tr> p) {
  hopper::forward<Tr, Softmax<Tr, false>, CAUSAL, false, true, true, GRID, EPILOGUE>(p);
}

// The verification tests' build (fault hooks; own name: out of the SASS check's filter).
template <typename Tr, bool CAUSAL, Grid GRID, Epilogue EPILOGUE>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    fp8_sm90_fault_kernel(const __grid_constant__ Params<Tr> p) {
  hopper::forward<Tr, Softmax<Tr, true>, CAUSAL, true, true, true, GRID, EPILOGUE>(p);
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
  if (q_blocks == 0) return hopper::no_launch(out);
  const Workspace w = carve(s, b.workspace);
  const Params<Tr> p{
      hopper::forward_params<Tr>(Tr::tma_q(w.q8, N, heads), Tr::tma_k(w.k8, N, heads),
                                 Tr::tma_v(w.vt8, Npad, heads), s, b, fault, q_blocks),
      w.amax_q,
      w.amax_k,
      w.amax_v,
      Npad,
      static_cast<int>(q_scale_blocks(s.N)),
      static_cast<int>(kv_scale_blocks(s.N))};
  if (std::string e = hopper::check_inputs_encoded("fp8", p); !e.empty()) return e;
  // K8 and V8 take 1 byte per element.
  const hopper::ForwardLaunch launch{
      "fp8", 2LL * Npad * D, CAUSAL ? tuning::kSm90L2ShareCausal : tuning::kSm90L2ShareNonCausal,
      b.o, hopper::tile_counter_at(b, tile_counter_offset(s))};
  auto go = [&](auto kernel, hopper::Plan plan) {
    return hopper::prepare_forward<Tr>(kernel, plan, p, launch, out);
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
