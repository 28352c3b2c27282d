// The masked online softmax of the fused attention kernels (fa2, fp8; fa1 uses its pieces for
// FA1's per-block statistics), on score tiles held in tensor-core accumulator fragments.
//
// Every piece works on the thread's scores s[NT][4] in the C-fragment layout of mma.m16n8 (the
// layout is a template parameter, FragC16x8 below): lane = 4g + t holds, for each 8-key tile n,
// elements e = 0..3 at row FragC16x8::row(e) (0: the warp's row g, 1: row g + 8) and key
// FragC16x8::key(k0, n, e, t) = k0 + n*8 + 2t + (e & 1). A row's keys are spread over the 4 lanes
// of a quad, so row statistics finish with two xor-shuffles (1, 2). The accumulator of wgmma
// (sm_90a) has the same per-thread shape (two rows per thread per 16-row slice, 2 values per row
// per 8 keys, the quad owning a row), so the Hopper kernels can use the same code with a layout of
// their own.
//
// Arithmetic (log2 domain; the softmax scale * log2(e) is folded into one multiply per score):
//   x = s * scale_log2, -inf where masked (key >= N; causal: key > row + shift; a dropped block)
//   m_new = max(m, rowmax x);  base = m_new, or 0 while the row has seen no key (so exp2 gives 0,
//   not NaN);  P = exp2(x - base);  alpha = exp2(m - base);  l = l * alpha + rowsum P (each
//   thread keeps a partial l over its own keys; the quad's sum is taken once, in finish());
//   O *= alpha.  Epilogue: l = quad sum, O * (numerator / l), lse = (m + log2 l) * ln 2.
//
// Cost: every function is __forceinline__, and the one predicate whose placement changes the code
// (does this block need a mask at all) stays in each kernel's body, so sharing this code costs the
// kernels nothing. fa2's 32-row warps take update_scaled_tiles (below): the same arithmetic in an
// order with shorter dependency chains.
//
// Fault injection (kernels/common/fault.hpp) reaches this code through KeyMask<..., FAULTS>: the
// mask_shift and drop_kv_block knobs are read only in the FAULTS instantiations (elsewhere
// compile-time 0 / false); scale_factor and natural_exp are folded into scale_log2 by the launcher
// (softmax_scale_log2 in kernels/common/launch.hpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/fast_exp2.cuh"
#include "kernels/common/mma_sm80.cuh"

namespace fa {

#define FA_SOFTMAX_INLINE __device__ __forceinline__

// The natural-log log-sum-exp of a row from its max m (log2 units: the max of the scaled scores)
// and its sum l of exp2(score - m).
FA_SOFTMAX_INLINE float natural_lse(float m, float l) {
  constexpr float kLn2 = 0.6931471805599453f;
  return (m + log2f(l)) * kLn2;
}

// C fragment of mma.m16n8k* (PTX ISA): c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1).
struct FragC16x8 {
  static constexpr int kRows = 2;  // rows per thread
  static FA_SOFTMAX_INLINE int row(int e) { return e >> 1; }
  // The key of element e of 8-key tile n, for a block whose first key is k0 (thread t of the quad).
  static FA_SOFTMAX_INLINE std::int64_t key(std::int64_t k0, int n, int e, int t) {
    return k0 + n * 8 + 2 * t + (e & 1);
  }
};

// Which keys of one K/V block are masked for this thread's rows. The fault knobs are read only
// when FAULTS is set: elsewhere they are compile-time 0 / false inside every function here, so the
// measured kernels carry no fault code.
template <bool CAUSAL, int BC, bool FAULTS>
struct KeyMask {
  std::int64_t k0;     // first key of the block
  std::int64_t N;      // keys >= N are padding
  std::int64_t row_a;  // the thread's query rows: Layout::row 0
  std::int64_t row_b;  // and 1
  int fault_shift;     // fault injection: causal keeps key <= row + shift (+1: one future key)
  bool fault_dropped;  // fault injection: the whole block is masked

  FA_SOFTMAX_INLINE int shift() const { return FAULTS ? fault_shift : 0; }
  FA_SOFTMAX_INLINE bool dropped() const { return FAULTS && fault_dropped; }
};

// s <- s * scale_log2, -inf at masked keys (checked only when needed: the block touches the N edge
// or the diagonal, or is dropped). The kernels compute needed themselves, in their own body, as
//   mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped()
// not through a helper: behind a function boundary NVVM lays out the masked and unmasked copies of
// this loop the other way round (one more register, a different schedule in the causal kernels).
template <typename Layout = FragC16x8, bool CAUSAL, int BC, bool FAULTS, int NT>
FA_SOFTMAX_INLINE void scale_and_mask(float (&s)[NT][4], float scale_log2,
                                      const KeyMask<CAUSAL, BC, FAULTS>& mask, bool needed, int t) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = s[n][e] * scale_log2;
      if (needed) {
        const std::int64_t key = Layout::key(mask.k0, n, e, t);
        const std::int64_t row = Layout::row(e) == 0 ? mask.row_a : mask.row_b;
        if (key >= mask.N || (CAUSAL && key > row + mask.shift()) || mask.dropped()) x = -INFINITY;
      }
      s[n][e] = x;
    }
  }
}

// s <- -inf at masked keys, unscaled (kernels that fold the scale into the exponent: the mask
// is applied only on the blocks that need it, chosen at compile time by the caller).
template <typename Layout = FragC16x8, bool CAUSAL, int BC, bool FAULTS, int NT>
FA_SOFTMAX_INLINE void mask_keys(float (&s)[NT][4], const KeyMask<CAUSAL, BC, FAULTS>& mask,
                                 int t) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t key = Layout::key(mask.k0, n, e, t);
      const std::int64_t row = Layout::row(e) == 0 ? mask.row_a : mask.row_b;
      if (key >= mask.N || (CAUSAL && key > row + mask.shift()) || mask.dropped())
        s[n][e] = -INFINITY;
    }
  }
}

// max(init, the row's scores) over the quad that holds row r.
template <int NT>
FA_SOFTMAX_INLINE float row_max(const float (&s)[NT][4], int r, float init) {
  float mx = init;
#pragma unroll
  for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  return mx;
}

// The exponent base for a row whose max is mx: 0 while every key so far is masked (mx = -inf),
// so that exp2(-inf - base) is 0, not NaN.
FA_SOFTMAX_INLINE float exp_base(float mx) {
  return (mx == -INFINITY) ? 0.0f : mx;
}

// Row r's scores <- exp2(s - base) in place; returns this thread's part of their sum.
template <int NT>
FA_SOFTMAX_INLINE float exp2_row(float (&s)[NT][4], int r, float base) {
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    s[n][2 * r] = fast_exp2(s[n][2 * r] - base);
    s[n][2 * r + 1] = fast_exp2(s[n][2 * r + 1] - base);
    sum += s[n][2 * r] + s[n][2 * r + 1];
  }
  return sum;
}

// Row r's unscaled scores <- exp2(s * scale_log2 - base) in place: the scale folded into one FFMA
// per score (FlashAttention-3's form: no separate multiply pass); returns this thread's part of
// the row sum. base is in the scaled (log2) domain.
template <int NT>
FA_SOFTMAX_INLINE float exp2_row_scaled(float (&s)[NT][4], int r, float scale_log2, float base) {
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    s[n][2 * r] = fast_exp2(fmaf(s[n][2 * r], scale_log2, -base));
    s[n][2 * r + 1] = fast_exp2(fmaf(s[n][2 * r + 1], scale_log2, -base));
    sum += s[n][2 * r] + s[n][2 * r + 1];
  }
  return sum;
}

// x summed over the quad (the 4 threads of a row).
FA_SOFTMAX_INLINE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// O *= alpha of its row, for the thread's accumulator tiles (Layout's rows).
template <typename Layout, int DT>
FA_SOFTMAX_INLINE void scale_rows(float (&o)[DT][4], const float (&alpha)[Layout::kRows]) {
#pragma unroll
  for (int i = 0; i < DT; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] *= alpha[Layout::row(e)];
  }
}

// FA2's running state for the thread's rows: max m (log2 domain) and the partial row sum l.
template <typename Layout = FragC16x8>
struct OnlineSoftmax {
  static constexpr int kRows = Layout::kRows;
  float m[kRows];
  float l[kRows];

  FA_SOFTMAX_INLINE OnlineSoftmax() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) m[r] = -INFINITY;
#pragma unroll
    for (int r = 0; r < kRows; ++r) l[r] = 0.0f;
  }

  // One K/V block: s (already scaled and masked) becomes P = exp2(s - m_new) in place, m and l
  // move on, and the output accumulator o (same layout, DT 8-column tiles) is rescaled.
  template <int NT, int DT>
  FA_SOFTMAX_INLINE void update(float (&s)[NT][4], float (&o)[DT][4]) {
    float alpha[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float mx = row_max(s, r, m[r]);
      const float base = exp_base(mx);
      alpha[r] = fast_exp2(m[r] - base);
      m[r] = mx;
      const float sum = exp2_row(s, r, base);
      l[r] = l[r] * alpha[r] + sum;
    }
    scale_rows<Layout>(o, alpha);
  }

  // Row r's max moves to max(m, scaled_max) (scale_log2 > 0: the max of the scaled scores is the
  // scaled max); *alpha = exp2(m_old - base) rescales l and O; returns the exponent base (0 while
  // the row has seen no key).
  FA_SOFTMAX_INLINE float move_max(int r, float scaled_max, float* alpha) {
    const float mx = fmaxf(m[r], scaled_max);
    const float base = exp_base(mx);
    *alpha = fast_exp2(m[r] - base);
    m[r] = mx;
    return base;
  }

  // After the last block: l <- the full row sums (quad reduction); inv[r] = numerator / l[r], the
  // factor that normalises row r of O (numerator: 1, or a dequantisation scale).
  FA_SOFTMAX_INLINE void finish(float numerator, float (&inv)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      l[r] = quad_sum(l[r]);
      inv[r] = numerator / l[r];
    }
  }

  // The epilogue for the thread's rows row_a, row_b (rows >= N skipped): O * inv[r] stored as T
  // pairs into Oh (row-major, D columns; FragC16x8's columns), and the lse of each row into lse_h
  // by the quad's thread 0.
  template <typename T, int D, int DT>
  FA_SOFTMAX_INLINE void store(T* Oh, float* lse_h, const float (&o)[DT][4], const float (&inv)[2],
                               std::int64_t row_a, std::int64_t row_b, std::int64_t N,
                               int t) const {
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      const int col = i * 8 + 2 * t;
      if (row_a < N) {
        *reinterpret_cast<std::uint32_t*>(Oh + row_a * D + col) =
            sm80::pack2<T>(o[i][0] * inv[0], o[i][1] * inv[0]);
      }
      if (row_b < N) {
        *reinterpret_cast<std::uint32_t*>(Oh + row_b * D + col) =
            sm80::pack2<T>(o[i][2] * inv[1], o[i][3] * inv[1]);
      }
    }
    store_lse(lse_h, row_a, row_b, N, t);
  }

  // The lse of rows row_a, row_b (< N) into lse_h (the head's), by the quad's first thread.
  FA_SOFTMAX_INLINE void store_lse(float* lse_h, std::int64_t row_a, std::int64_t row_b,
                                   std::int64_t N, int t) const {
    if (t == 0) {
      if (row_a < N) lse_h[row_a] = lse(0);
      if (row_b < N) lse_h[row_b] = lse(1);
    }
  }

  // Natural-log log-sum-exp of row r (after finish()).
  FA_SOFTMAX_INLINE float lse(int r) const {
    return natural_lse(m[r], l[r]);
  }
};

// v[0] op v[1] op ... op v[NT-1] as a tree: depth log2(NT) instead of a chain of NT - 1
// dependent operations (v is overwritten).
template <int NT, typename Op>
FA_SOFTMAX_INLINE float tree_fold(float (&v)[NT], Op op) {
  static_assert((NT & (NT - 1)) == 0, "tree_fold: NT a power of two");
#pragma unroll
  for (int w = 1; w < NT; w *= 2) {
#pragma unroll
    for (int n = 0; n + w < NT; n += 2 * w) v[n] = op(v[n], v[n + w]);
  }
  return v[0];
}

// The thread's max of row r over its NT 8-key tiles (no quad shuffle), as a tree.
template <int NT>
FA_SOFTMAX_INLINE float thread_row_max_tree(const float (&s)[NT][4], int r) {
  float v[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) v[n] = fmaxf(s[n][2 * r], s[n][2 * r + 1]);
  return tree_fold(v, [](float a, float b) { return fmaxf(a, b); });
}

// exp2_row_scaled with the thread's part of the row sum taken as a tree (same exponentials; the
// sum's rounding order differs).
template <int NT>
FA_SOFTMAX_INLINE float exp2_row_scaled_tree(float (&s)[NT][4], int r, float scale_log2,
                                             float base) {
  float v[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    s[n][2 * r] = fast_exp2(fmaf(s[n][2 * r], scale_log2, -base));
    s[n][2 * r + 1] = fast_exp2(fmaf(s[n][2 * r + 1], scale_log2, -base));
    v[n] = s[n][2 * r] + s[n][2 * r + 1];
  }
  return tree_fold(v, [](float a, float b) { return a + b; });
}

// The maxima of the R rows of each of MT m16 tiles (raw scores): each thread's part as a tree,
// then the quad reductions of all MT * R rows together, so their shuffles are in flight at the
// same time (update_scaled_tiles below; fp8's softmax at d=128, kernels/fp8/fp8_sm90_kernel.cuh).
template <int MT, int NT, int R>
FA_SOFTMAX_INLINE void quad_row_max_tiles(const float (&s)[MT][NT][4], float (&mx)[MT][R]) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) mx[m][r] = thread_row_max_tree(s[m], r);
  }
#pragma unroll
  for (int lane_mask = 1; lane_mask <= 2; lane_mask *= 2) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int r = 0; r < R; ++r)
        mx[m][r] = fmaxf(mx[m][r], __shfl_xor_sync(0xffffffffu, mx[m][r], lane_mask));
    }
  }
}

// One online-softmax step on the MT m16 tiles of one warp at once (fa2's warps of 32 rows), on
// UNSCALED scores (masked ones -inf): the row max is taken on the raw scores and scaled once
// (scale_log2 > 0 keeps the order), each P = exp2(s * scale_log2 - m_new) is one FFMA and one
// exp2, and m stays in the scaled log2 domain, so finish/store/lse agree. The 2*MT rows' maxima
// are reduced together, so their quad shuffles are in flight at the same time, and the per-thread
// max and sum are trees. Why: with two warps per scheduler (fa2's 4-warp blocks, two per SM)
// little hides a dependency chain; tile by tile, each m16 tile's max chain, two dependent
// shuffles and exponentials ran before the next tile's began (ncu: stalls on fixed-latency
// dependencies well above FlashAttention-2's).
template <int MT, int NT, int DT, typename Layout>
FA_SOFTMAX_INLINE void update_scaled_tiles(OnlineSoftmax<Layout> (&sm)[MT], float (&s)[MT][NT][4],
                                           float (&o)[MT][DT][4], float scale_log2) {
  constexpr int R = Layout::kRows;
  float mx[MT][R];
  quad_row_max_tiles(s, mx);
  float alpha[MT][R];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float base = sm[m].move_max(r, mx[m][r] * scale_log2, &alpha[m][r]);
      sm[m].l[r] = sm[m].l[r] * alpha[m][r] + exp2_row_scaled_tree(s[m], r, scale_log2, base);
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) scale_rows<Layout>(o[m], alpha[m]);
}

#undef FA_SOFTMAX_INLINE

}  // namespace fa
