// fa2 backward: FlashAttention-2's backward pass (Dao 2023, Algorithm 2), three kernels.
//
// Algorithm (per head; scale = 1/sqrt(d), lse the forward's natural-log log-sum-exp per row):
//   P = exp(scale Q K^T - lse), dV = P^T dO, dP = dO V^T, D = rowsum(dO o O), dS = P o (dP - D),
//   dQ = scale dS K, dK = scale dS^T Q.  P is never stored: it is recomputed from Q, K and lse.
//
// Schedule
//   pre-pass  one warp per row: D = rowsum(dO o O) (fp32, to the workspace) and the row of the
//             fp32 dQ accumulator zeroed.
//   main      grid (ceil(N/Bc) K/V blocks, B*H) (block_order heads: the two swapped); block
//             Bc/16 warps; warp w owns keys [16w, 16w+16) of the block for the whole run, so
//             its dK and dV rows (16 x d, fp32) stay in registers (FA2's "K/V outer" split).
//             K_j, V_j -> shared (cp.async), read from HBM once.
//             loop i over the query blocks of Br rows that see block j (causal: from the
//             diagonal on):
//               Q_i, dO_i -> shared (cp.async); lse_i (log2 units) and D_i -> shared
//               S^T = K_w Q_i^T, dP^T = V_w dO_i^T       mma.sync m16n8k16, fp32 accumulators
//               P^T = exp2(S^T scale log2e - lse_i)      masked: keys >= N, causal key > query
//               dS^T = P^T o (dP^T - D_i)
//               dV_w += P^T dO_i, dK_w += dS^T Q_i       P^T, dS^T re-used as A fragments
//               dS -> shared (input type, [query][key]); each warp then takes 16 query rows
//               (and d/(warps*16/Br) columns) of dQ_i += dS K_j and adds them to the fp32
//               accumulator in HBM with atomicAdd (red.global.add.f32)
//             epilogue: dK *= scale; dK, dV written once.
//   convert   dQ = scale * accumulator, rounded to the input type.
//
// HBM traffic (profiler/io_model.cpp, fa2_backward_model): O, dO read and D, the accumulator
// written by the pre-pass; K, V read once; Q, dO, lse, D read once per K/V block that the query
// block sees; the accumulator read and written (atomics, at the L2) once per block pair; dK, dV
// written once; the accumulator read and dQ written by the convert pass.
//
// Not pipelined: each query block's tiles are loaded and waited for before use (one stage).
// Fault injection (verification tests): drop_kv_block (that thread block contributes nothing and
// writes dK = dV = 0), mask_shift, scale_factor / natural_exp (folded into scale_log2).
#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fa2/fa2.hpp"

namespace fa {
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
  float* dq_accum;  // [B*H][N][d] fp32
  float* D;         // [B*H][N] fp32
  std::int64_t N;
  std::int64_t rows;  // B*H*N
  float scale;        // the softmax scale, for dQ and dK
  float scale_log2;   // softmax scale * log2(e), fault hooks folded in
  int num_kv_blocks;
  int heads_fastest;
  FaultInjection fault;
};

template <typename T>
__device__ inline float to_f(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return __half2float(x);
  }
}

template <int D, typename T>
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
  float* dq = p.dq_accum + row * D;
#pragma unroll
  for (int c = lane * 4; c < D; c += 128)
    *reinterpret_cast<float4*>(dq + c) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
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

template <int D, int BR, int BC>
constexpr int fa2_bwd_smem_bytes() {
  // K, V tiles; Q, dO tiles; the dS tile; lse and D of the query block.
  return (2 * BC * D + 2 * BR * D + BR * BC) * 2 + 2 * BR * 4;
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
__global__ void __launch_bounds__(BC / 16 * 32) fa2_bwd_kernel(const Fa2BwdParams p) {
  constexpr int kWarps = BC / 16, kThreads = kWarps * 32;
  constexpr int kQT = BR / 8;  // 8-query tiles of S^T
  constexpr int kDT = D / 8;   // 8-column tiles of dK, dV
  // The dQ product: BR/16 row groups of 16 query rows, the warps of a row group splitting d.
  constexpr int kRowGroups = BR / 16, kColGroups = kWarps / kRowGroups;
  constexpr int kDqCols = D / kColGroups;
  static_assert(BR <= BC && kWarps % kRowGroups == 0 && kDqCols % 16 == 0, "bwd tile shape");
  static_assert(BC >= 64, "the dS tile's swizzle needs 64 columns");
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);  // [BC][D]
  T* sV = sK + BC * D;                     // [BC][D]
  T* sQ = sV + BC * D;                     // [BR][D]
  T* sdO = sQ + BR * D;                    // [BR][D]
  T* sdS = sdO + BR * D;                   // [BR][BC], swizzled with BC columns
  float* sLse = reinterpret_cast<float*>(sdS + BR * BC);
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
  float* acc_h = p.dq_accum + head_offset;
  const bool dropped = FAULTS && kb == p.fault.drop_kv_block;
  const int shift = FAULTS ? p.fault.mask_shift : 0;

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
  const int first_q = CAUSAL ? static_cast<int>(k0 / BR) : 0;
  const int row_group = warp % kRowGroups, col_group = warp / kRowGroups;

  for (int qb = dropped ? total_q : first_q; qb < total_q; ++qb) {
    const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
    load_tile<BR, D, kThreads>(sQ, Qh, q0, N);
    load_tile<BR, D, kThreads>(sdO, dOh, q0, N);
    cp_async_commit();
    for (int r = threadIdx.x; r < BR; r += kThreads) {
      const bool in = q0 + r < N;
      sLse[r] = in ? lse_h[q0 + r] * kLog2e : INFINITY;  // padding rows: P = 0
      sD[r] = in ? D_h[q0 + r] : 0.0f;
    }
    cp_async_wait<0>();
    __syncthreads();

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
        float pe = exp2f(st[n][e] * p.scale_log2 - sLse[qi]);
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
#pragma unroll
    for (int n = 0; n < kQT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qi = n * 8 + 2 * t + (e & 1);
        const int kl = warp * 16 + g + 8 * (e >> 1);
        sdS[swz<BC>(qi, kl)] = static_cast<T>(dpt[n][e]);
      }
    }
    __syncthreads();

    // dQ_i += dS K_j for this warp's 16 query rows and kDqCols columns.
    {
      std::uint32_t af[BC / 16][4];
      load_a_fragments<BC>(af, sdS, row_group * 16, lane);
      float dq[kDqCols / 8][4];
#pragma unroll
      for (int i = 0; i < kDqCols / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < BC / 16; ++kc) {
#pragma unroll
        for (int dp = 0; dp < kDqCols / 16; ++dp) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b,
                            smem_u32(sK + swz<D>(kc * 16 + (lane & 15),
                                                 col_group * kDqCols + dp * 16 + (lane >> 4) * 8)));
          mma_16816<T>(dq[2 * dp], af[kc], b[0], b[1]);
          mma_16816<T>(dq[2 * dp + 1], af[kc], b[2], b[3]);
        }
      }
      const std::int64_t row_a = q0 + row_group * 16 + g, row_b = row_a + 8;
#pragma unroll
      for (int i = 0; i < kDqCols / 8; ++i) {
        const int col = col_group * kDqCols + i * 8 + 2 * t;
        if (row_a < N) {
          atomicAdd(acc_h + row_a * D + col, dq[i][0]);
          atomicAdd(acc_h + row_a * D + col + 1, dq[i][1]);
        }
        if (row_b < N) {
          atomicAdd(acc_h + row_b * D + col, dq[i][2]);
          atomicAdd(acc_h + row_b * D + col + 1, dq[i][3]);
        }
      }
    }
    // The next query block's loads overwrite sQ, sdO, sdS, sLse, sD.
    __syncthreads();
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

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
std::string launch_fa2_bwd(const Shape& s, const BackwardBuffers& b, cudaStream_t stream,
                           bool heads_fastest, const FaultInjection& fault,
                           const Fa2BwdPhaseHooks& phases) {
  constexpr int kThreads = BC / 16 * 32;
  constexpr int kSmem = fa2_bwd_smem_bytes<D, BR, BC>();
  auto kernel = fa2_bwd_kernel<D, BR, BC, CAUSAL, T, FAULTS>;
  static PerDevice<cudaError_t> attr;
  const cudaError_t attr_status = attr.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr_status != cudaSuccess)
    return std::string("fa2 backward: cudaFuncSetAttribute: ") + cudaGetErrorString(attr_status);
  const std::int64_t kv_blocks = (s.N + BC - 1) / BC;
  const std::int64_t rows = s.heads_total() * s.N;
  const std::int64_t y_extent = heads_fastest ? kv_blocks : s.heads_total();
  if (kv_blocks > 0x7fffffff || s.heads_total() > 0x7fffffff || y_extent > 65535)
    return "fa2 backward: grid too large";
  auto* ws = static_cast<unsigned char*>(b.workspace);
  float* acc = reinterpret_cast<float*>(ws);
  float* Dv = reinterpret_cast<float*>(ws + static_cast<std::size_t>(rows) * D * 4);
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
                       fault};
  phases.begin("D = rowsum(dO o O), dQ accumulator zeroed");
  fa2_bwd_prepass_kernel<D, T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(p);
  phases.end();
  if (std::string e = launch_status("fa2 backward pre-pass"); !e.empty()) return e;
  phases.begin("dK, dV, dQ accumulation (K/V blocks outer)");
  const dim3 grid =
      heads_fastest
          ? dim3(static_cast<unsigned>(s.heads_total()), static_cast<unsigned>(kv_blocks))
          : dim3(static_cast<unsigned>(kv_blocks), static_cast<unsigned>(s.heads_total()));
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  phases.end();
  if (std::string e = launch_status("fa2 backward"); !e.empty()) return e;
  phases.begin("dQ = scale accumulator, to the dtype");
  const std::int64_t pairs = rows * D / 2;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((pairs + 255) / 256, 65535));
  fa2_bwd_convert_kernel<T><<<blocks, 256, 0, stream>>>(p, pairs);
  phases.end();
  return launch_status("fa2 backward convert");
}

// The compiled backward tiles (Br x Bc); the first of each head dim is the default.
using Fa2BwdTiles = TileList<TileShape<64, 64, 64>, TileShape<128, 32, 64>>;
using Fa2BwdFaultTiles = Fa2BwdTiles;

}  // namespace

std::vector<Tiles> fa2_backward_tile_options(int d) {
  return Fa2BwdTiles::options(d);
}

std::size_t fa2_backward_workspace_bytes(const Shape& s) {
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N);
  return rows * static_cast<std::size_t>(s.d) * 4 + rows * 4;
}

std::string fa2_run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             cudaStream_t stream, bool heads_fastest, const FaultInjection& fault,
                             const Fa2BwdPhaseHooks& phases) {
  if (b.workspace_bytes < fa2_backward_workspace_bytes(s))
    return "fa2 backward: workspace too small";
  if (fault.any()) {
    return dispatch_tiles<Fa2BwdFaultTiles>(
        "fa2 backward", s, t, [&](auto shape, auto causal, auto type) {
          using S = decltype(shape);
          return launch_fa2_bwd<S::D, S::BR, S::BC, decltype(causal)::value,
                                typename decltype(type)::type, true>(s, b, stream, heads_fastest,
                                                                     fault, phases);
        });
  }
  return dispatch_tiles<Fa2BwdTiles>("fa2 backward", s, t, [&](auto shape, auto causal, auto type) {
    using S = decltype(shape);
    return launch_fa2_bwd<S::D, S::BR, S::BC, decltype(causal)::value,
                          typename decltype(type)::type, false>(s, b, stream, heads_fastest, fault,
                                                                phases);
  });
}

}  // namespace fa
