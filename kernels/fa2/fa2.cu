// fa2: FlashAttention-2 forward, one fused kernel.
//
// Schedule
//   grid      (ceil(N/Br) query blocks, B*H); causal launches the longest query blocks first.
//   block     Br/16 warps; warp w owns query rows [16w, 16w+16) of the block for the whole run,
//             so softmax statistics (m, l) never leave registers (FA2's "Q outer" split).
//   prologue  Q tile -> shared (cp.async) -> registers as mma A fragments (read once from HBM).
//   loop j    over K/V blocks of Bc rows (causal: only up to the diagonal):
//               K_j+1, V_j+1 prefetched into the other shared-memory buffer (cp.async);
//               S = Q K_j^T            mma.sync m16n8k16, fp32 accumulators in registers
//               mask (N tail, causal) only on blocks that straddle the edge or the diagonal
//               m_new = max(m, rowmax S); P = exp2(S*scale*log2e - m_new); O *= exp2(m - m_new)
//               l = l*exp2(m - m_new) + rowsum P (kept per thread, reduced once at the end)
//               O += P V_j             P re-used from the S accumulators as A fragments (bf16/fp16)
//   epilogue  O /= l (the deferred rescale), O and lse = ln(sum exp) written once.
//
// HBM traffic (profiler/io_model.cpp): Q read once; K and V read once per query block
// (ceil(N/Br) times; causal: the blocks up to the diagonal); O and lse written once.
// Shared memory layout: rows of d elements in 16-byte chunks, chunk c of row r stored at
// c ^ (r % 8), so the 8 row addresses of every ldmatrix phase hit 8 different bank groups.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/fa2/fa2.hpp"

namespace fa {
namespace {

// Tile shapes, one per head dim. Br = 16 * warps.
template <int D>
struct Fa2Traits;
template <>
struct Fa2Traits<64> {
  static constexpr int kBlockQ = 128, kBlockKV = 64;
};
template <>
struct Fa2Traits<128> {
  static constexpr int kBlockQ = 128, kBlockKV = 64;
};

struct Fa2Params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  std::int64_t N;
  float scale_log2;  // softmax scale * log2(e): exponentials are taken as exp2
  int num_q_blocks;
};

__device__ inline std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  // src-size 0 zero-fills the 16 bytes: rows past N become zeros in shared memory.
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_size));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
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
  static_assert(kChunks % THREADS == 0, "tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kChunks / THREADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const bool valid = row0 + r < N;
    const T* src = gmem_head + (valid ? (row0 + r) * D + ch * 8 : 0);
    cp_async_16(smem_u32(smem + swz<D>(r, ch * 8)), src, valid);
  }
}

template <int D, bool CAUSAL, typename T>
__global__ void __launch_bounds__(Fa2Traits<D>::kBlockQ / 16 * 32)
    fa2_forward_kernel(const Fa2Params p) {
  constexpr int kBr = Fa2Traits<D>::kBlockQ, kBc = Fa2Traits<D>::kBlockKV;
  constexpr int kWarps = kBr / 16, kThreads = kWarps * 32;
  constexpr int kKChunks = D / 16;   // k-steps of the S product
  constexpr int kNTiles = kBc / 8;   // 8-column tiles of S
  constexpr int kDTiles = D / 8;     // 8-column tiles of O
  constexpr int kPChunks = kBc / 16; // k-steps of the PV product

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBr * D;     // [2][kBc][D]
  T* sV = sK + 2 * kBc * D; // [2][kBc][D]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates
  // Causal: the last query blocks do the most work; launch them first.
  const int qb = CAUSAL ? p.num_q_blocks - 1 - static_cast<int>(blockIdx.x)
                        : static_cast<int>(blockIdx.x);
  const std::int64_t bh = blockIdx.y;
  const std::int64_t N = p.N;
  const std::int64_t q0 = static_cast<std::int64_t>(qb) * kBr;
  const std::int64_t head_offset = bh * N * D;
  const T* Qh = static_cast<const T*>(p.q) + head_offset;
  const T* Kh = static_cast<const T*>(p.k) + head_offset;
  const T* Vh = static_cast<const T*>(p.v) + head_offset;

  const int total_kv = static_cast<int>((N + kBc - 1) / kBc);
  int num_kv = total_kv;
  if constexpr (CAUSAL) {
    const std::int64_t last_row = (q0 + kBr < N ? q0 + kBr : N) - 1;
    num_kv = min(total_kv, static_cast<int>(last_row / kBc) + 1);
  }

  load_tile<kBr, D, kThreads>(sQ, Qh, q0, N);
  cp_async_commit();
  load_tile<kBc, D, kThreads>(sK, Kh, 0, N);
  load_tile<kBc, D, kThreads>(sV, Vh, 0, N);
  cp_async_commit();

  // Q fragments for this warp's 16 rows, kept in registers for the whole K/V loop.
  std::uint32_t qf[kKChunks][4];
  cp_async_wait<1>();
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < kKChunks; ++kk) {
    ldmatrix_x4(qf[kk], smem_u32(sQ + swz<D>(warp * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8)));
  }

  float o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows g and g+8, log2 domain
  float l_run[2] = {0.0f, 0.0f};            // this thread's partial row sums
  const std::int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;

  for (int j = 0; j < num_kv; ++j) {
    const int buf = j & 1;
    if (j + 1 < num_kv) {
      load_tile<kBc, D, kThreads>(sK + (buf ^ 1) * kBc * D, Kh, (j + 1) * std::int64_t{kBc}, N);
      load_tile<kBc, D, kThreads>(sV + (buf ^ 1) * kBc * D, Vh, (j + 1) * std::int64_t{kBc}, N);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* sKj = sK + buf * kBc * D;
    const T* sVj = sV + buf * kBc * D;

    // S = Q K^T for this warp's 16 rows x kBc keys.
    float s[kNTiles][4];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKChunks; ++kk) {
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, smem_u32(sKj + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                             kk * 16 + ((lane >> 3) & 1) * 8)));
        mma_16816<T>(s[2 * np], qf[kk], b[0], b[1]);
        mma_16816<T>(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    const std::int64_t k0 = static_cast<std::int64_t>(j) * kBc;
    const bool needs_mask = (k0 + kBc > N) || (CAUSAL && k0 + kBc - 1 > q0);
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * p.scale_log2;
        if (needs_mask) {
          const std::int64_t key = k0 + n * 8 + 2 * t + (e & 1);
          const std::int64_t row = (e < 2) ? row_a : row_b;
          if (key >= N || (CAUSAL && key > row)) x = -INFINITY;
        }
        s[n][e] = x;
      }
    }

    // Online softmax: new row max, rescale factor for what was accumulated so far.
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with every key masked so far keeps m = -inf; subtract 0 so exp2 gives 0, not NaN.
      const float base = (mx == -INFINITY) ? 0.0f : mx;
      alpha[r] = exp2f(m_run[r] - base);
      m_run[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] - base);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - base);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l_run[r] = l_run[r] * alpha[r] + sum;
    }
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    // O += P V: the S accumulators of two adjacent 8-key tiles form one 16x16 A fragment.
#pragma unroll
    for (int kc = 0; kc < kPChunks; ++kc) {
      std::uint32_t a[4];
      a[0] = pack2<T>(s[2 * kc][0], s[2 * kc][1]);
      a[1] = pack2<T>(s[2 * kc][2], s[2 * kc][3]);
      a[2] = pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
      a[3] = pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, smem_u32(sVj + swz<D>(kc * 16 + (lane & 15), dp * 16 + (lane >> 4) * 8)));
        mma_16816<T>(o[2 * dp], a, b[0], b[1]);
        mma_16816<T>(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    // The next iteration's prefetch overwrites the buffer read here.
    __syncthreads();
  }

  // Epilogue: finish the row sums across the 4 threads of each row, apply the deferred 1/l.
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l_run[r] = l;
    inv_l[r] = 1.0f / l;
  }
  T* Oh = static_cast<T*>(p.o) + head_offset;
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) {
    const int col = i * 8 + 2 * t;
    if (row_a < N) {
      *reinterpret_cast<std::uint32_t*>(Oh + row_a * D + col) =
          pack2<T>(o[i][0] * inv_l[0], o[i][1] * inv_l[0]);
    }
    if (row_b < N) {
      *reinterpret_cast<std::uint32_t*>(Oh + row_b * D + col) =
          pack2<T>(o[i][2] * inv_l[1], o[i][3] * inv_l[1]);
    }
  }
  if (t == 0) {
    constexpr float kLn2 = 0.6931471805599453f;
    float* lse_h = p.lse + bh * N;
    if (row_a < N) lse_h[row_a] = (m_run[0] + log2f(l_run[0])) * kLn2;
    if (row_b < N) lse_h[row_b] = (m_run[1] + log2f(l_run[1])) * kLn2;
  }
}

template <int D, bool CAUSAL, typename T>
std::string launch_fa2(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
  using Tr = Fa2Traits<D>;
  constexpr int kThreads = Tr::kBlockQ / 16 * 32;
  constexpr int kSmem = (Tr::kBlockQ + 4 * Tr::kBlockKV) * D * static_cast<int>(sizeof(T));
  auto kernel = fa2_forward_kernel<D, CAUSAL, T>;
  static const cudaError_t attr_status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr_status != cudaSuccess) {
    return std::string("fa2: cudaFuncSetAttribute: ") + cudaGetErrorString(attr_status);
  }
  const std::int64_t q_blocks = (s.N + Tr::kBlockQ - 1) / Tr::kBlockQ;
  if (q_blocks > 0x7fffffff || s.heads_total() > 65535) {
    return "fa2: grid too large (B*H must be <= 65535)";
  }
  Fa2Params p{b.q, b.k, b.v, b.o, b.lse, s.N,
              static_cast<float>(s.scale() * 1.4426950408889634), static_cast<int>(q_blocks)};
  const dim3 grid(static_cast<unsigned>(q_blocks), static_cast<unsigned>(s.heads_total()));
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  if (auto e = cudaGetLastError(); e != cudaSuccess) {
    return std::string("fa2 launch: ") + cudaGetErrorString(e);
  }
  return "";
}

template <int D>
std::string dispatch_causal_dtype(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
  if (s.dtype == DType::bf16) {
    return s.causal ? launch_fa2<D, true, __nv_bfloat16>(s, b, stream)
                    : launch_fa2<D, false, __nv_bfloat16>(s, b, stream);
  }
  return s.causal ? launch_fa2<D, true, __half>(s, b, stream)
                  : launch_fa2<D, false, __half>(s, b, stream);
}

class Fa2Launcher final : public Launcher {
 public:
  std::string run(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) override {
    switch (s.d) {
      case 64:
        return dispatch_causal_dtype<64>(s, b, stream);
      case 128:
        return dispatch_causal_dtype<128>(s, b, stream);
      default:
        return "fa2: unsupported head dim " + std::to_string(s.d) + " (accepted: 64, 128)";
    }
  }
};

}  // namespace

Tiles fa2_tiles(int d) {
  switch (d) {
    case 64:
      return {Fa2Traits<64>::kBlockQ, Fa2Traits<64>::kBlockKV};
    case 128:
      return {Fa2Traits<128>::kBlockQ, Fa2Traits<128>::kBlockKV};
    default:
      return {};
  }
}

std::unique_ptr<Launcher> make_fa2_launcher() { return std::make_unique<Fa2Launcher>(); }

}  // namespace fa
