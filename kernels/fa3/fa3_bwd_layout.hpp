// Where fa3's backward keeps dS and a dQ share in shared memory, and dQ in the fp32 accumulator
// (host and device; the CPU tests tests/test_fa3_bwd_layout.cpp check the properties the kernels
// rely on, and tests/fa3_bwd_cute_layout.cu dS's offsets against CuTe's layout).
//
// dS (64 queries x 128 keys, 16-bit, per buffer) is dQ = dS K's A operand, queries contiguous
// with the 128-byte swizzle (CuTe's GMMA::Layout_MN_SW128_Atom tiled over the keys): (query q,
// key k) at byte 128 k + 2 q, its bits 4-6 XORed with k % 8. A consumer thread holds dS^T for
// keys key_a and key_a + 8 (same k % 8) and queries 8 n + 2 t, +1: its 2 x 8 32-bit stores are one
// base XOR 16 n (+ 1 KB for key_a + 8), and a warp's stores of one n hit 32 distinct banks.
//
// A consumer warpgroup's dQ share is 64 rows x `cols` columns (cols = d / column groups: 32 or
// 64), row-major, each row's 8-column groups XOR-permuted by the row: column c of row r lies at
// r cols + (c XOR 8 (r % 4)). The bulk reduce-add copies a share as it lies, so the accumulator
// holds the same order and the post-pass reads it back with dq_share_index.
//   - The consumers' stores: thread (g, t) of warp w holds, per 8-column tile n, rows 16 w + g
//     and 16 w + g + 8 at columns 8 n + 2 t, +1 (the wgmma accumulator's order); a half-warp's
//     float2 stores then hit 32 distinct banks (unpermuted, its 4 rows would land on the same 8
//     banks: a 4-way conflict).
//   - The post-pass: 4 adjacent columns from a multiple of 4 stay adjacent (a float4).
//   - A thread's 2 x cols/8 store addresses are one base XOR 32 n (+ 32 cols bytes for the lower
//     row): the permutation only touches bits that the base leaves zero, so the kernel computes
//     one base per share and no address per store.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FA3_BWD_HD __host__ __device__
#else
#define FA3_BWD_HD
#endif

namespace fa::fa3_bwd {

// Float index of (row r, column c) in a share of `cols` columns (a multiple of 32).
FA3_BWD_HD constexpr int dq_share_index(int r, int c, int cols) {
  return r * cols + (c ^ (8 * (r % 4)));
}

// Byte offset, in its share, of the float2 that thread (row r = 16 w + g, t) stores for tile 0;
// tile n's is this XOR 32 n, and the row 8 below it 32 cols bytes further.
FA3_BWD_HD constexpr std::uint32_t dq_share_thread_base(int r, int t, int cols) {
  return (4u * static_cast<std::uint32_t>(r * cols + 2 * t)) |
         (32u * static_cast<std::uint32_t>(r % 4));
}

// Byte offset of dS (query q, key k) in one 64 x 128 buffer.
FA3_BWD_HD constexpr std::uint32_t ds_offset(int q, int k) {
  return (128u * static_cast<std::uint32_t>(k) + 2u * static_cast<std::uint32_t>(q)) ^
         (16u * static_cast<std::uint32_t>(k % 8));
}

// Byte offset of the dS^T pair (queries 2 t, 2 t + 1; key key_a) that a thread stores for
// 8-query tile 0; tile n's is this XOR 16 n, key_a + 8's 1024 bytes further.
FA3_BWD_HD constexpr std::uint32_t ds_thread_base(int key_a, int t) {
  return (128u * static_cast<std::uint32_t>(key_a) + 4u * static_cast<std::uint32_t>(t)) |
         (16u * static_cast<std::uint32_t>(key_a % 8));
}

}  // namespace fa::fa3_bwd
