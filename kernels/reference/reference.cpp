#include "kernels/reference/reference.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "kernels/fp8/fp8_layout.hpp"

namespace fa::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Causal, aligned bottom-right: query `row` sees keys up to row + N_kv - N.
bool masked(const Head& h, bool causal, std::int64_t row, std::int64_t key) {
  return causal && key > row + h.kv_len() - h.N;
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
  std::vector<double> exact(h.kv_len(), kNegInf);
  double m_exact = kNegInf, m_low = kNegInf;
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (std::isinf(s[k])) continue;
    exact[k] = scale * dot(&h.q[row * d], &h.k[k * d], d);
    m_exact = std::max(m_exact, exact[k]);
    m_low = std::max(m_low, static_cast<double>(s[k]));
  }
  double l_exact = 0, l_low = 0;
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (exact[k] == kNegInf) continue;
    l_exact += std::exp(exact[k] - m_exact);
    l_low += std::exp(static_cast<double>(s[k]) - m_low);
  }
  double first = 0, second = 0;
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
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
  std::vector<double> s(h.kv_len());
  double m = kNegInf;
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    s[k] = masked(h, causal, row, k) ? kNegInf : scale * dot(q, &h.k[k * d], d);
    m = std::max(m, s[k]);
  }
  double l = 0.0;
  std::fill(out, out + d, 0.0);
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
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
  std::vector<float> s(h.kv_len());
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (masked(h, causal, row, k)) {
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
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (!std::isinf(s[k])) l += std::exp(s[k] - m);
  }
  std::vector<float> acc(d, 0.0f);
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
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

void rotate_hadamard(double* x, std::int64_t d) {
  for (std::int64_t i = 0; i < d; ++i) {
    if (fp8::flip_sign(static_cast<int>(i))) x[i] = -x[i];
  }
  for (std::int64_t len = 1; len < d; len <<= 1) {
    for (std::int64_t i = 0; i < d; i += 2 * len) {
      for (std::int64_t j = i; j < i + len; ++j) {
        const double a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  const double norm = 1.0 / std::sqrt(static_cast<double>(d));
  for (std::int64_t i = 0; i < d; ++i) x[i] *= norm;
}

namespace {

// t with each row rotated (H S) when `rotate` and d is a power of two.
std::vector<double> rotated_rows(std::vector<double> t, std::int64_t N, std::int64_t d,
                                 bool rotate) {
  if (rotate && d > 0 && (d & (d - 1)) == 0) {
    for (std::int64_t r = 0; r < N; ++r) rotate_hadamard(&t[r * d], d);
  }
  return t;
}

// An all-zero block keeps a finite scale, as the kernels' does.
constexpr double kAmaxFloor = 1e-30;

double amax_of(const std::vector<double>& t, std::int64_t begin, std::int64_t end) {
  double amax = kAmaxFloor;
  for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::abs(t[i]));
  return amax;
}

// One tensor [N][d] scaled by 448 / amax per block of `block_rows` rows (0: all N), or by
// 448 / `fixed_amax` when that is positive, and rounded to E4M3, rotated first when `rotate`.
void quantise_tensor(const std::vector<double>& in, std::int64_t N, std::int64_t d, bool rotate,
                     std::int64_t block_rows, double fixed_amax, std::vector<float>* out,
                     std::vector<double>* descale) {
  const std::vector<double> t = rotated_rows(in, N, d, rotate);
  out->resize(static_cast<std::size_t>(N * d));
  descale->resize(static_cast<std::size_t>(N));
  const std::int64_t span = block_rows > 0 ? block_rows : std::max<std::int64_t>(N, 1);
  for (std::int64_t r0 = 0; r0 < N; r0 += span) {
    const std::int64_t r1 = std::min(N, r0 + span);
    const double amax = fixed_amax > 0 ? fixed_amax : amax_of(t, r0 * d, r1 * d);
    const double sc = 448.0 / amax;
    for (std::int64_t r = r0; r < r1; ++r) {
      (*descale)[r] = amax / 448.0;
      for (std::int64_t c = 0; c < d; ++c)
        (*out)[r * d + c] = static_cast<float>(round_to_e4m3(t[r * d + c] * sc));
    }
  }
}

}  // namespace

Fp8Amax fp8_amax(const Head& h, bool rotated) {
  const std::int64_t n = h.N * h.d;
  return {amax_of(rotated_rows(h.q, h.N, h.d, rotated), 0, n),
          amax_of(rotated_rows(h.k, h.N, h.d, rotated), 0, n), amax_of(h.v, 0, n)};
}

Fp8Amax max(const Fp8Amax& a, const Fp8Amax& b) {
  return {std::max(a.q, b.q), std::max(a.k, b.k), std::max(a.v, b.v)};
}

Fp8Head fp8_quantise(const Head& h, const Fp8Scheme& scheme, const Fp8Amax* tensor_amax) {
  Fp8Head f;
  quantise_tensor(h.q, h.N, h.d, scheme.rotated, scheme.q_rows, tensor_amax ? tensor_amax->q : 0,
                  &f.q8, &f.q_descale);
  quantise_tensor(h.k, h.N, h.d, scheme.rotated, scheme.kv_rows, tensor_amax ? tensor_amax->k : 0,
                  &f.k8, &f.k_descale);
  quantise_tensor(h.v, h.N, h.d, /*rotate=*/false, scheme.kv_rows, tensor_amax ? tensor_amax->v : 0,
                  &f.v8, &f.v_descale);
  return f;
}

PlainLse fp8_row(const Head& h, const Fp8Head& f, std::int64_t row, bool causal, double scale,
                 double* out) {
  const std::int64_t d = h.d;
  std::vector<float> s(h.kv_len());
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (masked(h, causal, row, k)) {
      s[k] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float acc = 0.0f;
    for (std::int64_t c = 0; c < d; ++c) acc += f.q8[row * d + c] * f.k8[k * d + c];
    s[k] = static_cast<float>(acc * (f.q_descale[row] * f.k_descale[k] * scale));
    m = std::max(m, s[k]);
  }
  float l = 0.0f;
  std::vector<float> acc(d, 0.0f);
  for (std::int64_t k = 0; k < h.kv_len(); ++k) {
    if (std::isinf(s[k])) continue;
    const float p = std::exp(s[k] - m);
    l += p;
    const float w = static_cast<float>(round_to_e4m3(256.0 * p) * f.v_descale[k]);
    for (std::int64_t c = 0; c < d; ++c) acc[c] += w * f.v8[k * d + c];
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] = round_to(acc[c] / 256.0 / l, DType::bf16);
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
          s[k - j0] = masked(h, causal, r, k) ? kNegInf : scale * dot(&h.q[r * d], &h.k[k * d], d);
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
          s[k - j0] = masked(h, causal, r, k) ? kNegInf : scale * dot(&h.q[r * d], &h.k[k * d], d);
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

// ---- Backward ----

namespace fa::reference {
namespace {

// f(i) for i in [0, n), split over `threads` threads (rows are independent).
template <typename F>
void parallel_for(std::int64_t n, int threads, F&& f) {
  const int workers =
      static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n)));
  if (workers <= 1) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (std::int64_t i = w; i < n; i += workers) f(i);
    });
  }
  for (auto& t : pool) t.join();
}

// fp32 dot product of two rows that are exact in the input dtype (so each product is exact).
float dot32(const double* a, const double* b, std::int64_t d) {
  float acc = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) acc += static_cast<float>(a[c]) * static_cast<float>(b[c]);
  return acc;
}

// The plain forward's statistics of one row (plain_lowp_row's arithmetic): the rounded scores'
// max m and sum l, from which its P entries follow (plain_p).
struct PlainStats {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
};

float plain_score(const Head& h, std::int64_t i, std::int64_t j, double scale, DType dtype) {
  const float acc = dot32(&h.q[i * h.d], &h.k[j * h.d], h.d);
  return static_cast<float>(round_to(acc * static_cast<float>(scale), dtype));
}

PlainStats plain_stats(const Head& h, std::int64_t i, bool causal, double scale, DType dtype) {
  PlainStats st;
  const std::int64_t end = causal ? i + 1 : h.N;
  std::vector<float> s(static_cast<std::size_t>(end));
  for (std::int64_t j = 0; j < end; ++j) {
    s[j] = plain_score(h, i, j, scale, dtype);
    st.m = std::max(st.m, s[j]);
  }
  for (std::int64_t j = 0; j < end; ++j) st.l += std::exp(s[j] - st.m);
  return st;
}

float plain_p(float s, const PlainStats& st, DType dtype) {
  return static_cast<float>(round_to(std::exp(s - st.m) / st.l, dtype));
}

}  // namespace

GradRows attention_backward_rows(const Head& h, const std::vector<double>& d_o, bool causal,
                                 double scale, const std::vector<std::int64_t>& q_rows,
                                 const std::vector<std::int64_t>& k_rows, int threads) {
  const std::int64_t N = h.N, d = h.d;
  std::vector<double> lse(N), D(N);
  parallel_for(N, threads, [&](std::int64_t i) {
    std::vector<double> o(d);
    lse[i] = attention_row(h, i, causal, scale, o.data());
    D[i] = dot(&d_o[i * d], o.data(), d);
  });
  GradRows g;
  g.dq.assign(q_rows.size() * d, 0.0);
  g.dk.assign(k_rows.size() * d, 0.0);
  g.dv.assign(k_rows.size() * d, 0.0);
  parallel_for(static_cast<std::int64_t>(q_rows.size()), threads, [&](std::int64_t r) {
    const std::int64_t i = q_rows[r];
    double* dq = &g.dq[r * d];
    for (std::int64_t j = 0; j < (causal ? i + 1 : N); ++j) {
      const double p = std::exp(scale * dot(&h.q[i * d], &h.k[j * d], d) - lse[i]);
      const double ds = p * (dot(&d_o[i * d], &h.v[j * d], d) - D[i]);
      for (std::int64_t c = 0; c < d; ++c) dq[c] += ds * h.k[j * d + c];
    }
    for (std::int64_t c = 0; c < d; ++c) dq[c] *= scale;
  });
  parallel_for(static_cast<std::int64_t>(k_rows.size()), threads, [&](std::int64_t r) {
    const std::int64_t j = k_rows[r];
    double *dk = &g.dk[r * d], *dv = &g.dv[r * d];
    for (std::int64_t i = causal ? j : 0; i < N; ++i) {
      const double p = std::exp(scale * dot(&h.q[i * d], &h.k[j * d], d) - lse[i]);
      const double ds = p * (dot(&d_o[i * d], &h.v[j * d], d) - D[i]);
      for (std::int64_t c = 0; c < d; ++c) {
        dv[c] += p * d_o[i * d + c];
        dk[c] += ds * h.q[i * d + c];
      }
    }
    for (std::int64_t c = 0; c < d; ++c) dk[c] *= scale;
  });
  return g;
}

GradRows plain_lowp_backward_rows(const Head& h, const std::vector<double>& d_o, bool causal,
                                  double scale, DType dtype,
                                  const std::vector<std::int64_t>& q_rows,
                                  const std::vector<std::int64_t>& k_rows, int threads) {
  const std::int64_t N = h.N, d = h.d;
  auto plain_dp = [&](std::int64_t i, std::int64_t j) {
    return static_cast<float>(round_to(dot32(&d_o[i * d], &h.v[j * d], d), dtype));
  };
  // Every row's forward statistics and D = fp32 rowsum(dO o O), O the plain forward's output
  // rounded to the dtype: FlashAttention's D, the one standard, fa2 and cuDNN compute. (With
  // PyTorch's D = rowsum(dP o P) instead, dP - D cancelled exactly in the plain computation on
  // rows whose exact gradient is 0 (N = 1; causal row 0), so its error there was 0 and the rule
  // allowed nothing for the round-off of dP every implementation has, on the H200.)
  std::vector<PlainStats> st(N);
  std::vector<float> D(N);
  parallel_for(N, threads, [&](std::int64_t i) {
    st[i] = plain_stats(h, i, causal, scale, dtype);
    std::vector<float> o(static_cast<std::size_t>(d), 0.0f);
    for (std::int64_t j = 0; j < (causal ? i + 1 : N); ++j) {
      const float p = plain_p(plain_score(h, i, j, scale, dtype), st[i], dtype);
      for (std::int64_t c = 0; c < d; ++c) o[c] += p * static_cast<float>(h.v[j * d + c]);
    }
    float acc = 0.0f;
    for (std::int64_t c = 0; c < d; ++c)
      acc += static_cast<float>(d_o[i * d + c]) * static_cast<float>(round_to(o[c], dtype));
    D[i] = acc;
  });
  auto plain_ds = [&](std::int64_t i, std::int64_t j, float p) {
    return static_cast<float>(round_to(p * (plain_dp(i, j) - D[i]), dtype));
  };
  const float scale_f = static_cast<float>(scale);
  GradRows g;
  g.dq.assign(q_rows.size() * d, 0.0);
  g.dk.assign(k_rows.size() * d, 0.0);
  g.dv.assign(k_rows.size() * d, 0.0);
  parallel_for(static_cast<std::int64_t>(q_rows.size()), threads, [&](std::int64_t r) {
    const std::int64_t i = q_rows[r];
    std::vector<float> acc(d, 0.0f);
    for (std::int64_t j = 0; j < (causal ? i + 1 : N); ++j) {
      const float ds = plain_ds(i, j, plain_p(plain_score(h, i, j, scale, dtype), st[i], dtype));
      for (std::int64_t c = 0; c < d; ++c) acc[c] += ds * static_cast<float>(h.k[j * d + c]);
    }
    for (std::int64_t c = 0; c < d; ++c) g.dq[r * d + c] = round_to(acc[c] * scale_f, dtype);
  });
  parallel_for(static_cast<std::int64_t>(k_rows.size()), threads, [&](std::int64_t r) {
    const std::int64_t j = k_rows[r];
    std::vector<float> dk(d, 0.0f), dv(d, 0.0f);
    for (std::int64_t i = causal ? j : 0; i < N; ++i) {
      const float p = plain_p(plain_score(h, i, j, scale, dtype), st[i], dtype);
      const float ds = plain_ds(i, j, p);
      for (std::int64_t c = 0; c < d; ++c) {
        dv[c] += p * static_cast<float>(d_o[i * d + c]);
        dk[c] += ds * static_cast<float>(h.q[i * d + c]);
      }
    }
    for (std::int64_t c = 0; c < d; ++c) {
      g.dk[r * d + c] = round_to(dk[c] * scale_f, dtype);
      g.dv[r * d + c] = round_to(dv[c], dtype);
    }
  });
  return g;
}

GradRows attention_backward_naive(const Head& h, const std::vector<double>& d_o, bool causal,
                                  double scale) {
  const std::int64_t N = h.N, d = h.d;
  std::vector<double> P(N * N, 0.0), dP(N * N, 0.0), O(N * d, 0.0);
  for (std::int64_t i = 0; i < N; ++i) {
    double m = kNegInf;
    for (std::int64_t j = 0; j < N; ++j) {
      P[i * N + j] = masked(h, causal, i, j) ? kNegInf : scale * dot(&h.q[i * d], &h.k[j * d], d);
      m = std::max(m, P[i * N + j]);
    }
    double l = 0;
    for (std::int64_t j = 0; j < N; ++j) {
      P[i * N + j] = P[i * N + j] == kNegInf ? 0.0 : std::exp(P[i * N + j] - m);
      l += P[i * N + j];
    }
    for (std::int64_t j = 0; j < N; ++j) P[i * N + j] /= l;
  }
  GradRows g;
  g.dq.assign(N * d, 0.0);
  g.dk.assign(N * d, 0.0);
  g.dv.assign(N * d, 0.0);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        O[i * d + c] += P[i * N + j] * h.v[j * d + c];
        g.dv[j * d + c] += P[i * N + j] * d_o[i * d + c];
        dP[i * N + j] += d_o[i * d + c] * h.v[j * d + c];
      }
  for (std::int64_t i = 0; i < N; ++i) {
    // Softmax's Jacobian applied row by row: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik).
    double rowdot = 0;
    for (std::int64_t j = 0; j < N; ++j) rowdot += P[i * N + j] * dP[i * N + j];
    for (std::int64_t j = 0; j < N; ++j) {
      const double ds = P[i * N + j] * (dP[i * N + j] - rowdot);
      for (std::int64_t c = 0; c < d; ++c) {
        g.dq[i * d + c] += scale * ds * h.k[j * d + c];
        g.dk[j * d + c] += scale * ds * h.q[i * d + c];
      }
    }
  }
  return g;
}

}  // namespace fa::reference
