#include "kernels/problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

std::int64_t Shape::kv_rows_total() const {
  if (!ragged()) return B * kv_len();
  return std::accumulate(kv_lengths.begin(), kv_lengths.end(), std::int64_t{0});
}

double Shape::unmasked_pairs_of(std::int64_t b) const {
  const double n = static_cast<double>(N), nkv = static_cast<double>(kv_len_of(b));
  if (!causal) return n * nkv;
  // Row i sees i + offset + 1 keys (never more than L_b: the last row sees them all), or none.
  const double offset = nkv - n;
  if (offset >= 0) return n * offset + n * (n + 1) / 2;
  return nkv * (nkv + 1) / 2;  // rows before -offset see no key
}

double Shape::unmasked_pairs() const {
  if (!ragged()) return unmasked_pairs_of(0);
  double sum = 0;
  for (std::int64_t b = 0; b < B; ++b) sum += unmasked_pairs_of(b);
  return sum / static_cast<double>(B);
}

std::string kv_lengths_text(const std::vector<std::int64_t>& lengths) {
  if (lengths.size() <= 4) return fmt::format("{}", fmt::join(lengths, ","));
  const auto [lo, hi] = std::minmax_element(lengths.begin(), lengths.end());
  return fmt::format("{}..{}/sum={}", *lo, *hi,
                     std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0}));
}

std::string shape_text(const Shape& s) {
  std::string out = fmt::format("B={} H={}", s.B, s.H);
  if (s.grouped()) out += fmt::format(" H_kv={}", s.kv_heads());
  out += fmt::format(" N={}", s.N);
  if (!s.square()) out += fmt::format(" N_kv={}", s.kv_len());
  if (s.ragged()) out += " kv_lengths=" + kv_lengths_text(s.kv_lengths);
  if (s.paged()) out += fmt::format(" page={}", s.page_size);
  return out + fmt::format(" d={}", s.d);
}

std::string needs_contiguous_cache(const Shape& s, std::string_view who) {
  if (s.paged() || s.ragged())
    return fmt::format("unsupported: {} reads one contiguous K/V length for the batch ({})", who,
                       shape_text(s));
  return "";
}

std::string needs_square_mha(const Shape& s, std::string_view who) {
  if (s.grouped() || !s.square())
    return fmt::format("unsupported: {} takes square multi-head attention ({})", who,
                       shape_text(s));
  return needs_contiguous_cache(s, who);
}

std::vector<std::int32_t> kv_lengths_i32(const Shape& s) {
  std::vector<std::int32_t> lengths(static_cast<std::size_t>(s.B));
  for (std::int64_t b = 0; b < s.B; ++b)
    lengths[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(s.kv_len_of(b));
  return lengths;
}

std::vector<std::int32_t> kv_page_table(const Shape& s, std::uint64_t seed) {
  std::vector<std::int32_t> table(static_cast<std::size_t>(s.B * s.pages_per_sequence()));
  std::iota(table.begin(), table.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(table.begin(), table.end(), rng);
  return table;
}

std::int64_t kv_row_offset(const Shape& s, const std::vector<std::int32_t>& page_table,
                           std::int64_t kv_bh, std::int64_t j) {
  if (!s.paged()) return (kv_bh * s.kv_len() + j) * s.d;
  const std::int64_t b = kv_bh / s.kv_heads(), h = kv_bh % s.kv_heads();
  const std::int64_t page =
      page_table[static_cast<std::size_t>(b * s.pages_per_sequence() + j / s.page_size)];
  return ((page * s.kv_heads() + h) * s.page_size + j % s.page_size) * s.d;
}

double Shape::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(d));
}

}  // namespace fa
