// The FP8 variants' quantisation pass: bf16 Q, K, V -> E4M3 Q8, K8 (rotated) and V8 (transposed,
// keys permuted), with their amax per scale block (kernels/fp8/fp8_quant.hpp). With --fp8-scale
// block the inputs are read once (2 bytes per element) and written once (1 byte); with
// --fp8-scale head an amax pass per (batch*head, tensor) runs first and the quantise pass uses
// its result (the inputs are read twice).
//
// The pass (quantise_pipelined_kernel): a persistent grid walks work items (kItemRows rows of one
// tensor of one head) with the next items' inputs in flight through a cp.async ring in shared
// memory. Per item, each warp takes its rows: Q and K rotated on the tensor cores (mma.m16n8k16
// with the +-1 Walsh-Hadamard matrix), V read transposed by ldmatrix.trans; the block reduces the
// amax of each scale block (Q: 64 rows, K and V: 128), scales, rounds to E4M3 and stores: Q8, K8
// row-major with their columns in one fixed permuted order (the same for both, so Q K^T is
// unchanged); V8 through a transposed shared tile to [d][Npad], keys permuted inside each group
// of 16 (fp8_layout.hpp), zeros past N.
// Where the ring does not fit a block's shared memory (sm_89 at d=64: 112 KB against 99 KB), the
// fallback (quantise_kernel) holds a warp's 16 rows in registers, rotates Q and K by butterflies,
// and loads, computes and stores per block of 128 rows, with the natural column order.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <string>

#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/fp8/e4m3.cuh"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/fp8/fp8_tuning.hpp"

namespace fa::fp8 {
namespace {

// ---- incoherent processing -------------------------------------------------------------------

// Q and K rows are multiplied by the same orthogonal matrix H·S (S: fixed random signs, H: the
// normalised Walsh-Hadamard matrix) before quantisation; Q K^T is unchanged because (H S)(H S)^T
// = I. An outlier in one coordinate is spread over all d, so its quantisation error becomes d
// independent errors instead of one error shared by every key's score (the FlashAttention-3
// paper's "incoherent processing"; the signs: fp8_layout.hpp). Measured effect in
// docs/accuracy.md.
// The Walsh-Hadamard butterflies and the 1/sqrt(D) of a row of D elements held by the lanes whose
// index within the row is `sub` (consecutive lanes of one warp), E consecutive elements per lane:
// first the log2(E) stages inside a lane, then the stages across the row's D/E lanes.
template <int D, int E>
__device__ inline void hadamard(float (&x)[E], int sub) {
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
  for (int m = 1; m < D / E; m <<= 1) {  // butterflies across the row's lanes
    // The lane's side of the butterfly as a sign: fma(+1, a, b) = a + b and fma(-1, b, a) = a - b
    // round exactly as the additions, and a stage costs a shuffle and an FFMA per element instead
    // of a shuffle, an FSEL and an FADD.
    const float side = (sub & m) ? -1.0f : 1.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float y = __shfl_xor_sync(0xffffffffu, x[e], m);
      x[e] = fmaf(side, x[e], y);
    }
  }
  const float norm = rsqrtf(static_cast<float>(D));
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] *= norm;
}

// One row of D elements held by a warp, D/32 consecutive elements per lane; rotated in place.
template <int D>
__device__ inline void rotate_row(float (&x)[D / 32], int lane) {
  constexpr int E = D / 32;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (flip_sign(lane * E + e)) x[e] = -x[e];
  }
  hadamard<D>(x, lane);
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

// ---- the fallback pass (where the ring does not fit) ---------------------------------------

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
  // Every lane takes part in the shuffles: a full-mask __shfl_xor_sync called by lane 0 alone
  // waits for the other 31 forever.
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

// ---- the pipelined pass ----------------------------------------------------------------------

// A persistent grid (as many blocks as fit on the SMs) walks the work items (kItemRows rows of one
// tensor of one head; the rows of consecutive items are adjacent) with the inputs of the next
// items already on their way into shared memory (cp.async, a ring of kStages stages) while the
// block rotates, reduces and stores the current one: loading, then computing, then storing left
// the SM with no load in flight most of the time. Warp w's lanes copy its own rows of the ring,
// so a __syncwarp hands them over; a thread's cp.async into a stage follows, in its warp's
// program order, the warp's reads of that stage's previous item. The scale blocks stay those of
// fp8_layout.hpp: a 256-row item records two K/V blocks and four Q blocks.
constexpr int kPipeThreads = tuning::kQuantThreads;
template <int D>
struct Pipe {
  static constexpr int kSub = D / 8;                     // lanes per row
  static constexpr int kPassRows = kPipeThreads / kSub;  // rows per pass: 32 or 16 (256 threads)
  static constexpr int kItemRows = D == 64 ? tuning::kQuantRowsD64 : kKvScaleRows;
  static constexpr int kKvBlocks = kItemRows / kKvScaleRows;  // K, V scale blocks per item
  static constexpr int kQBlocks = kItemRows / kQScaleRows;    // Q scale blocks per item
  static constexpr int kPasses = kItemRows / kPassRows;       // 16-byte chunks per thread and item
  static constexpr int kStages = D == 64 ? tuning::kQuantStagesD64 : tuning::kQuantStagesD128;
  static constexpr int kStageBytes = kItemRows * D * 2;  // an item's bf16
  static constexpr int kTileBytes = kItemRows * D;       // V's E4M3 tile
  static constexpr int kSmemBytes = kStages * kStageBytes + kTileBytes;
  // The block amax's partial maxima: per Q scale block and warp, double-buffered (static).
  static constexpr int kRedBytes = 2 * kQBlocks * (kPipeThreads / 32) * 4;
  // The register cap's target: the blocks per SM that the shared memory allows (sm_90: 227 KB,
  // 1 KB reserved per block), at most tuning's kQuantMostBlocks.
  static constexpr int kSmemFit = 227 * 1024 / (kSmemBytes + 1024 + kRedBytes);
  static constexpr int kMostBlocks =
      D == 64 ? tuning::kQuantMostBlocksD64 : tuning::kQuantMostBlocksD128;
  static constexpr int kMinBlocks =
      kSmemFit < 1 ? 1 : (kSmemFit < kMostBlocks ? kSmemFit : kMostBlocks);
  static_assert(kPipeThreads % kSub == 0 && kQScaleRows % kPassRows == 0 && kStages >= 2,
                "a pass covers whole rows of one 64-row half; the ring has two stages or more");
  static_assert(kItemRows % kKvScaleRows == 0 && kItemRows % kPad == 0,
                "an item covers whole K/V scale blocks and whole blocks of V8's padding");
};
// Items per (tensor, head): ceil(N / kItemRows), from the K/V scale blocks.
template <int D, typename T>
__host__ __device__ inline T item_blocks(T kv_blocks) {
  return (kv_blocks + Pipe<D>::kKvBlocks - 1) / Pipe<D>::kKvBlocks;
}
// Items of the whole pass: Q, K and V of every head (quantise() keeps it below 2^31).
template <int D>
__host__ __device__ inline std::int64_t pass_items(const QuantParams& p) {
  return 3 * p.heads * item_blocks<D>(p.kv_blocks);
}

// a[i * STRIDE] for i < N, by selects (a dynamic index would put `a` in local memory). Called
// inside the condition of the store it feeds: the same selects before it spilled at d=64's
// register cap.
template <int N, int STRIDE, int M>
__device__ inline float pick(const float (&a)[M], int i) {
  float v = a[(N - 1) * STRIDE];
#pragma unroll
  for (int j = N - 2; j >= 0; --j) v = i == j ? a[j * STRIDE] : v;
  return v;
}

// Work item i: kItemRows rows (the item's K/V scale blocks from blk * kKvBlocks) of one tensor
// (0 Q, 1 K, 2 V) of head bh.
struct QuantItem {
  int tensor;
  std::int64_t bh, blk;
};
// In 32 bits (quantise() refuses more items): a 64-bit division is a call of about 70
// instructions, and the d=64 kernel paid four per thread and item (ten CALLs in its SASS).
template <int D>
__device__ inline QuantItem quant_item(std::uint32_t i, const QuantParams& p) {
  const auto blocks = item_blocks<D>(static_cast<std::uint32_t>(p.kv_blocks));
  const auto heads = static_cast<std::uint32_t>(p.heads);
  const std::uint32_t r = i / blocks;
  return QuantItem{static_cast<int>(r / heads), r % heads, i % blocks};
}
template <int D>
__device__ inline const __nv_bfloat16* item_rows(const QuantItem& it, const QuantParams& p) {
  return (it.tensor == 0 ? p.q : (it.tensor == 1 ? p.k : p.v)) + it.bh * p.N * D;
}

// Q's and K's rotation on the tensor cores. Y = (S X) H is a product with the d x d
// Walsh-Hadamard matrix of +-1 (bf16 exact, fp32 accumulation), mma.m16n8k16 per 16 rows, A from
// the ring by ldmatrix with the signs S as sign-bit XORs, B from four registers (Sylvester's H is,
// per 16 x 8 block (kt, nt), sigma(kt, nt) times one of two base blocks: popcount(i & j) splits
// over bits 0-2, bit 3 and bits 4-). That is about D/64 + 0.6 instructions per element instead of
// the butterflies' 11-13. Each thread keeps the columns 8 nt + 2 t, +1 of its rows (the
// accumulator's), and stores them as bytes t D/4 + 2 nt + c: Q8 and K8 hold the rotated rows with
// their columns permuted by one fixed permutation, which Q K^T does not see (any orthogonal map
// applied to both rows). 1/sqrt(d) goes into the scale. The ring's rows have their 16-byte chunks
// XOR-swizzled by the row's low three bits (ldmatrix's 8 rows then hit 8 bank groups).

// The row and 16-byte chunk of the item that thread t copies in pass `pass`: warp w's lanes copy
// its own rows.
struct Chunk {
  int row, sub;
};
template <int D>
__device__ __forceinline__ Chunk chunk_of(int pass, int t) {
  using P = Pipe<D>;
  constexpr int kWarpRows = P::kItemRows / (kPipeThreads / 32), kRowsPerPass = 32 / P::kSub;
  static_assert(
      kWarpRows % 16 == 0 && kWarpRows == kRowsPerPass * P::kPasses && kQScaleRows % kWarpRows == 0,
      "a warp copies whole m16 tiles of one Q scale block");
  return Chunk{(t / 32) * kWarpRows + pass * kRowsPerPass + (t % 32) / P::kSub, (t % 32) % P::kSub};
}
// A chunk's byte offset in a stage: rows of D bf16, the row's 16-byte chunks XOR-swizzled by its
// low three bits.
template <int D>
__device__ __forceinline__ int swizzled_offset(int row, int sub) {
  return row * D * 2 + (sub ^ (row & 7)) * 16;
}
// Producer step: this thread's chunks of item i (if any) into `stage`, as one cp.async group
// (committed even when empty, so every thread counts the same groups). Rows past N arrive as
// zeros (src-size 0).
template <int D>
__device__ __forceinline__ void load_item_async(std::uint32_t stage, std::uint32_t i,
                                                std::uint32_t items, const QuantParams& p, int t) {
  using P = Pipe<D>;
  if (i < items) {
    const QuantItem it = quant_item<D>(i, p);
    const __nv_bfloat16* src = item_rows<D>(it, p);
#pragma unroll
    for (int pass = 0; pass < P::kPasses; ++pass) {
      const Chunk c = chunk_of<D>(pass, t);
      const std::int64_t row = it.blk * P::kItemRows + c.row;
      const bool inside = row < p.N;
      sm80::cp_async_16(stage + swizzled_offset<D>(c.row, c.sub),
                        src + (inside ? row : 0) * D + c.sub * 8, inside);
    }
  }
  sm80::cp_async_commit();
}

// The amax of each of the item's kQ 64-row Q scale blocks over the thread block, from each
// thread's partial maxima m (`red`: this item's half of a double buffer, so a fast warp's next
// item cannot overwrite what a slow warp still reads).
template <int D>
__device__ __forceinline__ void block_amax(float (&m)[Pipe<D>::kQBlocks],
                                           float (&red)[Pipe<D>::kQBlocks][kPipeThreads / 32],
                                           float (&q_amax)[Pipe<D>::kQBlocks], int t) {
  constexpr int kWarps = kPipeThreads / 32, kQ = Pipe<D>::kQBlocks;
  const int warp = t / 32, lane = t % 32;
  // Every lane takes part in the shuffles (see quantise_kernel).
#pragma unroll
  for (int q = 0; q < kQ; ++q) m[q] = warp_max(m[q]);
  if (lane == 0) {
#pragma unroll
    for (int q = 0; q < kQ; ++q) red[q][warp] = m[q];
  }
  __syncthreads();
  // Lane l reads one of the kQ x kWarps partial maxima and the warp reduces them: one shared load
  // and a few shuffles per thread instead of kQ x kWarps shared loads.
  {
    constexpr int kSlots = kQ * kWarps, kLaneSlots = kSlots < 32 ? kSlots : 32;
    static_assert(kSlots % kLaneSlots == 0 && kLaneSlots % kWarps == 0,
                  "each lane's partial maxima lie in whole Q blocks' slots");
    const int slot = lane % kLaneSlots;
    float v[kSlots / kLaneSlots];
#pragma unroll
    for (int r = 0; r < kSlots / kLaneSlots; ++r) {
      const int s = r * kLaneSlots + slot;
      v[r] = red[s / kWarps][s % kWarps];
#pragma unroll
      for (int off = 1; off < kWarps; off <<= 1)
        v[r] = fmaxf(v[r], __shfl_xor_sync(0xffffffffu, v[r], off));
    }
#pragma unroll
    for (int q = 0; q < kQ; ++q)
      q_amax[q] = __shfl_sync(0xffffffffu, v[q * kWarps / kLaneSlots], q * kWarps % kLaneSlots);
  }
}

// The scale of each Q block's rows: Q's own block, K's and V's 128-key block (the two Q blocks
// it covers), or the head's (Scale::head, which every block of the head then records, so the
// attention kernels read one layout). An all-zero block keeps a finite scale. Recorded in the
// workspace; blocks past N (the last item's, with 256 rows) record nothing: their slots belong to
// the next head.
template <int D, bool HEAD_SCALE>
__device__ __forceinline__ void item_amax(const float (&q_amax)[Pipe<D>::kQBlocks],
                                          const QuantItem& it, const QuantParams& p, int t,
                                          float (&amax)[Pipe<D>::kQBlocks]) {
  using P = Pipe<D>;
  constexpr int kQ = P::kQBlocks;
#pragma unroll
  for (int q = 0; q < kQ; ++q) {
    amax[q] = HEAD_SCALE ? p.w.amax_head[it.tensor * p.heads + it.bh]
                         : fmaxf(it.tensor == 0 ? q_amax[q] : fmaxf(q_amax[q & ~1], q_amax[q | 1]),
                                 1e-30f);
  }
  if (it.tensor == 0 && t < kQ) {
    const std::int64_t qb = it.blk * kQ + t;
    if (qb < p.q_blocks) p.w.amax_q[it.bh * p.q_blocks + qb] = pick<kQ, 1>(amax, t);
  } else if (it.tensor > 0 && static_cast<unsigned>(t) < P::kKvBlocks) {
    // (Unsigned: with one block per item that is t == 0, and kb below folds to it.blk.)
    const std::int64_t kb = it.blk * P::kKvBlocks + t;
    if (P::kKvBlocks == 1 || kb < p.kv_blocks)
      (it.tensor == 1 ? p.w.amax_k : p.w.amax_v)[it.bh * p.kv_blocks + kb] =
          pick<P::kKvBlocks, 2>(amax, t);
  }
}

// V's E4M3 tile is written already transposed, [D][kItemRows] bytes in V8's key order, from
// registers that ldmatrix.trans filled with the column's keys in that order (quantise_item), then
// copied out in 16-byte chunks: no byte gather of a row-major tile.
// Byte `pos` of row (column of V) c of the transposed tile: its 16-byte chunks XOR-swizzled by
// the row's low three bits, so a warp's 4-byte stores (8 columns c0 + g, positions 4 tq of one
// 16-key group) hit 32 different banks, and 8 lanes' 16-byte reads of one row 8 bank groups.
template <int D>
__device__ __forceinline__ int vt_tile_offset(int c, int pos) {
  return c * Pipe<D>::kItemRows + (((pos / 16) ^ (c & 7)) * 16) + pos % 16;
}
// The transposed tile to V8 (vt_tile_offset's layout), a 16-byte chunk per thread and step: 8
// lanes write 128 consecutive bytes of one V8 row. The barrier first: every warp's columns are in.
template <int D>
__device__ __forceinline__ void store_vt_tile(const std::uint8_t* tile, const QuantItem& it,
                                              const QuantParams& p, int t) {
  using P = Pipe<D>;
  __syncthreads();
  constexpr int kRowChunks = P::kItemRows / 16, kChunks = D * kRowChunks;
  static_assert(kChunks % kPipeThreads == 0, "every thread copies the same number of chunks");
  const std::int64_t row0 = it.blk * P::kItemRows;
  std::uint8_t* out = p.w.vt8 + it.bh * D * p.Npad + row0;
#pragma unroll
  for (int j = 0; j < kChunks / kPipeThreads; ++j) {
    const int w = j * kPipeThreads + t, c = w / kRowChunks, ch = w % kRowChunks;
    // Keys past Npad (a last 256-row item's second K/V block past N) are the next head's.
    if (P::kKvBlocks > 1 && row0 + ch * 16 >= p.Npad) continue;
    *reinterpret_cast<uint4*>(out + c * p.Npad + ch * 16) =
        *reinterpret_cast<const uint4*>(tile + vt_tile_offset<D>(c, ch * 16));
  }
}

// ---- the MMA rotation ---------------------------------------------------------------------

// Thread constants: the sign bits S of the A fragment's columns (per 16-column step kt: h = 0
// the columns 2t, 2t+1, h = 1 those + 8; bf16 pairs), and the base B block of H.
template <int D>
struct MmaRotation {
  std::uint32_t a_signs[D / 16][2];
  std::uint32_t b_pos, b_neg;  // B block (k 2t, 2t+1; n g) of H_16x8, and its negation
  __device__ explicit MmaRotation(int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kt = 0; kt < D / 16; ++kt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = kt * 16 + h * 8 + 2 * t;
        a_signs[kt][h] = (flip_sign(c) ? 0x8000u : 0u) | (flip_sign(c + 1) ? 0x80000000u : 0u);
      }
    }
    // The base block (fp8_layout.hpp) at k = 2t + i (i = 0, 1), n = g: b0 of every block; b1
    // (k + 8) reads the same base entries.
    const bool neg0 = hadamard_negative(2 * t, g), neg1 = hadamard_negative(2 * t + 1, g);
    b_pos = (neg0 ? 0xBF80u : 0x3F80u) | ((neg1 ? 0xBF80u : 0x3F80u) << 16);
    b_neg = b_pos ^ 0x80008000u;
  }
  // B of block (kt, nt): its rows 0-7 (b0) and 8-15 (b1), each the base block or its negation
  // (hadamard_block_negative). Called with kt, nt of unrolled loops, so the selects fold away.
  __device__ std::uint32_t b0(int kt, int nt) const {
    return hadamard_block_negative(kt, nt, 0) ? b_neg : b_pos;
  }
  __device__ std::uint32_t b1(int kt, int nt) const {
    return hadamard_block_negative(kt, nt, 1) ? b_neg : b_pos;
  }
};

// The size K of the Walsh-Hadamard factor the tensor cores multiply by (tuning::kQuantMmaBlock).
// Sylvester's H_D = H_(D/K) (x) H_K: the MMAs compute Z_b = (S X)_b H_K for each block b of K
// input columns (K/16 steps of D/16 each, not D/16), and log2(D/K) butterfly stages across the
// blocks (in the thread's own accumulators: block b's columns sit in acc[b K/8 ...]) finish
// Y = sum_b H_(D/K)[b][b'] Z_b. Each halving of K halves the MMAs and adds one FADD per
// accumulator.
template <int D>
constexpr int kMmaBlock = tuning::kQuantMmaBlock < D ? tuning::kQuantMmaBlock : D;

// acc[mt][nt] += (S X) H for the warp's m16 tiles of rows from `row0` of the stage: A by
// ldmatrix (lane l: row l % 16, 8-column half l / 16 of each 16-column step), signs by XOR; the
// MMAs by blocks of kMmaBlock columns, then the butterflies across the blocks.
template <int D, int MT>
__device__ __forceinline__ void rotate_tiles_mma(float (&acc)[MT][D / 8][4], std::uint32_t stage,
                                                 int row0, int lane, const MmaRotation<D>& rot) {
  constexpr int K = kMmaBlock<D>, kBlocks = D / K;
  static_assert(K % 16 == 0 && D % K == 0, "whole 16-column steps per block");
#pragma unroll
  for (int kt = 0; kt < D / 16; ++kt) {
    const int b = kt / (K / 16), kt0 = kt % (K / 16);  // block b, its step kt0
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int row = row0 + mt * 16 + lane % 16;
      std::uint32_t a[4];
      sm80::ldmatrix_x4(a, stage + swizzled_offset<D>(row, 2 * kt + lane / 16));
      a[0] ^= rot.a_signs[kt][0];
      a[1] ^= rot.a_signs[kt][0];
      a[2] ^= rot.a_signs[kt][1];
      a[3] ^= rot.a_signs[kt][1];
#pragma unroll
      for (int nt0 = 0; nt0 < K / 8; ++nt0)
        sm80::mma_16816<__nv_bfloat16>(acc[mt][b * (K / 8) + nt0], a, rot.b0(kt0, nt0),
                                       rot.b1(kt0, nt0));
    }
  }
  // Y_b' = sum_b H_(D/K)[b][b'] Z_b: butterflies over the block index, in fp32 as the MMAs'
  // own accumulation. Stage m pairs column tile nt (its block's bit m clear) with nt + m K/8.
#pragma unroll
  for (int m = 1; m < kBlocks; m <<= 1) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        if ((nt / (K / 8)) & m) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float z0 = acc[mt][nt][e], z1 = acc[mt][nt + m * (K / 8)][e];
          acc[mt][nt][e] = z0 + z1;
          acc[mt][nt + m * (K / 8)][e] = z0 - z1;
        }
      }
    }
  }
}

// The amax of the scale block of a warp's rows (all in Q block q_w) from the warp's maximum mw:
// the block reduction (block_amax) and the record of the item's scale blocks (item_amax).
template <int D, bool HEAD_SCALE>
__device__ __forceinline__ float warp_block_amax(float mw, int q_w,
                                                 float (&red)[Pipe<D>::kQBlocks][kPipeThreads / 32],
                                                 const QuantItem& it, const QuantParams& p, int t) {
  constexpr int kQ = Pipe<D>::kQBlocks;
  float m[kQ];  // mw in the warp's Q block's slot (block_amax)
#pragma unroll
  for (int q = 0; q < kQ; ++q) m[q] = q == q_w ? mw : 0.0f;
  float q_amax[kQ], amax[kQ];
  block_amax<D>(m, red, q_amax, t);
  item_amax<D, HEAD_SCALE>(q_amax, it, p, t, amax);
  return pick<kQ, 1>(amax, q_w);
}

// Consumer step: the warp's rows (one Q scale block's share) rotated on the tensor cores (Q, K)
// or read back transposed by ldmatrix.trans (V), the block amax, then Q8/K8 stored with the
// accumulator's column order (t D/4 + 2 nt + c), V8 through `tile` (store_vt_tile).
template <int D, bool HEAD_SCALE>
__device__ __forceinline__ void quantise_item(std::uint32_t stage_u32, const QuantItem& it,
                                              const QuantParams& p,
                                              float (&red)[Pipe<D>::kQBlocks][kPipeThreads / 32],
                                              std::uint8_t* tile, int t,
                                              const MmaRotation<D>& rot) {
  using P = Pipe<D>;
  constexpr int kWarpRows = P::kItemRows / (kPipeThreads / 32);
  constexpr int MT = kWarpRows / 16, DT = D / 8;
  const int warp = t / 32, lane = t % 32, g = lane / 4, tq = lane % 4;
  const int row0 = warp * kWarpRows, q_w = row0 / kQScaleRows;
  const std::int64_t item_row0 = it.blk * P::kItemRows;
  float mw = 0.0f;
  if (it.tensor < 2) {
    float acc[MT][DT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < DT; ++nt)
        acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
    }
    rotate_tiles_mma<D, MT>(acc, stage_u32, row0, lane, rot);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < DT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) mw = fmaxf(mw, fabsf(acc[mt][nt][e]));
      }
    }
    // mw is of the unnormalised rows: the block amax (of the rotated rows) is mw / sqrt(D).
    mw *= rsqrtf(static_cast<float>(D));
    const float sc = kE4m3Max * rsqrtf(static_cast<float>(D)) /
                     warp_block_amax<D, HEAD_SCALE>(mw, q_w, red, it, p, t);
    std::uint8_t* dst = (it.tensor == 0 ? p.w.q8 : p.w.k8) + it.bh * p.N * D;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const std::int64_t row = item_row0 + row0 + mt * 16 + g + 8 * half;
        std::uint32_t word[D / 16];
#pragma unroll
        for (int j = 0; j < D / 16; ++j)
          word[j] =
              e4m3x4(acc[mt][2 * j][2 * half] * sc, acc[mt][2 * j][2 * half + 1] * sc,
                     acc[mt][2 * j + 1][2 * half] * sc, acc[mt][2 * j + 1][2 * half + 1] * sc);
        if (row < p.N) {
          // Bytes rotated_column_position(D, 8 nt + 2 tq + c) = tq D/4 + 2 nt + c.
          auto* out = reinterpret_cast<uint4*>(dst + row * D + rotated_row_offset(D, tq));
#pragma unroll
          for (int j = 0; j < D / 64; ++j)
            out[j] = make_uint4(word[4 * j], word[4 * j + 1], word[4 * j + 2], word[4 * j + 3]);
        }
      }
    }
    return;
  }
  // V transposed on the way out of the ring (ldmatrix.trans): register r of step (kg, j) holds
  // column 16 j + 8 (r / 2) + g, keys 2 tq, 2 tq + 1 (+ 8 for odd r) of the warp's 16-key group
  // kg, so registers 2h and 2h + 1 are the column's positions 4 tq .. 4 tq + 3 in V8's key
  // order (fp8_layout.hpp: the P fragment's order) as they come.
  // The amax on the bf16 pairs as they are (exact; the registers stay packed until the scale).
  constexpr int KG = kWarpRows / 16;
  std::uint32_t v[KG][D / 16][4];
  __nv_bfloat162 mv = __float2bfloat162_rn(0.0f);
#pragma unroll
  for (int kg = 0; kg < KG; ++kg) {
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      sm80::ldmatrix_x4_trans(
          v[kg][j], stage_u32 + swizzled_offset<D>(row0 + kg * 16 + lane % 16, 2 * j + lane / 16));
#pragma unroll
      for (int r = 0; r < 4; ++r)
        mv = __hmax2(mv, __habs2(*reinterpret_cast<const __nv_bfloat162*>(&v[kg][j][r])));
    }
  }
  mw = fmaxf(__low2float(mv), __high2float(mv));
  const float sc = kE4m3Max / warp_block_amax<D, HEAD_SCALE>(mw, q_w, red, it, p, t);
#pragma unroll
  for (int kg = 0; kg < KG; ++kg) {
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 a =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v[kg][j][2 * h]));
        const float2 b =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v[kg][j][2 * h + 1]));
        *reinterpret_cast<std::uint32_t*>(
            tile + vt_tile_offset<D>(16 * j + 8 * h + g, row0 + 16 * kg + 4 * tq)) =
            e4m3x4(a.x * sc, a.y * sc, b.x * sc, b.y * sc);
      }
    }
  }
  store_vt_tile<D>(tile, it, p, t);
}

// The persistent loop: the ring's first kStages - 1 items in flight, then per item: issue the
// load kStages - 1 items ahead, wait for this item's group, read, quantise.
template <int D, bool HEAD_SCALE>
__global__ void __launch_bounds__(kPipeThreads, Pipe<D>::kMinBlocks)
    quantise_pipelined_kernel(const QuantParams p) {
  using P = Pipe<D>;
  extern __shared__ __align__(16) std::uint8_t smem[];
  __shared__ float red[2][P::kQBlocks][kPipeThreads / 32];
  const int t = threadIdx.x;
  const auto items = static_cast<std::uint32_t>(pass_items<D>(p));
  const std::uint32_t step = gridDim.x;
  const std::uint32_t ring = sm80::smem_u32(smem);
  std::uint8_t* tile = smem + P::kStages * P::kStageBytes;
#pragma unroll
  for (int s = 0; s < P::kStages - 1; ++s)
    load_item_async<D>(ring + s * P::kStageBytes, blockIdx.x + s * step, items, p, t);
  const MmaRotation<D> rot(t % 32);
  int k = 0;
  for (std::uint32_t i = blockIdx.x; i < items; i += step, ++k) {
    // The lanes of the warp read each other's chunks (ldmatrix): the warp has finished the
    // previous item's reads of the stage this load overwrites.
    __syncwarp();
    load_item_async<D>(ring + ((k + P::kStages - 1) % P::kStages) * P::kStageBytes,
                       i + (P::kStages - 1) * step, items, p, t);
    sm80::cp_async_wait<P::kStages - 1>();
    // No __syncthreads follows the wait here (each warp reads its own rows): keep the compiler
    // from moving the shared-memory reads above it.
    asm volatile("" ::: "memory");
    const int st = k % P::kStages;
    __syncwarp();  // the warp's rows, copied by its 32 lanes, are all in
    quantise_item<D, HEAD_SCALE>(ring + st * P::kStageBytes, quant_item<D>(i, p), p, red[k & 1],
                                 tile, t, rot);
  }
  sm80::cp_async_wait<0>();  // no copy outlives the block
}

// Blocks of the persistent grid: as many as fit on the device's SMs (once per device); 0 where
// the kernel cannot run (its shared memory is more than the device gives a block: a large ring
// on sm_80/sm_89, whose fp8-sm89 variant shares this pass), and the caller takes the fallback.
template <int D, bool HEAD_SCALE>
int pipelined_grid() {
  static PerDevice<int> blocks;
  return blocks.get([] {
    const auto kernel = quantise_pipelined_kernel<D, HEAD_SCALE>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Pipe<D>::kSmemBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPipeThreads,
                                                      Pipe<D>::kSmemBytes) != cudaSuccess) {
      (void)cudaGetLastError();  // the refusal is not the next launch's error
      return 0;
    }
    return sms * per_sm;
  });
}

// The pipelined pass where it fits, else the fallback.
template <int D, bool HEAD_SCALE>
void launch_quantise(const QuantParams& p, cudaStream_t stream) {
  const std::int64_t items = pass_items<D>(p);
  if (const int fit = pipelined_grid<D, HEAD_SCALE>(); fit > 0) {
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(items, fit));
    quantise_pipelined_kernel<D, HEAD_SCALE>
        <<<blocks, kPipeThreads, Pipe<D>::kSmemBytes, stream>>>(p);
    return;
  }
  const dim3 grid(static_cast<unsigned>(p.kv_blocks), static_cast<unsigned>(p.heads), 3);
  quantise_kernel<D, HEAD_SCALE><<<grid, 256, 0, stream>>>(p);
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
  if (scale == Scale::head) {
    amax_head_kernel<D><<<dim3(static_cast<unsigned>(p.heads), 3), 256, 0, stream>>>(
        p.q, p.k, p.v, s.N, p.w.amax_head);
    launch_quantise<D, true>(p, stream);
  } else {
    launch_quantise<D, false>(p, stream);
  }
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
  // The pipelined form's item indices, and those its ring looks ahead to, in 32 bits.
  if (3 * s.heads_total() * kv_scale_blocks(s.N) > 0x7fffffffLL)
    return "fp8 quantise: 3 * B*H * ceil(N / 128) must be < 2^31";
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
