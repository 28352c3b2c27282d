#include "kernels/problem.hpp"

#include <fmt/format.h>

#include <cmath>

namespace fa {

std::string_view to_string(DType t) {
  return t == DType::bf16 ? "bf16" : "fp16";
}

bool parse_dtype(std::string_view s, DType* out) {
  if (s == "bf16") {
    *out = DType::bf16;
    return true;
  }
  if (s == "fp16") {
    *out = DType::fp16;
    return true;
  }
  return false;
}

double Shape::unmasked_pairs() const {
  const double n = static_cast<double>(N), nkv = static_cast<double>(kv_len());
  if (!causal) return n * nkv;
  // Row i sees i + offset + 1 keys (never more than N_kv: the last row sees them all), or none.
  const double offset = static_cast<double>(causal_offset());
  if (offset >= 0) return n * offset + n * (n + 1) / 2;
  return nkv * (nkv + 1) / 2;  // rows before -offset see no key
}

std::string shape_text(const Shape& s) {
  std::string out = fmt::format("B={} H={}", s.B, s.H);
  if (s.grouped()) out += fmt::format(" H_kv={}", s.kv_heads());
  out += fmt::format(" N={}", s.N);
  if (!s.square()) out += fmt::format(" N_kv={}", s.kv_len());
  return out + fmt::format(" d={}", s.d);
}

double Shape::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(d));
}

}  // namespace fa
