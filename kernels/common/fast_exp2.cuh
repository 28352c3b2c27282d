// 2^x for the softmax weights of every attention kernel: one bare MUFU.EX2 (CMake FA_FAST_EXP2,
// on by default), or exp2f (FA_FAST_EXP2=OFF). The H200 A/B (scripts/exp2_ab.sh, 2026-11-23):
// the bare instruction ran fa3 1.05-1.09x, fp8 1.01-1.11x and fa2 1.01-1.08x over all 36 rows
// (N 1024/4096/16384, d 64/128, causal both), cudnn 0.98-1.01x in the same runs
// (tests/data/h200-exp2-ab-*-2026-11-23.json).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// poly_exp2 compiles for the host too, where the CPU tests check its error (tests/test_exp2.cpp).
#if defined(__CUDACC__)
#define FA_EXP2_HD __host__ __device__ __forceinline__
#else
#define FA_EXP2_HD inline
#endif

namespace fa {

#if defined(__CUDACC__)

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
#endif  // __CUDACC__

// The bits of a float as an integer and back (CUDA's intrinsics on the device; memcpy on the host).
FA_EXP2_HD std::int32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(x);
#else
  std::int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i;
#endif
}
FA_EXP2_HD float float_of_bits(std::int32_t i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float x;
  std::memcpy(&x, &i, sizeof x);
  return x;
#endif
}

// 2^x for x <= 0 on the FMA pipe, no MUFU: round x to the nearest integer j by the magic add
// (1.5 * 2^23: the sum's low mantissa bits hold j), a degree-3 polynomial for 2^f on
// f = x - j in [-0.5, 0.5], times 2^j built from j's bits.
// FlashAttention-4 computes part of its exponentials this way on Blackwell, where the tensor
// cores outrun MUFU; on the H200 the two also meet at d=64 (256 tensor FLOPs per score against
// MUFU's 16 exponentials per SM per clock: the same time per score), and FP8's tensor cores are
// twice as fast. Cost: 9 issue slots (FMNMX, 3 FADD, 3 FFMA, an integer shift-add, FMUL) against
// MUFU.EX2's 1 issue slot and 8 MUFU cycles per warp. Coefficients: minimax for the relative
// error on [-0.5, 0.5] with p(0) = 1 (Lawson's iteration in float64, then rounded to fp32): max
// relative error 1.01e-4 in fp32 (2^-13.3; tests/test_exp2.cpp), 20x under bf16's rounding of P
// (2^-9) and 5x under fp16's (2^-11).
// x is clamped to -127 first: there j = -127 and 2^j's bits are 0, so 2^-127 and below (masked
// keys: x = -inf) come out +0 exactly; between -127 and -126 the result is p * 2^-126 or +0,
// which the fp32 sums and the 16-bit P conversions take as the ~0 it is. NaN becomes 0 here
// (fmaxf): a NaN score still reaches the output through the row max, the row's other weights and
// alpha, so none is hidden.
FA_EXP2_HD float poly_exp2(float x) {
  constexpr float kRound = 0x1.8p23f;  // 1.5 * 2^23: x + kRound keeps round(x) in the low bits
  x = fmaxf(x, -127.0f);
  const float shifted = x + kRound;
  const float j = shifted - kRound;
  const float f = x - j;  // in [-0.5, 0.5]
  const float p = fmaf(fmaf(fmaf(0x1.c2a20ep-5f, f, 0x1.f00c52p-3f), f, 0x1.62f5fcp-1f), f, 1.0f);
  // shifted's low 23 bits hold j + 2^22; shifted left by 23 they leave j * 2^23 (mod 2^32), and
  // adding 1.0's bits gives 2^j (j >= -126), or +0 at j = -127.
  // 2^j built apart and multiplied in: adding j into p's exponent bits instead (one integer op on
  // the value that lands in the wgmma's accumulator registers) made ptxas serialise the wgmma
  // (C7511) in all 20 of fa3's d=64 128-row kernels; this form, none (nvcc 13.0).
  return p * float_of_bits(static_cast<std::int32_t>(
                 (static_cast<std::uint32_t>(float_bits(shifted)) << 23) + 0x3f800000u));
}

// Of each kExp2PolyEvery consecutive 8-key column tiles of a softmax row, the last takes poly_exp2
// and the rest MUFU (0: all MUFU). CMake FA_EXP2_POLY_EVERY sets it for the sm_90a kernels (fa3 and
// fp8, where the tensor cores can outrun MUFU); fa2's mma.sync loop runs at a third of MUFU's rate
// and keeps 0. Registers: with FA_EXP2_POLY_EVERY=4 the forward kernels of fa3 (d=64: 128 and 192
// rows) and fp8 (d=64) have no spills and no serialised wgmma (ptxas, nvcc 13.0); the fault-hook
// kernels keep the spills they had without it. Measured (H200, scripts/exp2_ab.sh, 0 against 4,
// tests/data/h200-exp2-poly-ab-*-2026-11-23.json): 4 is slower on every row, fa3 0.91-0.97x and
// fp8 0.83-0.99x (d=64 non-causal: 0.83x), cudnn 0.99-1.00x. Each exponential moved off MUFU costs
// 8 more issue slots, and the issue slots bind, not MUFU: so 0, the default.
#if defined(FA_EXP2_POLY_EVERY)
inline constexpr int kExp2PolyEvery = FA_EXP2_POLY_EVERY;
#else
inline constexpr int kExp2PolyEvery = 0;
#endif

}  // namespace fa
