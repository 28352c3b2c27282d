#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/common/fill.hpp"
#include "kernels/common/fill_sample.hpp"

namespace fa {
namespace {

template <typename T>
__global__ void fill_normal_kernel(T* dst, std::int64_t count, std::uint64_t seed, Inputs inputs) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    const float z = sample_input(seed, static_cast<std::uint64_t>(i), inputs);
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
  if (dtype == DType::bf16) {
    fill_normal_kernel<<<grid_for(count), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count,
                                                            seed, inputs);
  } else {
    fill_normal_kernel<<<grid_for(count), 256, 0, stream>>>(static_cast<__half*>(dst), count, seed,
                                                            inputs);
  }
  return cudaGetLastError();
}

const char* inputs_names() {
  return "normal, outliers, uniform, heavy";
}

bool parse_inputs(const std::string& name, Inputs* out) {
  static constexpr std::pair<const char*, Inputs> kNames[] = {{"normal", Inputs::normal},
                                                              {"outliers", Inputs::outliers},
                                                              {"uniform", Inputs::uniform},
                                                              {"heavy", Inputs::heavy}};
  for (const auto& [n, v] : kNames) {
    if (name == n) {
      *out = v;
      return true;
    }
  }
  return false;
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
