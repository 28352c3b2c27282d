// The attention problem every variant solves, and the device buffers it runs on.
//
// Layout (all variants, all dtypes): Q and O are [B, H, N, d] row-major, contiguous ("BHSD"), K
// and V [B, H_kv, N_kv, d]; the log-sum-exp is [B, H, N] fp32. Query head h reads K/V head
// h / (H / H_kv) (grouped-query attention; H_kv = H is multi-head, 1 multi-query). Softmax scale
// is 1/sqrt(d). Causal is aligned bottom-right, as flash-attention aligns it: query i sees key j
// when j <= i + N_kv - N (square attention: j <= i), so the last query sees every key.
//
// The K/V cache of inference (decode): each sequence b may hold its own length L_b <= N_kv
// (Shape::kv_lengths; causal then aligns to it: j <= i + L_b - N), and K and V may live in pages
// (Shape::page_size P): pools [pages][H_kv][P][d], the cuDNN container layout, where sequence b's
// key j is row j % P of pool page page_table[b][j / P]; the pages are scattered (kv_page_table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace fa {

enum class DType { bf16, fp16 };

inline constexpr std::size_t element_bytes(DType) {
  return 2;
}
std::string_view to_string(DType t);
bool parse_dtype(std::string_view s, DType* out);

struct Shape {
  std::int64_t B = 1;
  std::int64_t H = 1;  // query heads
  std::int64_t N = 1;  // query rows per head
  std::int64_t d = 64;
  bool causal = false;
  DType dtype = DType::bf16;
  std::int64_t H_kv = 0;       // K/V heads, a divisor of H (0: H)
  std::int64_t N_kv = 0;       // K/V rows per head (0: N); the cache's capacity with kv_lengths
  std::int64_t page_size = 0;  // rows of a K/V page, a power of two (0: not paged)
  std::vector<std::int64_t> kv_lengths;  // each sequence's K/V rows, 1..N_kv (empty: N_kv each)

  std::int64_t kv_heads() const { return H_kv > 0 ? H_kv : H; }
  std::int64_t kv_len() const { return N_kv > 0 ? N_kv : N; }
  bool paged() const { return page_size > 0; }
  bool ragged() const { return !kv_lengths.empty(); }
  // Sequence b's K/V rows.
  std::int64_t kv_len_of(std::int64_t b) const {
    return ragged() ? kv_lengths[static_cast<std::size_t>(b)] : kv_len();
  }
  // Page-table entries per sequence (the cache's capacity in pages).
  std::int64_t pages_per_sequence() const {
    return paged() ? (kv_len() + page_size - 1) / page_size : 0;
  }
  std::int64_t group() const { return H / kv_heads(); }  // query heads per K/V head
  bool grouped() const { return kv_heads() != H; }
  bool square() const { return kv_len() == N; }
  // The causal mask's shift: query i sees key j <= i + causal_offset().
  std::int64_t causal_offset() const { return kv_len() - N; }
  std::int64_t heads_total() const { return B * H; }
  std::int64_t kv_heads_total() const { return B * kv_heads(); }
  // The (batch, K/V head) index that (batch, query head) index bh reads.
  std::int64_t kv_head_of(std::int64_t bh) const { return bh / H * kv_heads() + bh % H / group(); }
  std::int64_t qo_elements() const { return B * H * N * d; }                  // Q or O
  std::int64_t kv_elements() const { return B * kv_heads() * kv_len() * d; }  // K or V
  // K or V as stored: kv_elements(), or the pool's whole pages.
  std::int64_t kv_stored_elements() const {
    return paged() ? B * pages_per_sequence() * kv_heads() * page_size * d : kv_elements();
  }
  // K/V rows of one K/V head summed over the batch (B N_kv without kv_lengths).
  std::int64_t kv_rows_total() const;
  std::int64_t score_elements() const { return B * H * N * kv_len(); }  // S or P
  // A configuration's identity, which the record, the gate and merge match on (K/V heads and
  // length as their values, so that 0 and H, or 0 and N, are one shape).
  auto key() const {
    return std::tuple{
        B, H, kv_heads(), N, kv_len(), d, causal, static_cast<int>(dtype), page_size, kv_lengths};
  }
  // (query, key) pairs of one head of sequence b the mask lets through: N * L_b, or causal's
  // bottom-right triangle with its diagonal; unmasked_pairs() sums them over the batch / B.
  double unmasked_pairs_of(std::int64_t b) const;
  double unmasked_pairs() const;
  double scale() const;
};

// "B=4 H=32 N=4096 d=128", with " H_kv=8" and " N_kv=65536" where they differ from H and N,
// " page=64" for a paged cache and " kv_lengths=..." (kv_lengths_text) for lengths apart: the
// one spelling of a shape in every output (console, CSV, the gate's and merge's lines).
std::string shape_text(const Shape& s);
// The lengths, listed where B <= 4 ("100,4096"), else "MIN..MAX/sum=S".
std::string kv_lengths_text(const std::vector<std::int64_t>& lengths);

// A launcher's own guard, "" when it takes the shape, else the row's reason: square multi-head
// attention over a contiguous cache (needs_square_mha), or any shape but a paged or ragged cache
// (needs_contiguous_cache). The registry's capabilities keep such rows away; the guard refuses a
// direct call before its kernel indexes past the buffers.
std::string needs_square_mha(const Shape& s, std::string_view who);
std::string needs_contiguous_cache(const Shape& s, std::string_view who);

// A paged cache's page table, [B][pages_per_sequence] pool page indices: every pool page used
// once, in an order drawn from `seed` (pages scattered, as an allocator leaves them).
std::vector<std::int32_t> kv_page_table(const Shape& s, std::uint64_t seed);
// Each sequence's K/V length as the kernels read it, [B] int32 (kv_len_of).
std::vector<std::int32_t> kv_lengths_i32(const Shape& s);
// The element offset of key j of K/V head kv_bh (batch b = kv_bh / H_kv) in K or V as stored;
// `page_table` as kv_page_table's (ignored when not paged).
std::int64_t kv_row_offset(const Shape& s, const std::vector<std::int32_t>& page_table,
                           std::int64_t kv_bh, std::int64_t j);

// Device pointers for one configuration. Q, K, V are inputs; O and lse are outputs.
// `workspace` is variant-private scratch of the size the variant asked for.
struct DeviceBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // A paged or ragged cache (Shape::paged(), Shape::ragged()), int32 on the device: the page
  // table [B][pages_per_sequence] (null when not paged), each sequence's K/V length [B] (set for
  // either: N_kv each when not ragged).
  const std::int32_t* page_table = nullptr;
  const std::int32_t* kv_lengths = nullptr;
};

// One backward pass: the forward's inputs and outputs (Q, K, V, O and the lse per row), the
// incoming gradient dO, and the gradients it writes (dQ, dK, dV, in the inputs' dtype).
struct BackwardBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* lse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

}  // namespace fa
