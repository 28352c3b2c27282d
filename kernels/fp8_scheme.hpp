// How an FP8 variant quantises its inputs, as data: the verification models the same scheme on
// the CPU (reference::fp8_quantise), so an FP8 row is judged against a computation that rounds
// the same Q, K and V to E4M3 (docs/accuracy.md, "FP8").
#pragma once

#include <cstdint>
#include <tuple>

namespace fa {

struct Fp8Scheme {
  // Q and K rows multiplied by H S (normalised Walsh-Hadamard after fixed random signs,
  // kernels/fp8/fp8_layout.hpp: flip_sign) before quantisation.
  bool rotated = false;
  // Rows per scale block (448 / amax over the block); 0: one scale per head. (One scale per
  // whole tensor depends on the other heads, so it is no scheme: reference::fp8_quantise takes
  // that amax from its caller.)
  std::int64_t q_rows = 0;
  std::int64_t kv_rows = 0;

  auto tie() const { return std::tie(rotated, q_rows, kv_rows); }
  bool operator==(const Fp8Scheme& o) const { return tie() == o.tie(); }
  bool operator<(const Fp8Scheme& o) const { return tie() < o.tie(); }
};

// Plain per-head FP8: no rotation, one scale per head and tensor (the baseline of the fp8 rule's
// overall figure, and the scheme of a variant that declares none).
constexpr Fp8Scheme kPlainFp8{};

}  // namespace fa
