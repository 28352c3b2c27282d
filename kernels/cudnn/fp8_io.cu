// Per-tensor E4M3 quantisation for the cudnn-fp8 peer (kernels/cudnn/fp8_io.hpp). Per-tensor
// scaling is what cuDNN's FP8 graph takes (one descale per operand); our own fp8 variant scales
// per (batch, head) and rotates Q and K first (kernels/fp8/fp8.cu).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/cudnn/fp8_io.hpp"

namespace fa {
namespace {

constexpr float kE4M3Max = 448.0f;
constexpr int kThreads = 256;

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

// max |x| of three tensors; blockIdx.y picks the tensor. Non-negative floats order as their bits.
__global__ void amax3_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                             std::int64_t n, float* amax) {
  const __nv_bfloat16* x = blockIdx.y == 0 ? q : blockIdx.y == 1 ? k : v;
  float m = 0.0f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    m = fmaxf(m, fabsf(__bfloat162float(x[i])));
  }
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0)
    atomicMax(reinterpret_cast<int*>(amax + blockIdx.y), __float_as_int(m));
}

__global__ void scales_kernel(float* s) {
  const float aq = fmaxf(s[kAmaxQ], 1e-30f), ak = fmaxf(s[kAmaxK], 1e-30f),
              av = fmaxf(s[kAmaxV], 1e-30f);
  s[kDescaleQ] = aq / kE4M3Max;
  s[kDescaleK] = ak / kE4M3Max;
  s[kDescaleV] = av / kE4M3Max;
  s[kScaleS] = kE4M3Max;
  s[kDescaleS] = 1.0f / kE4M3Max;
  s[kScaleO] = kE4M3Max / av;
  s[kDescaleO] = av / kE4M3Max;
}

__global__ void quantise3_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                 const __nv_bfloat16* v, __nv_fp8_e4m3* q8, __nv_fp8_e4m3* k8,
                                 __nv_fp8_e4m3* v8, std::int64_t n, const float* s) {
  const int t = blockIdx.y;
  const __nv_bfloat16* x = t == 0 ? q : t == 1 ? k : v;
  __nv_fp8_e4m3* y = t == 0 ? q8 : t == 1 ? k8 : v8;
  const float scale = 1.0f / s[kDescaleQ + t];
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    y[i] = __nv_fp8_e4m3(__bfloat162float(x[i]) * scale);
  }
}

__global__ void dequantise_kernel(const __nv_fp8_e4m3* o8, __nv_bfloat16* o, std::int64_t n,
                                  const float* s) {
  const float descale = s[kDescaleO];
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    o[i] = __float2bfloat16(static_cast<float>(o8[i]) * descale);
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 8192 ? (blocks > 0 ? blocks : 1) : 8192);
}

}  // namespace

// cudnn-fp8 poses square multi-head attention only (its launcher refuses other shapes in prepare
// and run: needs_square_mha), so K, V and O are Q's size: four FP8 copies of qo_elements() each.
std::size_t cudnn_fp8_workspace_bytes(const Shape& s) {
  return 4 * align256(static_cast<std::size_t>(s.qo_elements())) +
         align256(kCudnnFp8Scalars * sizeof(float));
}

CudnnFp8Buffers cudnn_fp8_carve(const Shape& s, void* workspace) {
  auto* base = static_cast<char*>(workspace);
  const std::size_t step = align256(static_cast<std::size_t>(s.qo_elements()));
  return {base, base + step, base + 2 * step, base + 3 * step,
          reinterpret_cast<float*>(base + 4 * step)};
}

cudaError_t cudnn_fp8_quantise_inputs(const Shape& s, const void* q, const void* k, const void* v,
                                      const CudnnFp8Buffers& w, cudaStream_t stream) {
  const std::int64_t n = s.qo_elements();
  if (cudaError_t e = cudaMemsetAsync(w.scalars, 0, kCudnnFp8Scalars * sizeof(float), stream);
      e != cudaSuccess) {
    return e;
  }
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* kb = static_cast<const __nv_bfloat16*>(k);
  const auto* vb = static_cast<const __nv_bfloat16*>(v);
  amax3_kernel<<<dim3(grid_for(n), 3), kThreads, 0, stream>>>(qb, kb, vb, n, w.scalars + kAmaxQ);
  scales_kernel<<<1, 1, 0, stream>>>(w.scalars);
  quantise3_kernel<<<dim3(grid_for(n), 3), kThreads, 0, stream>>>(
      qb, kb, vb, static_cast<__nv_fp8_e4m3*>(w.q8), static_cast<__nv_fp8_e4m3*>(w.k8),
      static_cast<__nv_fp8_e4m3*>(w.v8), n, w.scalars);
  return cudaGetLastError();
}

cudaError_t cudnn_fp8_dequantise_output(const Shape& s, const CudnnFp8Buffers& w, void* o,
                                        cudaStream_t stream) {
  const std::int64_t n = s.qo_elements();
  dequantise_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<const __nv_fp8_e4m3*>(w.o8), static_cast<__nv_bfloat16*>(o), n, w.scalars);
  return cudaGetLastError();
}

}  // namespace fa
