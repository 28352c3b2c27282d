// fp8-sm89: FP8 (E4M3) attention forward on the FP8 tensor cores through mma.sync m16n8k32
// (sm_89 and later: the portable FP8 path; on sm_90 the variant fp8 runs the wgmma kernel,
// kernels/fp8/fp8_sm90_kernel.cuh), FA2 loop order. Inputs bf16; output bf16; log-sum-exp fp32.
//
// Stages (all part of the variant and timed with it, unless --fp8-prequantized)
//   1 quantise  kernels/fp8/fp8_quant.cu: Q8 = e4m3(Q H / descale_Q), K8 likewise (H: a fixed
//               random orthogonal rotation, "incoherent processing"), V8 = e4m3(V / descale_V)
//               written TRANSPOSED as [d][Npad] with permuted keys (fp8_layout.hpp), because the
//               B operand of the PV product needs consecutive keys per d and ldmatrix has no
//               8-bit transpose; descales per block of rows or per head (--fp8-scale).
//   2 attention grid (ceil(N/Br), B*H), Br/16 warps of 16 rows, K/V blocks of Bc keys, cp.async
//               double buffer; S = Q8 K8^T (fp32) * descale_Q * descale_K(j); online softmax in
//               fp32 as fa2; P8 = e4m3(256 * P) with P = exp2(S - m) <= 1, so P8 <= 256 stays
//               inside E4M3's 448 and small probabilities stay out of its subnormals; O += P8 V8
//               (fp32), O kept in units of the current V block's descale; epilogue
//               O * descale_V / 256 / l.
//
// The key permutation (kernels/fp8/fp8_layout.hpp): the S accumulator of an m16n8 tile gives
// thread t keys {2t, 2t+1}, but the fp8 A operand wants keys {4t..4t+3} of a 32-key step. Reading
// the four values a thread holds for keys {2t, 2t+1, 8+2t, 9+2t} as "positions 4t..4t+3" is free
// if V's keys sit in that order, which is how the quantise pass writes V8.
//
// HBM traffic (profiler/io_model.cpp, fp8): the fa2 pattern with 1-byte Q, K, V, plus the
// quantisation pass over Q, K, V (read in 16 bits, written in 8; --fp8-scale head reads twice).
#include <cuda_fp8.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_e4m3.cuh"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fp8/e4m3.cuh"
#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/fp8/fp8_tuning.hpp"

namespace fa {
namespace {

using namespace sm80;
using fp8::e4m3x4;
using fp8::kE4m3Max;
using fp8::kPScale;

// ---- stage 3: attention ----------------------------------------------------------------------

struct Fp8Params {
  const std::uint8_t* q8;
  const std::uint8_t* k8;
  const std::uint8_t* vt8;
  const float* amax_q;  // [B*H][q_blocks]: per 64 rows (fp8_quant.hpp)
  const float* amax_k;  // [B*H][kv_blocks]: per 128 keys
  const float* amax_v;  // [B*H][kv_blocks]
  __nv_bfloat16* o;
  float* lse;
  std::int64_t N, Npad, q_blocks, kv_blocks;
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
  // Descales per scale block: Q's of this warp's 64-row block (clamped: rows past N), K's and V's
  // per K/V block (BC = 128 keys). O is kept in units of the last V block's descale: before
  // P_j V_j it is multiplied by descale_v(j-1) / descale_v(j) (1 with --fp8-scale head).
  const std::int64_t q_scale_block = min((q0 + warp * 16) / fp8::kQScaleRows, p.q_blocks - 1);
  const float q_factor =
      p.amax_q[bh * p.q_blocks + q_scale_block] / kE4m3Max * (1.0f / kE4m3Max) * p.scale_log2;
  const float* amax_k = p.amax_k + bh * p.kv_blocks;
  const float* amax_v = p.amax_v + bh * p.kv_blocks;
  float amax_v_prev = 0.0f;

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
        sm80::mma_e4m3(s[2 * np], qf[kk], b[0], b[1]);
        sm80::mma_e4m3(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    const KeyMask<CAUSAL, BC, FAULTS> mask{
        static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
        j == p.fault.drop_kv_block};
    const bool needs_mask =  // written out here: see scale_and_mask
        mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped();
    scale_and_mask(s, q_factor * amax_k[j], mask, needs_mask, t);
    softmax.update(s, o);  // s becomes P; m, l move on; O rescaled
    const float amax_v_j = amax_v[j];
    if (j > 0 && amax_v_prev != amax_v_j) {
      const float ratio = amax_v_prev / amax_v_j;
#pragma unroll
      for (int i = 0; i < kDTiles; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][e] *= ratio;
      }
    }
    amax_v_prev = amax_v_j;

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
        sm80::mma_e4m3(o[2 * dp], a, b[0], b[1]);
        sm80::mma_e4m3(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();
  }

  float inv[2];
  softmax.finish(amax_v_prev / kE4m3Max / kPScale, inv);
  softmax.store<__nv_bfloat16, D>(p.o + bh * N * D, p.lse + bh * N, o, inv, row_a, row_b, N, t);
}

// ---- launcher ----------------------------------------------------------------------------

template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
std::string launch_attention(const Shape& s, const fp8::Workspace& w, const DeviceBuffers& b,
                             cudaStream_t stream, const FaultInjection& fault) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kSmem = BR * D + 4 * BC * D;
  static_assert(BC == fp8::kKvScaleRows && BR % fp8::kQScaleRows == 0,
                "scale blocks: one per K/V block, whole ones per query block");
  auto kernel = fp8_forward_kernel<D, BR, BC, CAUSAL, FAULTS>;
  static PerDevice<cudaError_t> attr_once;  // per device: the attribute belongs to its context
  const cudaError_t attr = attr_once.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr != cudaSuccess)
    return std::string("fp8-sm89: cudaFuncSetAttribute: ") + cudaGetErrorString(attr);
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) return "";
  if (s.heads_total() > 65535) return "fp8-sm89: grid too large (B*H must be <= 65535)";
  Fp8Params p{w.q8,
              w.k8,
              w.vt8,
              w.amax_q,
              w.amax_k,
              w.amax_v,
              static_cast<__nv_bfloat16*>(b.o),
              b.lse,
              s.N,
              fp8::padded(s.N),
              fp8::q_scale_blocks(s.N),
              fp8::kv_scale_blocks(s.N),
              softmax_scale_log2(s, fault),
              static_cast<int>(q_blocks),
              fault};
  kernel<<<dim3(static_cast<unsigned>(q_blocks), static_cast<unsigned>(s.heads_total())), kThreads,
           kSmem, stream>>>(p);
  return launch_status("fp8-sm89");
}

// The compiled tile shapes, one per head dim (fp8_tuning.hpp). Faults use the same list (FAULTS
// instantiations).
using fp8::tuning::kSm89TileD128;
using fp8::tuning::kSm89TileD64;
using Fp8Tiles = TileList<TileShape<64, kSm89TileD64.block_q, kSm89TileD64.block_kv>,
                          TileShape<128, kSm89TileD128.block_q, kSm89TileD128.block_kv>>;

class Fp8Launcher final : public fp8::QuantisingLauncher {
 public:
  explicit Fp8Launcher(const LaunchOptions& o) : QuantisingLauncher(o), fault_(o.fault) {}

  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fp8"); !e.empty()) return e;
    if (std::string e = quantise_step(s, b, stream); !e.empty()) return e;
    phase_begin("attention (E4M3 tensor cores, mma.sync)");
    std::string e = attention(s, t, b, stream, fault_);
    phase_end();
    return e;
  }

 private:
  static std::string attention(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                               cudaStream_t stream, const FaultInjection& f) {
    const fp8::Workspace w = fp8::carve(s, b.workspace);
    // Faults go to a separate instantiation (FAULTS), so the measured kernels are untouched.
    return Fp8Tiles::dispatch("fp8-sm89", s.d, t, [&](auto shape) {
      using S = decltype(shape);
      return with_causal(s.causal, [&](auto causal) {
        constexpr bool kCausal = decltype(causal)::value;
        return f.any() ? launch_attention<S::D, S::BR, S::BC, kCausal, true>(s, w, b, stream, f)
                       : launch_attention<S::D, S::BR, S::BC, kCausal, false>(s, w, b, stream, f);
      });
    });
  }

  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fp8_sm89_tile_options(int d) {
  return Fp8Tiles::options(d);
}

std::unique_ptr<Launcher> make_fp8_sm89_launcher(const LaunchOptions& o) {
  return std::make_unique<Fp8Launcher>(o);
}

}  // namespace fa
