// Probe for fa::CounterSession (profiler/cupti_range.*): two user ranges on a real GPU, a 1 GiB
// float4 copy and a cuBLAS bf16 GEMM 4096^3, with the counters printed next to what they should
// be. Not part of the CMake build. From the repository root:
//
//   nvcc -std=c++20 -O2 -arch=sm_90a -x cu -I. tests/cupti_probe.cpp profiler/cupti_range.cpp \
//        -lcupti -lcublas -o /tmp/cupti_probe && /tmp/cupti_probe [device]
//
// (-x cu makes nvcc compile the .cpp files as CUDA; use -arch=sm_80 etc. on other GPUs.)
// Needs permission to read GPU counters (root, or NVreg_RestrictProfilingToAdminUsers=0) and no
// other profiler attached. Exit status: 0 measured, 1 CUDA/cuBLAS error, 2 counters unavailable.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "profiler/cupti_range.hpp"

#define CHECK_CUDA(x)                                             \
  do {                                                            \
    cudaError_t e_ = (x);                                         \
    if (e_ != cudaSuccess) {                                      \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                               \
    }                                                             \
  } while (0)
#define CHECK_CUBLAS(x)                                              \
  do {                                                               \
    cublasStatus_t s_ = (x);                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                               \
      std::printf("%s failed: %s\n", #x, cublasGetStatusString(s_)); \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

__global__ void copy_float4(float4* __restrict__ dst, const float4* __restrict__ src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

static const char* kind_name(fa::CounterError::Kind k) {
  switch (k) {
    case fa::CounterError::none:
      return "none";
    case fa::CounterError::no_permission:
      return "no_permission";
    case fa::CounterError::unsupported_metric:
      return "unsupported_metric";
    case fa::CounterError::busy:
      return "busy";
    default:
      return "other";
  }
}

static void print(const std::string& range, const std::map<std::string, double>& values) {
  std::printf("range %s\n", range.c_str());
  for (const auto& [name, value] : values) std::printf("  %-66s %.6g\n", name.c_str(), value);
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  const std::vector<std::string> metrics = {
      "gpu__time_duration.sum",                     // ns, whole range
      "sm__cycles_elapsed.avg.per_second",          // SM clock, Hz
      "dram__bytes_read.sum",                       // bytes
      "dram__bytes_write.sum",                      // bytes
      "lts__t_bytes.sum",                           // L2 traffic, bytes
      "sm__ops_path_tensor_src_bf16_dst_fp32.sum",  // tensor-core bf16 ops
      "sm__inst_executed_pipe_tensor_op_gmma.sum",  // wgmma instructions (Hopper)
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
  };

  // 1. Names the chip lacks (host API), and what create() says about one.
  try {
    for (const auto& m : fa::CounterSession::unsupported(device, metrics)) {
      std::printf("unsupported on this chip: %s\n", m.c_str());
    }
  } catch (const fa::CounterFailure& f) {
    std::printf("unsupported() failed (%s): %s\n", kind_name(f.error.kind), f.what());
  }
  {
    auto bad = fa::CounterSession::create(device, {"dram__bytes_read.sum", "nosuch__metric.sum"});
    std::printf("create with a bad name -> %s: %s\n", kind_name(bad.error().kind),
                bad.error().message.c_str());
  }

  // 2. The session.
  auto session = fa::CounterSession::create(device, metrics);
  if (!session.ok()) {
    std::printf("counters unavailable (%s): %s\n", kind_name(session.error().kind),
                session.error().message.c_str());
    return 2;
  }
  std::printf("chip %s, %d pass(es) per measurement\n", session.chip().c_str(),
              session.passes_needed());

  // 3. Buffers: 1 GiB source and destination, an L2 flush buffer, GEMM operands.
  const size_t bytes = size_t(1) << 30, n4 = bytes / sizeof(float4);
  float4 *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemset(src, 1, bytes));
  int l2 = 0, sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  void* flush_buf = nullptr;
  CHECK_CUDA(cudaMalloc(&flush_buf, 2 * size_t(l2)));
  auto flush_l2 = [&] { CHECK_CUDA(cudaMemsetAsync(flush_buf, 0, 2 * size_t(l2))); };

  const int M = 4096;
  __nv_bfloat16 *A = nullptr, *B = nullptr, *C = nullptr;
  CHECK_CUDA(cudaMalloc(&A, size_t(M) * M * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMalloc(&B, size_t(M) * M * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMalloc(&C, size_t(M) * M * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMemset(A, 0, size_t(M) * M * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMemset(B, 0, size_t(M) * M * sizeof(__nv_bfloat16)));
  cublasHandle_t blas = nullptr;
  CHECK_CUBLAS(cublasCreate(&blas));
  const float alpha = 1.0f, beta = 0.0f;  // beta 0: C is overwritten, nothing to restore
  auto gemm = [&] {
    CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &alpha, A, CUDA_R_16BF, M, B,
                              CUDA_R_16BF, M, &beta, C, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  };
  auto copy = [&] {
    copy_float4<<<sms * 8, 512>>>(dst, src, n4);
    CHECK_CUDA(cudaGetLastError());
  };

  // Warm-up outside any range: module loading, cuBLAS heuristics.
  copy();
  gemm();
  CHECK_CUDA(cudaDeviceSynchronize());

  // 4. Two user ranges (the copy twice, to see the session reused and the values repeat).
  try {
    for (int rep = 0; rep < 2; ++rep) {
      const auto v = session.measure("copy_1GiB", copy, flush_l2);
      print("copy_1GiB (expect dram read ~ write ~ 1.074e9 bytes)", v);
      const double s = v.at("gpu__time_duration.sum") * 1e-9;
      std::printf("  -> %.1f GB/s DRAM (read+write)\n",
                  (v.at("dram__bytes_read.sum") + v.at("dram__bytes_write.sum")) / s / 1e9);
    }
    const auto g = session.measure("gemm_bf16_4096", gemm, flush_l2);
    print("gemm_bf16_4096 (expect 2*4096^3 = 1.374e11 flop)", g);
    std::printf("  -> %.1f TFLOP/s from 2*M*N*K and gpu__time_duration\n",
                2.0 * M * M * M / (g.at("gpu__time_duration.sum") * 1e-9) / 1e12);
  } catch (const fa::CounterFailure& f) {
    std::printf("measure failed (%s): %s\n", kind_name(f.error.kind), f.what());
    return 2;
  }

  CHECK_CUBLAS(cublasDestroy(blas));
  cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(src), cudaFree(dst), cudaFree(flush_buf);
  return 0;
}
