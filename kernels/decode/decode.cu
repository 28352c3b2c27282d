// decode: attention of a few query rows per sequence against a long K/V (FlashAttention's
// flash-decoding): the K/V sequence split across thread blocks, the parts combined.
//
// Schedule
//   grid      (splits, B*H_kv): block (s, b h_kv) takes keys [s C, min((s+1) C, L_b)) of K/V head
//             (b, h_kv), L_b its sequence's length (N_kv, or --kv-lengths), C = decode_split_keys
//             (whole 64-key tiles; decode_splits picks how many from the lengths, H_kv and the
//             SMs: one split where the blocks fill the GPU); a block past L_b has no keys.
//   pages     a paged cache (--page-size P): tile keys k0.. read from pool page
//             page_table[b][k0 / P] (P >= 64: the tile lies in one page; P < 64: per row).
//   rows      the g = H/H_kv query heads of the group and their N positions packed into one m16
//             tile (row r: position r / g, query head h_kv g + r % g; rows past N g are zero):
//             each K/V byte is read once for the whole group.
//   block     4 warps; K and V tiles of 64 keys stream through a 3-stage cp.async ring; warp w
//             takes keys [16 w, 16 w + 16) of every tile:
//               S = Q K_w^T        mma.sync m16n8k16, fp32
//               mask               L_b's edge, causal (bottom-right: row r sees keys
//                                  <= r / g + L_b - N)
//               online softmax     m, l per row in registers (kernels/common/online_softmax.cuh)
//               O += P V_w         P from S's accumulators
//   merge     the 4 warps' (m, l, O) through shared memory (the ring, drained).
//   epilogue  one split: O and lse written. Several: the block's O / l (fp32) and lse into the
//             workspace, then an arrival counted per K/V head; the last of the sequence's
//             ceil(L_b / C) parts to arrive combines them, one warp per output row:
//             lse = log sum exp lse_s, O = sum exp(lse_s - lse) O_s.
//
// HBM traffic (profiler/io_model.cpp, decode_model): Q read once, K and V once per K/V head, O
// and lse written once; with splits, the parts' O and lse written and read once more.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/common/device_buffer.hpp"
#include "kernels/common/fault.cuh"
#include "kernels/common/launch.hpp"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/per_device.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/hopper/persistent_grid.hpp"

namespace fa {

int decode_splits(const Shape& s, int sm_count) {
  const double slots = static_cast<double>(kDecodeBlocksPerSm) * sm_count;
  const std::int64_t most =
      std::clamp<std::int64_t>(s.kv_len() / kDecodeMinSplitKeys, 1, kDecodeMaxSplits);
  // A split count's wave fill: the blocks that hold keys (sequence b fills ceil(L_b / C) of its
  // splits) over the slots of the waves they take.
  auto fill = [&](std::int64_t n) {
    const std::int64_t keys = decode_split_keys(s, static_cast<int>(n));
    std::int64_t blocks = 0;
    for (std::int64_t b = 0; b < (s.ragged() ? s.B : 1); ++b)
      blocks += (s.kv_len_of(b) + keys - 1) / keys;
    if (!s.ragged()) blocks *= s.B;
    const double waves = static_cast<double>(blocks * s.kv_heads()) / slots;
    return waves / std::ceil(waves);
  };
  // The fewest splits that fill kDecodeWaveFill of their waves (more splits only add combine
  // work); where none does, the count that fills the most.
  std::int64_t splits = 0, fullest = 1;
  double fullest_fill = 0;
  for (std::int64_t n = 1; n <= most && splits == 0; ++n) {
    const double f = fill(n);
    if (f >= kDecodeWaveFill) splits = n;
    if (f > fullest_fill) fullest = n, fullest_fill = f;
  }
  if (splits == 0) splits = fullest;
  // Whole tiles per split, and no split left empty by the rounding.
  const std::int64_t keys = decode_split_keys(s, static_cast<int>(splits));
  return static_cast<int>((s.kv_len() + keys - 1) / keys);
}

std::int64_t decode_split_keys(const Shape& s, int splits) {
  const std::int64_t tiles = (s.kv_len() + kDecodeKeys - 1) / kDecodeKeys;
  return (tiles + splits - 1) / splits * kDecodeKeys;
}

std::string decode_shape_rule(const Shape& s) {
  if (s.N * s.group() > kDecodeRows)
    return "unsupported: decode packs N x H/H_kv query rows per K/V head into one 16-row tile (" +
           std::to_string(s.N * s.group()) + " here; prefill shapes are fa3's)";
  return "";
}

std::vector<Tiles> decode_tile_options(int d) {
  if (d != 64 && d != 128) return {};
  return {Tiles{kDecodeRows, kDecodeKeys}};
}

namespace {

using namespace sm80;

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kStages = 3;
constexpr int kWarpKeys = kDecodeKeys / kWarps;  // 16

struct DecodeParams {
  const void* q;
  const void* k;  // [B][H_kv][N_kv][D], or a paged cache's pool [pages][H_kv][P][D]
  const void* v;
  void* o;
  float* lse;
  float* part_o;                   // [splits][B H N][D] fp32: each split's O / l (splits > 1)
  float* part_lse;                 // [splits][B H N]
  const std::int32_t* page_table;  // [B][pages_per_sequence] (paged)
  const std::int32_t* kv_lengths;  // [B]; null: N_kv each
  std::int64_t N, N_kv, split_keys;
  std::int64_t rows_total;  // B H N: the output rows
  std::int64_t pages_per_sequence;
  int H, H_kv, group, splits;
  int page_shift;  // log2 of the page size (paged)
  // Splits > 1: per K/V head (b, h_kv), the blocks that have written their part; the last to
  // arrive combines and resets it to 0.
  unsigned* arrivals;
  float scale_log2;
  FaultInjection fault;  // read only by the FAULTS instantiations (verification tests)
};

template <int D>
constexpr int decode_smem_bytes() {
  // Q, then the K and V rings (16-bit elements); the merge reuses the rings as fp32.
  return (kDecodeRows + 2 * kStages * kDecodeKeys) * D * 2;
}
// The merge's m, l and O of every warp (fp32) reuse the K and V rings.
template <int D>
constexpr bool merge_fits_in_rings() {
  return 2 * kStages * kDecodeKeys * D * 2 >= (2 + D) * kWarps * kDecodeRows * 4;
}
static_assert(merge_fits_in_rings<64>() && merge_fits_in_rings<128>(),
              "decode: the merge buffer fits in the rings");

// Query head and position of packed row r of K/V head kv_h (of `group` query heads).
struct PackedRow {
  int head;  // within the batch
  std::int64_t position;
};
template <bool FAULTS>
__device__ __forceinline__ PackedRow packed_row(const DecodeParams& p, int kv_h, int r) {
  const int in_group = r % p.group;
  // FAULTS: the heads of a group interleaved (h % H_kv == kv_h) where h / g == kv_h is meant.
  const int head =
      FAULTS && p.fault.kv_head_interleaved ? in_group * p.H_kv + kv_h : kv_h * p.group + in_group;
  return {head, r / p.group};
}

// Sequence b's K/V length. FAULTS: the cache's N_kv for every sequence (kv_lengths_ignored).
template <bool FAULTS>
__device__ __forceinline__ std::int64_t sequence_length(const DecodeParams& p, int b) {
  if (FAULTS && p.fault.kv_lengths_ignored) return p.N_kv;
  return p.kv_lengths ? static_cast<std::int64_t>(p.kv_lengths[b]) : p.N_kv;
}

// The element offset of key `key` of K/V head kv_h of sequence b in a paged pool. FAULTS: the
// table's next entry (page_off_by_one).
template <int D, bool FAULTS>
__device__ __forceinline__ std::int64_t paged_offset(const DecodeParams& p, int b, int kv_h,
                                                     std::int64_t key) {
  std::int64_t entry = key >> p.page_shift;
  if (FAULTS && p.fault.page_off_by_one) entry = (entry + 1) % p.pages_per_sequence;
  const std::int64_t page = p.page_table[b * p.pages_per_sequence + entry];
  const std::int64_t page_rows = std::int64_t{1} << p.page_shift;
  return ((page * p.H_kv + kv_h) * page_rows + (key & (page_rows - 1))) * D;
}

// The K and V tiles of 64 keys from a paged pool whose pages are shorter than the tile: each row's
// own page. The thread's rows are looked up first, all at once, then their copies issued (a table
// load before each copy serialised the tile on the table's latency); K and V share the lookups.
// Rows at or past `end` are zero-filled.
template <int D, bool FAULTS, typename T>
__device__ __forceinline__ void load_tiles_paged_rows(T* k_smem, T* v_smem, const T* k_pool,
                                                      const T* v_pool, const DecodeParams& p, int b,
                                                      int kv_h, std::int64_t k0, std::int64_t end) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kPasses = kDecodeKeys * kChunksPerRow / kThreads;
  static_assert(kDecodeKeys * kChunksPerRow % kThreads == 0, "decode: whole passes per tile");
  std::int64_t offset[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int r = (threadIdx.x + i * kThreads) / kChunksPerRow;
    offset[i] = k0 + r < end ? paged_offset<D, FAULTS>(p, b, kv_h, k0 + r) : -1;
  }
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const bool valid = offset[i] >= 0;
    const std::int64_t src = valid ? offset[i] + ch * 8 : 0;
    cp_async_16(smem_u32(k_smem + swz<D>(r, ch * 8)), k_pool + src, valid);
    cp_async_16(smem_u32(v_smem + swz<D>(r, ch * 8)), v_pool + src, valid);
  }
}

// atomicAdd(counter, 1) with release and acquire semantics at GPU scope; returns the old value.
__device__ __forceinline__ unsigned arrive_acq_rel(unsigned* counter) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
               : "=r"(old)
               : "l"(counter)
               : "memory");
  return old;
}

// The parts of sequence b's rows: the splits its keys reach.
template <bool FAULTS>
__device__ __forceinline__ int parts_of(const DecodeParams& p, int b) {
  const std::int64_t reached = (sequence_length<FAULTS>(p, b) + p.split_keys - 1) / p.split_keys;
  return reached < p.splits ? static_cast<int>(reached) : p.splits;
}

// One warp combines output row `row` of sequence b: lse = log sum_s exp(lse_s),
// O = sum_s exp(lse_s - lse) O_s over its parts (a part whose keys were all masked has lse -inf:
// weight 0). Lane j reads the lse of parts j, j + 32, ... once; then each lane adds its D/32
// adjacent columns of 32 parts at a time, all 32 loads in flight, each part's weight shuffled from
// the lane that holds it: two memory latencies per row up to 32 parts, where the warp sits on the
// block's (and so the kernel's) tail. Reads bypass L1 (__ldcg): other blocks wrote the parts.
// FAULTS: split fault.drop_split is left out.
template <int D, typename T, bool FAULTS>
__device__ __forceinline__ void combine_row(const DecodeParams& p, std::int64_t row, int parts,
                                            int lane) {
  constexpr int kPerLane = D / 32;
  constexpr int kPasses = kDecodeMaxSplits / 32;
  using Vec = std::conditional_t<kPerLane == 4, float4, float2>;
  static_assert(kPerLane == 2 || kPerLane == 4, "decode combine: d 64 or 128");
  static_assert(kDecodeMaxSplits % 32 == 0, "decode combine: whole passes of 32 parts");
  const std::int64_t rows_total = p.rows_total;
  auto kept = [&](int s) { return s < parts && !(FAULTS && s == p.fault.drop_split); };
  float weight[kPasses];  // lse of part lane + 32 j, then its weight
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPasses; ++j) {
    const int s = lane + 32 * j;
    weight[j] = kept(s) ? __ldcg(p.part_lse + s * rows_total + row) : -INFINITY;
    mx = fmaxf(mx, weight[j]);
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
  const float base = mx == -INFINITY ? 0.0f : mx;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPasses; ++j) {
    weight[j] = __expf(weight[j] - base);  // 0 for a part left out (-inf)
    sum += weight[j];
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  float acc[kPerLane] = {};
#pragma unroll
  for (int j = 0; j < kPasses; ++j) {
    if (32 * j >= parts) break;
    Vec v[32];
#pragma unroll
    for (int q = 0; q < 32; ++q) {
      const int s = 32 * j + q;
      v[q] =
          kept(s)
              ? __ldcg(reinterpret_cast<const Vec*>(p.part_o + (s * rows_total + row) * D) + lane)
              : Vec{};
    }
#pragma unroll
    for (int q = 0; q < 32; ++q) {
      const float w = __shfl_sync(0xffffffffu, weight[j], q);
      const float* x = reinterpret_cast<const float*>(&v[q]);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) acc[e] += w * x[e];
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  T* dst = static_cast<T*>(p.o) + row * D + lane * kPerLane;
#pragma unroll
  for (int e = 0; e < kPerLane; e += 2)
    *reinterpret_cast<std::uint32_t*>(dst + e) = pack2<T>(acc[e] * inv, acc[e + 1] * inv);
  if (lane == 0) p.lse[row] = sum > 0.0f ? base + logf(sum) : -INFINITY;
}

template <int D, bool CAUSAL, bool PAGED, typename T, bool FAULTS>
__global__ void __launch_bounds__(kThreads) decode_kernel(const DecodeParams p) {
  constexpr int kNT = kWarpKeys / 8, kDT = D / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kDecodeRows * D;            // [kStages][64][D]
  T* sV = sK + kStages * kDecodeKeys * D;  // [kStages][64][D]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x;
  const int b = blockIdx.y / p.H_kv, kv_h = blockIdx.y % p.H_kv;
  const int rows = static_cast<int>(p.N) * p.group;
  const std::int64_t length = sequence_length<FAULTS>(p, b);
  const std::int64_t k_begin = split * p.split_keys;
  if (k_begin >= length) return;  // a split past a shorter sequence's keys: no part (combine)
  const std::int64_t k_end = min(length, k_begin + p.split_keys);
  const int tiles = static_cast<int>((k_end - k_begin + kDecodeKeys - 1) / kDecodeKeys);
  // Contiguous: this K/V head's rows. Paged: the pool (rows through paged_offset).
  const std::int64_t kv_offset =
      PAGED ? 0 : (static_cast<std::int64_t>(b) * p.H_kv + kv_h) * p.N_kv * D;
  const T* Kh = static_cast<const T*>(p.k) + kv_offset;
  const T* Vh = static_cast<const T*>(p.v) + kv_offset;

  // Q: the packed rows, zero past N g (16 B chunks, one row's D / 8 per pass).
  for (int c = threadIdx.x; c < kDecodeRows * D / 8; c += kThreads) {
    const int r = c / (D / 8), ch = c % (D / 8);
    const bool valid = r < rows;
    const PackedRow pr = packed_row<FAULTS>(p, kv_h, valid ? r : 0);
    const T* src = static_cast<const T*>(p.q) +
                   ((static_cast<std::int64_t>(b) * p.H + pr.head) * p.N + pr.position) * D +
                   ch * 8;
    cp_async_16(smem_u32(sQ + swz<D>(r, ch * 8)), src, valid);
  }
  // The ring's first stages (tile i in stage i % kStages; keys past k_end zero-filled).
  auto load_stage = [&](int i) {
    const std::int64_t k0 = k_begin + static_cast<std::int64_t>(i) * kDecodeKeys;
    T* k_dst = sK + (i % kStages) * kDecodeKeys * D;
    T* v_dst = sV + (i % kStages) * kDecodeKeys * D;
    if constexpr (PAGED) {
      if (p.page_shift < 6) {  // pages shorter than the tile
        load_tiles_paged_rows<D, FAULTS>(k_dst, v_dst, Kh, Vh, p, b, kv_h, k0, k_end);
        return;
      }
      // The tile lies in one page: its rows are contiguous there.
      const std::int64_t page = paged_offset<D, FAULTS>(p, b, kv_h, k0);
      if (k0 + kDecodeKeys <= k_end) {
        load_tile_inside<kDecodeKeys, D, kThreads>(k_dst, Kh + page, 0);
        load_tile_inside<kDecodeKeys, D, kThreads>(v_dst, Vh + page, 0);
      } else {
        load_tile<kDecodeKeys, D, kThreads>(k_dst, Kh + page, 0, k_end - k0);
        load_tile<kDecodeKeys, D, kThreads>(v_dst, Vh + page, 0, k_end - k0);
      }
      return;
    }
    if (k0 + kDecodeKeys <= k_end) {
      load_tile_inside<kDecodeKeys, D, kThreads>(k_dst, Kh, k0);
      load_tile_inside<kDecodeKeys, D, kThreads>(v_dst, Vh, k0);
    } else {
      load_tile<kDecodeKeys, D, kThreads>(k_dst, Kh, k0, k_end);
      load_tile<kDecodeKeys, D, kThreads>(v_dst, Vh, k0, k_end);
    }
  };
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles) load_stage(i);
    cp_async_commit();  // empty groups keep the count the waits below expect
  }

  float o[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  OnlineSoftmax<> softmax;
  std::uint32_t qf[D / 16][4];
  // The thread's packed rows g and g + 8 as query positions moved bottom-right (key <= position +
  // L_b - N); `shift` is position 0's limit, the fault's shift included.
  const std::int64_t offset = length - p.N;
  const std::int64_t shift = (FAULTS ? p.fault.mask_shift : 0) + offset;

  for (int i = 0; i < tiles; ++i) {
    if (i + kStages - 1 < tiles) load_stage(i + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();
    if (i == 0) load_a_fragments<D>(qf, sQ, 0, lane);

    const std::int64_t k0 = k_begin + static_cast<std::int64_t>(i) * kDecodeKeys + warp * kWarpKeys;
    float s[kNT][4];
    warp_qkt<D, kWarpKeys>(s, qf, sK + (i % kStages) * kDecodeKeys * D + warp * kWarpKeys * D,
                           lane);
    const bool dropped = FAULTS && p.fault.drop_kv_block >= 0 &&
                         (k_begin + static_cast<std::int64_t>(i) * kDecodeKeys) / kDecodeKeys ==
                             p.fault.drop_kv_block;
    const bool needs_mask =
        k0 + kWarpKeys > k_end || (CAUSAL && k0 + kWarpKeys - 1 > shift) || dropped;
    const KeyMask<CAUSAL, kWarpKeys, FAULTS> mask{k0,
                                                  k_end,
                                                  g / p.group + offset,
                                                  (g + 8) / p.group + offset,
                                                  FAULTS ? p.fault.mask_shift : 0,
                                                  dropped};
    scale_and_mask(s, p.scale_log2, mask, needs_mask, t);
    softmax.update(s, o);
    warp_pv<D, kWarpKeys>(o, s, sV + (i % kStages) * kDecodeKeys * D + warp * kWarpKeys * D, lane);
    __syncthreads();  // the stage read here is the one the next iteration's load refills
  }
  cp_async_wait<0>();
  __syncthreads();

  // Merge the warps: each row's max over the warps, then O and l scaled to it and summed.
  float* m_w = reinterpret_cast<float*>(sK);  // [kWarps][16]
  float* l_w = m_w + kWarps * kDecodeRows;    // [kWarps][16]
  float* o_w = l_w + kWarps * kDecodeRows;    // [kWarps][16][D]
  float l_part[2] = {softmax.l[0], softmax.l[1]};
#pragma unroll
  for (int r = 0; r < 2; ++r) l_part[r] = quad_sum(l_part[r]);
  if (t == 0) {
    m_w[warp * kDecodeRows + g] = softmax.m[0];
    m_w[warp * kDecodeRows + g + 8] = softmax.m[1];
    l_w[warp * kDecodeRows + g] = l_part[0];
    l_w[warp * kDecodeRows + g + 8] = l_part[1];
  }
  __syncthreads();
  float scale[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_w[w * kDecodeRows + row]);
    scale[r] = fast_exp2(softmax.m[r] - exp_base(mx));
  }
#pragma unroll
  for (int i = 0; i < kDT; ++i) {
    const int col = i * 8 + 2 * t;
    o_w[(warp * kDecodeRows + g) * D + col] = o[i][0] * scale[0];
    o_w[(warp * kDecodeRows + g) * D + col + 1] = o[i][1] * scale[0];
    o_w[(warp * kDecodeRows + g + 8) * D + col] = o[i][2] * scale[1];
    o_w[(warp * kDecodeRows + g + 8) * D + col + 1] = o[i][3] * scale[1];
  }
  __syncthreads();

  // Each thread: rows r, columns c .. c + 3 per pass; the row's m, l over the warps.
  for (int idx = threadIdx.x; idx < kDecodeRows * D / 4; idx += kThreads) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    if (r >= rows) break;  // idx grows with r
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_w[w * kDecodeRows + r]);
    const float base = exp_base(mx);
    float l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int w = 0; w < kWarps; ++w) {
      l += l_w[w * kDecodeRows + r] * fast_exp2(m_w[w * kDecodeRows + r] - base);
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] += o_w[(w * kDecodeRows + r) * D + c + j];
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const float lse = l > 0.0f ? natural_lse(mx, l) : -INFINITY;
    const PackedRow pr = packed_row<FAULTS>(p, kv_h, r);
    const std::int64_t out_row = (static_cast<std::int64_t>(b) * p.H + pr.head) * p.N + pr.position;
    if (p.splits == 1) {
      T* dst = static_cast<T*>(p.o) + out_row * D + c;
      *reinterpret_cast<std::uint32_t*>(dst) = pack2<T>(acc[0] * inv, acc[1] * inv);
      *reinterpret_cast<std::uint32_t*>(dst + 2) = pack2<T>(acc[2] * inv, acc[3] * inv);
      if (c == 0) p.lse[out_row] = lse;
    } else {
      const std::int64_t part_row = split * p.rows_total + out_row;
      float4* dst = reinterpret_cast<float4*>(p.part_o + part_row * D + c);
      *dst = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      if (c == 0) p.part_lse[part_row] = lse;
    }
  }
  if (p.splits == 1) return;
  // The last of the sequence's parts to be written combines its K/V head's rows. Not a second
  // kernel: at batch 1 its launch and its reads from a cold start cost a sixth of the row. The
  // arrival is CUTLASS's split-K barrier: bar.sync orders the block's part stores before thread
  // 0's arrival, whose release makes them visible and whose acquire (in the last block) sees the
  // others'; one fence per block instead of a __threadfence per thread, 0.2-1.3 us off the
  // batch-1 rows.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned arrived = arrive_acq_rel(p.arrivals + blockIdx.y) + 1;
    last = arrived == static_cast<unsigned>(parts_of<FAULTS>(p, b));
    if (last) p.arrivals[blockIdx.y] = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  const int parts = parts_of<FAULTS>(p, b);
  for (int r = warp; r < rows; r += kWarps) {
    const PackedRow pr = packed_row<FAULTS>(p, kv_h, r);
    const std::int64_t row = (static_cast<std::int64_t>(b) * p.H + pr.head) * p.N + pr.position;
    combine_row<D, T, FAULTS>(p, row, parts, lane);
  }
}

// The SMs of the current device, or 0 where it cannot be asked (the launcher says why).
int sm_count_here() {
  const hopper::DeviceFacts facts = hopper::device_facts();
  return facts.status == cudaSuccess ? facts.sms : 0;
}

std::size_t workspace_for(const Shape& s, int splits) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N);
  return static_cast<std::size_t>(splits) * rows * (static_cast<std::size_t>(s.d) + 1) * 4;
}

template <int D, bool CAUSAL, bool PAGED, typename T, bool FAULTS>
std::string launch_decode(const Shape& s, const DeviceBuffers& b, cudaStream_t stream,
                          const FaultInjection& fault, int splits, unsigned* arrivals) {
  constexpr int kSmem = decode_smem_bytes<D>();
  auto kernel = decode_kernel<D, CAUSAL, PAGED, T, FAULTS>;
  static PerDevice<cudaError_t> attr;
  const cudaError_t st = attr.get([&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (st != cudaSuccess)
    return std::string("decode: cudaFuncSetAttribute: ") + cudaGetErrorString(st);
  if (splits < 1 || splits > kDecodeMaxSplits)  // the combine reads kDecodeMaxSplits parts at most
    return "decode: " + std::to_string(splits) + " splits outside 1.." +
           std::to_string(kDecodeMaxSplits);
  if (b.workspace_bytes < workspace_for(s, splits)) return "decode: workspace too small";
  if (s.kv_heads_total() > 65535) return "decode: grid too large (B*H_kv must be <= 65535)";
  if ((s.paged() && !b.page_table) || (s.ragged() && !b.kv_lengths))
    return "decode: the shape's page table or K/V lengths are not in its buffers";
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N);
  float* part_o = static_cast<float*>(b.workspace);
  int page_shift = 0;
  while (s.paged() && (std::int64_t{1} << page_shift) < s.page_size) ++page_shift;
  DecodeParams p{b.q,
                 b.k,
                 b.v,
                 b.o,
                 b.lse,
                 part_o,
                 splits > 1 ? part_o + static_cast<std::size_t>(splits) * rows * D : nullptr,
                 b.page_table,
                 s.ragged() ? b.kv_lengths : nullptr,
                 s.N,
                 s.kv_len(),
                 decode_split_keys(s, splits),
                 static_cast<std::int64_t>(rows),
                 s.pages_per_sequence(),
                 static_cast<int>(s.H),
                 static_cast<int>(s.kv_heads()),
                 static_cast<int>(s.group()),
                 splits,
                 page_shift,
                 arrivals,
                 softmax_scale_log2(s, fault),
                 fault};
  kernel<<<dim3(static_cast<unsigned>(splits), static_cast<unsigned>(s.kv_heads_total())), kThreads,
           kSmem, stream>>>(p);
  return launch_status("decode");
}

class DecodeLauncher final : public Launcher {
 public:
  explicit DecodeLauncher(const FaultInjection& fault) : fault_(fault) {}
  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    const int sms = sm_count_here();
    return sms > 0 ? workspace_for(s, decode_splits(s, sms)) : 0;
  }
  std::string run(const Shape& s, const Tiles&, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string r = plan(s); !r.empty()) return r;
    if (std::string r = reserve_arrivals(s, stream); !r.empty()) return r;
    return fault_.any() ? dispatch<true>(s, b, stream) : dispatch<false>(s, b, stream);
  }

 private:
  // The shape's checks and split count, once per shape: the split rule walks up to
  // kDecodeMaxSplits counts over the batch's lengths, host work that would otherwise sit between
  // a timed sample's start event and its kernel.
  std::string plan(const Shape& s) {
    if (planned_splits_ > 0 && s.key() == planned_.key()) return "";
    if (std::string r = decode_shape_rule(s); !r.empty()) return r;
    for (std::int64_t len : s.kv_lengths) {
      if (len < 1 || len > s.kv_len())
        return "decode: a sequence's K/V length " + std::to_string(len) + " outside 1.." +
               std::to_string(s.kv_len());
    }
    const int sms = sm_count_here();
    if (sms <= 0) return "decode: the device's SM count could not be read";
    planned_ = s;
    planned_splits_ = decode_splits(s, sms);
    return "";
  }

  // The combine's arrival counters, one per K/V head, zeroed once when allocated (each launch
  // leaves them zero): allocated by the first run of a larger shape, an untimed one (a
  // verification), never inside a graph capture; zeroed on the launch's stream, so the kernel
  // sees them zero (a launcher's launches go to one stream at a time).
  std::string reserve_arrivals(const Shape& s, cudaStream_t stream) {
    const auto needed = static_cast<std::size_t>(s.kv_heads_total());
    if (needed <= arrivals_count_) return "";
    if (arrivals_.ptr) cudaFree(arrivals_.ptr);
    arrivals_.ptr = nullptr;
    arrivals_count_ = 0;
    if (!arrivals_.allocate(needed * sizeof(unsigned)) ||
        cudaMemsetAsync(arrivals_.ptr, 0, needed * sizeof(unsigned), stream) != cudaSuccess) {
      cudaGetLastError();
      return "decode: the combine's arrival counters could not be allocated";
    }
    arrivals_count_ = needed;
    return "";
  }

  template <bool FAULTS>
  std::string dispatch(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) const {
    auto by_type = [&](auto d, auto causal, auto paged) -> std::string {
      constexpr int D = decltype(d)::value;
      constexpr bool C = decltype(causal)::value, P = decltype(paged)::value;
      if (s.dtype == DType::bf16)
        return launch_decode<D, C, P, __nv_bfloat16, FAULTS>(s, b, stream, fault_, planned_splits_,
                                                             arrivals());
      return launch_decode<D, C, P, __half, FAULTS>(s, b, stream, fault_, planned_splits_,
                                                    arrivals());
    };
    auto by_paging = [&](auto d, auto causal) {
      return s.paged() ? by_type(d, causal, std::true_type{})
                       : by_type(d, causal, std::false_type{});
    };
    auto by_mask = [&](auto d) {
      return s.causal ? by_paging(d, std::true_type{}) : by_paging(d, std::false_type{});
    };
    if (s.d == 64) return by_mask(std::integral_constant<int, 64>{});
    if (s.d == 128) return by_mask(std::integral_constant<int, 128>{});
    return "decode: d=" + std::to_string(s.d) + " (compiled: 64, 128)";
  }
  unsigned* arrivals() const { return static_cast<unsigned*>(arrivals_.ptr); }

  FaultInjection fault_;
  DeviceAllocation arrivals_;
  std::size_t arrivals_count_ = 0;
  Shape planned_;  // the shape planned_splits_ is for
  int planned_splits_ = 0;
};

}  // namespace

std::unique_ptr<Launcher> make_decode_launcher(const LaunchOptions& o) {
  return std::make_unique<DecodeLauncher>(o.fault);
}

}  // namespace fa
