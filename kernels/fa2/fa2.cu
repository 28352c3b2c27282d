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
// Tiles (Br x Bc) are a template parameter; fa2_tile_options() lists the compiled ones.
#include <algorithm>
#include <string>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fa2/fa2.hpp"

namespace fa {
namespace {

using namespace sm80;

struct Fa2Params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  std::int64_t N;
  float scale_log2;  // softmax scale * log2(e): exponentials are taken as exp2
  int num_q_blocks;
  int heads_fastest;     // 1: blockIdx.x walks heads (heads interleaved), 0: query blocks of a head
                         // together
  FaultInjection fault;  // read only by the FAULTS instantiation (verification tests)
};

template <int D, int BR, int BC>
constexpr int fa2_smem_bytes() {
  return (BR + 4 * BC) * D * 2;  // Q tile + double-buffered K and V tiles, 16-bit elements
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
__global__ void __launch_bounds__(BR / 16 * 32) fa2_forward_kernel(const Fa2Params p) {
  constexpr int kWarps = BR / 16, kThreads = kWarps * 32;
  constexpr int kNTiles = BC / 8;  // 8-column tiles of S
  constexpr int kDTiles = D / 8;   // 8-column tiles of O

  extern __shared__ __align__(128) unsigned char smem_raw[];
#ifdef FA_TEST_FA2_SLOWDOWN  // test builds only (scripts/gate_h200.sh): see the end of the kernel
  const long long test_t0 = clock64();
#endif
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BR * D;      // [2][BC][D]
  T* sV = sK + 2 * BC * D;  // [2][BC][D]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates
  // Causal: the last query blocks do the most work; launch them first.
  // Block order: consecutive thread blocks are the query blocks of one head (they share K and V,
  // so the L2 serves the re-reads), or the same query block of consecutive heads (--fa2-order
  // heads: each head's K/V is touched by blocks launched far apart, and DRAM sees the re-reads).
  const int q_index = static_cast<int>(p.heads_fastest ? blockIdx.y : blockIdx.x);
  const int qb = CAUSAL ? p.num_q_blocks - 1 - q_index : q_index;
  const std::int64_t bh = p.heads_fastest ? blockIdx.x : blockIdx.y;
  const std::int64_t N = p.N;
  const std::int64_t q0 = static_cast<std::int64_t>(qb) * BR;
  const std::int64_t head_offset = bh * N * D;
  const T* Qh = static_cast<const T*>(p.q) + head_offset;
  const T* Kh = static_cast<const T*>(p.k) + head_offset;
  const T* Vh = static_cast<const T*>(p.v) + head_offset;

  const int total_kv = static_cast<int>((N + BC - 1) / BC);
  int num_kv = total_kv;
  if constexpr (CAUSAL) {
    const std::int64_t last_row = (q0 + BR < N ? q0 + BR : N) - 1;
    num_kv = min(total_kv, static_cast<int>(last_row / BC) + 1);
  }

  load_tile<BR, D, kThreads>(sQ, Qh, q0, N);
  cp_async_commit();
  load_tile<BC, D, kThreads>(sK, Kh, 0, N);
  load_tile<BC, D, kThreads>(sV, Vh, FAULTS ? faulty_v_row<BC>(p.fault, 0, total_kv) : 0, N);
  cp_async_commit();

  // Q fragments for this warp's 16 rows, kept in registers for the whole K/V loop.
  std::uint32_t qf[D / 16][4];
  cp_async_wait<1>();
  __syncthreads();
  load_a_fragments<D>(qf, sQ, warp * 16, lane);

  float o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  OnlineSoftmax<> softmax;  // m (log2 domain) and this thread's partial l, rows g and g+8
  const std::int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;

  for (int j = 0; j < num_kv; ++j) {
    const int buf = j & 1;
    if (j + 1 < num_kv) {
      std::int64_t v_row = (j + 1) * std::int64_t{BC};
      if constexpr (FAULTS) v_row = faulty_v_row<BC>(p.fault, j + 1, total_kv);
      load_tile<BC, D, kThreads>(sK + (buf ^ 1) * BC * D, Kh, (j + 1) * std::int64_t{BC}, N);
      load_tile<BC, D, kThreads>(sV + (buf ^ 1) * BC * D, Vh, v_row, N);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    float s[kNTiles][4];
    warp_qkt<D, BC>(s, qf, sK + buf * BC * D, lane);

    const KeyMask<CAUSAL, BC, FAULTS> mask{
        static_cast<std::int64_t>(j) * BC, N, row_a, row_b, p.fault.mask_shift,
        j == p.fault.drop_kv_block};
    const bool needs_mask =  // written out here: see scale_and_mask
        mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped();
    scale_and_mask(s, p.scale_log2, mask, needs_mask, t);
    softmax.update(s, o);  // s becomes P; m, l move on; O rescaled

    warp_pv<D, BC>(o, s, sV + buf * BC * D, lane);
    // The next iteration's prefetch overwrites the buffer read here.
    __syncthreads();
  }

  // Epilogue: finish the row sums across the 4 threads of each row, apply the deferred 1/l.
  float inv_l[2];
  softmax.finish(1.0f, inv_l);
  softmax.store<T, D>(static_cast<T*>(p.o) + head_offset, p.lse + bh * N, o, inv_l, row_a, row_b, N,
                      t);
#ifdef FA_TEST_FA2_SLOWDOWN  // each block holds its SM slot 5% longer: a ~5% slower kernel
  if (threadIdx.x == 0) {
    const long long until = clock64() + (clock64() - test_t0) / 20;
    while (clock64() < until) {
    }
  }
#endif
}

template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS = false>
std::string launch_fa2(const Shape& s, const DeviceBuffers& b, cudaStream_t stream,
                       bool heads_fastest, const FaultInjection& fault = {}) {
  constexpr int kThreads = BR / 16 * 32;
  constexpr int kSmem = fa2_smem_bytes<D, BR, BC>();
  auto kernel = fa2_forward_kernel<D, BR, BC, CAUSAL, T, FAULTS>;
  static PerDevice<cudaError_t> attr;  // per device: the attribute belongs to its context
  const cudaError_t attr_status = attr.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr_status != cudaSuccess) {
    return std::string("fa2: cudaFuncSetAttribute: ") + cudaGetErrorString(attr_status);
  }
  const std::int64_t q_blocks = launched_query_blocks(s.N, BR, fault);
  if (q_blocks == 0) return "";
  const std::int64_t y_extent = heads_fastest ? q_blocks : s.heads_total();
  if (q_blocks > 0x7fffffff || s.heads_total() > 0x7fffffff || y_extent > 65535) {
    return heads_fastest
               ? "fa2: grid too large (ceil(N/Br) must be <= 65535 with --fa2-order heads)"
               : "fa2: grid too large (B*H must be <= 65535)";
  }
  Fa2Params p{b.q,
              b.k,
              b.v,
              b.o,
              b.lse,
              s.N,
              softmax_scale_log2(s, fault),
              static_cast<int>(q_blocks),
              heads_fastest ? 1 : 0,
              fault};
  const dim3 grid =
      heads_fastest ? dim3(static_cast<unsigned>(s.heads_total()), static_cast<unsigned>(q_blocks))
                    : dim3(static_cast<unsigned>(q_blocks), static_cast<unsigned>(s.heads_total()));
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  return launch_status("fa2");
}

// The compiled tile shapes; the first of each head dim is the default (fastest measured).
using Fa2Tiles = TileList<TileShape<64, 128, 64>, TileShape<64, 128, 128>, TileShape<64, 64, 64>,
                          TileShape<128, 128, 64>, TileShape<128, 64, 64>, TileShape<128, 128, 32>>;
// Faults are compiled into the default tiles only (the tests' shapes).
using Fa2FaultTiles = TileList<TileShape<64, 128, 64>, TileShape<128, 128, 64>>;

class Fa2Launcher final : public Launcher {
 public:
  Fa2Launcher(bool heads_fastest, const FaultInjection& fault)
      : heads_fastest_(heads_fastest), fault_(fault) {}
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (fault_.any()) {
      if (!Fa2FaultTiles::contains(s.d, t))
        return "fa2: fault injection is compiled for the default tiles only";
      return launch<true>(Fa2FaultTiles{}, s, t, b, stream);
    }
    return launch<false>(Fa2Tiles{}, s, t, b, stream);
  }
  std::size_t backward_workspace_bytes(const Shape& s, const Tiles&) const override {
    return fa2_backward_workspace_bytes(s);
  }
  std::string run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    const Fa2BwdPhaseHooks hooks{[this](const char* name) { phase_begin(name); },
                                 [this] { phase_end(); }};
    return fa2_run_backward(s, t, b, stream, heads_fastest_, fault_, hooks);
  }

 private:
  // Tile list -> (tiles, causal, dtype) instantiation -> launch.
  template <bool FAULTS, typename List>
  std::string launch(List, const Shape& s, const Tiles& t, const DeviceBuffers& b,
                     cudaStream_t stream) const {
    return dispatch_tiles<List>("fa2", s, t, [&](auto shape, auto causal, auto type) {
      using S = decltype(shape);
      return launch_fa2<S::D, S::BR, S::BC, decltype(causal)::value, typename decltype(type)::type,
                        FAULTS>(s, b, stream, heads_fastest_, fault_);
    });
  }

  bool heads_fastest_;
  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fa2_tile_options(int d) {
  std::vector<Tiles> out = Fa2Tiles::options(d);
#ifdef FA_TEST_FA2_SMALL_TILE  // test builds only (scripts/gate_h200.sh): last tile = default
  if (!out.empty()) std::rotate(out.begin(), out.end() - 1, out.end());
#endif
  return out;
}

std::unique_ptr<Launcher> make_fa2_launcher(const LaunchOptions& o) {
  return std::make_unique<Fa2Launcher>(o.is(kOptionBlockOrder, std::string("heads")), o.fault);
}

}  // namespace fa
