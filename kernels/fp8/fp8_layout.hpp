// The layouts the FP8 kernels share (host and device; the CPU test tests/test_fp8_layout.cpp
// checks them against the PTX fragment layouts written out independently).
//
// P V on FP8 tensor cores takes P from registers as the A operand. Both A fragments we use,
// mma.m16n8k32 (sm_89 kernel) and wgmma m64nNk32 with 8-bit A in registers (sm_90a kernel; CuTe's
// GMMA::ALayout_64x32), give a thread of a 16-row slab the same bytes: register 2h + r holds row
// g + 8r, positions 16h + 4t .. 16h + 4t + 3 of a 32-key step (g = lane/4, t = lane%4). The S
// accumulators (mma.m16n8 and wgmma m64nN alike) give the same thread keys 8n + 2t, 8n + 2t + 1 of
// 8-column tile n, rows g (elements 0, 1) and g + 8 (elements 2, 3).
//
// Instead of moving bytes between threads, V's keys are stored permuted inside each group of 16 so
// that position p holds the key whose score the thread already has: register (kc, h, r) of P is
// e4m3x4(s[n][2r], s[n][2r+1], s[n+1][2r], s[n+1][2r+1]) with n = 4 kc + 2 h, and position
// 4t + i of a 16-key group holds key 8 (i/2) + 2t + (i%2).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FA_FP8_HD __host__ __device__
#else
#define FA_FP8_HD
#endif

namespace fa::fp8 {

constexpr float kE4m3Max = 448.0f;
// P in [0, 1] is stored as E4M3(256 P) (FlashAttention-3's offset of 8 in the exponent): small
// probabilities stay out of E4M3's subnormals and 256 stays under 448.
constexpr float kPScale = 256.0f;
constexpr float kPScaleLog2 = 8.0f;
// Scale blocks (--fp8-scale block): Q per 64 rows (one consumer warpgroup's or four sm_89 warps'
// rows), K and V per 128 keys (every kernel's Bc); V8's padding and the K/V loop use the same 128.
constexpr int kQScaleRows = 64;
constexpr int kKvScaleRows = 128;
constexpr int kPad = 128;  // V8 is [d][Npad], Npad = N rounded up to 128

constexpr std::int64_t padded(std::int64_t N) {
  return (N + kPad - 1) / kPad * kPad;
}
constexpr std::int64_t q_scale_blocks(std::int64_t N) {
  return (N + kQScaleRows - 1) / kQScaleRows;
}
constexpr std::int64_t kv_scale_blocks(std::int64_t N) {
  return (N + kKvScaleRows - 1) / kKvScaleRows;
}

// Incoherent processing: Q and K rows are multiplied by H S (S: these fixed random signs of the
// d coordinates, H: the normalised Walsh-Hadamard matrix) before quantisation (fp8_quant.cu).
FA_FP8_HD constexpr bool flip_sign(int i) {
  return ((0x9E3779B97F4A7C15ull >> (i & 63)) ^ (0xC2B2AE3D27D4EB4Full >> ((i >> 6) & 63))) & 1;
}

// The quantisation pass's rotation on the tensor cores (fp8_quant.cu).
// Sylvester's Walsh-Hadamard matrix: H[i][j] = (-1)^popcount(i & j); true where it is -1.
FA_FP8_HD constexpr bool hadamard_negative(int i, int j) {
  return (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) != 0;  // device: one POPC
}
// Block (kt, nt) of H (rows 16 kt + k, columns 8 nt + n; k < 16, n < 8) is one 8 x 8 base block
// negated or not: H[16 kt + k][8 nt + n] = hadamard_negative(k % 8, n) XOR
// hadamard_block_negative(kt, nt, k / 8). popcount(i & j) splits over the bits: 0-2 of both (the
// base block), bit 3 of the row against bit 0 of nt, and bits 4 and up of the row against bits 1
// and up of nt. So B of mma.m16n8k16 needs the base block's one register and its negation.
FA_FP8_HD constexpr bool hadamard_block_negative(int kt, int nt, int k_half) {
  return hadamard_negative(kt, nt >> 1) != (k_half != 0 && (nt & 1) != 0);
}
// Where column `col` of a rotated row (the accumulator's column 8 nt + 2 t + c, held by the
// thread of quad position t) is stored in Q8 and K8: byte t d/4 + 2 nt + c, so each thread's
// columns of a row are contiguous. One fixed permutation for Q and K, which Q K^T does not see.
FA_FP8_HD constexpr int rotated_column_position(int d, int col) {
  return ((col % 8) / 2) * (d / 4) + 2 * (col / 8) + col % 2;
}
// The first of thread t's bytes in a stored row: rotated_column_position(d, 2 t).
FA_FP8_HD constexpr int rotated_row_offset(int d, int t) {
  return t * (d / 4);
}

// The key stored at position p of V8 (p and the key lie in the same group of 16).
FA_FP8_HD constexpr int permuted_key(int p) {
  const int q = p & 15, t = q >> 2, i = q & 3;
  return (p & ~15) + 8 * (i >> 1) + 2 * t + (i & 1);
}

// The position of key k (the inverse of permuted_key).
FA_FP8_HD constexpr int key_position(int k) {
  const int q = k & 15, half = q >> 3, t = (q & 7) >> 1, lo = q & 1;
  return (k & ~15) + 4 * t + 2 * half + lo;
}

// Which S accumulator element byte b of P register (kc, h, r) comes from: tile n, element e.
struct AccElement {
  int n, e;
};
FA_FP8_HD constexpr AccElement p_source(int kc, int h, int r, int b) {
  return AccElement{4 * kc + 2 * h + (b >> 1), 2 * r + (b & 1)};
}

}  // namespace fa::fp8
