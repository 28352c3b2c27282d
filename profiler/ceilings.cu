// Measures the roofline's ceilings on the current device. Each figure is the median of repeated
// timed runs (CUDA events) after warm-up, on random data (never zeros: a GEMM on zeros ran 13%
// faster on an H200 of this workplace).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/cuda_check.hpp"
#include "kernels/common/device_buffer.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/common/mma_e4m3.cuh"
#include "kernels/common/mma_sm80.cuh"
#include "profiler/ceilings.hpp"
#include "profiler/counters.hpp"
#include "profiler/cupti_range.hpp"
#include "profiler/energy_queue.hpp"
#include "profiler/utc_time.hpp"

namespace fa {
namespace {

constexpr int kWarmup = 3, kReps = 10;

// Median milliseconds of `launch` over kReps timed runs.
double median_ms(const std::function<void()>& launch, cudaStream_t stream) {
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t a, b;
  FA_CUDA_CHECK(cudaEventCreate(&a));
  FA_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int i = 0; i < kReps; ++i) {
    FA_CUDA_CHECK(cudaEventRecord(a, stream));
    launch();
    FA_CUDA_CHECK(cudaEventRecord(b, stream));
    FA_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    FA_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out,
                            std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = in[i];
  }
}

// One pass, no grid-stride loop: each thread issues four independent 16-byte loads before its
// stores, so more bytes are in flight per SM than with one load per iteration.
__global__ void copy_unrolled_kernel(const float4* __restrict__ in, float4* __restrict__ out,
                                     std::size_t n) {
  constexpr int kLoads = 4;
  const std::size_t base = blockIdx.x * std::size_t{blockDim.x} * kLoads + threadIdx.x;
  float4 v[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const std::size_t i = base + std::size_t{blockDim.x} * j;
    if (i < n) v[j] = in[i];
  }
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const std::size_t i = base + std::size_t{blockDim.x} * j;
    if (i < n) out[i] = v[j];
  }
}

// Reads the buffer once, grid-stride, kLoads independent 16-byte loads in flight per thread
// (streaming: __ldcs); the sum keeps the loads alive. A kernel that only reads (decode's K/V
// stream) moves more bytes per second than a copy, whose writes share the DRAM bus.
template <int kLoads>
__global__ void read_stream_kernel(const float4* __restrict__ in, std::size_t n, float* sink) {
  float acc = 0.0f;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x * kLoads;
  for (std::size_t base = blockIdx.x * std::size_t{blockDim.x} * kLoads + threadIdx.x; base < n;
       base += stride) {
    float4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const std::size_t i = base + std::size_t{blockDim.x} * j;
      v[j] = i < n ? __ldcs(in + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) acc += v[j].x + v[j].y + v[j].z + v[j].w;
  }
  if (acc == 1234.5f) *sink = acc;
}

// Reads a buffer that fits in L2 `iters` times; the sum keeps the loads alive.
__global__ void l2_read_kernel(const float4* __restrict__ in, std::size_t n, int iters,
                               float* sink) {
  float acc = 0.0f;
  for (int it = 0; it < iters; ++it) {
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
         i += std::size_t{gridDim.x} * blockDim.x) {
      const float4 v = __ldcg(in + i);  // cache-global: L2, not L1
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == 1234.5f) *sink = acc;
}

// Eight independent FFMA chains per thread: enough parallelism to fill the FP32 pipes.
__global__ void ffma_kernel(float* sink, int iters, float b, float c) {
  float x[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) x[k] = threadIdx.x * 1e-3f + k;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], b, c);
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += x[k];
  if (s == 1234.5f) *sink = s;
}

// Every thread resident and asleep for `ns` nanoseconds: a kernel that does no FLOPs and moves no
// bytes, so its energy is the device's constant power while a kernel runs (the energy model's
// idle term), with clocks at their running level. Each warp adds the iterations of its loop to
// `iterations`: its instructions per launch follow from them (kSleep* below). The loop is
// warp-uniform: every lane reads the same %globaltimer in the same instruction.
__global__ void sleep_kernel(unsigned long long ns, unsigned long long* iterations) {
  unsigned long long start = 0, now = 0;
  unsigned n = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    ++n;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  if (threadIdx.x % 32 == 0) atomicAdd(iterations, static_cast<unsigned long long>(n));
}

// The energy model's instruction term where the counters cannot count the softmax step: FFMA and
// nothing else, 8 independent chains per thread (enough to fill the FP32 pipes), 64 FFMA per
// iteration of a loop the compiler may not unroll, so that its instructions per launch are known
// exactly from its SASS (kFfma* below). 1024 threads, two blocks per SM: a grid of 2 blocks per SM
// fills every SM (64 warps). b and c differ per thread, so every FFMA reads its operands from
// registers (the parameters themselves would be read from the constant bank), but the same two
// in every instruction: the operand reuse cache serves them, and an FFMA here costs less than the
// mixes real kernels issue (H200: 220 pJ per warp instruction against the softmax step's 317).
constexpr int kFfmaThreads = 1024;
__global__ void __launch_bounds__(kFfmaThreads, 2)
    ffma_calibration_kernel(float* sink, int iters, float b, float c) {
  const float bt = b - threadIdx.x * 1e-7f, ct = c + threadIdx.x * 1e-7f;
  float x[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) x[k] = threadIdx.x * 1e-3f + k;
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
#pragma unroll
      for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], bt, ct);
    }
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += x[k];
  if (s == 1234.5f) *sink = s;
}

// The energy model's instruction term where the counters can count it: the element-wise step an
// attention kernel runs around its matrix products (the online softmax of a score tile), on the
// CUDA cores alone. Per iteration a thread holds 32 scores of two rows, as an mma fragment does:
// each row's maximum (FMNMX, then across the row's 4 lanes: SHFL.BFLY), the exponent's argument
// (FFMA), MUFU.EX2, the row sum (FADD), pairs packed to bf16 (F2FP; folded into a word, LOP3, as
// the next product would take them), and the next tile's scores from these (FFMA). The operands
// are distinct registers, unlike the FFMA kernel's (one x times the same two b and c, which the
// operand reuse cache serves). Instructions counted (CUPTI); without the counters the FFMA kernel
// sets the term.
constexpr int kSoftmaxThreads = 512, kSoftmaxIters = 2048;
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_calibration_kernel(float* sink, int iters, float scale) {
  float s[2][16];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int k = 0; k < 16; ++k) s[r][k] = ((threadIdx.x * 7 + r * 16 + k) % 29) * (1.0f / 29);
  }
  float row_sum[2] = {0, 0};
  std::uint32_t packed = 0;
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = s[r][0];
#pragma unroll
      for (int k = 1; k < 16; ++k) m = fmaxf(m, s[r][k]);
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      const float shift = m * scale;
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        float p;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(p) : "f"(fmaf(s[r][k], scale, -shift)));
        row_sum[r] += p;
        s[r][k] = p;
      }
#pragma unroll
      for (int k = 0; k < 16; k += 2) {
        const __nv_bfloat162 two = __floats2bfloat162_rn(s[r][k], s[r][k + 1]);
        packed ^= *reinterpret_cast<const std::uint32_t*>(&two);
      }
#pragma unroll
      for (int k = 0; k < 16; ++k) s[r][k] = fmaf(s[r][k], 0.75f, 0.125f * (k & 3));
    }
  }
  if (row_sum[0] + row_sum[1] == 1234.5f || packed == 0x12345678u) *sink = row_sum[0] + packed;
}

// The energy model's mma.sync term: ldmatrix and mma.sync as the attention kernels fa1, fa2 and
// fp8 (sm_89+) run them, the tensor cores' operands through registers. Per k-step a warp loads
// one A fragment (m16, ldmatrix.x4) and the fragments of two n8 tiles of B (ldmatrix.x4) from
// shared memory, and issues mma.sync into independent fp32 accumulators; a fixed number of k-steps
// per iteration of a loop the compiler may not unroll (kMma* below). Shared memory is filled once
// (random values in [-1, 1), never zeros) and read by every warp; no global memory in the loop.
// 1024 threads a block.
//  - bf16 (m16n8k16): 8 k-steps of 4 mma.sync, A times each n8 tile twice, into 4 accumulators (a
//    second A fragment in registers, as fa2's Q, needs more than the 32 registers a thread of two
//    blocks per SM has: ptxas spills). Two blocks per SM: every SM full (64 warps).
//  - e4m3 (m16n8k32, sm_89+): 4 k-steps of 2 mma.sync (A times each n8 tile), even and odd k-steps
//    into different accumulators. Hopper has no e4m3 mma.sync: ptxas makes each one 2 HMMA.16816
//    (f16) after converting the operands (F2FP.F16.E4M3.UNPACK_B), and adds into the accumulator
//    with 4 FADD, as in the fp8 attention kernel; that needs 62 registers (more k-steps or mma per
//    step spill), so one block per SM (32 warps). Its code for targets below sm_89 is empty, and
//    it is launched only where it was built for sm_89 or later (measure_energy_model).
// An iteration is 131,072 FLOPs per warp (bf16) or 65,536 (e4m3).
constexpr int kMmaThreads = 1024;
template <bool kFp8>
constexpr int kMmaSteps = kFp8 ? 4 : 8;  // k-steps per iteration
template <bool kFp8>
constexpr int kMmaPerStep = kFp8 ? 2 : 4;  // mma.sync per k-step
// A tile row: 8 k-steps of 32 bytes (16 bf16 or 32 e4m3), padded by 16 bytes so the 8 row
// addresses of an ldmatrix matrix fall in 8 different 4-bank groups (no bank conflicts).
constexpr int kMmaRowBytes = 8 * 32 + 16;

// A value in [-1, 1) from an index (integer hash), for the mma kernels' operands.
__device__ __forceinline__ float mma_operand(unsigned i) {
  i *= 0x9E3779B1u;
  i ^= i >> 16;
  i *= 0x85EBCA6Bu;
  i ^= i >> 13;
  return static_cast<float>(static_cast<int>(i)) * 0x1p-31f;
}

template <bool kFp8>
__device__ __forceinline__ void mma_calibration_body(float* sink, int iters) {
  __shared__ __align__(16) unsigned char tile[32][kMmaRowBytes];  // rows 0-15 A, 16-31 B ([n][k])
  // Thread t fills the 8 bytes at row t / 32, bytes (t % 32) * 8 (kMmaThreads covers the tile).
  const unsigned t = threadIdx.x;
  std::uint32_t w[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if constexpr (kFp8) {
      const unsigned i = 8 * t + 4 * j;
      w[j] = __nv_fp8x4_e4m3(make_float4(mma_operand(i), mma_operand(i + 1), mma_operand(i + 2),
                                         mma_operand(i + 3)))
                 .__x;
    } else {
      const unsigned i = 4 * t + 2 * j;
      w[j] = sm80::pack2<__nv_bfloat16>(mma_operand(i), mma_operand(i + 1));
    }
  }
  *reinterpret_cast<uint2*>(&tile[t / 32][(t % 32) * 8]) = make_uint2(w[0], w[1]);
  __syncthreads();
  // ldmatrix row addresses (mma_sm80.cuh's "A" and "K" patterns, unswizzled): A's lane l reads
  // row l & 15 at byte (l >> 4) * 16 of the k-step, and B's row (l & 7) + (l >> 4) * 8 at byte
  // ((l >> 3) & 1) * 16, so b[0], b[1] are one n8 tile's fragment and b[2], b[3] the other's.
  const unsigned lane = t % 32;
  const std::uint32_t a_addr = sm80::smem_u32(&tile[lane & 15][(lane >> 4) * 16]);
  const std::uint32_t b_addr =
      sm80::smem_u32(&tile[16 + (lane & 7) + ((lane >> 4) << 3)][((lane >> 3) & 1) * 16]);
  float acc[4][4] = {};
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int s = 0; s < kMmaSteps<kFp8>; ++s) {
      std::uint32_t a[4], b[4];
      sm80::ldmatrix_x4(a, a_addr + 32 * s);
      sm80::ldmatrix_x4(b, b_addr + 32 * s);
      if constexpr (kFp8) {
        sm80::mma_e4m3(acc[2 * (s & 1)], a, b[0], b[1]);
        sm80::mma_e4m3(acc[2 * (s & 1) + 1], a, b[2], b[3]);
      } else {
        sm80::mma_16816<__nv_bfloat16>(acc[0], a, b[0], b[1]);
        sm80::mma_16816<__nv_bfloat16>(acc[1], a, b[2], b[3]);
        sm80::mma_16816<__nv_bfloat16>(acc[2], a, b[0], b[1]);
        sm80::mma_16816<__nv_bfloat16>(acc[3], a, b[2], b[3]);
      }
    }
  }
  float sum = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += acc[m][k];
  }
  if (sum == 1234.5f) *sink = sum;
}

__global__ void __launch_bounds__(kMmaThreads, 2)
    mma_bf16_calibration_kernel(float* sink, int iters) {
  mma_calibration_body<false>(sink, iters);
}

__global__ void __launch_bounds__(kMmaThreads, 1)
    mma_e4m3_calibration_kernel(float* sink, int iters) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890  // else empty: no e4m3 mma.sync below sm_89
  mma_calibration_body<true>(sink, iters);
#endif
}

// The energy model's L2 term: each thread copies 16-byte chunks of a buffer that stays in the L2
// into shared memory with cp.async, as fa2 loads its K/V tiles (the L2 read, the crossbar, the
// shared-memory write), two stages in flight, and nothing else. `mask`: the buffer's float4s
// less one (a power of two). Its instructions and bytes are counted (CUPTI), not derived.
constexpr int kL2StreamThreads = 256, kL2StreamChunks = 4, kL2StreamIters = 1024;
__global__ void __launch_bounds__(kL2StreamThreads)
    l2_stream_kernel(const float4* __restrict__ in, unsigned mask, int iters, float* sink) {
  __shared__ __align__(16) float4 ring[2][kL2StreamChunks][kL2StreamThreads];
  const unsigned stride = gridDim.x * kL2StreamThreads;
  unsigned i = blockIdx.x * kL2StreamThreads + threadIdx.x;
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < kL2StreamChunks; ++c) {
      sm80::cp_async_16(sm80::smem_u32(&ring[it & 1][c][threadIdx.x]), in + (i & mask), true);
      i += stride;
    }
    sm80::cp_async_commit();
    sm80::cp_async_wait<1>();  // the stage written next iteration has landed
  }
  sm80::cp_async_wait<0>();
  if (ring[0][0][threadIdx.x].x == 1234.5f) *sink = 1;
}

// The energy model's busy-SM power: one warp per scheduler on every SM, the first lane of each
// following a chain of dependent loads through the L2 (ld.global.cg: no L1 hits), so the SMs hold
// running warps that issue almost nothing (one load per L2 latency): what the window draws above
// the sleep kernel's warps, which sleep, is the SMs' own. `next`: a permutation with one cycle.
constexpr int kChaseThreads = 128, kChaseSteps = 8192;
__global__ void __launch_bounds__(kChaseThreads)
    l2_chase_kernel(const unsigned* __restrict__ next, unsigned mask, int steps, unsigned* sink) {
  if (threadIdx.x % 32 != 0) return;
  unsigned j = ((blockIdx.x * kChaseThreads + threadIdx.x) * 7919u) & mask;
#pragma unroll 1
  for (int s = 0; s < steps; ++s) j = __ldcg(next + j);
  if (j == 0xFFFFFFFFu) *sink = j;
}

// next[k] = k + stride (mod n, a power of two; an odd stride makes one cycle through every entry),
// the stride far more than a 128-byte line.
__global__ void chase_chain_kernel(unsigned* next, unsigned mask, unsigned stride) {
  for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k <= mask; k += gridDim.x * blockDim.x)
    next[k] = (k + stride) & mask;
}

__global__ void to_e4m3_kernel(const __nv_bfloat16* in, __nv_fp8_e4m3* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = __nv_fp8_e4m3(__bfloat162float(in[i]));
  }
}

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLASLt ") + what + " failed (status " +
                             std::to_string(s) + ")");
  }
}

// An n^3 GEMM D = A^T B in cuBLASLt ("TN", the layout FP8 needs on Hopper), fp32 accumulate.
// `a_type` for A and B, `d_type` for C and D. `sm_count` > 0: cuBLASLt is asked to run it on that
// many SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET); 0, on all of them.
class LtGemm {
 public:
  LtGemm(cublasLtHandle_t lt, cudaDataType_t a_type, cudaDataType_t d_type, const void* A,
         const void* B, void* D, int n, void* workspace, std::size_t ws_bytes, cudaStream_t stream,
         int sm_count = 0)
      : lt_(lt), A_(A), B_(B), D_(D), n_(n), ws_(workspace), ws_bytes_(ws_bytes), stream_(stream) {
    lt_check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "TRANSB");
    if (sm_count > 0) {
      const std::int32_t target = sm_count;
      lt_check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target,
                                              sizeof target),
               "SM_COUNT_TARGET");
    }
    lt_check(cublasLtMatrixLayoutCreate(&la_, a_type, n, n, n), "layout A");
    lt_check(cublasLtMatrixLayoutCreate(&lb_, a_type, n, n, n), "layout B");
    lt_check(cublasLtMatrixLayoutCreate(&ld_, d_type, n, n, n), "layout D");
    cublasLtMatmulPreference_t pref;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws_bytes, sizeof ws_bytes),
             "workspace preference");
    int found = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(lt, op_, la_, lb_, ld_, ld_, pref, 1, &result_, &found),
             "AlgoGetHeuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) throw std::runtime_error("cuBLASLt: no algorithm for this GEMM");
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(la_);
    cublasLtMatrixLayoutDestroy(lb_);
    cublasLtMatrixLayoutDestroy(ld_);
    cublasLtMatmulDescDestroy(op_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void launch() const {
    const float alpha = 1.0f, beta = 0.0f;
    lt_check(cublasLtMatmul(lt_, op_, &alpha, A_, la_, B_, lb_, &beta, D_, ld_, D_, ld_,
                            &result_.algo, ws_, ws_bytes_, stream_),
             "Matmul");
  }
  double flops() const { return 2.0 * n_ * double(n_) * n_; }

 private:
  cublasLtHandle_t lt_;
  const void *A_, *B_;
  void* D_;
  int n_;
  void* ws_;
  std::size_t ws_bytes_;
  cudaStream_t stream_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
  cublasLtMatmulHeuristicResult_t result_{};
};

// FLOP/s of an n^3 GEMM (LtGemm).
double lt_gemm_flops(cublasLtHandle_t lt, cudaDataType_t a_type, cudaDataType_t d_type,
                     const void* A, const void* B, void* D, int n, void* workspace,
                     std::size_t ws_bytes, cudaStream_t stream) {
  const LtGemm gemm(lt, a_type, d_type, A, B, D, n, workspace, ws_bytes, stream);
  return gemm.flops() / (median_ms([&] { gemm.launch(); }, stream) * 1e-3);
}

}  // namespace

MeasuredCeilings measure_ceilings(const DeviceInfo& device) {
  FA_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t stream;
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MeasuredCeilings m;
  const int blocks = device.sm_count * 8;

  {  // DRAM: the fastest of three copies of 1 GiB (bytes read + written) and a read of it (bytes
     // read) is the roof: the roof must not sit below what a user's kernel can reach (a
     // grid-stride copy measured 3.90 TB/s on the H200 where PyTorch's copy reaches 4.25; decode,
     // which only reads, moved its cache at 1.07-1.08x the copies' rate).
    const std::size_t bytes = std::size_t{1} << 30, n = bytes / 16;
    DeviceAllocation in(bytes), out(bytes), sink(sizeof(float));
    FA_CUDA_CHECK(
        fill_normal(in.ptr, static_cast<std::int64_t>(bytes / 2), DType::bf16, 1, stream));
    const auto* src = static_cast<const float4*>(in.ptr);
    auto* dst = static_cast<float4*>(out.ptr);
    const double grid_stride_ms =
        median_ms([&] { copy_kernel<<<blocks, 256, 0, stream>>>(src, dst, n); }, stream);
    const auto unrolled_blocks = static_cast<unsigned>((n + 1023) / 1024);
    const double unrolled_ms = median_ms(
        [&] { copy_unrolled_kernel<<<unrolled_blocks, 256, 0, stream>>>(src, dst, n); }, stream);
    const double memcpy_ms = median_ms(
        [&] {
          FA_CUDA_CHECK(cudaMemcpyAsync(out.ptr, in.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
        },
        stream);
    const double read_ms = median_ms(
        [&] {
          read_stream_kernel<4><<<blocks, 256, 0, stream>>>(src, n, static_cast<float*>(sink.ptr));
        },
        stream);
    m.dram_bytes_per_s =
        std::max(2.0 * bytes / (std::min({grid_stride_ms, unrolled_ms, memcpy_ms}) * 1e-3),
                 bytes / (read_ms * 1e-3));
  }
  {  // L2: a quarter of the L2, read 200 times.
    const std::size_t bytes = static_cast<std::size_t>(device.l2_bytes) / 4 / 16 * 16;
    DeviceAllocation in(bytes), sink(sizeof(float));
    FA_CUDA_CHECK(
        fill_normal(in.ptr, static_cast<std::int64_t>(bytes / 2), DType::bf16, 2, stream));
    constexpr int kIters = 200;
    const double ms = median_ms(
        [&] {
          l2_read_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float4*>(in.ptr), bytes / 16,
                                                     kIters, static_cast<float*>(sink.ptr));
        },
        stream);
    m.l2_bytes_per_s = double(bytes) * kIters / (ms * 1e-3);
  }
  {  // FP32: 8 chains x iters FFMA per thread, 2 FLOPs each.
    DeviceAllocation sink(sizeof(float));
    constexpr int kIters = 8192;
    const double ms = median_ms(
        [&] {
          ffma_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(sink.ptr), kIters, 0.999f,
                                                  1e-3f);
        },
        stream);
    m.fp32_flops_per_s = double(blocks) * 256 * kIters * 8 * 2 / (ms * 1e-3);
  }
  {  // Tensor cores: 8192^3 GEMMs.
    constexpr int n = 8192;
    const std::size_t elems = std::size_t{n} * n, ws_bytes = std::size_t{64} << 20;
    DeviceAllocation a(elems * 2), b(elems * 2), d(elems * 2), a8(elems), b8(elems), ws(ws_bytes);
    FA_CUDA_CHECK(fill_normal(a.ptr, static_cast<std::int64_t>(elems), DType::bf16, 3, stream));
    FA_CUDA_CHECK(fill_normal(b.ptr, static_cast<std::int64_t>(elems), DType::bf16, 4, stream));
    cublasLtHandle_t lt;
    lt_check(cublasLtCreate(&lt), "Create");
    m.bf16_flops_per_s = lt_gemm_flops(lt, CUDA_R_16BF, CUDA_R_16BF, a.ptr, b.ptr, d.ptr, n, ws.ptr,
                                       ws_bytes, stream);
    FA_CUDA_CHECK(fill_normal(a.ptr, static_cast<std::int64_t>(elems), DType::fp16, 5, stream));
    FA_CUDA_CHECK(fill_normal(b.ptr, static_cast<std::int64_t>(elems), DType::fp16, 6, stream));
    m.fp16_flops_per_s =
        lt_gemm_flops(lt, CUDA_R_16F, CUDA_R_16F, a.ptr, b.ptr, d.ptr, n, ws.ptr, ws_bytes, stream);
    if (device.cc_major * 10 + device.cc_minor >= 89) {
      FA_CUDA_CHECK(fill_normal(a.ptr, static_cast<std::int64_t>(elems), DType::bf16, 7, stream));
      FA_CUDA_CHECK(fill_normal(b.ptr, static_cast<std::int64_t>(elems), DType::bf16, 8, stream));
      to_e4m3_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.ptr),
                                                 static_cast<__nv_fp8_e4m3*>(a8.ptr), elems);
      to_e4m3_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(b.ptr),
                                                 static_cast<__nv_fp8_e4m3*>(b8.ptr), elems);
      m.fp8_flops_per_s = lt_gemm_flops(lt, CUDA_R_8F_E4M3, CUDA_R_16BF, a8.ptr, b8.ptr, d.ptr, n,
                                        ws.ptr, ws_bytes, stream);
    }
    cublasLtDestroy(lt);
  }
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  m.measured_utc = utc_time("%Y-%m-%dT%H:%M:%SZ");
  return m;
}

namespace {

// ---- Instructions per launch of the calibration kernels: warp instructions, as
// sm__inst_executed.sum counts them (every SASS instruction a warp issues, uniform-datapath ones
// included, once per warp whatever its active lanes). Counted in this file's SASS
// (`cuobjdump -sass -arch sm_90a|sm_80 build/CMakeFiles/fa_profiler.dir/profiler/ceilings.cu.o`,
// CUDA 13.0): Hopper runs the sm_90a code, every other device of this build the sm_80 code (a GPU
// newer than both compiles compute_80's PTX, whose set-up may differ by a few instructions).
struct SassCounts {
  double early_exit = 0;     // a warp that leaves at the bounds check (copy only)
  double fixed = 0;          // everything outside the loop, EXIT included
  double per_iteration = 0;  // one iteration of the loop, its branch included
};

// copy_kernel. sm_90a: 10 instructions to the bounds check and its EXIT, 9 of set-up, 13 per
// iteration of the grid-stride loop (two 64-bit addresses, LDG.E.128, STG.E.128, the 64-bit index
// step and compare, BRA), EXIT. sm_80: 8 + 8 set-up, the same 13, EXIT.
constexpr SassCounts kCopySm90{10, 20, 13}, kCopySm80{8, 17, 13};

// ffma_calibration_kernel. sm_90a: 20 before the loop (parameters, the per-thread b and c, the
// chains' 8 start values, the trip test, the loop's set-up), 67 per iteration (64 FFMA R, R, R, R,
// UIADD3 and ISETP of the counter, BRA), 10 after it (8 FADD, FSETP, EXIT): 30 + 67 x iters per
// warp. sm_80: 29 + 67 x iters (the counter in a register).
constexpr SassCounts kFfmaSm90{0, 30, 67}, kFfmaSm80{0, 29, 67};
constexpr int kFfmaIters = 4096;  // a full launch about 2 ms on an H200 at 1980 MHz

// mma_bf16_calibration_kernel. sm_90a: 78 before the loop (the operands' hash and conversion, the
// shared store, the barrier, the two ldmatrix addresses, the accumulators' zeros, the trip test),
// 52 per iteration (16 LDSM.16.M88.4, 32 HMMA.16816.F32.BF16, UIADD3 and ISETP of the counter, a
// NOP, BRA), 18 after it (16 FADD, FSETP, EXIT): 96 + 52 x iters per warp. sm_80: 91 + 51 x iters
// (72 before the loop, 19 after it; no NOP in the loop).
constexpr SassCounts kMmaBf16Sm90{0, 96, 52}, kMmaBf16Sm80{0, 91, 51};
// mma_e4m3_calibration_kernel. sm_90a: 106 before the loop, 125 per iteration (8 LDSM.16.M88.4,
// 64 F2FP.F16.E4M3.UNPACK_B, 16 HMMA.16816.F32, 32 FADD, 2 NOP, UIADD3, ISETP, BRA: Hopper's
// emulation of 8 mma.sync e4m3), 18 after it: 124 + 125 x iters per warp. sm_80: the kernel is
// empty (MOV of the stack pointer, EXIT; never launched there: measure_energy_model checks the
// PTX version it was built from).
constexpr SassCounts kMmaFp8Sm90{0, 124, 125}, kMmaFp8Sm80{0, 2, 0};
// Iterations for about 2 ms a full launch on an H200: bf16 ran at 474 TFLOP/s (its 2 ldmatrix.x4
// per 4 mma bound by shared memory's 128 bytes per clock, not by the tensor cores), so
// 264 x 32 x 864 x 131,072 = 9.6e11 FLOPs, 2.0 ms; e4m3 (emulated) at 327 TFLOP/s, one block per
// SM, 132 x 32 x 2304 x 65,536 = 6.4e11 FLOPs, 1.95 ms.
constexpr int kMmaBf16Iters = 864, kMmaFp8Iters = 2304;

// sleep_kernel. Both: 9 per iteration (UIADD3 of the counter, NANOSLEEP, NOP, the timer read, the
// 64-bit subtract and compare, BRA); 22 outside the loop (sm_90a: 4 before it; the lane test and
// EXIT, 3; lane 0's warp-aggregated REDG.E.ADD.64 and its set-up, 15 with the last EXIT). The
// iterations are counted by the kernel itself.
constexpr SassCounts kSleepSm90{0, 22, 9}, kSleepSm80{0, 22, 9};

const SassCounts& sass(const DeviceInfo& device, const SassCounts& sm90, const SassCounts& sm80) {
  return device.cc_major == 9 ? sm90 : sm80;
}

// A copy_kernel launch of blocks x threads over n float4s: a warp runs as many iterations as its
// first lane, ceil((n - i) / stride) for thread index i (exact but for one more EXIT of a warp
// whose lanes leave the loop on different iterations).
double copy_instructions(const SassCounts& c, int blocks, int threads, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blocks) * threads;
  double total = 0;
  for (std::size_t i = 0; i < stride; i += 32) {
    total +=
        i >= n ? c.early_exit : c.fixed + c.per_iteration * double((n - i + stride - 1) / stride);
  }
  return total;
}

// An ffma_calibration_kernel or mma_*_calibration_kernel launch of blocks x threads: every warp
// runs every iteration. On an H200 (132 SMs, sm_90a) the FFMA kernel's full grid (264 blocks)
// issues 264 x 32 x (30 + 67 x 4096) = 2,318,654,976 warp instructions per launch, the quarter
// (33 blocks) 289,831,872; the bf16 mma kernel's 264 x 32 x (96 + 52 x 864) = 380,362,752 and
// 47,545,344; the e4m3 one's (132 blocks) 132 x 32 x (124 + 125 x 2304) = 1,217,035,776 and
// 304,258,944.
double loop_instructions(const SassCounts& c, int blocks, int threads, int iters) {
  return double(blocks) * (threads / 32) * (c.fixed + c.per_iteration * iters);
}

// Warp instructions of an n^3 cuBLASLt GEMM: an estimate, since cuBLAS picks its kernel. Hopper
// (wgmma; taken for newer GPUs too, unverified there): each HGMMA m64nNk16 (k32 for fp8) is issued
// by the 4 warps of a warpgroup, and each warp issues about 3.5 more per HGMMA (the pipeline's
// barrier waits and arrives, warpgroup arrive/commit/wait, the k-loop, the producer's TMA issues,
// the epilogue): 18 warp instructions per 2 x 64 x N x 16 FLOPs, with N 128 to 256 in cuBLAS's
// large tiles about 20,000 FLOPs per warp instruction (40,000 for fp8). Before Hopper (mma.sync):
// one HMMA m16n8k16 (4,096 FLOPs, k32 and 8,192 for fp8) per warp instruction and about one more
// (ldmatrix, cp.async, addressing) per HMMA. At the H200's fitted 0.46 nJ per instruction and 1.05
// pJ per FLOP the Hopper estimate is 2% of a GEMM's energy: off by 2x, it moves the point by 1%,
// inside the fit's residuals. The pre-Hopper one is 10 times larger and as uncertain
// (docs/energy.md).
double gemm_instructions(const DeviceInfo& device, double flops, bool fp8) {
  const double per_instruction = device.cc_major >= 9 ? 20000.0 : 2048.0;
  return flops / (per_instruction * (fp8 ? 2 : 1));
}

// One calibration kernel: its launch, what one launch does, and where its instructions are known
// only after the window (the sleep kernel counts its own iterations), how to count them.
struct Calibration {
  std::function<void()> launch;
  energy::CalibrationPoint point;
  std::function<void()> before_window = {};               // optional
  std::function<double(int launches)> instructions = {};  // optional: else point.instructions
  // What the counters replace (CUPTI, one launch after the window): its SM <-> L2 bytes always
  // (but for the sleep kernel: none), its instructions and DRAM bytes where they are not known
  // from its code (the GEMMs, the L2 kernels). `needs_counts`: without them the point is left out.
  bool count_l2 = true, count_instructions = false, count_dram = false, needs_counts = false;
};

// The counters a calibration point reads: SM <-> L2 sectors, instructions, DRAM bytes.
std::vector<std::string> calibration_metrics() {
  return {counters::kSmFromL2Sectors, counters::kSmToL2Sectors, "sm__inst_executed.sum",
          "dram__bytes_read.sum", "dram__bytes_write.sum"};
}

// One calibration kernel in an energy window: what it did per launch, what that cost, at which
// clock and temperature; the window's reason when it could not be measured. `session`: the
// counters (none: the L2 bytes go uncounted, the point keeps its derived figures); a counting
// failure ends the session for the points after it and is said in `count_error`.
std::string calibration_point(energy::PowerSource& power, const energy::Settings& settings,
                              cudaStream_t stream, const Calibration& c, CounterSession* session,
                              std::string* count_error,
                              std::vector<energy::CalibrationPoint>* points) {
  const bool counting = session && count_error->empty();
  if (c.needs_counts && !counting) return "";  // its figures exist only as counts
  const double launch_s = median_ms(c.launch, stream) * 1e-3;
  if (c.before_window) c.before_window();
  energy::StreamLaunchQueue queue(stream, [&] {
    c.launch();
    return std::string();
  });
  const energy::Measurement m =
      energy::measure(power, queue, energy::steady_clock(), launch_s, settings);
  if (m.status != "ok") return c.point.kernel + ": " + m.status + ": " + m.reason;
  energy::CalibrationPoint p = c.point;
  p.seconds = m.seconds_per_launch;
  p.energy_j = *m.energy_per_launch_mj * 1e-3;
  p.sm_clock_mhz = m.sm_clock_mean_mhz;
  p.temperature_c = m.temperature_mean_c;
  p.temperature_max_c = m.temperature_max_c;
  if (c.instructions) p.instructions = c.instructions(m.launches);
  if (counting && c.count_l2) {
    try {
      FA_CUDA_CHECK(cudaStreamSynchronize(stream));
      auto v = session->measure(c.point.kernel,
                                [&] {
                                  c.launch();
                                  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
                                },
                                {});
      p.l2_bytes = 32.0 * (v[counters::kSmFromL2Sectors] + v[counters::kSmToL2Sectors]);
      if (c.count_instructions) p.instructions = v["sm__inst_executed.sum"];
      if (c.count_dram) p.bytes = v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"];
    } catch (const CounterFailure& e) {
      *count_error = c.point.kernel + ": " + e.error.message;
      if (c.needs_counts) return "";
    }
  }
  points->push_back(p);
  return "";
}

// The two grids a calibration kernel runs on: every SM at full occupancy (as many blocks as fit)
// and about a quarter of the SMs (one block each): two rates of the same work against time.
template <typename Kernel>
std::array<int, 2> two_rates(const DeviceInfo& device, Kernel kernel, int threads) {
  int per_sm = 0;
  FA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return {device.sm_count * std::max(1, per_sm), std::max(1, device.sm_count / 4)};
}

}  // namespace

energy::Fit measure_energy_model(const DeviceInfo& device, energy::PowerSource& power,
                                 const energy::Settings& settings) {
  FA_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t stream;
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<energy::CalibrationPoint> points;
  std::string why_not, count_error;
  bool counted_some = false;  // a window's counts came back
  // The counters, for the SM <-> L2 bytes (and the instructions and DRAM bytes of the kernels not
  // written here); without them the model has no L2 term.
  std::optional<CounterSession> session;
  {
    CounterSession s = CounterSession::create(device.index, calibration_metrics());
    if (s.ok()) {
      session.emplace(std::move(s));
    } else {
      count_error = s.error().message;
    }
  }
  const double sms = device.sm_count;
  auto point = [&](const Calibration& c) {
    if (why_not.empty()) {
      const bool counting = session && count_error.empty();
      why_not = calibration_point(power, settings, stream, c, session ? &*session : nullptr,
                                  &count_error, &points);
      counted_some = counted_some || (counting && c.count_l2 && count_error.empty());
    }
  };
  {  // Bytes: the copy at three grid sizes, so its rate (and power) varies while FLOPs stay 0:
     // the byte term and the constant power are told apart by the slope and the intercept.
    const std::size_t bytes = std::size_t{1} << 30, n = bytes / 16;
    DeviceAllocation in(bytes), out(bytes);
    FA_CUDA_CHECK(
        fill_normal(in.ptr, static_cast<std::int64_t>(bytes / 2), DType::bf16, 11, stream));
    const auto* src = static_cast<const float4*>(in.ptr);
    auto* dst = static_cast<float4*>(out.ptr);
    for (const int blocks :
         {device.sm_count * 8, device.sm_count, std::max(1, device.sm_count / 4)}) {
      Calibration c{[&, blocks] { copy_kernel<<<blocks, 256, 0, stream>>>(src, dst, n); },
                    {"copy 1 GiB, " + std::to_string(blocks) + " blocks"}};
      c.point.bytes = 2.0 * bytes;
      c.point.instructions = copy_instructions(sass(device, kCopySm90, kCopySm80), blocks, 256, n);
      c.point.active_sm_fraction = std::min(1.0, blocks / sms);
      point(c);
    }
  }
  {  // Instructions: the softmax step on every SM at full occupancy and on about a quarter of the
     // SMs (one block each): two rates of instructions against time, no FLOPs the model counts
     // (FP32 is not a tensor FLOP) and no DRAM bytes. Counted; without the counters, the FFMA
     // kernel, whose instructions its SASS gives (the same two rates).
    DeviceAllocation sink(sizeof(float));
    const std::size_t before_softmax = points.size();
    for (const int blocks : two_rates(device, softmax_calibration_kernel, kSoftmaxThreads)) {
      Calibration c{[&, blocks] {
                      softmax_calibration_kernel<<<blocks, kSoftmaxThreads, 0, stream>>>(
                          static_cast<float*>(sink.ptr), kSoftmaxIters, 1.4427f);
                    },
                    {"softmax step, " + std::to_string(blocks) + " blocks of " +
                     std::to_string(kSoftmaxThreads)}};
      c.point.active_sm_fraction = std::min(1.0, blocks / sms);
      c.count_instructions = c.needs_counts = true;
      point(c);
    }
    const bool counted = points.size() > before_softmax;  // the softmax step's points
    for (const int blocks : {device.sm_count * 2, std::max(1, device.sm_count / 4)}) {
      if (counted) break;
      Calibration c{
          [&, blocks] {
            ffma_calibration_kernel<<<blocks, kFfmaThreads, 0, stream>>>(
                static_cast<float*>(sink.ptr), kFfmaIters, 0.999f, 1e-3f);
          },
          {"FFMA, " + std::to_string(blocks) + " blocks of " + std::to_string(kFfmaThreads)}};
      c.point.instructions =
          loop_instructions(sass(device, kFfmaSm90, kFfmaSm80), blocks, kFfmaThreads, kFfmaIters);
      c.point.active_sm_fraction = std::min(1.0, blocks / sms);
      point(c);
    }
  }
  {  // mma.sync FLOPs (bf16, and e4m3 where the device and this build have them), their operands
     // through registers, on every SM at full occupancy (as many blocks as fit) and on about a
     // quarter of the SMs (one block each): two rates against time. Their instructions (ldmatrix,
     // mma.sync, the loop's) are counted from the SASS; no DRAM bytes.
    DeviceAllocation sink(sizeof(float));
    cudaFuncAttributes e4m3{};
    FA_CUDA_CHECK(cudaFuncGetAttributes(&e4m3, mma_e4m3_calibration_kernel));
    // Its instruction counts are Hopper's (kMmaFp8Sm90); elsewhere the e4m3 code is another's.
    const bool fp8 = device.cc_major == 9 && e4m3.ptxVersion >= 89;
    for (const bool is_fp8 : {false, true}) {
      if (is_fp8 && !fp8) continue;
      void (*const kernel)(float*, int) =
          is_fp8 ? mma_e4m3_calibration_kernel : mma_bf16_calibration_kernel;
      const int iters = is_fp8 ? kMmaFp8Iters : kMmaBf16Iters;
      const SassCounts& counts = is_fp8 ? sass(device, kMmaFp8Sm90, kMmaFp8Sm80)
                                        : sass(device, kMmaBf16Sm90, kMmaBf16Sm80);
      // FLOPs per warp and iteration: mma m16n8k16 2 x 16 x 8 x 16 = 4,096, m16n8k32 8,192.
      const double per_iteration = is_fp8 ? kMmaSteps<true> * kMmaPerStep<true> * 8192.0
                                          : kMmaSteps<false> * kMmaPerStep<false> * 4096.0;
      for (const int blocks : two_rates(device, kernel, kMmaThreads)) {
        Calibration c{
            [&, blocks, kernel, iters] {
              kernel<<<blocks, kMmaThreads, 0, stream>>>(static_cast<float*>(sink.ptr), iters);
            },
            {std::string(is_fp8 ? "mma.sync e4m3, " : "mma.sync bf16, ") + std::to_string(blocks) +
             " blocks of " + std::to_string(kMmaThreads)}};
        const double flops = double(blocks) * (kMmaThreads / 32) * iters * per_iteration;
        (is_fp8 ? c.point.flops8_mma : c.point.flops16_mma) = flops;
        c.point.instructions = loop_instructions(counts, blocks, kMmaThreads, iters);
        c.point.active_sm_fraction = std::min(1.0, blocks / sms);
        point(c);
      }
    }
  }
  {  // SM <-> L2 bytes: cp.async from a buffer that stays in the L2 into shared memory, on every
     // SM at full occupancy and on a quarter of the SMs (one block each): two rates against time.
     // Counted (instructions and bytes); left out without the counters.
    std::size_t n = 1;  // float4s: the largest power of two within a quarter of the L2
    while (n * 2 * 16 <= static_cast<std::size_t>(device.l2_bytes) / 4) n *= 2;
    DeviceAllocation buffer(n * 16), sink(sizeof(float));
    FA_CUDA_CHECK(
        fill_normal(buffer.ptr, static_cast<std::int64_t>(n * 8), DType::bf16, 14, stream));
    for (const int blocks : two_rates(device, l2_stream_kernel, kL2StreamThreads)) {
      Calibration c{[&, blocks] {
                      l2_stream_kernel<<<blocks, kL2StreamThreads, 0, stream>>>(
                          static_cast<const float4*>(buffer.ptr), static_cast<unsigned>(n - 1),
                          kL2StreamIters, static_cast<float*>(sink.ptr));
                    },
                    {"L2 to shared memory, " + std::to_string(blocks) + " blocks"}};
      c.point.active_sm_fraction = std::min(1.0, blocks / sms);
      c.count_instructions = c.needs_counts = true;
      point(c);
    }
  }
  {  // Busy SMs: one warp per scheduler on every SM, one lane each chasing pointers through the
     // L2 (4 MiB of chain). Counted; left out without the counters.
    constexpr unsigned kEntries = 1u << 20;
    DeviceAllocation chain(kEntries * sizeof(unsigned)), sink(sizeof(unsigned));
    chase_chain_kernel<<<device.sm_count * 4, 256, 0, stream>>>(static_cast<unsigned*>(chain.ptr),
                                                                kEntries - 1, 40503u);
    FA_CUDA_CHECK(cudaGetLastError());
    Calibration c{[&] {
                    l2_chase_kernel<<<device.sm_count, kChaseThreads, 0, stream>>>(
                        static_cast<const unsigned*>(chain.ptr), kEntries - 1, kChaseSteps,
                        static_cast<unsigned*>(sink.ptr));
                  },
                  {"L2 pointer chase, one lane per scheduler"}};
    c.count_instructions = c.needs_counts = true;
    point(c);
  }
  {  // FLOPs: bf16 GEMMs of two sizes, and the larger on three quarters, half and a quarter of
     // the SMs; fp8 ones where the device has FP8 tensor cores. Their instructions and DRAM bytes
     // are counted; without the counters an estimate (gemm_instructions) and the compulsory bytes
     // (A, B read once, D written once).
    const std::size_t ws_bytes = std::size_t{64} << 20, max_elems = std::size_t{8192} * 8192;
    DeviceAllocation a(max_elems * 2), b(max_elems * 2), d(max_elems * 2), a8(max_elems),
        b8(max_elems), ws(ws_bytes);
    FA_CUDA_CHECK(
        fill_normal(a.ptr, static_cast<std::int64_t>(max_elems), DType::bf16, 12, stream));
    FA_CUDA_CHECK(
        fill_normal(b.ptr, static_cast<std::int64_t>(max_elems), DType::bf16, 13, stream));
    const bool fp8 = device.cc_major * 10 + device.cc_minor >= 89;
    if (fp8) {
      const int blocks = device.sm_count * 8;
      to_e4m3_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.ptr),
                                                 static_cast<__nv_fp8_e4m3*>(a8.ptr), max_elems);
      to_e4m3_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(b.ptr),
                                                 static_cast<__nv_fp8_e4m3*>(b8.ptr), max_elems);
    }
    cublasLtHandle_t lt;
    lt_check(cublasLtCreate(&lt), "Create");
    // The bf16 GEMM of size n, and the fp8 one where `with_fp8`, on `target` SMs (0: all).
    const auto gemms = [&](int n, int target, bool with_fp8) {
      const double elems = double(n) * n;
      const std::string on = target > 0 ? " on " + std::to_string(target) + " SMs" : "";
      const double active = target > 0 ? std::min(1.0, target / sms) : 1.0;
      const LtGemm g16(lt, CUDA_R_16BF, CUDA_R_16BF, a.ptr, b.ptr, d.ptr, n, ws.ptr, ws_bytes,
                       stream, target);
      Calibration c{[&] { g16.launch(); }, {"bf16 GEMM " + std::to_string(n) + on}};
      c.point.flops16 = g16.flops();
      c.point.bytes = 3 * elems * 2;
      c.point.instructions = gemm_instructions(device, g16.flops(), false);
      c.point.active_sm_fraction = active;
      c.count_instructions = c.count_dram = true;
      point(c);
      if (!fp8 || !with_fp8) return;
      const LtGemm g8(lt, CUDA_R_8F_E4M3, CUDA_R_16BF, a8.ptr, b8.ptr, d.ptr, n, ws.ptr, ws_bytes,
                      stream, target);
      Calibration q{[&] { g8.launch(); }, {"fp8 GEMM " + std::to_string(n) + on}};
      q.point.flops8 = g8.flops();
      q.point.bytes = 2 * elems + elems * 2;
      q.point.instructions = gemm_instructions(device, g8.flops(), true);
      q.point.active_sm_fraction = active;
      q.count_instructions = q.count_dram = true;
      point(q);
    };
    // On every SM they run power-capped, their SM clock well below its maximum (1300 to 1510 MHz
    // on the H200); on a quarter of the SMs the device draws far less and the clock stays at its
    // maximum, and on half and three quarters of them (bf16) it lands between: the same FLOPs at
    // several clocks pin how the energy per FLOP scales with the clock, and where it stops
    // falling (the voltage's floor).
    for (const int n : {8192, 4096}) gemms(n, 0, true);
    gemms(8192, std::max(1, device.sm_count / 4), true);
    gemms(8192, std::max(1, device.sm_count / 2), false);
    gemms(8192, std::max(1, device.sm_count * 3 / 4), false);
    cublasLtDestroy(lt);
  }
  {  // Constant power: a kernel that sleeps for 1 ms on every SM. Last, after the GEMMs have
     // warmed the GPU: leakage grows with temperature (118 W at 35 degrees C against 146 W warm on
     // the H200) and the rows run warm.
    DeviceAllocation iterations(sizeof(unsigned long long));
    auto* counter = static_cast<unsigned long long*>(iterations.ptr);
    const int blocks = device.sm_count * 8, warps = blocks * (256 / 32);
    Calibration c{[&] { sleep_kernel<<<blocks, 256, 0, stream>>>(1000000ull, counter); },
                  {"sleep 1 ms"}};
    c.point.active_sm_fraction = 0;  // its warps sleep
    c.count_l2 = false;
    c.before_window = [&] { FA_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof *counter, stream)); };
    const SassCounts& counts = sass(device, kSleepSm90, kSleepSm80);
    c.instructions = [&](int launches) {  // the window's launches added up their iterations
      unsigned long long total = 0;
      FA_CUDA_CHECK(cudaMemcpyAsync(&total, counter, sizeof total, cudaMemcpyDeviceToHost, stream));
      FA_CUDA_CHECK(cudaStreamSynchronize(stream));
      return warps * counts.fixed + counts.per_iteration * double(total) / std::max(1, launches);
    };
    point(c);
  }
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  session.reset();
  // Counts in some windows and not in others would bias the fit (L2 bytes, instructions and DRAM
  // bytes counted for some GEMMs, derived for others): a calibration whose counters failed after
  // they had worked is not fitted, and the next run measures it again.
  if (why_not.empty() && !count_error.empty() && counted_some) {
    energy::Fit f;
    f.status = "unavailable";
    f.reason = "the calibration's counters failed after some windows (" + count_error +
               "): measured again on the next run";
    f.points = points;
    return f;
  }
  if (!why_not.empty()) {
    energy::Fit f;
    f.status = "unavailable";
    f.reason = "calibration window " + why_not;
    f.points = points;
    return f;
  }
  // The dynamic energies are quoted at the device's highest SM clock (NVML's maximum clock; the
  // fastest calibration window's where the driver does not say).
  const energy::Reading max_clock = power.max_sm_clock_mhz();
  energy::Fit f = energy::fit(points, max_clock.ok ? double(max_clock.value) : 0.0);
  if (f.status == "ok" && !count_error.empty()) {
    f.reason =
        "no L2 term, busy-SM power from the sleep kernel alone, the GEMMs' instructions "
        "estimated and their DRAM bytes the compulsory ones: the calibration's counters were "
        "unavailable (" +
        count_error + ")";
  }
  return f;
}

}  // namespace fa
