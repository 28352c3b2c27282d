// The e4m3 tensor-core product of the mma.sync kernels (sm_89 and later), shared by the fp8-sm89
// attention kernel (kernels/fp8/fp8.cu) and the energy model's mma.sync calibration kernel
// (profiler/ceilings.cu). Its fragments are m16n8k16's (kernels/common/mma_sm80.cuh) with each
// 32-bit register holding four E4M3 values, so k is 32. Hopper has no e4m3 mma.sync: ptxas emits
// two f16 HMMA per product after converting the operands.
#pragma once

#include <cstdint>

namespace fa::sm80 {

// D += A (m16 x k32, row) x B (k32 x n8, col), e4m3, fp32 accumulate.
__device__ inline void mma_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched below compute capability 8.9 (the launchers check)
#endif
}

}  // namespace fa::sm80
