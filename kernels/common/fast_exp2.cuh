// 2^x for the softmax weights of every attention kernel (fa1, fa2, fa3, fp8): one bare MUFU.EX2.
#pragma once

namespace fa {

// ex2.approx.ftz.f32: the MUFU.EX2 that exp2f issues too, without the range fix-up exp2f adds
// around it when built without --use_fast_math (a compare and two predicated multiplies per
// exponential, so that results below 2^-126 come out denormal instead of zero). Predicated off,
// those still take issue slots, and the softmax is issue-bound. A weight below 2^-126 is zero to
// every fp32 sum it joins and to bf16/fp16/E4M3 P. exp2(-inf) stays +0; NaN stays NaN.
// FlashAttention's kernels, built with --use_fast_math, get this single instruction too.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace fa
