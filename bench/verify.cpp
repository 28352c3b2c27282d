#include "bench/verify.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "kernels/common/cuda_check.hpp"
#include "kernels/reference/reference.hpp"

namespace fa::bench {
namespace {

constexpr double kAbsoluteSlack = 1e-3;
constexpr int kMaxHeads = 4;
constexpr int kRowsPerHead = 48;  // when N is larger than that

std::vector<std::uint16_t> copy_bits(const void* src, std::int64_t count) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(count));
  FA_CUDA_CHECK(cudaMemcpy(out.data(), src, out.size() * 2, cudaMemcpyDeviceToHost));
  return out;
}

// Rows to check: all when N is small; otherwise the edges of the sequence and of the usual
// tile sizes (where masking and tail handling live), and random rows.
std::vector<std::int64_t> pick_rows(std::int64_t N, std::mt19937_64& rng) {
  std::set<std::int64_t> rows;
  if (N <= kRowsPerHead) {
    for (std::int64_t r = 0; r < N; ++r) rows.insert(r);
  } else {
    for (std::int64_t r : {0L, 1L, 15L, 16L, 63L, 64L, 127L, 128L, 129L, N - 2, N - 1}) {
      if (r >= 0 && r < N) rows.insert(r);
    }
    std::uniform_int_distribution<std::int64_t> dist(0, N - 1);
    while (static_cast<int>(rows.size()) < kRowsPerHead) rows.insert(dist(rng));
  }
  return {rows.begin(), rows.end()};
}

}  // namespace

double half_bits_to_double(std::uint16_t bits, DType dtype) {
  if (dtype == DType::bf16) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half_raw raw;
  raw.x = bits;
  return static_cast<double>(__half2float(__half(raw)));
}

ReferenceSample::ReferenceSample(const Shape& s, const DeviceBuffers& in, std::uint64_t seed,
                                 bool fp8_baseline)
    : shape_(s) {
  std::mt19937_64 rng(seed ^ 0x5eedf00dULL);
  std::set<std::int64_t> bhs{0, s.heads_total() - 1};
  std::uniform_int_distribution<std::int64_t> dist(0, s.heads_total() - 1);
  while (static_cast<int>(bhs.size()) < std::min<std::int64_t>(kMaxHeads, s.heads_total())) {
    bhs.insert(dist(rng));
  }
  const std::int64_t head_elems = s.N * s.d;
  double baseline_sq = 0, fp8_sq = 0, baseline_n = 0;
  for (std::int64_t bh : bhs) {
    HeadSample hs;
    hs.bh = bh;
    hs.rows = pick_rows(s.N, rng);
    reference::Head head;
    head.N = s.N;
    head.d = s.d;
    auto load = [&](const void* base, std::vector<double>& dst) {
      const auto bits = copy_bits(static_cast<const std::uint16_t*>(base) + bh * head_elems, head_elems);
      dst.resize(bits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) dst[i] = half_bits_to_double(bits[i], s.dtype);
    };
    load(in.q, head.q);
    load(in.k, head.k);
    load(in.v, head.v);
    const std::size_t nrows = hs.rows.size();
    hs.ref.resize(nrows * s.d);
    hs.lse.resize(nrows);
    std::vector<double> lowp(nrows * s.d), fp8(fp8_baseline && s.dtype == DType::bf16 ? nrows * s.d : 0);
    const reference::Fp8Scales fp8_scales = fp8.empty() ? reference::Fp8Scales{} : reference::fp8_scales(head);
    // Rows are independent: split them over the host's cores.
    const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < workers; ++w) {
      pool.emplace_back([&, w] {
        for (std::size_t i = w; i < nrows; i += workers) {
          hs.lse[i] = reference::attention_row(head, hs.rows[i], s.causal, s.scale(), &hs.ref[i * s.d]);
          reference::plain_lowp_row(head, hs.rows[i], s.causal, s.scale(), s.dtype, &lowp[i * s.d]);
          if (!fp8.empty()) reference::plain_fp8_row(head, fp8_scales, hs.rows[i], s.causal, s.scale(), &fp8[i * s.d]);
        }
      });
    }
    for (auto& t : pool) t.join();
    for (std::size_t i = 0; i < lowp.size(); ++i) {
      const double e = std::abs(lowp[i] - hs.ref[i]);
      baseline_max_abs_error_ = std::max(baseline_max_abs_error_, e);
      baseline_sq += e * e;
    }
    for (std::size_t i = 0; i < fp8.size(); ++i) {
      const double e = std::abs(fp8[i] - hs.ref[i]);
      fp8_baseline_max_abs_error_ = std::max(fp8_baseline_max_abs_error_, e);
      fp8_sq += e * e;
    }
    baseline_n += static_cast<double>(lowp.size());
    heads_.push_back(std::move(hs));
  }
  baseline_rmse_ = std::sqrt(baseline_sq / baseline_n);
  fp8_baseline_rmse_ = std::sqrt(fp8_sq / baseline_n);
}

double fp8_rmse_bar(const std::string& inputs) {
  // The FlashAttention-3 paper's per-tensor FP8 baseline reached 2.4e-2 on its outlier inputs.
  return inputs == "outliers" ? 2.4e-2 : 1e-2;
}

Verification ReferenceSample::check(const DeviceBuffers& out, const Rule& rule) const {
  const bool check_lse = rule.check_lse;
  const Shape& s = shape_;
  Verification v;
  const auto o = copy_bits(out.o, s.qkv_elements());
  for (std::uint16_t bits : o) {
    if (!std::isfinite(half_bits_to_double(bits, s.dtype))) ++v.nonfinite_count;
  }
  v.all_finite = v.nonfinite_count == 0;
  double sq = 0;
  std::int64_t n = 0;
  double lse_err = 0;
  for (const auto& hs : heads_) {
    std::vector<float> lse;
    if (check_lse) {
      lse.resize(static_cast<std::size_t>(s.N));
      FA_CUDA_CHECK(cudaMemcpy(lse.data(), out.lse + hs.bh * s.N, lse.size() * 4, cudaMemcpyDeviceToHost));
    }
    for (std::size_t i = 0; i < hs.rows.size(); ++i) {
      const std::int64_t base = (hs.bh * s.N + hs.rows[i]) * s.d;
      for (std::int64_t c = 0; c < s.d; ++c) {
        const double got = half_bits_to_double(o[static_cast<std::size_t>(base + c)], s.dtype);
        const double err = std::abs(got - hs.ref[i * s.d + c]);
        v.max_abs_error = std::isnan(err) ? INFINITY : std::max(v.max_abs_error, err);
        sq += err * err;
        ++n;
      }
      if (check_lse) {
        const double e = std::abs(static_cast<double>(lse[static_cast<std::size_t>(hs.rows[i])]) - hs.lse[i]);
        lse_err = std::isnan(e) ? INFINITY : std::max(lse_err, e);
      }
    }
    v.rows_checked += static_cast<std::int64_t>(hs.rows.size());
  }
  v.heads_checked = static_cast<std::int64_t>(heads_.size());
  v.rmse = n > 0 ? std::sqrt(sq / static_cast<double>(n)) : 0;
  v.baseline_max_abs_error = baseline_max_abs_error_;
  v.baseline_rmse = baseline_rmse_;
  if (check_lse) v.lse_max_abs_error = lse_err;
  if (rule.accuracy == AccuracyRule::fp8_rmse) {
    // FP8 is judged by RMSE against fp64 (the FlashAttention-3 paper's measure); its lse comes
    // from quantised scores and is reported, not judged. The tolerance: the bar (the FlashAttention-3 paper's figures), or twice a plain per-head FP8
    // implementation where E4M3 rounding alone exceeds the bar: short sequences, where each
    // output averages few rounded values of V.
    v.metric = "rmse";
    v.baseline_max_abs_error = fp8_baseline_max_abs_error_;
    v.baseline_rmse = fp8_baseline_rmse_;
    v.tolerance = std::max(rule.rmse_bar, 2 * fp8_baseline_rmse_);
    v.passed = v.all_finite && v.rmse <= v.tolerance;
    return v;
  }
  v.tolerance = 2 * baseline_max_abs_error_ + kAbsoluteSlack;
  v.passed = v.all_finite && v.max_abs_error <= v.tolerance;
  // lse is fp32 from exact 16-bit inputs with fp32 accumulation: far under this bound.
  if (check_lse) v.passed = v.passed && lse_err <= kAbsoluteSlack;
  return v;
}

}  // namespace fa::bench
