// Measures the roofline's ceilings on the current device. Each figure is the median of repeated
// timed runs (CUDA events) after warm-up, on random data (never zeros: a GEMM on zeros ran 13%
// faster on an H200 of this workplace).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/cuda_check.hpp"
#include "kernels/common/device_buffer.hpp"
#include "kernels/common/fill.hpp"
#include "profiler/ceilings.hpp"
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
// idle term), with clocks at their running level.
__global__ void sleep_kernel(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
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
// `a_type` for A and B, `d_type` for C and D.
class LtGemm {
 public:
  LtGemm(cublasLtHandle_t lt, cudaDataType_t a_type, cudaDataType_t d_type, const void* A,
         const void* B, void* D, int n, void* workspace, std::size_t ws_bytes, cudaStream_t stream)
      : lt_(lt), A_(A), B_(B), D_(D), n_(n), ws_(workspace), ws_bytes_(ws_bytes), stream_(stream) {
    lt_check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "TRANSB");
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

  {  // DRAM: copy 1 GiB, count bytes read + written; the fastest of three ways to copy is the
     // roof (a grid-stride kernel measured 3.90 TB/s on the H200 where PyTorch's copy reaches
     // 4.25: the roof must not sit below what a user's kernel can reach).
    const std::size_t bytes = std::size_t{1} << 30, n = bytes / 16;
    DeviceAllocation in(bytes), out(bytes);
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
    m.dram_bytes_per_s = 2.0 * bytes / (std::min({grid_stride_ms, unrolled_ms, memcpy_ms}) * 1e-3);
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

// One calibration kernel in an energy window: what it did per launch and what that cost; the
// window's reason when it could not be measured.
std::string calibration_point(energy::PowerSource& power, const energy::Settings& settings,
                              cudaStream_t stream, const std::function<void()>& launch,
                              energy::CalibrationPoint point,
                              std::vector<energy::CalibrationPoint>* points) {
  const double launch_s = median_ms(launch, stream) * 1e-3;
  energy::StreamLaunchQueue queue(stream, [&] {
    launch();
    return std::string();
  });
  const energy::Measurement m =
      energy::measure(power, queue, energy::steady_clock(), launch_s, settings);
  if (m.status != "ok") return point.kernel + ": " + m.status + ": " + m.reason;
  point.seconds = m.seconds_per_launch;
  point.energy_j = *m.energy_per_launch_mj * 1e-3;
  points->push_back(point);
  return "";
}

}  // namespace

energy::Fit measure_energy_model(const DeviceInfo& device, energy::PowerSource& power,
                                 const energy::Settings& settings) {
  FA_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t stream;
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<energy::CalibrationPoint> points;
  std::string why_not;
  auto point = [&](const std::function<void()>& launch, energy::CalibrationPoint p) {
    if (why_not.empty()) why_not = calibration_point(power, settings, stream, launch, p, &points);
  };
  // Constant power: a kernel that sleeps for 1 ms on every SM.
  point([&] { sleep_kernel<<<device.sm_count * 8, 256, 0, stream>>>(1000000ull); }, {"sleep 1 ms"});
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
      energy::CalibrationPoint p{"copy 1 GiB, " + std::to_string(blocks) + " blocks"};
      p.bytes = 2.0 * bytes;
      point([&] { copy_kernel<<<blocks, 256, 0, stream>>>(src, dst, n); }, p);
    }
  }
  {  // FLOPs: bf16 GEMMs of two sizes, fp8 ones where the device has FP8 tensor cores. Their
     // bytes are the compulsory ones (A, B read once, D written once).
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
    for (const int n : {8192, 4096}) {
      const double elems = double(n) * n;
      const LtGemm g16(lt, CUDA_R_16BF, CUDA_R_16BF, a.ptr, b.ptr, d.ptr, n, ws.ptr, ws_bytes,
                       stream);
      energy::CalibrationPoint p{"bf16 GEMM " + std::to_string(n)};
      p.flops16 = g16.flops();
      p.bytes = 3 * elems * 2;
      point([&] { g16.launch(); }, p);
      if (!fp8) continue;
      const LtGemm g8(lt, CUDA_R_8F_E4M3, CUDA_R_16BF, a8.ptr, b8.ptr, d.ptr, n, ws.ptr, ws_bytes,
                      stream);
      energy::CalibrationPoint q{"fp8 GEMM " + std::to_string(n)};
      q.flops8 = g8.flops();
      q.bytes = 2 * elems + elems * 2;
      point([&] { g8.launch(); }, q);
    }
    cublasLtDestroy(lt);
  }
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  if (!why_not.empty()) {
    energy::Fit f;
    f.status = "unavailable";
    f.reason = "calibration window " + why_not;
    f.points = points;
    return f;
  }
  return energy::fit(points);
}

}  // namespace fa
