// fp8: FP8 (E4M3) attention forward on the FP8 tensor cores (mma.sync m16n8k32, sm_89+), FA2
// loop order. Inputs bf16; output bf16; log-sum-exp fp32.
//
// Stages (all part of the variant and timed with it, unless --fp8-prequantized)
//   1 amax      one thread block per (batch*head, tensor): max |x| of Q H, K H (H: a fixed
//               random orthogonal rotation, "incoherent processing", see below) and V per head.
//   2 quantise  Q8 = e4m3(Q H * 448/amax_Q), K8 likewise, row-major [N][d] bytes;
//               V8 = e4m3(V * 448/amax_V) written TRANSPOSED as [d][Npad] (Npad = N rounded up
//               to 128, zero padding), keys permuted inside each group of 16 (see below), because
//               the B operand of the PV product needs consecutive keys per d and ldmatrix has no
//               8-bit transpose.
//   3 attention grid (ceil(N/Br), B*H), Br/16 warps of 16 rows, K/V blocks of Bc keys, cp.async
//               double buffer; S = Q8 K8^T (fp32) * descale_Q * descale_K; online softmax in fp32
//               as fa2; P8 = e4m3(256 * P) with P = exp2(S - m) <= 1, so P8 <= 256 stays inside
//               E4M3's 448 and small probabilities stay out of its subnormals; O += P8 V8 (fp32);
//               epilogue O * descale_V / 256 / l.
//
// The key permutation: the S accumulator of an m16n8 tile gives thread t keys {2t, 2t+1}, but the
// fp8 A operand wants keys {4t..4t+3} of a 32-key step. Reading the four values a thread holds
// for keys {2t, 2t+1, 8+2t, 9+2t} as "positions 4t..4t+3" is free if V's keys sit in that order:
// position 4t+i of a 16-key group holds key 8*(i/2) + 2t + (i%2). The quantise kernel writes V8
// that way, so S becomes P8 without shuffles.
//
// HBM traffic (profiler/io_model.cpp, fp8): the fa2 pattern with 1-byte Q, K, V, plus the two
// quantisation passes over Q, K, V (read twice in 16 bits, written once in 8).
#include <cuda_fp8.h>

#include <algorithm>
#include <string>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fp8/fp8.hpp"

namespace fa {
namespace {

using namespace sm80;

constexpr float kE4m3Max = 448.0f;
constexpr float kPScale = 256.0f;  // P in [0, 1] is quantised as 256 * P
constexpr int kPad = 128;          // Npad: multiple of every Bc

std::int64_t padded(std::int64_t N) {
  return (N + kPad - 1) / kPad * kPad;
}

// ---- incoherent processing -------------------------------------------------------------------

// Q and K rows are multiplied by the same orthogonal matrix H·S (S: fixed random signs, H: the
// normalised Walsh-Hadamard matrix) before quantisation; Q K^T is unchanged because (H S)(H S)^T
// = I. An outlier in one coordinate is spread over all d, so its quantisation error becomes d
// independent errors instead of one error shared by every key's score (the FlashAttention-3
// paper's "incoherent processing"). Measured effect in docs/accuracy.md.
__device__ inline bool flip_sign(int i) {
  return ((0x9E3779B97F4A7C15ull >> (i & 63)) ^ (0xC2B2AE3D27D4EB4Full >> ((i >> 6) & 63))) & 1;
}

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

template <int D>
__device__ inline void load_row(float (&x)[D / 32], const __nv_bfloat16* row, int lane) {
  constexpr int E = D / 32;
  __nv_bfloat16 v[E];
  if constexpr (E == 2) {
    *reinterpret_cast<std::uint32_t*>(v) = *reinterpret_cast<const std::uint32_t*>(row + lane * E);
  } else {
    *reinterpret_cast<uint2*>(v) = *reinterpret_cast<const uint2*>(row + lane * E);
  }
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] = __bfloat162float(v[e]);
}

// ---- stage 1: per-head amax (of the rotated Q and K, of V as it is) ------------------------

template <int D>
__global__ void __launch_bounds__(256)
    amax_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                std::int64_t N, float* amax) {
  const int tensor = blockIdx.y;  // 0 Q, 1 K, 2 V
  const __nv_bfloat16* src = (tensor == 0 ? q : (tensor == 1 ? k : v)) + blockIdx.x * N * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = 0.0f;
  for (std::int64_t r = warp; r < N; r += 8) {
    float x[D / 32];
    load_row<D>(x, src + r * D, lane);
    if (tensor < 2) rotate_row<D>(x, lane);
#pragma unroll
    for (int e = 0; e < D / 32; ++e) m = fmaxf(m, fabsf(x[e]));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float red[8];
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; ++w) m = fmaxf(m, red[w]);
    amax[tensor * gridDim.x + blockIdx.x] = fmaxf(m, 1e-30f);  // all-zero head: scale stays finite
  }
}

__device__ inline std::uint32_t e4m3x4(float a, float b, float c, float d) {
  const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// ---- stage 2: quantisation -----------------------------------------------------------------

// Q and K (blockIdx.y = 0, 1): one warp per row, rotated, scaled, rounded to E4M3, row-major.
template <int D>
__global__ void __launch_bounds__(256)
    quantise_qk_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, std::uint8_t* q8,
                       std::uint8_t* k8, const float* amax, std::int64_t rows, std::int64_t N) {
  const __nv_bfloat16* src = blockIdx.y == 0 ? q : k;
  std::uint8_t* dst = blockIdx.y == 0 ? q8 : k8;
  const float* am = amax + blockIdx.y * (rows / N);
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = (blockIdx.x * 256LL + threadIdx.x) / 32; r < rows; r += 8LL * gridDim.x) {
    float x[D / 32];
    load_row<D>(x, src + r * D, lane);
    rotate_row<D>(x, lane);
    const float sc = kE4m3Max / am[r / N];
    if constexpr (D == 64) {
      *reinterpret_cast<std::uint16_t*>(dst + r * D + lane * 2) = static_cast<std::uint16_t>(
          __nv_cvt_float2_to_fp8x2(make_float2(x[0] * sc, x[1] * sc), __NV_SATFINITE, __NV_E4M3));
    } else {
      *reinterpret_cast<std::uint32_t*>(dst + r * D + lane * 4) =
          e4m3x4(x[0] * sc, x[1] * sc, x[2] * sc, x[3] * sc);
    }
  }
}

// Key stored at position p of the transposed V (see the file comment).
__device__ inline int permuted_key(int p) {
  const int q = p & 15, t = q >> 2, i = q & 3;
  return (p & ~15) + 8 * (i >> 1) + 2 * t + (i & 1);
}

// V -> V8 transposed [d][Npad] with permuted keys; one block per (64 keys, batch*head).
template <int D>
__global__ void __launch_bounds__(256)
    quantise_vt_kernel(const __nv_bfloat16* v, std::uint8_t* vt8, const float* amax_v,
                       std::int64_t N, std::int64_t Npad) {
  __shared__ float tile[64][D + 1];  // +1: the transposed reads hit different banks
  const std::int64_t bh = blockIdx.y;
  const std::int64_t key0 = static_cast<std::int64_t>(blockIdx.x) * 64;
  const float s = kE4m3Max / amax_v[bh];
  const __nv_bfloat16* vh = v + bh * N * D;
  for (int idx = threadIdx.x; idx < 64 * D; idx += 256) {
    const int r = idx / D, c = idx % D;
    tile[r][c] = key0 + r < N ? __bfloat162float(vh[(key0 + r) * D + c]) * s : 0.0f;
  }
  __syncthreads();
  std::uint8_t* out = vt8 + bh * D * Npad + key0;
  for (int idx = threadIdx.x; idx < D * 16; idx += 256) {  // 4 positions per thread
    const int c = idx / 16, p = (idx % 16) * 4;
    *reinterpret_cast<std::uint32_t*>(out + c * Npad + p) =
        e4m3x4(tile[permuted_key(p)][c], tile[permuted_key(p + 1)][c], tile[permuted_key(p + 2)][c],
               tile[permuted_key(p + 3)][c]);
  }
}

// ---- stage 3: attention ----------------------------------------------------------------------

struct Fp8Params {
  const std::uint8_t* q8;
  const std::uint8_t* k8;
  const std::uint8_t* vt8;
  const float* amax;  // [3][B*H]: Q, K, V
  __nv_bfloat16* o;
  float* lse;
  std::int64_t N, Npad, heads;
  float scale_log2;
  int num_q_blocks;
  FaultInjection fault;  // read only by the FAULTS instantiation (verification tests)
};

// Byte offset of (row, byte) in a swizzled tile with rows of ROW_BYTES (64 or 128) bytes: the 8
// row addresses of an ldmatrix phase land in 8 different 16-byte bank groups.
template <int ROW_BYTES>
__device__ inline int swz_bytes(int row, int byte) {
  const int chunk = byte >> 4;
  const int phys = ROW_BYTES == 128 ? (chunk ^ (row & 7)) : (chunk ^ ((row >> 1) & 3));
  return row * ROW_BYTES + (phys << 4) + (byte & 15);
}

template <int ROWS, int ROW_BYTES, int THREADS>
__device__ inline void load_tile_bytes(std::uint8_t* smem, const std::uint8_t* g, std::int64_t row0,
                                       std::int64_t rows_valid, std::int64_t stride) {
  constexpr int kChunksPerRow = ROW_BYTES / 16, kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % THREADS == 0, "tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kChunks / THREADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const bool valid = row0 + r < rows_valid;
    cp_async_16(smem_u32(smem + swz_bytes<ROW_BYTES>(r, ch * 16)),
                g + (valid ? (row0 + r) * stride + ch * 16 : 0), valid);
  }
}

__device__ inline void mma_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched below compute capability 8.9 (the launcher checks)
#endif
}

template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
__global__ void __launch_bounds__(BR / 16 * 32) fp8_forward_kernel(const Fp8Params p) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kNTiles = BC / 8, kDTiles = D / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  std::uint8_t* sQ = smem_raw;          // [BR][D]
  std::uint8_t* sK = sQ + BR * D;       // [2][BC][D]
  std::uint8_t* sVt = sK + 2 * BC * D;  // [2][D][BC]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int qb =
      CAUSAL ? p.num_q_blocks - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const std::int64_t bh = blockIdx.y, N = p.N;
  const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
  const std::uint8_t* Qh = p.q8 + bh * N * D;
  const std::uint8_t* Kh = p.k8 + bh * N * D;
  const std::uint8_t* Vth = p.vt8 + bh * D * p.Npad;
  const float descale_q = p.amax[bh] / kE4m3Max, descale_k = p.amax[p.heads + bh] / kE4m3Max;
  const float descale_v = p.amax[2 * p.heads + bh] / kE4m3Max;
  const float qk_factor = descale_q * descale_k * p.scale_log2;

  const int total_kv = static_cast<int>((N + BC - 1) / BC);
  int num_kv = total_kv;
  if constexpr (CAUSAL) {
    const std::int64_t last_row = (q0 + BR < N ? q0 + BR : N) - 1;
    num_kv = min(total_kv, static_cast<int>(last_row / BC) + 1);
  }

  load_tile_bytes<BR, D, kThreads>(sQ, Qh, q0, N, D);
  cp_async_commit();
  load_tile_bytes<BC, D, kThreads>(sK, Kh, 0, N, D);
  load_tile_bytes<D, BC, kThreads>(sVt, Vth + (FAULTS ? faulty_v_row<BC>(p.fault, 0, total_kv) : 0),
                                   0, D, p.Npad);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  std::uint32_t qf[D / 32][4];
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk) {
    ldmatrix_x4(qf[kk],
                smem_u32(sQ + swz_bytes<D>(warp * 16 + (lane & 15), kk * 32 + (lane >> 4) * 16)));
  }

  float o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  OnlineSoftmax<> softmax;  // m (log2 domain) and this thread's partial l, rows g and g+8
  const std::int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;

  for (int j = 0; j < num_kv; ++j) {
    const int buf = j & 1;
    if (j + 1 < num_kv) {
      load_tile_bytes<BC, D, kThreads>(sK + (buf ^ 1) * BC * D, Kh, (j + 1) * std::int64_t{BC}, N,
                                       D);
      const std::int64_t v_key =
          FAULTS ? faulty_v_row<BC>(p.fault, j + 1, total_kv) : (j + 1) * std::int64_t{BC};
      load_tile_bytes<D, BC, kThreads>(sVt + (buf ^ 1) * D * BC, Vth + v_key, 0, D, p.Npad);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const std::uint8_t* sKj = sK + buf * BC * D;
    const std::uint8_t* sVj = sVt + buf * D * BC;

    float s[kNTiles][4];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
#pragma unroll
      for (int np = 0; np < BC / 16; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, smem_u32(sKj + swz_bytes<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                   kk * 32 + ((lane >> 3) & 1) * 16)));
        mma_e4m3(s[2 * np], qf[kk], b[0], b[1]);
        mma_e4m3(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    const KeyMask<CAUSAL, BC, FAULTS> mask{
        static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
        j == p.fault.drop_kv_block};
    const bool needs_mask =  // written out here: see scale_and_mask
        mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped();
    scale_and_mask(s, qk_factor, mask, needs_mask, t);
    softmax.update(s, o);  // s becomes P; m, l move on; O rescaled

    // O += P8 V8, 32 keys per step; P8's A fragment is read straight off the S accumulators
    // in the permuted key order that V8 was stored in.
#pragma unroll
    for (int kc = 0; kc < BC / 32; ++kc) {
      std::uint32_t a[4];
      const int n0 = 4 * kc;
      a[0] = e4m3x4(kPScale * s[n0][0], kPScale * s[n0][1], kPScale * s[n0 + 1][0],
                    kPScale * s[n0 + 1][1]);
      a[1] = e4m3x4(kPScale * s[n0][2], kPScale * s[n0][3], kPScale * s[n0 + 1][2],
                    kPScale * s[n0 + 1][3]);
      a[2] = e4m3x4(kPScale * s[n0 + 2][0], kPScale * s[n0 + 2][1], kPScale * s[n0 + 3][0],
                    kPScale * s[n0 + 3][1]);
      a[3] = e4m3x4(kPScale * s[n0 + 2][2], kPScale * s[n0 + 2][3], kPScale * s[n0 + 3][2],
                    kPScale * s[n0 + 3][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4(b, smem_u32(sVj + swz_bytes<BC>(dp * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                    kc * 32 + ((lane >> 3) & 1) * 16)));
        mma_e4m3(o[2 * dp], a, b[0], b[1]);
        mma_e4m3(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();
  }

  float inv[2];
  softmax.finish(descale_v / kPScale, inv);
  softmax.store<__nv_bfloat16, D>(p.o + bh * N * D, p.lse + bh * N, o, inv, row_a, row_b, N, t);
}

// ---- launcher ----------------------------------------------------------------------------

struct Workspace {
  std::uint8_t *q8, *k8, *vt8;
  float* amax;
};

Workspace carve(const Shape& s, void* base) {
  auto* p = static_cast<std::uint8_t*>(base);
  const std::int64_t qk = s.heads_total() * s.N * s.d, vt = s.heads_total() * s.d * padded(s.N);
  Workspace w{p, p + qk, p + 2 * qk, reinterpret_cast<float*>(p + 2 * qk + vt)};
  return w;
}

template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
std::string launch_attention(const Shape& s, const Workspace& w, const DeviceBuffers& b,
                             cudaStream_t stream, const FaultInjection& fault) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kSmem = BR * D + 4 * BC * D;
  auto kernel = fp8_forward_kernel<D, BR, BC, CAUSAL, FAULTS>;
  static PerDevice<cudaError_t> attr_once;  // per device: the attribute belongs to its context
  const cudaError_t attr = attr_once.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr != cudaSuccess)
    return std::string("fp8: cudaFuncSetAttribute: ") + cudaGetErrorString(attr);
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) return "";
  if (s.heads_total() > 65535) return "fp8: grid too large (B*H must be <= 65535)";
  Fp8Params p{w.q8,
              w.k8,
              w.vt8,
              w.amax,
              static_cast<__nv_bfloat16*>(b.o),
              b.lse,
              s.N,
              padded(s.N),
              s.heads_total(),
              softmax_scale_log2(s, fault),
              static_cast<int>(q_blocks),
              fault};
  kernel<<<dim3(static_cast<unsigned>(q_blocks), static_cast<unsigned>(s.heads_total())), kThreads,
           kSmem, stream>>>(p);
  return launch_status("fp8");
}

// The compiled tile shapes (one per head dim). Faults use the same list (FAULTS instantiations).
using Fp8Tiles = TileList<TileShape<64, 128, 128>, TileShape<128, 128, 128>>;

class Fp8Launcher final : public Launcher {
 public:
  Fp8Launcher(bool prequantized, const FaultInjection& fault)
      : prequantized_(prequantized), fault_(fault) {}

  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return static_cast<std::size_t>(2 * s.heads_total() * s.N * s.d +
                                    s.heads_total() * s.d * padded(s.N)) +
           3 * static_cast<std::size_t>(s.heads_total()) * sizeof(float);
  }

  std::string prepare(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                      cudaStream_t stream) override {
    return prequantized_ ? quantise(s, b, stream) : "";
  }

  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (b.workspace_bytes < workspace_bytes(s, t)) return "fp8: workspace too small";
    if (!prequantized_) {
      phase_begin("quantise Q, K, V to E4M3 (amax, Q/K, V^T)");
      std::string e = quantise(s, b, stream);
      phase_end();
      if (!e.empty()) return e;
    }
    phase_begin("attention (E4M3 tensor cores)");
    std::string e = attention(s, t, b, stream, fault_);
    phase_end();
    return e;
  }

 private:
  static std::string attention(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                               cudaStream_t stream, const FaultInjection& f) {
    const Workspace w = carve(s, b.workspace);
    // Faults go to a separate instantiation (FAULTS), so the measured kernels are untouched.
    return Fp8Tiles::dispatch("fp8", s.d, t, [&](auto shape) {
      using S = decltype(shape);
      return with_causal(s.causal, [&](auto causal) {
        constexpr bool kCausal = decltype(causal)::value;
        return f.any() ? launch_attention<S::D, S::BR, S::BC, kCausal, true>(s, w, b, stream, f)
                       : launch_attention<S::D, S::BR, S::BC, kCausal, false>(s, w, b, stream, f);
      });
    });
  }

  static std::string quantise(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
    const Workspace w = carve(s, b.workspace);
    const auto* q = static_cast<const __nv_bfloat16*>(b.q);
    const auto* k = static_cast<const __nv_bfloat16*>(b.k);
    const auto* v = static_cast<const __nv_bfloat16*>(b.v);
    const std::int64_t heads = s.heads_total(), rows = heads * s.N;
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((rows + 7) / 8, 8192));
    if (s.d == 64) {
      amax_kernel<64>
          <<<dim3(static_cast<unsigned>(heads), 3), 256, 0, stream>>>(q, k, v, s.N, w.amax);
      quantise_qk_kernel<64>
          <<<dim3(blocks, 2), 256, 0, stream>>>(q, k, w.q8, w.k8, w.amax, rows, s.N);
    } else {
      amax_kernel<128>
          <<<dim3(static_cast<unsigned>(heads), 3), 256, 0, stream>>>(q, k, v, s.N, w.amax);
      quantise_qk_kernel<128>
          <<<dim3(blocks, 2), 256, 0, stream>>>(q, k, w.q8, w.k8, w.amax, rows, s.N);
    }
    const dim3 vt_grid(static_cast<unsigned>(padded(s.N) / 64), static_cast<unsigned>(heads));
    if (s.d == 64) {
      quantise_vt_kernel<64>
          <<<vt_grid, 256, 0, stream>>>(v, w.vt8, w.amax + 2 * heads, s.N, padded(s.N));
    } else {
      quantise_vt_kernel<128>
          <<<vt_grid, 256, 0, stream>>>(v, w.vt8, w.amax + 2 * heads, s.N, padded(s.N));
    }
    if (auto e = cudaGetLastError(); e != cudaSuccess)
      return std::string("fp8 quantise: ") + cudaGetErrorString(e);
    return "";
  }

  bool prequantized_;
  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fp8_tile_options(int d) {
  return Fp8Tiles::options(d);
}

std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions& o) {
  return std::make_unique<Fp8Launcher>(o.is(kOptionPrequantized, true), o.fault);
}

}  // namespace fa
