#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "kernels/common/fill.hpp"

namespace fa {
namespace {

// splitmix64: a counter-based generator, so any element can be produced independently.
__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_normal_kernel(T* dst, std::int64_t count, std::uint64_t seed, bool outliers) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    const std::uint64_t r = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
    // Box-Muller on two 32-bit uniforms in (0, 1].
    const float u1 = (static_cast<float>(r >> 40) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((r >> 8) & 0xFFFFFFu) * (1.0f / 16777216.0f);
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (outliers) {
      const std::uint64_t r2 = splitmix64(r ^ 0xA5A5A5A5A5A5A5A5ull);
      if ((r2 >> 40) < 16777u) {  // probability 16777 / 2^24 = 0.001
        const float v1 = (static_cast<float>((r2 >> 16) & 0xFFFFFFu) + 1.0f) * (1.0f / 16777216.0f);
        const float v2 = static_cast<float>(r2 & 0xFFFFu) * (1.0f / 65536.0f);
        z += 10.0f * sqrtf(-2.0f * logf(v1)) * cospif(2.0f * v2);  // N(0, 100): std 10
      }
    }
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      dst[i] = __float2bfloat16_rn(z);
    } else {
      dst[i] = __float2half_rn(z);
    }
  }
}

template <typename T>
__global__ void fill_bits_kernel(T* dst, std::int64_t count, T value) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    dst[i] = value;
  }
}

int grid_for(std::int64_t count) {
  const std::int64_t blocks = (count + 255) / 256;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

cudaError_t fill_normal(void* dst, std::int64_t count, DType dtype, std::uint64_t seed,
                        cudaStream_t stream, Inputs inputs) {
  if (count <= 0) return cudaSuccess;
  const bool outliers = inputs == Inputs::outliers;
  if (dtype == DType::bf16) {
    fill_normal_kernel<<<grid_for(count), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count,
                                                            seed, outliers);
  } else {
    fill_normal_kernel<<<grid_for(count), 256, 0, stream>>>(static_cast<__half*>(dst), count, seed,
                                                            outliers);
  }
  return cudaGetLastError();
}

cudaError_t poison_nan16(void* dst, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  // 0x7FFF is a NaN in both bf16 and fp16 (a byte memset cannot make a bf16 NaN: 0x7F7F is finite).
  fill_bits_kernel<<<grid_for(count), 256, 0, stream>>>(static_cast<std::uint16_t*>(dst), count,
                                                        std::uint16_t{0x7FFF});
  return cudaGetLastError();
}

cudaError_t poison_nan32(float* dst, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  fill_bits_kernel<<<grid_for(count), 256, 0, stream>>>(dst, count, nanf(""));
  return cudaGetLastError();
}

}  // namespace fa
