// The FP8 variants' quantisation pass: bf16 Q, K, V -> E4M3 Q8, K8 (rotated) and V8 (transposed,
// keys permuted), with their amax per scale block (kernels/fp8/fp8_quant.hpp).
//
// One thread block of 256 threads per (128 rows, batch*head, tensor): each warp holds 16 rows in
// registers (d/32 consecutive elements per lane), Q and K rotated in place (below); the block
// reduces the amax of each scale block (Q: the two halves of 64 rows, K and V: all 128), writes
// it, scales, rounds to E4M3 and stores: Q8, K8 row-major; V8 through shared memory, transposed to
// [d][Npad] with its keys permuted inside each group of 16 (fp8_layout.hpp), zeros past N. So
// with --fp8-scale block the inputs are read once (2 bytes per element) and written once (1 byte):
// 3 bytes per element of Q, K and V. With --fp8-scale head an amax pass per (batch*head, tensor)
// runs first and the quantise pass uses its result: the inputs are read twice.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <string>

#include "kernels/fp8/fp8_quant.hpp"

namespace fa::fp8 {
namespace {

// ---- incoherent processing -------------------------------------------------------------------

// Q and K rows are multiplied by the same orthogonal matrix H·S (S: fixed random signs, H: the
// normalised Walsh-Hadamard matrix) before quantisation; Q K^T is unchanged because (H S)(H S)^T
// = I. An outlier in one coordinate is spread over all d, so its quantisation error becomes d
// independent errors instead of one error shared by every key's score (the FlashAttention-3
// paper's "incoherent processing"; the signs: fp8_layout.hpp). Measured effect in
// docs/accuracy.md.
// One row of D elements held by a warp, D/32 consecutive elements per lane; rotated in place.
template <int D>
__device__ inline void rotate_row(float (&x)[D / 32], int lane) {
  constexpr int E = D / 32;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (flip_sign(lane * E + e)) x[e] = -x[e];
  }
#pragma unroll
  for (int st = 1; st < E; st <<= 1) {  // butterflies inside a lane
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (!(e & st)) {
        const float a = x[e], b = x[e + st];
        x[e] = a + b;
        x[e + st] = a - b;
      }
    }
  }
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {  // butterflies across lanes
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float y = __shfl_xor_sync(0xffffffffu, x[e], m);
      x[e] = (lane & m) ? (y - x[e]) : (x[e] + y);
    }
  }
  const float norm = rsqrtf(static_cast<float>(D));
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] *= norm;
}

// Row `row` (< N, else zeros) of D elements, D/32 consecutive ones per lane.
template <int D>
__device__ inline void load_row(float (&x)[D / 32], const __nv_bfloat16* src, std::int64_t row,
                                std::int64_t N, int lane) {
  constexpr int E = D / 32;
  __nv_bfloat16 v[E];
  if (row < N) {
    const __nv_bfloat16* p = src + row * D + lane * E;
    if constexpr (E == 2) {
      *reinterpret_cast<std::uint32_t*>(v) = __ldg(reinterpret_cast<const unsigned int*>(p));
    } else {
      *reinterpret_cast<uint2*>(v) = __ldg(reinterpret_cast<const uint2*>(p));
    }
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = __bfloat162float(v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = 0.0f;
  }
}

__device__ inline float warp_max(float m) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  return m;
}

__device__ inline std::uint32_t e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}
__device__ inline std::uint32_t e4m3x4(float a, float b, float c, float d) {
  return e4m3x2(a, b) | (e4m3x2(c, d) << 16);
}

// ---- per-head amax (Scale::head) -------------------------------------------------------------

template <int D>
__global__ void __launch_bounds__(256)
    amax_head_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                     std::int64_t N, float* amax_head) {
  const int tensor = blockIdx.y;  // 0 Q, 1 K, 2 V
  const __nv_bfloat16* src = (tensor == 0 ? q : (tensor == 1 ? k : v)) + blockIdx.x * N * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = 0.0f;
  for (std::int64_t r = warp; r < N; r += 8) {
    float x[D / 32];
    load_row<D>(x, src, r, N, lane);
    if (tensor < 2) rotate_row<D>(x, lane);
#pragma unroll
    for (int e = 0; e < D / 32; ++e) m = fmaxf(m, fabsf(x[e]));
  }
  m = warp_max(m);
  __shared__ float red[8];
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; ++w) m = fmaxf(m, red[w]);
    amax_head[tensor * gridDim.x + blockIdx.x] = fmaxf(m, 1e-30f);  // all zero: finite scale
  }
}

// ---- the quantise pass -----------------------------------------------------------------------

struct QuantParams {
  const __nv_bfloat16 *q, *k, *v;
  Workspace w;
  std::int64_t N, Npad, heads, q_blocks, kv_blocks;
};

template <int D, bool HEAD_SCALE>
__global__ void __launch_bounds__(256) quantise_kernel(const QuantParams p) {
  constexpr int E = D / 32, kRows = 16;  // rows per warp
  const int tensor = blockIdx.z;         // 0 Q, 1 K, 2 V
  const std::int64_t bh = blockIdx.y, blk = blockIdx.x, N = p.N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row0 = blk * kKvScaleRows + warp * kRows;  // this warp's first row
  const __nv_bfloat16* src = (tensor == 0 ? p.q : (tensor == 1 ? p.k : p.v)) + bh * N * D;

  float x[kRows][E];
#pragma unroll
  for (int r = 0; r < kRows; ++r) load_row<D>(x[r], src, row0 + r, N, lane);
  float m = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (tensor < 2) rotate_row<D>(x[r], lane);
#pragma unroll
    for (int e = 0; e < E; ++e) m = fmaxf(m, fabsf(x[r][e]));
  }
  __shared__ float red[8];
  // Every lane takes part in the shuffles (a full-mask __shfl_xor_sync called by lane 0 alone
  // waits for the other 31 forever: the H200 hang of 2026-11-23, found with cuda-gdb).
  m = warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  float amax;
  if constexpr (HEAD_SCALE) {
    amax = p.w.amax_head[tensor * p.heads + bh];
  } else if (tensor == 0) {  // Q: the 64-row half of this warp
    const int h = warp / 4;
    amax = fmaxf(fmaxf(red[4 * h], red[4 * h + 1]), fmaxf(red[4 * h + 2], red[4 * h + 3]));
  } else {
    amax = red[0];
    for (int w = 1; w < 8; ++w) amax = fmaxf(amax, red[w]);
  }
  amax = fmaxf(amax, 1e-30f);  // an all-zero block keeps a finite scale
  if (threadIdx.x % 128 == 0 && tensor == 0) {
    const std::int64_t qb = blk * 2 + threadIdx.x / 128;
    if (qb < p.q_blocks) p.w.amax_q[bh * p.q_blocks + qb] = amax;
  } else if (threadIdx.x == 0) {
    (tensor == 1 ? p.w.amax_k : p.w.amax_v)[bh * p.kv_blocks + blk] = amax;
  }
  const float sc = kE4m3Max / amax;

  if (tensor < 2) {
    std::uint8_t* dst = (tensor == 0 ? p.w.q8 : p.w.k8) + bh * N * D;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (row0 + r >= N) break;
      std::uint8_t* out = dst + (row0 + r) * D + lane * E;
      if constexpr (E == 2) {
        *reinterpret_cast<std::uint16_t*>(out) =
            static_cast<std::uint16_t>(e4m3x2(x[r][0] * sc, x[r][1] * sc));
      } else {
        *reinterpret_cast<std::uint32_t*>(out) =
            e4m3x4(x[r][0] * sc, x[r][1] * sc, x[r][2] * sc, x[r][3] * sc);
      }
    }
    return;
  }

  // V: two halves of 64 keys through a float tile ([key][d + 1]: the transposed reads below hit
  // different banks), written out transposed and permuted, 4 positions (one word) per store.
  __shared__ float tile[64][D + 1];
  std::uint8_t* out = p.w.vt8 + bh * D * p.Npad + blk * kKvScaleRows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (warp / 4 == h) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < E; ++e) tile[(warp % 4) * kRows + r][lane * E + e] = x[r][e] * sc;
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < D * 16; idx += 256) {
      const int c = idx / 16, pos = (idx % 16) * 4;
      *reinterpret_cast<std::uint32_t*>(out + c * p.Npad + h * 64 + pos) =
          e4m3x4(tile[permuted_key(pos)][c], tile[permuted_key(pos + 1)][c],
                 tile[permuted_key(pos + 2)][c], tile[permuted_key(pos + 3)][c]);
    }
    __syncthreads();
  }
}

// The wide form (FA_FP8_QUANT_WIDE): 512 threads per 128 rows, each thread one 16-byte chunk (8
// consecutive elements) of 2 (d=64) or 4 (d=128) rows. Against the form above: a quarter of the
// load instructions, half the registers per thread (so 2-3 blocks of 16 warps per SM instead of
// 2-4 of 8), three of the Hadamard's stages inside a lane instead of one or two, and V's
// transposed tile in E4M3 bytes (8 or 16 KB, read conflict-free: lanes along d) instead of
// floats (17 or 33 KB). The same amax blocks, the same rounding, the same layouts.
constexpr int kWideThreads = 512;

// Eight consecutive elements (a 16-byte chunk) of a row of D, held by lane `sub` of the D/8
// lanes that hold the row (consecutive lanes of one warp); rotated in place.
template <int D>
__device__ inline void rotate_chunk(float (&x)[8], int sub) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (flip_sign(sub * 8 + e)) x[e] = -x[e];
  }
#pragma unroll
  for (int st = 1; st < 8; st <<= 1) {  // butterflies inside a lane
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (!(e & st)) {
        const float a = x[e], b = x[e + st];
        x[e] = a + b;
        x[e + st] = a - b;
      }
    }
  }
#pragma unroll
  for (int m = 1; m < D / 8; m <<= 1) {  // butterflies across the row's lanes
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float y = __shfl_xor_sync(0xffffffffu, x[e], m);
      x[e] = (sub & m) ? (y - x[e]) : (x[e] + y);
    }
  }
  const float norm = rsqrtf(static_cast<float>(D));
#pragma unroll
  for (int e = 0; e < 8; ++e) x[e] *= norm;
}

__device__ inline void load_chunk(float (&x)[8], const __nv_bfloat16* p, bool inside) {
  if (inside) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h[e]);
      x[2 * e] = f.x;
      x[2 * e + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = 0.0f;
  }
}

__device__ inline uint2 e4m3x8(const float (&x)[8], float sc) {
  return make_uint2(e4m3x4(x[0] * sc, x[1] * sc, x[2] * sc, x[3] * sc),
                    e4m3x4(x[4] * sc, x[5] * sc, x[6] * sc, x[7] * sc));
}

template <int D, bool HEAD_SCALE>
__global__ void __launch_bounds__(kWideThreads, D == 64 ? 3 : 2) quantise_wide_kernel(const QuantParams p) {
  constexpr int kSub = D / 8;                       // lanes per row
  constexpr int kPassRows = kWideThreads / kSub;    // rows per pass of the block: 64 or 32
  constexpr int kPasses = kKvScaleRows / kPassRows;  // chunks per thread: 2 or 4
  constexpr int kWarps = kWideThreads / 32;
  static_assert(kPassRows * kPasses == kKvScaleRows && kKvScaleRows == 2 * kQScaleRows);
  const int tensor = blockIdx.z;  // 0 Q, 1 K, 2 V
  const std::int64_t bh = blockIdx.y, blk = blockIdx.x, N = p.N;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32, sub = t % kSub;
  const int row_in_pass = t / kSub;
  const std::int64_t row0 = blk * kKvScaleRows;
  const __nv_bfloat16* src = (tensor == 0 ? p.q : (tensor == 1 ? p.k : p.v)) + bh * N * D;

  // Load: every chunk of the thread in flight before the first use.
  float x[kPasses][8];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const std::int64_t row = row0 + i * kPassRows + row_in_pass;
    load_chunk(x[i], src + row * D + sub * 8, row < N);
  }
  // Rotate Q and K; the amax of each 64-row half (pass i lies in half i * kPassRows / 64).
  float m[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    if (tensor < 2) rotate_chunk<D>(x[i], sub);
#pragma unroll
    for (int e = 0; e < 8; ++e) m[i * kPassRows / kQScaleRows] = fmaxf(m[i * kPassRows / kQScaleRows], fabsf(x[i][e]));
  }
  __shared__ float red[2][kWarps];
  // Every lane takes part in the shuffles (see quantise_kernel).
  m[0] = warp_max(m[0]);
  m[1] = warp_max(m[1]);
  if (lane == 0) {
    red[0][warp] = m[0];
    red[1][warp] = m[1];
  }
  __syncthreads();
  float half_amax[2] = {red[0][0], red[1][0]};
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    half_amax[0] = fmaxf(half_amax[0], red[0][w]);
    half_amax[1] = fmaxf(half_amax[1], red[1][w]);
  }
  const float block_amax = fmaxf(half_amax[0], half_amax[1]);
  // The scale of each half: Q's own half, K's and V's whole block, or the head's (Scale::head,
  // which every block of the head then records, so the attention kernels read one layout). An
  // all-zero block keeps a finite scale.
  float amax[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    amax[h] = HEAD_SCALE ? p.w.amax_head[tensor * p.heads + bh]
                         : fmaxf(tensor == 0 ? half_amax[h] : block_amax, 1e-30f);
  }
  if (tensor == 0 && t < 2) {
    const std::int64_t qb = blk * 2 + t;
    if (qb < p.q_blocks) p.w.amax_q[bh * p.q_blocks + qb] = t == 0 ? amax[0] : amax[1];
  } else if (tensor > 0 && t == 0) {
    (tensor == 1 ? p.w.amax_k : p.w.amax_v)[bh * p.kv_blocks + blk] = amax[0];
  }
  const float sc[2] = {kE4m3Max / amax[0], kE4m3Max / amax[1]};

  if (tensor < 2) {  // Q8, K8: row-major, 8 bytes per chunk
    std::uint8_t* dst = (tensor == 0 ? p.w.q8 : p.w.k8) + bh * N * D;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const std::int64_t row = row0 + i * kPassRows + row_in_pass;
      if (row < N)
        *reinterpret_cast<uint2*>(dst + row * D + sub * 8) =
            e4m3x8(x[i], sc[i * kPassRows / kQScaleRows]);
    }
    return;
  }

  // V8: the block's 128 keys as E4M3 bytes in shared memory, then out transposed ([d][Npad]) with
  // keys permuted inside groups of 16 (fp8_layout.hpp): one 16-byte store per (column, group), the
  // lanes of a warp along the columns (consecutive bytes of one tile row: no bank conflict).
  __shared__ __align__(16) std::uint8_t tile[kKvScaleRows][D];
#pragma unroll
  for (int i = 0; i < kPasses; ++i)
    *reinterpret_cast<uint2*>(&tile[i * kPassRows + row_in_pass][sub * 8]) = e4m3x8(x[i], sc[0]);
  __syncthreads();
  std::uint8_t* out = p.w.vt8 + bh * D * p.Npad + blk * kKvScaleRows;
#pragma unroll
  for (int j = 0; j < D * (kKvScaleRows / 16) / kWideThreads; ++j) {
    const int item = j * kWideThreads + t, c = item % D, g = item / D;
    std::uint32_t word[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      word[w] = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b)
        word[w] |= static_cast<std::uint32_t>(tile[permuted_key(g * 16 + 4 * w + b)][c]) << (8 * b);
    }
    *reinterpret_cast<uint4*>(out + c * p.Npad + g * 16) = make_uint4(word[0], word[1], word[2], word[3]);
  }
}

template <int D>
void enqueue(const Shape& s, const DeviceBuffers& b, Scale scale, cudaStream_t stream) {
  QuantParams p{static_cast<const __nv_bfloat16*>(b.q),
                static_cast<const __nv_bfloat16*>(b.k),
                static_cast<const __nv_bfloat16*>(b.v),
                carve(s, b.workspace),
                s.N,
                padded(s.N),
                s.heads_total(),
                q_scale_blocks(s.N),
                kv_scale_blocks(s.N)};
  const dim3 grid(static_cast<unsigned>(p.kv_blocks), static_cast<unsigned>(p.heads), 3);
  if (scale == Scale::head)
    amax_head_kernel<D><<<dim3(static_cast<unsigned>(p.heads), 3), 256, 0, stream>>>(
        p.q, p.k, p.v, s.N, p.w.amax_head);
#if FA_FP8_QUANT_WIDE
  if (scale == Scale::head) {
    quantise_wide_kernel<D, true><<<grid, kWideThreads, 0, stream>>>(p);
  } else {
    quantise_wide_kernel<D, false><<<grid, kWideThreads, 0, stream>>>(p);
  }
#else
  if (scale == Scale::head) {
    quantise_kernel<D, true><<<grid, 256, 0, stream>>>(p);
  } else {
    quantise_kernel<D, false><<<grid, 256, 0, stream>>>(p);
  }
#endif
}

}  // namespace

const char* scale_name(Scale s) {
  return s == Scale::head ? "head" : "block";
}

Scale scale_option(const OptionValues& values) {
  const auto it = values.find(kOptionFp8Scale);
  if (it == values.end()) return kDefaultScale;
  if (it->second == OptionValue{std::string("head")}) return Scale::head;
  if (it->second == OptionValue{std::string("block")}) return Scale::block;
  return kDefaultScale;
}

Fp8Scheme scheme(const OptionValues& values) {
  Fp8Scheme s;
  s.rotated = true;
  if (scale_option(values) == Scale::block) {
    s.q_rows = kQScaleRows;
    s.kv_rows = kKvScaleRows;
  }
  return s;
}

std::size_t workspace_bytes(const Shape& s) {
  const std::int64_t heads = s.heads_total();
  const std::int64_t bytes8 = 2 * heads * s.N * s.d + heads * s.d * padded(s.N);
  const std::int64_t floats = heads * (q_scale_blocks(s.N) + 2 * kv_scale_blocks(s.N) + 3);
  return static_cast<std::size_t>((bytes8 + 15) / 16 * 16 + floats * 4);
}

Workspace carve(const Shape& s, void* base) {
  auto* p = static_cast<std::uint8_t*>(base);
  const std::int64_t heads = s.heads_total(), qk = heads * s.N * s.d;
  const std::int64_t vt = heads * s.d * padded(s.N);
  Workspace w;
  w.q8 = p;
  w.k8 = p + qk;
  w.vt8 = p + 2 * qk;
  w.amax_q = reinterpret_cast<float*>(p + (2 * qk + vt + 15) / 16 * 16);
  w.amax_k = w.amax_q + heads * q_scale_blocks(s.N);
  w.amax_v = w.amax_k + heads * kv_scale_blocks(s.N);
  w.amax_head = w.amax_v + heads * kv_scale_blocks(s.N);
  return w;
}

QuantisingLauncher::QuantisingLauncher(const LaunchOptions& o)
    : prequantized_(o.is(kOptionPrequantized, true)), scale_(scale_option(o.options)) {}

std::string QuantisingLauncher::prepare(const Shape& s, const Tiles&, const DeviceBuffers& b,
                                        cudaStream_t stream) {
  return prequantized_ ? quantise(s, b, scale_, stream) : "";
}

std::string QuantisingLauncher::quantise_step(const Shape& s, const DeviceBuffers& b,
                                              cudaStream_t stream) {
  if (b.workspace_bytes < fp8::workspace_bytes(s)) return "fp8: workspace too small";
  if (prequantized_) return "";
  phase_begin(scale_ == Scale::head ? "quantise Q, K, V to E4M3 (per-head amax, then one pass)"
                                    : "quantise Q, K, V to E4M3 (one pass, per-block amax)");
  std::string e = quantise(s, b, scale_, stream);
  phase_end();
  return e;
}

std::string quantise(const Shape& s, const DeviceBuffers& b, Scale scale, cudaStream_t stream) {
  if (b.workspace_bytes < workspace_bytes(s)) return "fp8 quantise: workspace too small";
  if (s.heads_total() > 65535) return "fp8 quantise: B*H must be <= 65535";
  if (s.d == 64) {
    enqueue<64>(s, b, scale, stream);
  } else if (s.d == 128) {
    enqueue<128>(s, b, scale, stream);
  } else {
    return "fp8 quantise: d must be 64 or 128";
  }
  if (auto e = cudaGetLastError(); e != cudaSuccess)
    return std::string("fp8 quantise: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace fa::fp8
