#include "kernels/reference/reference.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fa::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool masked(bool causal, std::int64_t row, std::int64_t key) {
  return causal && key > row;
}

double dot(const double* a, const double* b, std::int64_t d) {
  double s = 0.0;
  for (std::int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// PlainLse of rounded scores `s` (natural units, -inf where masked) against the exact ones.
PlainLse lse_against_exact(const Head& h, std::int64_t row, bool causal, double scale,
                           const std::vector<float>& s) {
  const std::int64_t d = h.d;
  std::vector<double> exact(h.N, kNegInf);
  double m_exact = kNegInf, m_low = kNegInf;
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (std::isinf(s[k])) continue;
    exact[k] = scale * dot(&h.q[row * d], &h.k[k * d], d);
    m_exact = std::max(m_exact, exact[k]);
    m_low = std::max(m_low, static_cast<double>(s[k]));
  }
  double l_exact = 0, l_low = 0;
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (exact[k] == kNegInf) continue;
    l_exact += std::exp(exact[k] - m_exact);
    l_low += std::exp(static_cast<double>(s[k]) - m_low);
  }
  double first = 0, second = 0;
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (exact[k] == kNegInf) continue;
    const double p = std::exp(exact[k] - m_exact) / l_exact,
                 e = static_cast<double>(s[k]) - exact[k];
    first += p * p * e * e;
    second += p * e * e;
  }
  return {m_low + std::log(l_low), std::sqrt(first) + second / 2};
}

}  // namespace

double round_to(double x, DType dtype) {
  const float f = static_cast<float>(x);
  if (dtype == DType::bf16) return static_cast<double>(__bfloat162float(__float2bfloat16_rn(f)));
  return static_cast<double>(__half2float(__float2half_rn(f)));
}

double attention_row(const Head& h, std::int64_t row, bool causal, double scale, double* out) {
  const std::int64_t d = h.d;
  const double* q = &h.q[row * d];
  std::vector<double> s(h.N);
  double m = kNegInf;
  for (std::int64_t k = 0; k < h.N; ++k) {
    s[k] = masked(causal, row, k) ? kNegInf : scale * dot(q, &h.k[k * d], d);
    m = std::max(m, s[k]);
  }
  double l = 0.0;
  std::fill(out, out + d, 0.0);
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (s[k] == kNegInf) continue;
    const double p = std::exp(s[k] - m);
    l += p;
    for (std::int64_t c = 0; c < d; ++c) out[c] += p * h.v[k * d + c];
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] /= l;
  return m + std::log(l);
}

PlainLse plain_lowp_row(const Head& h, std::int64_t row, bool causal, double scale, DType dtype,
                        double* out) {
  const std::int64_t d = h.d;
  std::vector<float> s(h.N);
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (masked(causal, row, k)) {
      s[k] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float acc = 0.0f;  // inputs are exact in dtype, so their fp32 products are exact too
    for (std::int64_t c = 0; c < d; ++c) {
      acc += static_cast<float>(h.q[row * d + c]) * static_cast<float>(h.k[k * d + c]);
    }
    s[k] = static_cast<float>(round_to(acc * static_cast<float>(scale), dtype));
    m = std::max(m, s[k]);
  }
  float l = 0.0f;
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (!std::isinf(s[k])) l += std::exp(s[k] - m);
  }
  std::vector<float> acc(d, 0.0f);
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (std::isinf(s[k])) continue;
    const float p = static_cast<float>(round_to(std::exp(s[k] - m) / l, dtype));
    for (std::int64_t c = 0; c < d; ++c) acc[c] += p * static_cast<float>(h.v[k * d + c]);
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] = round_to(acc[c], dtype);
  return lse_against_exact(h, row, causal, scale, s);
}

double round_to_e4m3(double x) {
  const __nv_fp8_storage_t q =
      __nv_cvt_float_to_fp8(static_cast<float>(x), __NV_SATFINITE, __NV_E4M3);
  const __half_raw h = __nv_cvt_fp8_to_halfraw(q, __NV_E4M3);
  return static_cast<double>(__half2float(__half(h)));
}

Fp8Scales fp8_scales(const Head& h) {
  auto amax = [](const std::vector<double>& v) {
    double m = 1e-30;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
  };
  return {448.0 / amax(h.q), 448.0 / amax(h.k), 448.0 / amax(h.v)};
}

PlainLse plain_fp8_row(const Head& h, const Fp8Scales& scales, std::int64_t row, bool causal,
                       double scale, double* out) {
  const std::int64_t d = h.d;
  const double sq = scales.q, sk = scales.k, sv = scales.v;
  std::vector<float> q8(d);
  for (std::int64_t c = 0; c < d; ++c)
    q8[c] = static_cast<float>(round_to_e4m3(h.q[row * d + c] * sq));
  std::vector<float> s(h.N);
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (masked(causal, row, k)) {
      s[k] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float acc = 0.0f;
    for (std::int64_t c = 0; c < d; ++c)
      acc += q8[c] * static_cast<float>(round_to_e4m3(h.k[k * d + c] * sk));
    s[k] = static_cast<float>(acc / (sq * sk) * scale);
    m = std::max(m, s[k]);
  }
  float l = 0.0f;
  std::vector<float> acc(d, 0.0f);
  for (std::int64_t k = 0; k < h.N; ++k) {
    if (std::isinf(s[k])) continue;
    const float p = std::exp(s[k] - m);
    l += p;
    const float p8 = static_cast<float>(round_to_e4m3(256.0 * p));
    for (std::int64_t c = 0; c < d; ++c)
      acc[c] += p8 * static_cast<float>(round_to_e4m3(h.v[k * d + c] * sv));
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] = round_to(acc[c] / (256.0 * sv) / l, DType::bf16);
  return lse_against_exact(h, row, causal, scale, s);
}

std::vector<double> tiled_kv_outer(const Head& h, bool causal, double scale, int block_q,
                                   int block_kv) {
  const std::int64_t N = h.N, d = h.d;
  // "HBM" state, read and written back at every (j, i) step as in Algorithm 1 of FlashAttention.
  std::vector<double> O(N * d, 0.0), l(N, 0.0), m(N, kNegInf);
  std::vector<double> s(block_kv);
  for (std::int64_t j0 = 0; j0 < N; j0 += block_kv) {
    const std::int64_t j1 = std::min<std::int64_t>(N, j0 + block_kv);
    for (std::int64_t i0 = 0; i0 < N; i0 += block_q) {
      const std::int64_t i1 = std::min<std::int64_t>(N, i0 + block_q);
      if (causal && j0 > i1 - 1) continue;  // block entirely above the diagonal
      for (std::int64_t r = i0; r < i1; ++r) {
        double mt = kNegInf;  // block row max
        for (std::int64_t k = j0; k < j1; ++k) {
          s[k - j0] = masked(causal, r, k) ? kNegInf : scale * dot(&h.q[r * d], &h.k[k * d], d);
          mt = std::max(mt, s[k - j0]);
        }
        if (mt == kNegInf) continue;  // no valid key for this row in this block
        double lt = 0.0;
        std::vector<double> pv(d, 0.0);
        for (std::int64_t k = j0; k < j1; ++k) {
          if (s[k - j0] == kNegInf) continue;
          const double p = std::exp(s[k - j0] - mt);
          lt += p;
          for (std::int64_t c = 0; c < d; ++c) pv[c] += p * h.v[k * d + c];
        }
        const double m_new = std::max(m[r], mt);
        const double a = std::exp(m[r] - m_new), b = std::exp(mt - m_new);
        const double l_new = a * l[r] + b * lt;
        for (std::int64_t c = 0; c < d; ++c) {
          O[r * d + c] = (l[r] * a * O[r * d + c] + b * pv[c]) / l_new;
        }
        l[r] = l_new;
        m[r] = m_new;
      }
    }
  }
  return O;
}

std::vector<double> tiled_q_outer(const Head& h, bool causal, double scale, int block_q,
                                  int block_kv, std::vector<double>* lse) {
  const std::int64_t N = h.N, d = h.d;
  std::vector<double> O(N * d, 0.0);
  if (lse) lse->assign(N, 0.0);
  for (std::int64_t i0 = 0; i0 < N; i0 += block_q) {
    const std::int64_t i1 = std::min<std::int64_t>(N, i0 + block_q);
    // On-chip state of one query block.
    std::vector<double> m(i1 - i0, kNegInf), l(i1 - i0, 0.0), acc((i1 - i0) * d, 0.0);
    for (std::int64_t j0 = 0; j0 < N; j0 += block_kv) {
      if (causal && j0 > i1 - 1) break;
      const std::int64_t j1 = std::min<std::int64_t>(N, j0 + block_kv);
      for (std::int64_t r = i0; r < i1; ++r) {
        const std::int64_t lr = r - i0;
        double mx = m[lr];
        std::vector<double> s(j1 - j0);
        for (std::int64_t k = j0; k < j1; ++k) {
          s[k - j0] = masked(causal, r, k) ? kNegInf : scale * dot(&h.q[r * d], &h.k[k * d], d);
          mx = std::max(mx, s[k - j0]);
        }
        if (mx == kNegInf) continue;
        const double alpha = std::exp(m[lr] - mx);  // 0 on the first valid block
        l[lr] *= alpha;
        for (std::int64_t c = 0; c < d; ++c) acc[lr * d + c] *= alpha;
        for (std::int64_t k = j0; k < j1; ++k) {
          if (s[k - j0] == kNegInf) continue;
          const double p = std::exp(s[k - j0] - mx);
          l[lr] += p;
          for (std::int64_t c = 0; c < d; ++c) acc[lr * d + c] += p * h.v[k * d + c];
        }
        m[lr] = mx;
      }
    }
    for (std::int64_t r = i0; r < i1; ++r) {  // the deferred rescale
      const std::int64_t lr = r - i0;
      for (std::int64_t c = 0; c < d; ++c) O[r * d + c] = acc[lr * d + c] / l[lr];
      if (lse) (*lse)[r] = m[lr] + std::log(l[lr]);
    }
  }
  return O;
}

}  // namespace fa::reference
