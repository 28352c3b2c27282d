// standard: attention in three passes, with S and P materialised in HBM.
//
//   pass 1  S = scale * Q K^T      cuBLAS strided-batched GEMM over B*H heads, fp32 accumulate,
//                                  S stored in the input type (bf16/fp16): N*N per head.
//   pass 2  P = softmax(S)         one thread block per row, the row held in registers (N <=
//                                  16384, N % 8 == 0): S read once, one exp per element; longer
//                                  or odd rows: an online max/sum pass, then a pass writing P.
//                                  Causal mask applied here; masked keys are not read.
//                                  P overwrites S in place (the IO model counts S read, P written).
//   pass 3  O = P V                cuBLAS strided-batched GEMM, fp32 accumulate, O in input type.
//
// HBM traffic (profiler/io_model.cpp): Q, K read; S written; S read (twice in the two-pass
// kernel), P written; P, V read; O written; the log-sum-exp (m + ln l per row) written by pass 2.
//
// Backward (run_backward), P kept in HBM by the forward: prepare_backward runs this forward once,
// untimed, into the backward's workspace (P where the forward leaves it; its O and lse into scratch
// of their own, the given O and lse untouched), as a training step's forward leaves P for its
// backward. The timed backward is then, each pass through HBM:
//   pass 1  dP = dO V^T             cuBLAS, dP (N x N, input type) into the dS buffer
//   pass 2  D = rowsum(dO o O)      a kernel, one warp per row, fp32. O: this forward's own (the
//                                   scratch O of prepare_backward), the O that P produced, so that
//                                   sum_j dS_ij = 0 holds to rounding on each row. With the given O
//                                   (fa2's) a causal row of 2-3 keys failed its dQ check on the
//                                   H200 (above its tolerance).
//   pass 3  dS = P o (dP - D)       a kernel, one thread block per row, in place over dP; causal:
//                                   keys past the diagonal not read, written 0
//   pass 4  dQ = scale dS K         cuBLAS
//   pass 5  dK = scale dS^T Q       cuBLAS
//   pass 6  dV = P^T dO             cuBLAS
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <string>
#include <type_traits>

#include "kernels/common/fault.hpp"
#include "kernels/standard/standard.hpp"

namespace fa {
namespace {

constexpr int kSoftmaxThreads = 256;

template <typename T>
__device__ inline float to_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return __half2float(x);
  }
}

template <typename T>
__device__ inline T from_float(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}

// What a softmax kernel works on. The fault fields are read only by the FAULTS instantiations
// (verification tests): keys [drop_lo, drop_hi) left out, the causal mask shifted.
template <typename T>
struct SoftmaxArgs {
  T* sp;       // S in, P out (in place), [rows][N]
  float* lse;  // [rows], natural log
  std::int64_t N;
  bool causal;
  int mask_shift;
  std::int64_t drop_lo, drop_hi;
};

// Keys of the row that take part: [0, valid) less the dropped range.
template <bool FAULTS, typename T>
__device__ inline std::int64_t valid_keys(const SoftmaxArgs<T>& a, std::int64_t row) {
  if (!a.causal) return a.N;
  const std::int64_t v = row + 1 + (FAULTS ? a.mask_shift : 0);
  return v < 0 ? 0 : (v > a.N ? a.N : v);
}
template <bool FAULTS, typename T>
__device__ inline bool key_dropped(const SoftmaxArgs<T>& a, std::int64_t key) {
  return FAULTS && key >= a.drop_lo && key < a.drop_hi;
}

// Combines two (max, sum-of-exp) pairs of an online softmax.
__device__ inline void merge_max_sum(float& m, float& l, float m2, float l2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;  // both empty
  l = l * __expf(m - mn) + l2 * __expf(m2 - mn);
  m = mn;
}

// Row softmax over S (already scaled). VEC elements per access: 8 (16 bytes) when rows are
// 16-byte aligned (N % 8 == 0), else 1.
template <typename T, int VEC, bool FAULTS>
__global__ void __launch_bounds__(kSoftmaxThreads) softmax_rows_kernel(const SoftmaxArgs<T> a) {
  const std::int64_t N = a.N;
  const std::int64_t row_global = blockIdx.x;  // over B*H*N rows
  const std::int64_t row = row_global % N;     // query position within the head
  T* srow = a.sp + row_global * N;
  // Causal: keys 0..row are valid; everything after is written as 0 without being read.
  const std::int64_t valid = valid_keys<FAULTS>(a, row);

  float m = -INFINITY, l = 0.0f;
  for (std::int64_t c = threadIdx.x * VEC; c < valid; c += kSoftmaxThreads * VEC) {
    T vals[VEC];
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(vals) = *reinterpret_cast<const uint4*>(srow + c);
    } else {
      vals[0] = srow[c];
    }
    // One rescale per vector, one exp per element.
    float vmax = -INFINITY;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (c + e < valid && !key_dropped<FAULTS>(a, c + e)) vmax = fmaxf(vmax, to_float(vals[e]));
    }
    if (vmax > m) {
      l *= __expf(m - vmax);
      m = vmax;
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (c + e < valid && !key_dropped<FAULTS>(a, c + e)) l += __expf(to_float(vals[e]) - m);
    }
  }
  // Warp, then block reduction of (m, l).
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
    merge_max_sum(m, l, m2, l2);
  }
  __shared__ float sm[kSoftmaxThreads / 32], sl[kSoftmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
  __syncthreads();
  m = sm[0];
  l = sl[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) merge_max_sum(m, l, sm[w], sl[w]);
  const float inv_l = 1.0f / l;
  if (threadIdx.x == 0) a.lse[row_global] = m + logf(l);

  for (std::int64_t c = threadIdx.x * VEC; c < N; c += kSoftmaxThreads * VEC) {
    T vals[VEC];
    const bool any_valid = c < valid;
    if (any_valid) {
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint4*>(vals) = *reinterpret_cast<const uint4*>(srow + c);
      } else {
        vals[0] = srow[c];
      }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const bool use = c + e < valid && !key_dropped<FAULTS>(a, c + e);
      const float p = use ? __expf(to_float(vals[e]) - m) * inv_l : 0.0f;
      vals[e] = from_float<T>(p);
    }
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(srow + c) = *reinterpret_cast<const uint4*>(vals);
    } else {
      srow[c] = vals[0];
    }
  }
}

// Block-wide reduction of one float (max or sum); `scratch` holds one value per warp and is
// used by this call only.
template <bool IS_MAX>
__device__ inline float block_reduce(float x, float* scratch) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, off);
    x = IS_MAX ? fmaxf(x, y) : x + y;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) x = IS_MAX ? fmaxf(x, scratch[w]) : x + scratch[w];
  return x;
}

// Row softmax with the row held in registers: one read of S, one exp per element, one write of
// P. Each thread holds VECS vectors of 8 elements, so rows up to 256 * 8 * VECS elements (N % 8
// == 0): one pass over S instead of two.
template <typename T, int VECS, bool FAULTS>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_in_registers_kernel(const SoftmaxArgs<T> a) {
  const std::int64_t N = a.N;
  const std::int64_t row_global = blockIdx.x;
  const std::int64_t row = row_global % N;
  T* srow = a.sp + row_global * N;
  const std::int64_t valid = valid_keys<FAULTS>(a, row);
  __shared__ float red_max[kSoftmaxThreads / 32], red_sum[kSoftmaxThreads / 32];

  float x[VECS][8];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < VECS; ++i) {
    const std::int64_t c = (static_cast<std::int64_t>(i) * kSoftmaxThreads + threadIdx.x) * 8;
    T vals[8];
    if (c < valid) {  // causal rows: keys past the diagonal are never read
      *reinterpret_cast<uint4*>(vals) = *reinterpret_cast<const uint4*>(srow + c);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      x[i][e] = (c + e < valid && !key_dropped<FAULTS>(a, c + e)) ? to_float(vals[e]) : -INFINITY;
      m = fmaxf(m, x[i][e]);
    }
  }
  m = block_reduce<true>(m, red_max);
  float l = 0.0f;
#pragma unroll
  for (int i = 0; i < VECS; ++i) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      x[i][e] = __expf(x[i][e] - m);  // exp(-inf) = 0 for masked and padding entries
      l += x[i][e];
    }
  }
  l = block_reduce<false>(l, red_sum);
  const float inv_l = 1.0f / l;
  if (threadIdx.x == 0) a.lse[row_global] = m + logf(l);
#pragma unroll
  for (int i = 0; i < VECS; ++i) {
    const std::int64_t c = (static_cast<std::int64_t>(i) * kSoftmaxThreads + threadIdx.x) * 8;
    if (c >= N) break;
    T vals[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) vals[e] = from_float<T>(x[i][e] * inv_l);
    *reinterpret_cast<uint4*>(srow + c) = *reinterpret_cast<const uint4*>(vals);
  }
}

// D[row] = sum_c dO[row][c] O[row][c] (fp32), one warp per row.
template <typename T>
__global__ void __launch_bounds__(256)
    rowsum_do_o_kernel(const T* d_o, const T* o, float* D, std::int64_t rows, int d) {
  const std::int64_t row = blockIdx.x * std::int64_t{8} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int c = lane; c < d; c += 32) acc += to_float(d_o[row * d + c]) * to_float(o[row * d + c]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) D[row] = acc;
}

// What the dS kernel works on: dP in, dS out (in place), P, D; the fault fields are read only by
// the FAULTS instantiation (keys [drop_lo, drop_hi) get dS = 0).
template <typename T>
struct DsArgs {
  T* ds;  // dP in, dS out, [rows][N]
  const T* p;
  const float* D;
  std::int64_t N;
  bool causal;
  std::int64_t drop_lo, drop_hi;
};

// dS = P o (dP - D) for one row per thread block; VEC elements per access (8 when N % 8 == 0).
template <typename T, int VEC, bool FAULTS>
__global__ void __launch_bounds__(kSoftmaxThreads) ds_rows_kernel(const DsArgs<T> a) {
  const std::int64_t N = a.N;
  const std::int64_t row_global = blockIdx.x;
  const std::int64_t row = row_global % N;
  T* dsrow = a.ds + row_global * N;
  const T* prow = a.p + row_global * N;
  const std::int64_t valid = a.causal ? row + 1 : N;
  const float D = a.D[row_global];
  for (std::int64_t c = threadIdx.x * VEC; c < N; c += kSoftmaxThreads * VEC) {
    T dp[VEC], p[VEC];
    if (c < valid) {
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint4*>(dp) = *reinterpret_cast<const uint4*>(dsrow + c);
        *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(prow + c);
      } else {
        dp[0] = dsrow[c];
        p[0] = prow[c];
      }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const bool dropped = FAULTS && c + e >= a.drop_lo && c + e < a.drop_hi;
      const bool use = c + e < valid && !dropped;
      dp[e] = from_float<T>(use ? to_float(p[e]) * (to_float(dp[e]) - D) : 0.0f);
    }
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(dsrow + c) = *reinterpret_cast<const uint4*>(dp);
    } else {
      dsrow[c] = dp[0];
    }
  }
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_(other)";
  }
}

class StandardLauncher final : public Launcher {
 public:
  explicit StandardLauncher(const FaultInjection& fault) : fault_(fault) {}
  ~StandardLauncher() override {
    if (handle_) cublasDestroy(handle_);
  }

  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return static_cast<std::size_t>(s.score_elements()) * element_bytes(s.dtype);
  }

  std::string run(const Shape& s, const Tiles& tiles, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "standard"); !e.empty()) return e;
    if (std::string e = ensure_handle(); !e.empty()) return e;
    if (b.workspace_bytes < workspace_bytes(s, tiles)) return "standard: workspace too small";
    cublasSetStream(handle_, stream);
    const cudaDataType_t type = s.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const int n = static_cast<int>(s.N), d = static_cast<int>(s.d);
    const int batch = static_cast<int>(s.heads_total());
    const long long stride_qkv = static_cast<long long>(s.N) * s.d;
    const long long stride_s = static_cast<long long>(s.N) * s.N;
    const float alpha_s = static_cast<float>(s.scale() * fault_.scale_multiplier()), one = 1.0f,
                zero = 0.0f;

    // Row-major S[q][k] = sum_c Q[q][c] K[k][c] is column-major S^T = K * Q^T, i.e. with
    // column-major views K^T (d x N, ld d) and Q^T (d x N, ld d): C(N x N) = op_T(K^T) * Q^T.
    phase_begin("S = scale Q K^T (cuBLAS)");
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, n, d, &alpha_s, b.k, type, d, stride_qkv, b.q, type,
        d, stride_qkv, &zero, b.workspace, type, n, stride_s, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    phase_end();
    if (st != CUBLAS_STATUS_SUCCESS) return std::string("cuBLAS QK^T: ") + cublas_status_name(st);

    const auto rows = static_cast<unsigned>(s.heads_total() * s.N);
    if (rows > 0x7fffffffu) return "standard: too many rows for one softmax grid";
    phase_begin("P = softmax(S), in place");
    if (s.dtype == DType::bf16) {
      launch_softmax<__nv_bfloat16>(s, b, rows, stream, fault_);
    } else {
      launch_softmax<__half>(s, b, rows, stream, fault_);
    }
    phase_end();
    if (auto e = cudaGetLastError(); e != cudaSuccess) {
      return std::string("softmax launch: ") + cudaGetErrorString(e);
    }

    // Row-major O[q][c] = sum_k P[q][k] V[k][c] is column-major O^T (d x N) = V^T (d x N) * P^T.
    phase_begin("O = P V (cuBLAS)");
    // (fault skip_last_query_block: the last 64-row block of O is not computed)
    const int o_rows = static_cast<int>(
        fault_.skip_last_query_block ? launched_query_blocks(s.N, 64, fault_) * 64 : n);
    st =
        cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, d, o_rows, n, &one, b.v, type,
                                   d, stride_qkv, b.workspace, type, n, stride_s, &zero, b.o, type,
                                   d, stride_qkv, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    phase_end();
    if (st != CUBLAS_STATUS_SUCCESS) return std::string("cuBLAS PV: ") + cublas_status_name(st);
    return "";
  }

  // The backward's workspace: P and dP/dS (N x N each, input type), D (fp32 per row), and the
  // scratch O and lse of the forward that prepare_backward runs.
  struct BackwardLayout {
    std::size_t p = 0, ds = 0, D = 0, o = 0, lse = 0, total = 0;
  };
  static BackwardLayout backward_layout(const Shape& s) {
    auto align = [](std::size_t x) { return (x + 255) / 256 * 256; };
    const std::size_t nn = static_cast<std::size_t>(s.score_elements()) * element_bytes(s.dtype);
    const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N) * sizeof(float);
    const std::size_t nd = static_cast<std::size_t>(s.qo_elements()) * element_bytes(s.dtype);
    BackwardLayout l;
    l.ds = align(nn);
    l.D = l.ds + align(nn);
    l.o = l.D + align(rows);
    l.lse = l.o + align(nd);
    l.total = l.lse + align(rows);
    return l;
  }
  std::size_t backward_workspace_bytes(const Shape& s, const Tiles&) const override {
    return backward_layout(s).total;
  }

  std::string prepare_backward(const Shape& s, const Tiles& tiles, const BackwardBuffers& b,
                               cudaStream_t stream) override {
    const BackwardLayout l = backward_layout(s);
    if (b.workspace_bytes < l.total) return "standard: backward workspace too small";
    auto* ws = static_cast<unsigned char*>(b.workspace);
    const DeviceBuffers fwd{b.q,
                            b.k,
                            b.v,
                            ws + l.o,
                            reinterpret_cast<float*>(ws + l.lse),
                            ws + l.p,
                            static_cast<std::size_t>(l.ds - l.p)};
    return run(s, tiles, fwd, stream);
  }

  std::string run_backward(const Shape& s, const Tiles&, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "standard's backward"); !e.empty()) return e;
    if (std::string e = ensure_handle(); !e.empty()) return e;
    const BackwardLayout l = backward_layout(s);
    if (b.workspace_bytes < l.total) return "standard: backward workspace too small";
    cublasSetStream(handle_, stream);
    auto* ws = static_cast<unsigned char*>(b.workspace);
    void* P = ws + l.p;
    void* dS = ws + l.ds;
    float* D = reinterpret_cast<float*>(ws + l.D);
    const cudaDataType_t type = s.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const int n = static_cast<int>(s.N), d = static_cast<int>(s.d);
    const int batch = static_cast<int>(s.heads_total());
    const long long stride_qkv = static_cast<long long>(s.N) * s.d;
    const long long stride_s = static_cast<long long>(s.N) * s.N;
    const float scale = static_cast<float>(s.scale()), one = 1.0f, zero = 0.0f;
    auto gemm = [&](const char* what, cublasOperation_t ta, cublasOperation_t tb, int m, int nn,
                    int k, const float* alpha, const void* A, int lda, long long sa, const void* B,
                    int ldb, long long sb, void* C, int ldc, long long sc) -> std::string {
      phase_begin(what);
      const cublasStatus_t st = cublasGemmStridedBatchedEx(
          handle_, ta, tb, m, nn, k, alpha, A, type, lda, sa, B, type, ldb, sb, &zero, C, type, ldc,
          sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      phase_end();
      return st == CUBLAS_STATUS_SUCCESS ? "" : std::string(what) + ": " + cublas_status_name(st);
    };
    // Row-major X[a][b] is column-major X^T. dP[i][j] = dO_i . V_j: as S = Q K^T in run().
    if (auto e = gemm("dP = dO V^T (cuBLAS)", CUBLAS_OP_T, CUBLAS_OP_N, n, n, d, &one, b.v, d,
                      stride_qkv, b.d_o, d, stride_qkv, dS, n, stride_s);
        !e.empty())
      return e;
    const std::int64_t rows = s.heads_total() * s.N;
    if (rows > 0x7fffffff) return "standard: too many rows for one grid";
    phase_begin("D = rowsum(dO o O)");
    if (s.dtype == DType::bf16) {
      launch_rowsum<__nv_bfloat16>(s, b.d_o, ws + l.o, D, rows, stream);
    } else {
      launch_rowsum<__half>(s, b.d_o, ws + l.o, D, rows, stream);
    }
    phase_end();
    phase_begin("dS = P o (dP - D)");
    if (s.dtype == DType::bf16) {
      launch_ds<__nv_bfloat16>(s, P, dS, D, rows, stream, fault_);
    } else {
      launch_ds<__half>(s, P, dS, D, rows, stream, fault_);
    }
    phase_end();
    if (auto e = cudaGetLastError(); e != cudaSuccess)
      return std::string("standard backward kernels: ") + cudaGetErrorString(e);
    // dQ[i][c] = scale sum_j dS[i][j] K[j][c]: as O = P V in run().
    if (auto e = gemm("dQ = scale dS K (cuBLAS)", CUBLAS_OP_N, CUBLAS_OP_N, d, n, n, &scale, b.k, d,
                      stride_qkv, dS, n, stride_s, b.dq, d, stride_qkv);
        !e.empty())
      return e;
    // dK[j][c] = scale sum_i dS[i][j] Q[i][c]: column-major dK^T = Q^T-view (d x N) times the
    // dS buffer (column-major dS^T) transposed.
    if (auto e = gemm("dK = scale dS^T Q (cuBLAS)", CUBLAS_OP_N, CUBLAS_OP_T, d, n, n, &scale, b.q,
                      d, stride_qkv, dS, n, stride_s, b.dk, d, stride_qkv);
        !e.empty())
      return e;
    // dV[j][c] = sum_i P[i][j] dO[i][c]: likewise with P and dO.
    return gemm("dV = P^T dO (cuBLAS)", CUBLAS_OP_N, CUBLAS_OP_T, d, n, n, &one, b.d_o, d,
                stride_qkv, P, n, stride_s, b.dv, d, stride_qkv);
  }

 private:
  std::string ensure_handle() {
    if (handle_) return "";
    if (auto st = cublasCreate(&handle_); st != CUBLAS_STATUS_SUCCESS) {
      handle_ = nullptr;
      return std::string("cublasCreate: ") + cublas_status_name(st);
    }
    return "";
  }

  template <typename T>
  static void launch_rowsum(const Shape& s, const void* d_o, const void* o, float* D,
                            std::int64_t rows, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>((rows + 7) / 8);
    rowsum_do_o_kernel<T><<<blocks, 256, 0, stream>>>(
        static_cast<const T*>(d_o), static_cast<const T*>(o), D, rows, static_cast<int>(s.d));
  }

  template <typename T>
  static void launch_ds(const Shape& s, void* P, void* dS, const float* D, std::int64_t rows,
                        cudaStream_t stream, const FaultInjection& f) {
    // The drop fault counts blocks of 64 keys, as the forward's.
    const std::int64_t drop_lo = f.drop_kv_block >= 0 ? std::int64_t{64} * f.drop_kv_block : 0;
    const DsArgs<T> a{static_cast<T*>(dS),
                      static_cast<const T*>(P),
                      D,
                      s.N,
                      s.causal,
                      drop_lo,
                      f.drop_kv_block >= 0 ? drop_lo + 64 : 0};
    const auto grid = static_cast<unsigned>(rows);
    if (f.in_kernel()) {
      if (s.N % 8 == 0) {
        ds_rows_kernel<T, 8, true><<<grid, kSoftmaxThreads, 0, stream>>>(a);
      } else {
        ds_rows_kernel<T, 1, true><<<grid, kSoftmaxThreads, 0, stream>>>(a);
      }
    } else if (s.N % 8 == 0) {
      ds_rows_kernel<T, 8, false><<<grid, kSoftmaxThreads, 0, stream>>>(a);
    } else {
      ds_rows_kernel<T, 1, false><<<grid, kSoftmaxThreads, 0, stream>>>(a);
    }
  }

  template <typename T>
  static void launch_softmax(const Shape& s, const DeviceBuffers& b, unsigned rows,
                             cudaStream_t stream, const FaultInjection& f) {
    // The drop fault counts blocks of 64 keys (fa2's Bc).
    const std::int64_t drop_lo = f.drop_kv_block >= 0 ? std::int64_t{64} * f.drop_kv_block : 0;
    const SoftmaxArgs<T> a{
        static_cast<T*>(b.workspace),           b.lse, s.N, s.causal, f.mask_shift, drop_lo,
        f.drop_kv_block >= 0 ? drop_lo + 64 : 0};
    if (f.in_kernel()) {
      launch_softmax_kernel<T, true>(s, a, rows, stream);
    } else {
      launch_softmax_kernel<T, false>(s, a, rows, stream);
    }
  }

  template <typename T, bool FAULTS>
  static void launch_softmax_kernel(const Shape& s, const SoftmaxArgs<T>& a, unsigned rows,
                                    cudaStream_t stream) {
    constexpr std::int64_t kPerVec = kSoftmaxThreads * 8;  // elements one vector per thread covers
    if (s.N % 8 == 0 && s.N <= 2 * kPerVec) {
      softmax_rows_in_registers_kernel<T, 2, FAULTS><<<rows, kSoftmaxThreads, 0, stream>>>(a);
    } else if (s.N % 8 == 0 && s.N <= 4 * kPerVec) {
      softmax_rows_in_registers_kernel<T, 4, FAULTS><<<rows, kSoftmaxThreads, 0, stream>>>(a);
    } else if (s.N % 8 == 0 && s.N <= 8 * kPerVec) {
      softmax_rows_in_registers_kernel<T, 8, FAULTS><<<rows, kSoftmaxThreads, 0, stream>>>(a);
    } else if (s.N % 8 == 0) {
      softmax_rows_kernel<T, 8, FAULTS><<<rows, kSoftmaxThreads, 0, stream>>>(a);
    } else {
      softmax_rows_kernel<T, 1, FAULTS><<<rows, kSoftmaxThreads, 0, stream>>>(a);
    }
  }

  cublasHandle_t handle_ = nullptr;
  FaultInjection fault_;
};

}  // namespace

std::unique_ptr<Launcher> make_standard_launcher(const LaunchOptions& o) {
  return std::make_unique<StandardLauncher>(o.fault);
}

}  // namespace fa
