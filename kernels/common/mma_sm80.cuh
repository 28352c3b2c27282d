// Building blocks shared by the mma.sync attention kernels (sm_80 and later): cp.async tile
// loads into swizzled shared memory, ldmatrix, the m16n8k16 tensor-core product, packing.
//
// Fragment layout of mma.m16n8k16 (PTX ISA), lane = 4*g + t:
//   A (16x16, row): a0,a1 = (g, 2t..2t+1)  a2,a3 = (g+8, 2t..)  a4,a5 = (g, 2t+8..)  a6,a7 = (g+8,
//   2t+8..) B (16x8, col):  b0,b1 = (k 2t..2t+1, n g)  b2,b3 = (k 2t+8.., n g) C (16x8): c0,c1 =
//   (g, 2t..2t+1)  c2,c3 = (g+8, 2t..2t+1)
// so the C fragments of two adjacent 8-column tiles are exactly one A fragment: S becomes P in
// registers without a trip through shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace fa::sm80 {

__device__ inline std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  // src-size 0 zero-fills the 16 bytes: rows past N become zeros in shared memory.
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_size));
}
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D += A(16x16, row) * B(16x8, col), fp32 accumulate.
template <typename T>
__device__ inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                 std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename T>
__device__ inline std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
}

// Element offset of (row, col) in a swizzled [rows][D] shared-memory tile.
template <int D>
__device__ inline int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Copies rows [row0, row0 + ROWS) of a [N][D] head slice into a swizzled shared tile;
// rows at or past N are zero-filled.
template <int ROWS, int D, int THREADS, typename T>
__device__ inline void load_tile(T* smem, const T* gmem_head, std::int64_t row0, std::int64_t N) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + THREADS - 1) / THREADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (kChunks % THREADS != 0 && c >= kChunks) break;
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const bool valid = row0 + r < N;
    const T* src = gmem_head + (valid ? (row0 + r) * D + ch * 8 : 0);
    cp_async_16(smem_u32(smem + swz<D>(r, ch * 8)), src, valid);
  }
}

// As load_tile, for a tile wholly inside the head (row0 + ROWS <= N): no row is zero-filled, so
// each thread's chunks are one source pointer and one shared address plus compile-time offsets
// (THREADS / (D/8) rows apart, a multiple of the swizzle's 8-row period), which the copy
// instruction takes as immediates. With load_tile's per-row predicate ptxas kept a 64-bit source
// pointer per chunk alive across the K/V loop and spilled them in fa2's 4-warp d=128 kernel;
// with this loader the main loop's path reloads none of them (they stay in the ragged-block
// branch, so ptxas's static spill total does not change).
template <int ROWS, int D, int THREADS, typename T>
__device__ inline void load_tile_inside(T* smem, const T* gmem_head, std::int64_t row0) {
  constexpr int kChunksPerRow = D / 8;
  static_assert(THREADS % kChunksPerRow == 0, "load_tile_inside: whole rows per pass");
  constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(kRowsPerPass % 8 == 0 && ROWS % kRowsPerPass == 0,
                "load_tile_inside: passes keep the swizzle phase and cover the tile");
  const int r = threadIdx.x / kChunksPerRow, ch = threadIdx.x % kChunksPerRow;
  const T* src = gmem_head + (row0 + r) * D + ch * 8;
  const std::uint32_t dst = smem_u32(smem + swz<D>(r, ch * 8));
#pragma unroll
  for (int i = 0; i < ROWS / kRowsPerPass; ++i) {
    cp_async_16(dst + i * kRowsPerPass * D * static_cast<int>(sizeof(T)),
                src + i * kRowsPerPass * D, true);
  }
}

// This warp's 16 query rows [row0, row0 + 16) of a swizzled [rows][D] tile as A fragments.
template <int D, typename T>
__device__ inline void load_a_fragments(std::uint32_t (&qf)[D / 16][4], const T* sQ, int row0,
                                        int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    ldmatrix_x4(qf[kk], smem_u32(sQ + swz<D>(row0 + (lane & 15), kk * 16 + (lane >> 4) * 8)));
  }
}

// S (16 x BC, fp32, zeroed here) = Q (16 x D, A fragments) * K^T, K the swizzled [BC][D] tile.
template <int D, int BC, typename T>
__device__ inline void warp_qkt(float (&s)[BC / 8][4], const std::uint32_t (&qf)[D / 16][4],
                                const T* sK, int lane) {
#pragma unroll
  for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < BC / 16; ++np) {
      std::uint32_t b[4];
      ldmatrix_x4(b, smem_u32(sK + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                          kk * 16 + ((lane >> 3) & 1) * 8)));
      mma_16816<T>(s[2 * np], qf[kk], b[0], b[1]);
      mma_16816<T>(s[2 * np + 1], qf[kk], b[2], b[3]);
    }
  }
}

// O (16 x D, fp32) += P (16 x BC, fp32 values rounded to T here) * V, V the swizzled [BC][D] tile.
template <int D, int BC, typename T>
__device__ inline void warp_pv(float (&o)[D / 8][4], const float (&p)[BC / 8][4], const T* sV,
                               int lane) {
#pragma unroll
  for (int kc = 0; kc < BC / 16; ++kc) {
    std::uint32_t a[4];
    a[0] = pack2<T>(p[2 * kc][0], p[2 * kc][1]);
    a[1] = pack2<T>(p[2 * kc][2], p[2 * kc][3]);
    a[2] = pack2<T>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
    a[3] = pack2<T>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, smem_u32(sV + swz<D>(kc * 16 + (lane & 15), dp * 16 + (lane >> 4) * 8)));
      mma_16816<T>(o[2 * dp], a, b[0], b[1]);
      mma_16816<T>(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// ldmatrix addresses in a swizzled [rows][D] tile (swz) from one per-lane address. A lane's
// ldmatrix row is 8-row-aligned block + (lane-fixed row & 7), and its column is a 16-element
// step + (a lane-fixed 0 or 8). So the swizzled 16-byte chunk of step c = col/8 (even) is
// (c & 8) + ((c & 7) ^ lane_chunk): the lane's step-0 address XOR (c & 7) * 16, plus (c & 8) * 16
// and the rows' stride. That holds when the tile starts 128-byte aligned and a row is a multiple
// of 128 bytes (bits 4-6 of the address are the chunk's low bits). One LOP3 and an immediate per
// ldmatrix, where swz's arithmetic per ldmatrix doubled the integer instructions of fa2's d=128
// K/V loop (SASS).
template <int D, typename T>
__device__ __forceinline__ std::uint32_t swz_step(std::uint32_t lane_addr, int rows, int col) {
  static_assert(D * sizeof(T) % 128 == 0, "swz_step: a row is a multiple of 128 bytes");
  const int c = col >> 3;  // col: a multiple of 16 (compile-time once unrolled)
  return (lane_addr ^ static_cast<std::uint32_t>((c & 7) << 4)) +
         static_cast<std::uint32_t>((c & ~7) * 16 + rows * D * static_cast<int>(sizeof(T)));
}

// Two ldmatrix address patterns of the rows functions below, each a per-lane step-0 address
// taken once per call and moved by swz_step. An "A" pattern: lane l reads row row0 + (l & 15),
// columns 16 * step + (l >> 4) * 8 (Q's A fragments, and V's ldmatrix.trans with row0 = 16 * kc);
// row0 must be a multiple of 8. A "K" pattern: row 16 * np + (l & 7) + (l >> 4) * 8, columns
// 16 * step + ((l >> 3) & 1) * 8 (K's B fragments).
template <int D, typename T>
__device__ __forceinline__ std::uint32_t a_lane_addr(const T* tile, int row0, int lane) {
  return smem_u32(tile + swz<D>(row0 + (lane & 15), (lane >> 4) * 8));
}
template <int D, typename T>
__device__ __forceinline__ std::uint32_t k_lane_addr(const T* tile, int lane) {
  return smem_u32(tile + swz<D>((lane & 7) + ((lane >> 4) << 3), ((lane >> 3) & 1) * 8));
}

// Warps of 16*MT query rows (FlashAttention-2's layout: each warp owns 32+ rows): every K or V
// fragment loaded from shared memory feeds MT m16 tiles, so the shared-memory bytes per MMA
// fall by MT. MT = 1 is warp_qkt / warp_pv above.
//
// Each ldmatrix is issued one step (4 MMAs) ahead of the MMAs that read it, from a ping-pong of
// fragment registers: issued just before them, ptxas placed many within 3 instructions of their
// first use, and short-scoreboard stalls dominated the K/V loop (ncu).
//
// S (16*MT x BC, fp32, zeroed here) = Q (16*MT x D, A fragments in registers) * K^T.
template <int MT, int D, int BC, typename T>
__device__ inline void warp_qkt_rows(float (&s)[MT][BC / 8][4],
                                     const std::uint32_t (&qf)[MT][D / 16][4], const T* sK,
                                     int lane) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
  }
  const std::uint32_t k_lane = k_lane_addr<D>(sK, lane);
  constexpr int NP = BC / 16, kSteps = D / 16 * NP;  // step i: k-step i / NP, key block i % NP
  std::uint32_t b[2][4];
  ldmatrix_x4(b[0], swz_step<D, T>(k_lane, 0, 0));
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int kk = i / NP, np = i % NP;
    if (i + 1 < kSteps)
      ldmatrix_x4(b[(i + 1) & 1], swz_step<D, T>(k_lane, (i + 1) % NP * 16, (i + 1) / NP * 16));
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mma_16816<T>(s[m][2 * np], qf[m][kk], b[i & 1][0], b[i & 1][1]);
      mma_16816<T>(s[m][2 * np + 1], qf[m][kk], b[i & 1][2], b[i & 1][3]);
    }
  }
}

// As warp_qkt_rows, with Q's A fragments read from the swizzled shared tile sQ (rows row0 ..
// row0 + 16*MT) one k-step at a time: for tiles whose registers cannot also hold Q.
template <int MT, int D, int BC, typename T>
__device__ inline void warp_qkt_rows_smem_q(float (&s)[MT][BC / 8][4], const T* sQ, int row0,
                                            const T* sK, int lane) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
  }
  // row0: a multiple of 8 (the warp's first row), so row & 7 is the lane's (swz_step).
  const std::uint32_t q_lane = a_lane_addr<D>(sQ, row0, lane);
  const std::uint32_t k_lane = k_lane_addr<D>(sK, lane);
  constexpr int NP = BC / 16, kSteps = D / 16 * NP;  // step i: k-step i / NP, key block i % NP
  std::uint32_t a[2][MT][4], b[2][4];                // [k-step & 1], [step & 1]
#pragma unroll
  for (int m = 0; m < MT; ++m) ldmatrix_x4(a[0][m], swz_step<D, T>(q_lane, m * 16, 0));
  ldmatrix_x4(b[0], swz_step<D, T>(k_lane, 0, 0));
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int kk = i / NP, np = i % NP;
    if (np == NP - 1 && kk + 1 < D / 16) {  // the next k-step's Q fragments
#pragma unroll
      for (int m = 0; m < MT; ++m)
        ldmatrix_x4(a[(kk + 1) & 1][m], swz_step<D, T>(q_lane, m * 16, (kk + 1) * 16));
    }
    if (i + 1 < kSteps)
      ldmatrix_x4(b[(i + 1) & 1], swz_step<D, T>(k_lane, (i + 1) % NP * 16, (i + 1) / NP * 16));
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mma_16816<T>(s[m][2 * np], a[kk & 1][m], b[i & 1][0], b[i & 1][1]);
      mma_16816<T>(s[m][2 * np + 1], a[kk & 1][m], b[i & 1][2], b[i & 1][3]);
    }
  }
}

// P (16*MT x BC, fp32) rounded to T and packed as A fragments: pk[m][kc] is the 16x16 A fragment
// of keys [16kc, 16kc + 16) of m16 tile m. Packing all of P before P V frees the fp32 scores (half
// the registers) before the V fragments stream in.
template <int MT, int BC, typename T>
__device__ inline void pack_p_rows(std::uint32_t (&pk)[MT][BC / 16][4],
                                   const float (&p)[MT][BC / 8][4]) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) {
      pk[m][kc][0] = pack2<T>(p[m][2 * kc][0], p[m][2 * kc][1]);
      pk[m][kc][1] = pack2<T>(p[m][2 * kc][2], p[m][2 * kc][3]);
      pk[m][kc][2] = pack2<T>(p[m][2 * kc + 1][0], p[m][2 * kc + 1][1]);
      pk[m][kc][3] = pack2<T>(p[m][2 * kc + 1][2], p[m][2 * kc + 1][3]);
    }
  }
}

// O (16*MT x D, fp32) += P (packed by pack_p_rows) * V: each V fragment (ldmatrix .trans) feeds
// MT m16 tiles.
template <int MT, int D, int BC, typename T>
__device__ inline void warp_pv_rows(float (&o)[MT][D / 8][4],
                                    const std::uint32_t (&pk)[MT][BC / 16][4], const T* sV,
                                    int lane) {
  const std::uint32_t v_lane = a_lane_addr<D>(sV, 0, lane);
  constexpr int DP = D / 16, kSteps = BC / 16 * DP;  // step i: key chunk i / DP, columns i % DP
  std::uint32_t b[2][4];
  ldmatrix_x4_trans(b[0], swz_step<D, T>(v_lane, 0, 0));
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int kc = i / DP, dp = i % DP;
    if (i + 1 < kSteps)
      ldmatrix_x4_trans(b[(i + 1) & 1],
                        swz_step<D, T>(v_lane, (i + 1) / DP * 16, (i + 1) % DP * 16));
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mma_16816<T>(o[m][2 * dp], pk[m][kc], b[i & 1][0], b[i & 1][1]);
      mma_16816<T>(o[m][2 * dp + 1], pk[m][kc], b[i & 1][2], b[i & 1][3]);
    }
  }
}

}  // namespace fa::sm80
