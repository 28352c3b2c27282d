// The attention problem every variant solves, and the device buffers it runs on.
//
// Layout (all variants, all dtypes): Q and O are [B, H, N, d] row-major, contiguous ("BHSD"), K
// and V [B, H_kv, N_kv, d]; the log-sum-exp is [B, H, N] fp32. Query head h reads K/V head
// h / (H / H_kv) (grouped-query attention; H_kv = H is multi-head, 1 multi-query). Softmax scale
// is 1/sqrt(d). Causal is aligned bottom-right, as flash-attention aligns it: query i sees key j
// when j <= i + N_kv - N (square attention: j <= i), so the last query sees every key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

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
  std::int64_t H_kv = 0;  // K/V heads, a divisor of H (0: H)
  std::int64_t N_kv = 0;  // K/V rows per head (0: N)

  std::int64_t kv_heads() const { return H_kv > 0 ? H_kv : H; }
  std::int64_t kv_len() const { return N_kv > 0 ? N_kv : N; }
  std::int64_t group() const { return H / kv_heads(); }  // query heads per K/V head
  bool grouped() const { return kv_heads() != H; }
  bool square() const { return kv_len() == N; }
  // The causal mask's shift: query i sees key j <= i + causal_offset().
  std::int64_t causal_offset() const { return kv_len() - N; }
  std::int64_t heads_total() const { return B * H; }
  std::int64_t kv_heads_total() const { return B * kv_heads(); }
  // The (batch, K/V head) index that (batch, query head) index bh reads.
  std::int64_t kv_head_of(std::int64_t bh) const { return bh / H * kv_heads() + bh % H / group(); }
  std::int64_t qkv_elements() const { return B * H * N * d; }                 // Q or O
  std::int64_t kv_elements() const { return B * kv_heads() * kv_len() * d; }  // K or V
  std::int64_t score_elements() const { return B * H * N * kv_len(); }        // S or P
  // A configuration's identity, which the record, the gate and merge match on (K/V heads and
  // length as their values, so that 0 and H, or 0 and N, are one shape).
  auto key() const {
    return std::tuple{B, H, kv_heads(), N, kv_len(), d, causal, static_cast<int>(dtype)};
  }
  // (query, key) pairs of one head the mask lets through: N * N_kv, or causal's bottom-right
  // triangle with its diagonal.
  double unmasked_pairs() const;
  double scale() const;
};

// "B=4 H=32 N=4096 d=128", with " H_kv=8" and " N_kv=65536" where they differ from H and N: the
// one spelling of a shape in every output (console, CSV, the gate's and merge's lines).
std::string shape_text(const Shape& s);

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
