// 2^x for the softmax weights of every attention kernel: one bare MUFU.EX2 (CMake FA_FAST_EXP2,
// on by default), or exp2f (FA_FAST_EXP2=OFF). The H200 A/B (scripts/exp2_ab.sh, 2026-11-23):
// the bare instruction ran fa3 1.05-1.09x, fp8 1.01-1.11x and fa2 1.01-1.08x over all 36 rows
// (N 1024/4096/16384, d 64/128, causal both), cudnn 0.98-1.01x in the same runs
// (tests/data/h200-exp2-ab-*-2026-11-23.json).
#pragma once

namespace fa {

// ex2.approx.ftz.f32: the MUFU.EX2 that exp2f issues too (its SASS), without the range fix-up
// exp2f adds around it when built without --use_fast_math: a compare and two predicated
// multiplies around every MUFU.EX2 (FSETP.GEU x, -126; @!P FMUL x, 0.5; @!P FMUL y, y), so that
// results below 2^-126 come out denormal instead of zero. Predicated off, those still take their
// issue slots: 3 of the 4 instructions of each exponential in fa3's d=64 main loop (SASS, nvcc
// 13.0: 198 MUFU.EX2 beside 200 FSETP.GEU). A softmax weight below 2^-126 is zero to every fp32
// sum it joins and to bf16/fp16/E4M3 P. exp2(-inf) stays +0; NaN stays NaN. FlashAttention's own
// kernels are built with --use_fast_math and get this single instruction too.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(FA_FAST_EXP2)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

}  // namespace fa
