// fa2 backward kernels: FlashAttention-2's backward pass (Dao 2023, Algorithm 2), with two ways to
// accumulate dQ (option dq).
//
// Algorithm (per head; scale = 1/sqrt(d), lse the forward's natural-log log-sum-exp per row):
//   P = exp(scale Q K^T - lse), dV = P^T dO, dP = dO V^T, D = rowsum(dO o O), dS = P o (dP - D),
//   dQ = scale dS K, dK = scale dS^T Q.  P is never stored: it is recomputed from Q, K and lse.
//
// Schedule, dq=dq-atomic (the default; FlashAttention-2's own):
//   pre-pass  one warp per row: D = rowsum(dO o O) (fp32, to the workspace) and the row of the
//             fp32 dQ accumulator zeroed.
//   main      grid (ceil(N/Bc) K/V blocks, B*H) (block_order heads: the two swapped); block
//             Bc/16 warps; warp w owns keys [16w, 16w+16) of the block for the whole run, so
//             its dK and dV rows (16 x d, fp32) stay in registers (FA2's "K/V outer" split).
//             K_j, V_j -> shared (cp.async), read from HBM once.
//             loop i over the query blocks of Br rows that see block j (causal: from the
//             diagonal on):
//               wait for Q_i, dO_i (shared, cp.async), lse_i (log2 units) and D_i (shared)
//               S^T = K_w Q_i^T, dP^T = V_w dO_i^T       mma.sync m16n8k16, fp32 accumulators
//               P^T = exp2(S^T scale log2e - lse_i)      masked: keys >= N, causal key > query
//               dS^T = P^T o (dP^T - D_i)
//               dV_w += P^T dO_i, dK_w += dS^T Q_i       P^T, dS^T re-used as A fragments
//               dS -> shared (input type, [query][key]); barrier; then Q_{i+1}, dO_{i+1}, lse,
//               D are requested into the same buffers (the barrier says every warp is done
//               with them), so their loads overlap the dQ product below and its atomics;
//               each warp takes 16 query rows (and d/(warps*16/Br) columns) of
//               dQ_i += dS K_j and adds them to the fp32 accumulator in HBM with atomics
//               (sm_90: one red.global.add.v4.f32 per four elements, lane pairs trading
//               halves by shuffles; sm_80: one per element)
//             epilogue: dK *= scale; dK, dV written once.
//   convert   dQ = scale * accumulator, rounded to the input type.
//
// Schedule, dq=dq-separate (no atomics; the dQ loop of Triton's fused-attention tutorial, the
// same recomputation FlashAttention's Q-outer loop would do):
//   pre-pass  D only (no accumulator).
//   main      as above without the dS tile, the dQ product and its atomics.
//   dq        grid (ceil(N/Br') query blocks, B*H), Br'/16 warps, each owning 16 query rows with
//             Q and dO as A fragments in registers and lse, D per row; loop over the K/V blocks
//             of Bc' keys the block sees (causal: up to the diagonal; K, V double-buffered):
//               S = Q K^T, dP = dO V^T, P = exp2(S scale log2e - lse), dS = P o (dP - D),
//               dQ += dS K  (dS re-used as A fragments, K as the B operand: warp_pv)
//             epilogue: dQ = scale dQ written once. Tiles Br' x Bc' fixed per head dim
//             (fa2_bwd_dq_block_q / fa2_bwd_dq_block_kv, kernels/fa2/fa2_tiles.hpp).
//             It recomputes S and dP: 7 products per block pair in all instead of 5.
//
// HBM traffic: profiler/io_model.cpp, fa2_backward_model (both modes, and the L2 view).
// Configurations: Fa2BwdTiles (kernels/fa2/fa2_tiles.hpp: Br x Bc of the main kernel, Bc/16
// warps), each with both dq modes.
// Fault injection (verification tests): drop_kv_block (that thread block contributes nothing and
// writes dK = dV = 0; the dq kernel leaves out the same keys), mask_shift, scale_factor /
// natural_exp (folded into scale_log2).
// Compiled in four translation units (kernels/fa2/fa2_bwd_d{64,128}{,_causal}.cu, one per head
// dim and mask, so that a build compiles them in parallel); kernels/fa2/fa2_bwd.cu holds the
// launcher and the dispatch.
#pragma once

#include <string>

#include "kernels/common/fast_exp2.cuh"
#include "kernels/common/fault.hpp"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fa2/fa2.hpp"
#include "kernels/fa2/fa2_tiles.hpp"

namespace fa {
namespace fa2_bwd {

// One backward pass at head dim D with the causal mask or not: the tiles matching t, the dtype,
// faults compiled in when any is set. Instantiated once each in the four files.
template <int D, bool CAUSAL>
std::string run(const Shape& s, const Tiles& t, const BackwardBuffers& b, cudaStream_t stream,
                const Fa2BwdOptions& o, const FaultInjection& fault,
                const Fa2BwdPhaseHooks& phases);
extern template std::string run<64, false>(const Shape&, const Tiles&, const BackwardBuffers&,
                                           cudaStream_t, const Fa2BwdOptions&,
                                           const FaultInjection&, const Fa2BwdPhaseHooks&);
extern template std::string run<64, true>(const Shape&, const Tiles&, const BackwardBuffers&,
                                          cudaStream_t, const Fa2BwdOptions&, const FaultInjection&,
                                          const Fa2BwdPhaseHooks&);
extern template std::string run<128, false>(const Shape&, const Tiles&, const BackwardBuffers&,
                                            cudaStream_t, const Fa2BwdOptions&,
                                            const FaultInjection&, const Fa2BwdPhaseHooks&);
extern template std::string run<128, true>(const Shape&, const Tiles&, const BackwardBuffers&,
                                           cudaStream_t, const Fa2BwdOptions&,
                                           const FaultInjection&, const Fa2BwdPhaseHooks&);

#ifdef FA2_BWD_INSTANTIATE  // defined by the four files that compile the kernels
namespace {

using namespace sm80;

struct Fa2BwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* d_o;
  const float* lse;
  void* dq;
  void* dk;
  void* dv;
  float* dq_accum;  // [B*H][N][d] fp32 (dq-atomic only; null with dq-separate)
  float* D;         // [B*H][N] fp32
  std::int64_t N;
  std::int64_t rows;  // B*H*N
  float scale;        // the softmax scale, for dQ and dK
  float scale_log2;   // softmax scale * log2(e), fault hooks folded in
  int num_kv_blocks;
  int heads_fastest;
  FaultInjection fault;
  // Keys of the main kernel's dropped K/V block (fault drop_kv_block), which the dq kernel (whose
  // K/V blocks are of another size) leaves out too; an empty range without the fault.
  std::int64_t drop_key_begin;
  std::int64_t drop_key_end;
};

constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ inline float to_f(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return __half2float(x);
  }
}

template <int D, typename T, bool ZERO_ACCUM>
__global__ void __launch_bounds__(256) fa2_bwd_prepass_kernel(const Fa2BwdParams p) {
  const std::int64_t row = blockIdx.x * std::int64_t{8} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.rows) return;
  const T* o = static_cast<const T*>(p.o) + row * D;
  const T* g = static_cast<const T*>(p.d_o) + row * D;
  float acc = 0.0f;
#pragma unroll
  for (int c = lane; c < D; c += 32) acc += to_f(o[c]) * to_f(g[c]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) p.D[row] = acc;
  if constexpr (ZERO_ACCUM) {
    float* dq = p.dq_accum + row * D;
#pragma unroll
    for (int c = lane * 4; c < D; c += 128)
      *reinterpret_cast<float4*>(dq + c) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    fa2_bwd_convert_kernel(const Fa2BwdParams p, std::int64_t pairs) {
  const float2* acc = reinterpret_cast<const float2*>(p.dq_accum);
  std::uint32_t* out = static_cast<std::uint32_t*>(p.dq);
  for (std::int64_t i = blockIdx.x * std::int64_t{256} + threadIdx.x; i < pairs;
       i += std::int64_t{gridDim.x} * 256) {
    const float2 a = acc[i];
    out[i] = pack2<T>(a.x * p.scale, a.y * p.scale);
  }
}

// Adds one 16x8 accumulator tile of the mma layout (this lane: rows row_a and row_b = row_a + 8,
// columns col0 + 2t, +1) to the row-major accumulator (`ld` floats per row). sm_90: lanes t and
// t^1 trade halves with two shuffles, so that each issues one red.global.add.v4.f32 of four
// adjacent columns (even t: row_a's columns col0 + 2t .. +3; odd t: row_b's col0 + 2t - 2 .. +1):
// half the reductions of two v2 per lane, the same bytes. Every lane of the warp must call it.
__device__ inline void accumulate_tile(float* acc, std::int64_t row_a, std::int64_t row_b, int col0,
                                       const float (&c)[4], int t, std::int64_t N, int ld) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
  const float give0 = odd ? c[0] : c[2], give1 = odd ? c[1] : c[3];
  const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1);
  const float got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
  const std::int64_t row = odd ? row_b : row_a;
  const int col = col0 + 2 * (t & ~1);
  const float4 v = odd ? make_float4(got0, got1, c[2], c[3]) : make_float4(c[0], c[1], got0, got1);
  if (row < N) atomicAdd(reinterpret_cast<float4*>(acc + row * ld + col), v);
#else
  const int col = col0 + 2 * t;  // sm_80: scalar reductions
  if (row_a < N) {
    atomicAdd(acc + row_a * ld + col, c[0]);
    atomicAdd(acc + row_a * ld + col + 1, c[1]);
  }
  if (row_b < N) {
    atomicAdd(acc + row_b * ld + col, c[2]);
    atomicAdd(acc + row_b * ld + col + 1, c[3]);
  }
#endif
}

template <int D, int BR, int BC, bool DQ_ATOMIC>
constexpr int fa2_bwd_smem_bytes() {
  // K, V tiles; Q, dO tiles; the dS tile (dq-atomic); lse and D of the query block.
  return (2 * BC * D + 2 * BR * D + (DQ_ATOMIC ? BR * BC : 0)) * 2 + 2 * BR * 4;
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS, bool DQ_ATOMIC>
__global__ void __launch_bounds__(BC / 16 * 32) fa2_bwd_kernel(const Fa2BwdParams p) {
  constexpr int kWarps = BC / 16, kThreads = kWarps * 32;
  constexpr int kQT = BR / 8;  // 8-query tiles of S^T
  constexpr int kDT = D / 8;   // 8-column tiles of dK, dV
  // The dQ product: BR/16 row groups of 16 query rows, the warps of a row group splitting d.
  constexpr int kRowGroups = BR / 16, kColGroups = kWarps / kRowGroups;
  constexpr int kDqCols = D / kColGroups;
  constexpr int kDqChunk = CAUSAL ? kDqCols : kFa2BwdDqChunk;  // dQ columns per reduction
  static_assert(BR <= BC && kWarps % kRowGroups == 0 && kDqCols % 16 == 0, "bwd tile shape");
  static_assert(BC >= 64, "the dS tile's swizzle needs 64 columns");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);  // [BC][D]
  T* sV = sK + BC * D;                     // [BC][D]
  T* sQ = sV + BC * D;                     // [BR][D]
  T* sdO = sQ + BR * D;                    // [BR][D]
  T* sdS = sdO + BR * D;                   // [BR][BC], swizzled with BC columns (dq-atomic)
  float* sLse = reinterpret_cast<float*>(sdS + (DQ_ATOMIC ? BR * BC : 0));
  float* sD = sLse + BR;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int kb = static_cast<int>(p.heads_fastest ? blockIdx.y : blockIdx.x);
  const std::int64_t bh = p.heads_fastest ? blockIdx.x : blockIdx.y;
  const std::int64_t N = p.N;
  const std::int64_t k0 = static_cast<std::int64_t>(kb) * BC;
  const std::int64_t head_offset = bh * N * D;
  const T* Qh = static_cast<const T*>(p.q) + head_offset;
  const T* Kh = static_cast<const T*>(p.k) + head_offset;
  const T* Vh = static_cast<const T*>(p.v) + head_offset;
  const T* dOh = static_cast<const T*>(p.d_o) + head_offset;
  const float* lse_h = p.lse + bh * N;
  const float* D_h = p.D + bh * N;
  const bool dropped = FAULTS && kb == p.fault.drop_kv_block;
  const int shift = FAULTS ? p.fault.mask_shift : 0;

  // Query block qb's Q, dO (cp.async, one group) and lse, D (plain stores) into shared memory.
  auto request_query_block = [&](int qb) {
    const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
    load_tile<BR, D, kThreads>(sQ, Qh, q0, N);
    load_tile<BR, D, kThreads>(sdO, dOh, q0, N);
    cp_async_commit();
    for (int r = threadIdx.x; r < BR; r += kThreads) {
      const bool in = q0 + r < N;
      sLse[r] = in ? lse_h[q0 + r] * kLog2e : INFINITY;  // padding rows: P = 0
      sD[r] = in ? D_h[q0 + r] : 0.0f;
    }
  };

  load_tile<BC, D, kThreads>(sK, Kh, k0, N);
  load_tile<BC, D, kThreads>(sV, Vh, k0, N);
  cp_async_commit();

  float dk[kDT][4], dv[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.0f;
  }
  const std::int64_t key_a = k0 + warp * 16 + g, key_b = key_a + 8;
  const int total_q = static_cast<int>((N + BR - 1) / BR);
  const int first_q = dropped ? total_q : (CAUSAL ? static_cast<int>(k0 / BR) : 0);
  const int row_group = warp % kRowGroups, col_group = warp / kRowGroups;
  if (first_q < total_q) request_query_block(first_q);

  for (int qb = first_q; qb < total_q; ++qb) {
    const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
    cp_async_wait<0>();
    __syncthreads();  // Q_i, dO_i, lse_i, D_i (and K, V) visible; the last dS tile consumed

    float st[kQT][4], dpt[kQT][4];
    {
      std::uint32_t af[D / 16][4];
      load_a_fragments<D>(af, sK, warp * 16, lane);
      warp_qkt<D, BR>(st, af, sQ, lane);
      load_a_fragments<D>(af, sV, warp * 16, lane);
      warp_qkt<D, BR>(dpt, af, sdO, lane);
    }
    const bool needs_mask = k0 + BC > N || (CAUSAL && q0 + shift < k0 + BC - 1) || FAULTS;
    // In 32-bit block-local units: keys valid below key_limit; causal keeps key <= query + shift.
    const int key_limit = static_cast<int>(N - k0 < BC ? N - k0 : BC);
    const int kq_offset = static_cast<int>(k0 - q0) - shift;
#pragma unroll
    for (int n = 0; n < kQT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qi = n * 8 + 2 * t + (e & 1);
        float pe = fast_exp2(st[n][e] * p.scale_log2 - sLse[qi]);
        if (needs_mask) {
          const int kl = warp * 16 + g + 8 * (e >> 1);
          if (kl >= key_limit || (CAUSAL && kl + kq_offset > qi)) pe = 0.0f;
        }
        st[n][e] = pe;
        dpt[n][e] = pe * (dpt[n][e] - sD[qi]);
      }
    }
    warp_pv<D, BR>(dv, st, sdO, lane);
    warp_pv<D, BR>(dk, dpt, sQ, lane);
    if constexpr (DQ_ATOMIC) {
#pragma unroll
      for (int n = 0; n < kQT; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qi = n * 8 + 2 * t + (e & 1);
          const int kl = warp * 16 + g + 8 * (e >> 1);
          sdS[swz<BC>(qi, kl)] = static_cast<T>(dpt[n][e]);
        }
      }
    }
    __syncthreads();  // every warp is done with sQ, sdO, sLse, sD; the dS tile is complete
    if (qb + 1 < total_q) request_query_block(qb + 1);  // overlaps the dQ product below

    if constexpr (DQ_ATOMIC) {
      // dQ_i += dS K_j for this warp's 16 query rows and kDqCols columns.
      float* acc_h = p.dq_accum + head_offset;
      std::uint32_t af[BC / 16][4];
      load_a_fragments<BC>(af, sdS, row_group * 16, lane);
      const std::int64_t row_a = q0 + row_group * 16 + g, row_b = row_a + 8;
      // kDqChunk columns at a time, each chunk sent to the accumulator once it is summed over
      // the block's keys (kFa2BwdDqChunk says why causal takes the whole width).
#pragma unroll
      for (int c0 = 0; c0 < kDqCols; c0 += kDqChunk) {
        float dq[kDqChunk / 8][4] = {};
#pragma unroll
        for (int kc = 0; kc < BC / 16; ++kc) {
#pragma unroll
          for (int dp = 0; dp < kDqChunk / 16; ++dp) {
            std::uint32_t b[4];
            ldmatrix_x4_trans(
                b, smem_u32(sK + swz<D>(kc * 16 + (lane & 15),
                                        col_group * kDqCols + c0 + dp * 16 + (lane >> 4) * 8)));
            mma_16816<T>(dq[2 * dp], af[kc], b[0], b[1]);
            mma_16816<T>(dq[2 * dp + 1], af[kc], b[2], b[3]);
          }
        }
#pragma unroll
        for (int i = 0; i < kDqChunk / 8; ++i)
          accumulate_tile(acc_h, row_a, row_b, col_group * kDqCols + c0 + i * 8, dq[i], t, N, D);
      }
    }
    // The next iteration's barrier orders these reads of sdS before its writes.
  }
  cp_async_wait<0>();  // a dropped block never waited for its K/V tiles

  T* dKh = static_cast<T*>(p.dk) + head_offset;
  T* dVh = static_cast<T*>(p.dv) + head_offset;
#pragma unroll
  for (int i = 0; i < kDT; ++i) {
    const int col = i * 8 + 2 * t;
    if (key_a < N) {
      *reinterpret_cast<std::uint32_t*>(dKh + key_a * D + col) =
          pack2<T>(dk[i][0] * p.scale, dk[i][1] * p.scale);
      *reinterpret_cast<std::uint32_t*>(dVh + key_a * D + col) = pack2<T>(dv[i][0], dv[i][1]);
    }
    if (key_b < N) {
      *reinterpret_cast<std::uint32_t*>(dKh + key_b * D + col) =
          pack2<T>(dk[i][2] * p.scale, dk[i][3] * p.scale);
      *reinterpret_cast<std::uint32_t*>(dVh + key_b * D + col) = pack2<T>(dv[i][2], dv[i][3]);
    }
  }
}

template <int D, int BR, int BC>
constexpr int fa2_bwd_dq_smem_bytes() {
  // Q, dO tiles (read once into registers); K, V tiles, two stages.
  return (2 * BR * D + 4 * BC * D) * 2;
}

// dq=dq-separate: dQ with query blocks outer (see the head of the file).
template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
__global__ void __launch_bounds__(BR / 16 * 32) fa2_bwd_dq_kernel(const Fa2BwdParams p) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kNT = BC / 8;  // 8-key tiles of S
  constexpr int kDT = D / 8;   // 8-column tiles of dQ

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // [BR][D]
  T* sdO = sQ + BR * D;                    // [BR][D]
  T* sK = sdO + BR * D;                    // [2][BC][D]
  T* sV = sK + 2 * BC * D;                 // [2][BC][D]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int num_q = static_cast<int>((p.N + BR - 1) / BR);
  const int q_index = static_cast<int>(p.heads_fastest ? blockIdx.y : blockIdx.x);
  const int qb = CAUSAL ? num_q - 1 - q_index : q_index;  // causal: the longest rows first
  const std::int64_t bh = p.heads_fastest ? blockIdx.x : blockIdx.y;
  const std::int64_t N = p.N;
  const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
  const std::int64_t head_offset = bh * N * D;
  const T* Qh = static_cast<const T*>(p.q) + head_offset;
  const T* Kh = static_cast<const T*>(p.k) + head_offset;
  const T* Vh = static_cast<const T*>(p.v) + head_offset;
  const T* dOh = static_cast<const T*>(p.d_o) + head_offset;
  const int shift = FAULTS ? p.fault.mask_shift : 0;

  const int total_kv = static_cast<int>((N + BC - 1) / BC);
  int num_kv = total_kv;
  if constexpr (CAUSAL) {
    std::int64_t last_key = (q0 + BR < N ? q0 + BR : N) - 1 + shift;
    if (last_key > N - 1) last_key = N - 1;
    num_kv = min(total_kv, static_cast<int>(last_key / BC) + 1);
  }

  load_tile<BR, D, kThreads>(sQ, Qh, q0, N);
  load_tile<BR, D, kThreads>(sdO, dOh, q0, N);
  load_tile<BC, D, kThreads>(sK, Kh, 0, N);
  load_tile<BC, D, kThreads>(sV, Vh, 0, N);
  cp_async_commit();

  const std::int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;
  // Rows past N: lse +inf makes P = 0.
  const float lse_a = row_a < N ? p.lse[bh * N + row_a] * kLog2e : INFINITY;
  const float lse_b = row_b < N ? p.lse[bh * N + row_b] * kLog2e : INFINITY;
  const float D_a = row_a < N ? p.D[bh * N + row_a] : 0.0f;
  const float D_b = row_b < N ? p.D[bh * N + row_b] : 0.0f;

  std::uint32_t qf[D / 16][4], gf[D / 16][4];  // Q and dO rows of this warp, as A fragments
  cp_async_wait<0>();
  __syncthreads();
  load_a_fragments<D>(qf, sQ, warp * 16, lane);
  load_a_fragments<D>(gf, sdO, warp * 16, lane);

  float dq[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;
  // Query rows relative to the block start, and the causal limit key <= row + shift.
  const std::int64_t lim_a = row_a + shift, lim_b = row_b + shift;

  for (int j = 0; j < num_kv; ++j) {
    const int buf = j & 1;
    if (j + 1 < num_kv) {
      load_tile<BC, D, kThreads>(sK + (buf ^ 1) * BC * D, Kh, (j + 1) * std::int64_t{BC}, N);
      load_tile<BC, D, kThreads>(sV + (buf ^ 1) * BC * D, Vh, (j + 1) * std::int64_t{BC}, N);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const T* sKb = sK + buf * BC * D;
    float s[kNT][4], dp[kNT][4];
    warp_qkt<D, BC>(s, qf, sKb, lane);
    warp_qkt<D, BC>(dp, gf, sV + buf * BC * D, lane);
    const std::int64_t k0 = static_cast<std::int64_t>(j) * BC;
    const bool needs_mask = k0 + BC > N || (CAUSAL && k0 + BC - 1 > q0 + shift) || FAULTS;
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool lower = e >= 2;
        float pe = fast_exp2(s[n][e] * p.scale_log2 - (lower ? lse_b : lse_a));
        if (needs_mask) {
          const std::int64_t key = k0 + n * 8 + 2 * t + (e & 1);
          if (key >= N || (CAUSAL && key > (lower ? lim_b : lim_a))) pe = 0.0f;
          if (FAULTS && key >= p.drop_key_begin && key < p.drop_key_end) pe = 0.0f;
        }
        s[n][e] = pe * (dp[n][e] - (lower ? D_b : D_a));  // dS
      }
    }
    warp_pv<D, BC>(dq, s, sKb, lane);
    // The next iteration's prefetch overwrites the buffer read here.
    __syncthreads();
  }

  T* dQh = static_cast<T*>(p.dq) + head_offset;
#pragma unroll
  for (int i = 0; i < kDT; ++i) {
    const int col = i * 8 + 2 * t;
    if (row_a < N)
      *reinterpret_cast<std::uint32_t*>(dQh + row_a * D + col) =
          pack2<T>(dq[i][0] * p.scale, dq[i][1] * p.scale);
    if (row_b < N)
      *reinterpret_cast<std::uint32_t*>(dQh + row_b * D + col) =
          pack2<T>(dq[i][2] * p.scale, dq[i][3] * p.scale);
  }
}

// cudaFuncSetAttribute once per device and kernel; "" or the error line. The kernel is a template
// argument so that each kernel has its own flag: keyed on the pointer's type, every kernel of
// one signature would share a flag, only the first would get its attribute, and every later
// kernel above 48 KiB would fail to launch with "invalid argument".
template <auto Kernel>
std::string set_smem(int bytes) {
  static PerDevice<cudaError_t> attr;
  const cudaError_t status = attr.get([&] {
    return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  });
  if (status != cudaSuccess)
    return std::string("fa2 backward: cudaFuncSetAttribute: ") + cudaGetErrorString(status);
  return "";
}

dim3 bwd_grid(bool heads_fastest, std::int64_t blocks, std::int64_t heads) {
  return heads_fastest ? dim3(static_cast<unsigned>(heads), static_cast<unsigned>(blocks))
                       : dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(heads));
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
std::string launch_fa2_bwd(const Shape& s, const BackwardBuffers& b, cudaStream_t stream,
                           bool heads_fastest, bool dq_separate, const FaultInjection& fault,
                           const Fa2BwdPhaseHooks& phases) {
  constexpr int kThreads = BC / 16 * 32;
  const std::int64_t kv_blocks = (s.N + BC - 1) / BC;
  const std::int64_t rows = s.heads_total() * s.N;
  constexpr int kDqBr = fa2_bwd_dq_block_q(D), kDqBc = fa2_bwd_dq_block_kv(D);
  const std::int64_t dq_blocks = (s.N + kDqBr - 1) / kDqBr;
  const std::int64_t longest = dq_separate && dq_blocks > kv_blocks ? dq_blocks : kv_blocks;
  const std::int64_t y_extent = heads_fastest ? longest : s.heads_total();
  if (longest > 0x7fffffff || s.heads_total() > 0x7fffffff || y_extent > 65535)
    return "fa2 backward: grid too large";
  auto* ws = static_cast<unsigned char*>(b.workspace);
  float* acc = dq_separate ? nullptr : reinterpret_cast<float*>(ws);
  float* Dv =
      reinterpret_cast<float*>(dq_separate ? ws : ws + static_cast<std::size_t>(rows) * D * 4);
  const Fa2BwdParams p{b.q,
                       b.k,
                       b.v,
                       b.o,
                       b.d_o,
                       b.lse,
                       b.dq,
                       b.dk,
                       b.dv,
                       acc,
                       Dv,
                       s.N,
                       rows,
                       static_cast<float>(s.scale()),
                       softmax_scale_log2(s, fault),
                       static_cast<int>(kv_blocks),
                       heads_fastest ? 1 : 0,
                       fault,
                       fault.drop_kv_block >= 0 ? std::int64_t{fault.drop_kv_block} * BC : 0,
                       fault.drop_kv_block >= 0 ? std::int64_t{fault.drop_kv_block + 1} * BC : 0};
  const auto prepass_blocks = static_cast<unsigned>((rows + 7) / 8);
  if (dq_separate) {
    constexpr auto kernel = fa2_bwd_kernel<D, BR, BC, CAUSAL, T, FAULTS, false>;
    constexpr int kSmem = fa2_bwd_smem_bytes<D, BR, BC, false>();
    constexpr auto dq_kernel = fa2_bwd_dq_kernel<D, kDqBr, kDqBc, CAUSAL, T, FAULTS>;
    constexpr int kDqSmem = fa2_bwd_dq_smem_bytes<D, kDqBr, kDqBc>();
    if (std::string e = set_smem<kernel>(kSmem); !e.empty()) return e;
    if (std::string e = set_smem<dq_kernel>(kDqSmem); !e.empty()) return e;
    phases.begin("D = rowsum(dO o O)");
    fa2_bwd_prepass_kernel<D, T, false><<<prepass_blocks, 256, 0, stream>>>(p);
    phases.end();
    if (std::string e = launch_status("fa2 backward pre-pass"); !e.empty()) return e;
    phases.begin("dK, dV (K/V blocks outer)");
    kernel<<<bwd_grid(heads_fastest, kv_blocks, s.heads_total()), kThreads, kSmem, stream>>>(p);
    phases.end();
    if (std::string e = launch_status("fa2 backward"); !e.empty()) return e;
    phases.begin("dQ (query blocks outer, P and dS recomputed)");
    dq_kernel<<<bwd_grid(heads_fastest, dq_blocks, s.heads_total()), kDqBr / 16 * 32, kDqSmem,
                stream>>>(p);
    phases.end();
    return launch_status("fa2 backward dQ");
  }
  constexpr auto kernel = fa2_bwd_kernel<D, BR, BC, CAUSAL, T, FAULTS, true>;
  constexpr int kSmem = fa2_bwd_smem_bytes<D, BR, BC, true>();
  if (std::string e = set_smem<kernel>(kSmem); !e.empty()) return e;
  phases.begin("D = rowsum(dO o O), dQ accumulator zeroed");
  fa2_bwd_prepass_kernel<D, T, true><<<prepass_blocks, 256, 0, stream>>>(p);
  phases.end();
  if (std::string e = launch_status("fa2 backward pre-pass"); !e.empty()) return e;
  phases.begin("dK, dV, dQ accumulation (K/V blocks outer)");
  kernel<<<bwd_grid(heads_fastest, kv_blocks, s.heads_total()), kThreads, kSmem, stream>>>(p);
  phases.end();
  if (std::string e = launch_status("fa2 backward"); !e.empty()) return e;
  phases.begin("dQ = scale accumulator, to the dtype");
  const std::int64_t pairs = rows * D / 2;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((pairs + 255) / 256, 65535));
  fa2_bwd_convert_kernel<T><<<blocks, 256, 0, stream>>>(p, pairs);
  phases.end();
  return launch_status("fa2 backward convert");
}

}  // namespace

template <int D, bool CAUSAL>
std::string run(const Shape& s, const Tiles& t, const BackwardBuffers& b, cudaStream_t stream,
                const Fa2BwdOptions& o, const FaultInjection& fault,
                const Fa2BwdPhaseHooks& phases) {
  return Fa2BwdTiles<D>::type::dispatch("fa2 backward", s.d, t, [&](auto shape) {
    using S = decltype(shape);
    return with_dtype(s.dtype, [&](auto type) {
      using T = typename decltype(type)::type;
      if (fault.any())
        return launch_fa2_bwd<S::D, S::BR, S::BC, CAUSAL, T, true>(s, b, stream, o.heads_fastest,
                                                                   o.dq_separate, fault, phases);
      return launch_fa2_bwd<S::D, S::BR, S::BC, CAUSAL, T, false>(s, b, stream, o.heads_fastest,
                                                                  o.dq_separate, fault, phases);
    });
  });
}
#endif  // FA2_BWD_INSTANTIATE

}  // namespace fa2_bwd
}  // namespace fa
