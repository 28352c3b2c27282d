// The attention problem every variant solves, and the device buffers it runs on.
//
// Layout (all variants, all dtypes): Q, K, V, O are [B, H, N, d] row-major, contiguous
// ("BHSD"); the log-sum-exp is [B, H, N] fp32. Softmax scale is 1/sqrt(d). Causal masks
// key j > query i (queries and keys share positions: square attention).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fa {

enum class DType { bf16, fp16 };

inline constexpr std::size_t element_bytes(DType) {
  return 2;
}
std::string_view to_string(DType t);
bool parse_dtype(std::string_view s, DType* out);

struct Shape {
  std::int64_t B = 1;
  std::int64_t H = 1;
  std::int64_t N = 1;
  std::int64_t d = 64;
  bool causal = false;
  DType dtype = DType::bf16;

  std::int64_t heads_total() const { return B * H; }
  std::int64_t qkv_elements() const { return B * H * N * d; }    // one of Q, K, V or O
  std::int64_t score_elements() const { return B * H * N * N; }  // S or P
  double scale() const;
};

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
