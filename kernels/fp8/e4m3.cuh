// Rounding fp32 to E4M3 on the device, shared by the quantisation pass (fp8_quant.cu) and both
// attention kernels (fp8.cu, fp8_sm90_kernel.cuh): round to nearest even, saturating at +-448
// (satfinite: an overflow becomes the largest finite value, never NaN), two values per
// conversion (one F2FP on sm_89+).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace fa::fp8 {

// E4M3(a) in bits 0-7, E4M3(b) in bits 8-15.
__device__ __forceinline__ std::uint32_t e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}
// E4M3(a), E4M3(b), E4M3(c), E4M3(d) in bytes 0 to 3: the order of an 8-bit MMA operand register.
__device__ __forceinline__ std::uint32_t e4m3x4(float a, float b, float c, float d) {
  return e4m3x2(a, b) | (e4m3x2(c, d) << 16);
}

}  // namespace fa::fp8
