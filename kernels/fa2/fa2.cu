// fa2: FlashAttention-2 forward, one fused kernel.
//
// Schedule
//   grid      (ceil(N/Br) query blocks, B*H); causal launches the longest query blocks first.
//   block     Br/WR warps; warp w owns query rows [WR*w, WR*w + WR) of the block for the whole run
//             (WR = 16: one m16 tile; WR = 32: two, FlashAttention-2's layout), so softmax
//             statistics (m, l) never leave registers (FA2's "Q outer" split).
//   prologue  Q tile -> shared (cp.async) -> registers as mma A fragments (read once from HBM);
//             tiles whose registers cannot also hold Q re-read its fragments from shared memory
//             per k-step.
//   loop j    over K/V blocks of Bc rows (causal: only up to the diagonal):
//               K_j+1, V_j+1 prefetched into the other shared-memory buffer (cp.async);
//               S = Q K_j^T            mma.sync m16n8k16, fp32 accumulators in registers; with
//                                      WR = 32 each K fragment (ldmatrix) feeds both m16 tiles
//               mask (N tail, causal) only on blocks (WR = 32: m16 tiles) that straddle the edge
//               or the diagonal
//               m_new = max(m, rowmax S); P = exp2(S*scale*log2e - m_new); O *= exp2(m - m_new)
//               (WR = 32: the scale folded into one FFMA per score, the max taken on raw scores,
//               both m16 tiles' statistics in one step: update_scaled_tiles)
//               l = l*exp2(m - m_new) + rowsum P (kept per thread, reduced once at the end)
//               O += P V_j             P re-used from the S accumulators as A fragments
//                                      (bf16/fp16); with WR = 32 each V fragment
//                                      (ldmatrix.trans) feeds both m16 tiles
//   epilogue  O /= l (the deferred rescale), O and lse = ln(sum exp) written once.
//
// HBM traffic (profiler/io_model.cpp): Q read once; K and V read once per query block
// (ceil(N/Br) times; causal: the blocks up to the diagonal); O and lse written once.
// Configurations (Br x Bc, WR) are template parameters; kernels/fa2/fa2_tiles.hpp lists the
// compiled ones and holds fa2's tuning constants.
#include <string>

#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fa2/fa2.hpp"
#include "kernels/fa2/fa2_tiles.hpp"

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

// Query rows per warp: WR = 16 (one m16 tile: every K/V fragment re-loaded from shared memory per
// 16 rows) or 32 (two m16 tiles per warp, FlashAttention-2's layout: each K/V fragment feeds both).
// Q stays in registers when its fragments fit beside S, P and O (an estimate of the fp32/packed
// registers per thread: Q, O, S; kFa2QRegisterBudget); otherwise each k-step of Q K^T re-reads Q
// from shared memory, as FlashAttention-2's own kernels do.
template <int D, int BC, int WR>
constexpr bool fa2_q_in_registers() {
  return WR == 16 || (WR / 16) * (D / 4 + D / 2 + BC / 2) <= kFa2QRegisterBudget;
}

template <int D, int BR, int BC, int WR, bool CAUSAL, typename T, bool FAULTS>
__global__ void __launch_bounds__(BR / WR * 32) fa2_forward_kernel(const Fa2Params p) {
  static_assert(WR == 16 || WR == 32, "fa2: 16 or 32 query rows per warp");
  static_assert(BR % WR == 0 && BC % 16 == 0 && D % 16 == 0, "fa2: tile shape");
  constexpr int kMT = WR / 16;  // m16 tiles per warp
  constexpr int kWarps = BR / WR, kThreads = kWarps * 32;
  constexpr int kNTiles = BC / 8;  // 8-column tiles of S
  constexpr int kDTiles = D / 8;   // 8-column tiles of O
  constexpr bool kQRegs = fa2_q_in_registers<D, BC, WR>();

  extern __shared__ __align__(128) unsigned char smem_raw[];
  if constexpr (FAULTS) note_block_start(smem_raw + fa2_smem_bytes<D, BR, BC>());  // slowdown
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

  // Q fragments for this warp's rows, kept in registers for the whole K/V loop (when they fit).
  std::uint32_t qf[kQRegs ? kMT : 1][kQRegs ? D / 16 : 1][4];
  cp_async_wait<1>();
  __syncthreads();
  if constexpr (kQRegs) {
#pragma unroll
    for (int m = 0; m < kMT; ++m) load_a_fragments<D>(qf[m], sQ, warp * WR + m * 16, lane);
  }

  float o[kMT][kDTiles][4];
#pragma unroll
  for (int m = 0; m < kMT; ++m) {
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) o[m][i][0] = o[m][i][1] = o[m][i][2] = o[m][i][3] = 0.0f;
  }
  // m (log2 domain) and this thread's partial l, rows g and g+8 of each m16 tile.
  OnlineSoftmax<> softmax[kMT];
  const std::int64_t row0 = q0 + warp * WR + g;  // row_a of m16 tile m: row0 + 16m; row_b: +8

  for (int j = 0; j < num_kv; ++j) {
    const int buf = j & 1;
    if (j + 1 < num_kv) {
      const std::int64_t k_row = (j + 1) * std::int64_t{BC};
      if (!FAULTS && k_row + BC <= N) {  // every block but a ragged last one
        load_tile_inside<BC, D, kThreads>(sK + (buf ^ 1) * BC * D, Kh, k_row);
        load_tile_inside<BC, D, kThreads>(sV + (buf ^ 1) * BC * D, Vh, k_row);
      } else {
        std::int64_t v_row = k_row;
        if constexpr (FAULTS) v_row = faulty_v_row<BC>(p.fault, j + 1, total_kv);
        load_tile<BC, D, kThreads>(sK + (buf ^ 1) * BC * D, Kh, k_row, N);
        load_tile<BC, D, kThreads>(sV + (buf ^ 1) * BC * D, Vh, v_row, N);
      }
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    float s[kMT][kNTiles][4];
    if constexpr (kMT == 1) {
      warp_qkt<D, BC>(s[0], qf[0], sK + buf * BC * D, lane);
    } else if constexpr (kQRegs) {
      warp_qkt_rows<kMT, D, BC>(s, qf, sK + buf * BC * D, lane);
    } else {
      warp_qkt_rows_smem_q<kMT, D, BC>(s, sQ, warp * WR, sK + buf * BC * D, lane);
    }

#pragma unroll
    for (int m = 0; m < kMT; ++m) {
      const std::int64_t row_a = row0 + m * 16;
      const KeyMask<CAUSAL, BC, FAULTS> mask{
          static_cast<std::int64_t>(j) * BC, N, row_a, row_a + 8, p.fault.mask_shift,
          j == p.fault.drop_kv_block};
      if constexpr (kMT == 1) {
        const bool needs_mask =  // written out here: see scale_and_mask
            mask.k0 + BC > N || (CAUSAL && mask.k0 + BC - 1 > q0 + mask.shift()) || mask.dropped();
        scale_and_mask(s[m], p.scale_log2, mask, needs_mask, t);
        softmax[m].update(s[m], o[m]);  // s becomes P; m, l move on; O rescaled
      } else {
        // Per m16 tile: a tile wholly below the diagonal skips the mask. The scale is folded
        // into the exponent (one FFMA per score), the mask works on the raw scores.
        const std::int64_t tile_row0 = q0 + warp * WR + m * 16;
        const bool needs_mask = mask.k0 + BC > N ||
                                (CAUSAL && mask.k0 + BC - 1 > tile_row0 + mask.shift()) ||
                                mask.dropped();
        if (needs_mask) mask_keys(s[m], mask, t);
      }
    }
    // Both m16 tiles' statistics in one step: their shuffles in flight together.
    if constexpr (kMT > 1) update_scaled_tiles(softmax, s, o, p.scale_log2);

    if constexpr (kMT == 1) {
      warp_pv<D, BC>(o[0], s[0], sV + buf * BC * D, lane);
    } else {
      std::uint32_t pk[kMT][BC / 16][4];
      pack_p_rows<kMT, BC, T>(pk, s);
      warp_pv_rows<kMT, D, BC, T>(o, pk, sV + buf * BC * D, lane);
    }
    // The next iteration's prefetch overwrites the buffer read here.
    __syncthreads();
  }

  // Epilogue: finish the row sums across the 4 threads of each row, apply the deferred 1/l.
#pragma unroll
  for (int m = 0; m < kMT; ++m) {
    float inv_l[2];
    softmax[m].finish(1.0f, inv_l);
    softmax[m].template store<T, D>(static_cast<T*>(p.o) + head_offset, p.lse + bh * N, o[m], inv_l,
                                    row0 + m * 16, row0 + m * 16 + 8, N, t);
  }
  if constexpr (FAULTS)
    hold_sm_slot(p.fault.slowdown_percent, smem_raw + fa2_smem_bytes<D, BR, BC>());
}

template <int D, int BR, int BC, int WR, bool CAUSAL, typename T, bool FAULTS = false>
std::string launch_fa2(const Shape& s, const DeviceBuffers& b, cudaStream_t stream,
                       bool heads_fastest, const FaultInjection& fault = {}) {
  constexpr int kThreads = BR / WR * 32;
  constexpr int kSmem = fa2_smem_bytes<D, BR, BC>() + (FAULTS ? kFaultSmemBytes : 0);
  auto kernel = fa2_forward_kernel<D, BR, BC, WR, CAUSAL, T, FAULTS>;
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

// Every tile has its FAULTS instantiation: the verification tests run each (Fa2TileFaults).
using Fa2FaultTiles = Fa2Tiles;

class Fa2Launcher final : public Launcher {
 public:
  Fa2Launcher(bool heads_fastest, const FaultInjection& fault)
      : heads_fastest_(heads_fastest), fault_(fault) {}
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fa2"); !e.empty()) return e;
    if (fault_.any()) {
      if (!Fa2FaultTiles::contains(s.d, t)) return "fa2: fault injection: no such compiled tile";
      return launch<true>(Fa2FaultTiles{}, s, t, b, stream);
    }
    return launch<false>(Fa2Tiles{}, s, t, b, stream);
  }
  std::size_t backward_workspace_bytes(const Shape& s, const Tiles&) const override {
    return fa2_backward_workspace_bytes(s);
  }
  std::string run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fa2's backward"); !e.empty()) return e;
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
      return launch_fa2<S::D, S::BR, S::BC, S::WR, decltype(causal)::value,
                        typename decltype(type)::type, FAULTS>(s, b, stream, heads_fastest_,
                                                               fault_);
    });
  }

  bool heads_fastest_;
  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fa2_tile_options(int d) {
  return Fa2Tiles::options(d);
}

std::unique_ptr<Launcher> make_fa2_launcher(const LaunchOptions& o) {
  return std::make_unique<Fa2Launcher>(o.is(kOptionBlockOrder, std::string("heads")), o.fault);
}

}  // namespace fa
