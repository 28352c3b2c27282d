// fa1: FlashAttention-1 forward, the loop order of Algorithm 1 of the FlashAttention paper.
//
// Schedule
//   grid      B*H thread blocks: one per (batch, head), as FlashAttention-1 parallelised.
//   block     Br/16 warps; warp w takes rows [16w, 16w+16) of whichever query block is current.
//   loop j    OUTER over K/V blocks of Bc rows: K_j, V_j -> shared memory once (cp.async).
//   loop i    INNER over query blocks of Br rows (causal: those with a row at or below block j):
//               Q_i -> shared (cp.async, the next Q block prefetched into a second buffer)
//               O_i, l_i, m_i <- HBM (fp32 state in the variant's workspace; not read at j = 0,
//                                    where they start as 0, 0, -inf)
//               S = Q_i K_j^T (mma.sync), mask, m~ = rowmax S, P~ = exp(S - m~), l~ = rowsum P~
//               m_new = max(m, m~); l_new = e^(m - m_new) l + e^(m~ - m_new) l~
//               O_i = (l e^(m - m_new) O_i + e^(m~ - m_new) P~ V_j) / l_new   (normalised every
//               step) O_i, l_i, m_i -> HBM; at the last K/V block of query block i, O_i goes to the
//               output in the input type instead (the state is not needed any more), and the
//               log-sum-exp m + ln l to the lse output.
//
// HBM traffic (profiler/io_model.cpp, fa1_model): K, V read once; Q_i read once per (j, i) pair;
// the fp32 O/l/m state read and written once per pair (less the first read and the last write);
// O and lse written once. This is the Theta(N^2 d^2 / M) pattern: the state crosses HBM N/Bc times.
#include <string>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fa1/fa1.hpp"

namespace fa {
namespace {

using namespace sm80;

struct Fa1Params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* o_state;  // [B, H, N, D] fp32
  float* l_state;  // [B, H, N]
  float* m_state;  // [B, H, N], log2 domain
  float* lse;      // [B, H, N], natural log
  std::int64_t N;
  float scale_log2;
  FaultInjection fault;  // read only by the FAULTS instantiation (verification tests)
};

template <int D, int BR, int BC>
constexpr int fa1_smem_bytes() {
  return (2 * BR + 2 * BC) * D * 2;  // two Q buffers, K and V tiles
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
__global__ void __launch_bounds__(BR / 16 * 32) fa1_forward_kernel(const Fa1Params p) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kNTiles = BC / 8, kDTiles = D / 8;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // [2][BR][D]
  T* sK = sQ + 2 * BR * D;                 // [BC][D]
  T* sV = sK + BC * D;                     // [BC][D]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const std::int64_t bh = blockIdx.x;
  const std::int64_t N = p.N;
  const std::int64_t head = bh * N * D;
  const T* Qh = static_cast<const T*>(p.q) + head;
  const T* Kh = static_cast<const T*>(p.k) + head;
  const T* Vh = static_cast<const T*>(p.v) + head;
  T* Oh = static_cast<T*>(p.o) + head;
  float* Os = p.o_state + head;
  float* ls = p.l_state + bh * N;
  float* ms = p.m_state + bh * N;
  const int num_kv = static_cast<int>((N + BC - 1) / BC);
  int num_q = static_cast<int>((N + BR - 1) / BR);
  if constexpr (FAULTS) {
    if (p.fault.skip_last_query_block) --num_q;
  }

  for (int j = 0; j < num_kv; ++j) {
    const std::int64_t k0 = static_cast<std::int64_t>(j) * BC;
    load_tile<BC, D, kThreads>(sK, Kh, k0, N);
    load_tile<BC, D, kThreads>(sV, Vh, FAULTS ? faulty_v_row<BC>(p.fault, j, num_kv) : k0, N);
    // Causal: query block i has a row at or below this K/V block iff i*BR + BR - 1 >= k0.
    const int i_start = CAUSAL ? static_cast<int>(k0 / BR) : 0;
    load_tile<BR, D, kThreads>(sQ + (i_start & 1) * BR * D, Qh, std::int64_t{i_start} * BR, N);
    cp_async_commit();

    for (int i = i_start; i < num_q; ++i) {
      const std::int64_t q0 = static_cast<std::int64_t>(i) * BR;
      if (i + 1 < num_q) {
        load_tile<BR, D, kThreads>(sQ + ((i + 1) & 1) * BR * D, Qh, q0 + BR, N);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();

      std::uint32_t qf[D / 16][4];
      load_a_fragments<D>(qf, sQ + (i & 1) * BR * D, warp * 16, lane);
      float s[kNTiles][4];
      warp_qkt<D, BC>(s, qf, sK, lane);

      const std::int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;
      const std::int64_t rows[2] = {row_a, row_b};
      const KeyMask<CAUSAL, BC, FAULTS> mask{
          k0, N, row_a, row_b, p.fault.mask_shift, j == p.fault.drop_kv_block};
      const bool needs_mask =  // written out here: see scale_and_mask
          mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped();
      scale_and_mask(s, p.scale_log2, mask, needs_mask, t);

      // Block statistics m~, l~ and P~ = exp(S - m~) (online_softmax.cuh's pieces, block-local).
      float m_blk[2], l_blk[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_blk[r] = row_max(s, r, -INFINITY);
        // exp_base: a row with no key in this block subtracts 0.
        l_blk[r] = quad_sum(exp2_row(s, r, exp_base(m_blk[r])));
      }

      float pv[kDTiles][4];
#pragma unroll
      for (int d = 0; d < kDTiles; ++d) pv[d][0] = pv[d][1] = pv[d][2] = pv[d][3] = 0.0f;
      warp_pv<D, BC>(pv, s, sV, lane);

      // Merge with the state in HBM.
      const int last_kv =
          CAUSAL ? min(num_kv - 1, static_cast<int>((min(N, q0 + BR) - 1) / BC)) : num_kv - 1;
      const bool first = (j == 0), last = (j == last_kv);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const std::int64_t row = rows[r];
        if (row >= N) continue;
        const float m_old = first ? -INFINITY : ms[row];
        const float l_old = first ? 0.0f : ls[row];
        const float m_new = fmaxf(m_old, m_blk[r]);  // finite: key 0 is in block j = 0
        // (-inf only when a fault drops block 0: subtract 0 so exp2 gives 0, not NaN)
        const float m_sub = m_new == -INFINITY ? 0.0f : m_new;
        const float a = fast_exp2(m_old - m_sub), b = fast_exp2(m_blk[r] - m_sub);
        const float l_new = a * l_old + b * l_blk[r];
        const float keep = a * l_old / l_new, add = b / l_new;
#pragma unroll
        for (int d = 0; d < kDTiles; ++d) {
          const int col = d * 8 + 2 * t;
          float2 o_old = first ? make_float2(0.0f, 0.0f)
                               : *reinterpret_cast<const float2*>(Os + row * D + col);
          const float x0 = keep * o_old.x + add * pv[d][2 * r];
          const float x1 = keep * o_old.y + add * pv[d][2 * r + 1];
          if (last) {
            *reinterpret_cast<std::uint32_t*>(Oh + row * D + col) = pack2<T>(x0, x1);
          } else {
            *reinterpret_cast<float2*>(Os + row * D + col) = make_float2(x0, x1);
          }
        }
        if (t == 0) {
          if (last) {
            constexpr float kLn2 = 0.6931471805599453f;
            p.lse[bh * N + row] = (m_new + log2f(l_new)) * kLn2;
          } else {
            ms[row] = m_new;
            ls[row] = l_new;
          }
        }
      }
      // The next prefetch overwrites the Q buffer read here; the next K/V block overwrites sK, sV.
      __syncthreads();
    }
  }
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS = false>
std::string launch_fa1(const Shape& s, const DeviceBuffers& b, cudaStream_t stream,
                       const FaultInjection& fault = {}) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kSmem = fa1_smem_bytes<D, BR, BC>();
  auto kernel = fa1_forward_kernel<D, BR, BC, CAUSAL, T, FAULTS>;
  static PerDevice<cudaError_t> attr;  // per device: the attribute belongs to its context
  const cudaError_t attr_status = attr.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr_status != cudaSuccess) {
    return std::string("fa1: cudaFuncSetAttribute: ") + cudaGetErrorString(attr_status);
  }
  if (s.heads_total() > 0x7fffffff) return "fa1: too many heads for one grid";
  float* state = static_cast<float*>(b.workspace);
  const std::int64_t rows = s.heads_total() * s.N;
  Fa1Params p{b.q,
              b.k,
              b.v,
              b.o,
              state,
              state + rows * D,
              state + rows * D + rows,
              b.lse,
              s.N,
              softmax_scale_log2(s, fault),
              fault};
  kernel<<<static_cast<unsigned>(s.heads_total()), kThreads, kSmem, stream>>>(p);
  return launch_status("fa1");
}

// The compiled tile shapes; the first of each head dim is the default. FA1's state traffic falls
// with Bc (the state crosses HBM N/Bc times) and does not depend on Br: the Bc=128 shapes are the
// knob that shows it.
using Fa1Tiles =
    TileList<TileShape<64, 128, 64>, TileShape<64, 64, 64>, TileShape<64, 128, 128>,
             TileShape<128, 128, 64>, TileShape<128, 64, 64>, TileShape<128, 128, 128>>;
// Faults are compiled into the default tiles only (the tests' shapes).
using Fa1FaultTiles = TileList<TileShape<64, 128, 64>, TileShape<128, 128, 64>>;

class Fa1Launcher final : public Launcher {
 public:
  explicit Fa1Launcher(const FaultInjection& fault) : fault_(fault) {}
  // fp32 O state plus l and m per row.
  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return static_cast<std::size_t>(s.heads_total() * s.N) * (s.d + 2) * sizeof(float);
  }

  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fa1"); !e.empty()) return e;
    if (b.workspace_bytes < workspace_bytes(s, t)) return "fa1: workspace too small";
    if (fault_.any()) {
      if (!Fa1FaultTiles::contains(s.d, t))
        return "fa1: fault injection is compiled for the default tiles only";
      return launch<true>(Fa1FaultTiles{}, s, t, b, stream);
    }
    return launch<false>(Fa1Tiles{}, s, t, b, stream);
  }

 private:
  // Tile list -> (tiles, causal, dtype) instantiation -> launch.
  template <bool FAULTS, typename List>
  std::string launch(List, const Shape& s, const Tiles& t, const DeviceBuffers& b,
                     cudaStream_t stream) const {
    return dispatch_tiles<List>("fa1", s, t, [&](auto shape, auto causal, auto type) {
      using S = decltype(shape);
      return launch_fa1<S::D, S::BR, S::BC, decltype(causal)::value, typename decltype(type)::type,
                        FAULTS>(s, b, stream, fault_);
    });
  }

  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fa1_tile_options(int d) {
  return Fa1Tiles::options(d);
}

std::unique_ptr<Launcher> make_fa1_launcher(const LaunchOptions& o) {
  return std::make_unique<Fa1Launcher>(o.fault);
}

}  // namespace fa
