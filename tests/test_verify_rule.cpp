// The verification rule on the CPU (runs in CI): kernels emulated in fp64 with each fault of
// kernels/common/fault.hpp, plus the rounding noise a real kernel of that precision adds (the
// plain same-precision computation's error on the same row), must FAIL the rule; the same
// emulation without a fault must pass. The GPU half (tests/test_faults_gpu.cpp) runs the real
// kernels with the same faults.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "bench/verify.hpp"
#include "kernels/common/fault.hpp"
#include "kernels/common/fill_sample.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/reference/reference.hpp"

namespace fa {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

reference::Head random_head(std::int64_t N, std::int64_t d, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  reference::Head h;
  h.N = N;
  h.d = d;
  for (auto* v : {&h.q, &h.k, &h.v}) {
    v->resize(static_cast<std::size_t>(N * d));
    for (double& x : *v) x = reference::round_to(normal(rng), dtype);
  }
  return h;
}

// What a kernel with `f` computes for one row, in fp64: O (d values) and the lse.
double faulty_row(const reference::Head& h, std::int64_t row, bool causal, double scale,
                  const FaultInjection& f, int bc, double* out) {
  const std::int64_t N = h.N, d = h.d;
  const double sc = scale * f.scale_multiplier();
  std::vector<double> s(N, -INFINITY);
  double m = -INFINITY;
  for (std::int64_t k = 0; k < N; ++k) {
    if (causal && k > row + f.mask_shift) continue;
    if (f.drop_kv_block >= 0 && k / bc == f.drop_kv_block) continue;
    double dot = 0;
    for (std::int64_t c = 0; c < d; ++c) dot += h.q[row * d + c] * h.k[k * d + c];
    s[k] = sc * dot;
    m = std::max(m, s[k]);
  }
  const std::int64_t blocks = (N + bc - 1) / bc;
  double l = 0;
  std::fill(out, out + d, 0.0);
  for (std::int64_t k = 0; k < N; ++k) {
    if (s[k] == -INFINITY) continue;
    const double p = std::exp(s[k] - m);
    l += p;
    std::int64_t src = k;
    if (k / bc == f.wrong_v_block) src = k + (k / bc + 1 < blocks ? bc : -bc);
    for (std::int64_t c = 0; c < d; ++c) out[c] += p * (src < N ? h.v[src * d + c] : 0.0);
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] /= l;
  return m + std::log(l);
}

struct Emulated {
  // (bh, row) -> O row and lse
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> o;
  std::map<std::pair<std::int64_t, std::int64_t>, double> lse;
};

// A kernel of `precision` with fault `f` (zero: writes zeros), block sizes (br, bc): the faulty
// fp64 result plus the plain computation's rounding error on that row.
Emulated emulate(const Shape& s, const std::vector<reference::Head>& heads,
                 const bench::ReferenceSample& ref, AccuracyRule rule, const FaultInjection& f,
                 bool zero, int br, int bc) {
  Emulated e;
  const std::int64_t d = s.d;
  const std::int64_t last_block_first = (s.N - 1) / br * br;
  for (std::int64_t bh : ref.sampled_heads()) {
    const auto& h = heads[static_cast<std::size_t>(bh)];
    const reference::Fp8Head quantised = rule == AccuracyRule::fp8_rmse
                                             ? reference::fp8_quantise(h, fp8::scheme({}))
                                             : reference::Fp8Head{};
    for (std::int64_t row : ref.sampled_rows(bh)) {
      std::vector<double> exact(d), plain(d), faulty(d);
      const double lse_exact = reference::attention_row(h, row, s.causal, s.scale(), exact.data());
      const double lse_plain =
          rule == AccuracyRule::fp8_rmse
              ? reference::fp8_row(h, quantised, row, s.causal, s.scale(), plain.data()).lse
              : reference::plain_lowp_row(h, row, s.causal, s.scale(), s.dtype, plain.data()).lse;
      const double lse_faulty = faulty_row(h, row, s.causal, s.scale(), f, bc, faulty.data());
      std::vector<double> out(d);
      for (std::int64_t c = 0; c < d; ++c) out[c] = faulty[c] + (plain[c] - exact[c]);
      if (zero) std::fill(out.begin(), out.end(), 0.0);
      if (f.skip_last_query_block && row >= last_block_first)
        std::fill(out.begin(), out.end(), kNaN);
      e.o[{bh, row}] = out;
      e.lse[{bh, row}] = lse_faulty + (lse_plain - lse_exact);
    }
  }
  return e;
}

// The rule's verdict on an emulated kernel; fp8 rows against `scheme` (default: our fp8's).
bench::Verification judge(const bench::ReferenceSample& ref, const Emulated& e, AccuracyRule rule,
                          const Fp8Scheme& scheme = fp8::scheme({})) {
  std::int64_t nonfinite = 0;
  for (const auto& [key, row] : e.o) {
    for (double x : row) nonfinite += std::isfinite(x) ? 0 : 1;
  }
  const bench::ReferenceSample::OutputAt o = [&](std::int64_t bh, std::int64_t row,
                                                 std::int64_t c) {
    return e.o.at({bh, row})[static_cast<std::size_t>(c)];
  };
  const bench::ReferenceSample::LseAt lse = [&](std::int64_t bh, std::int64_t row) {
    return e.lse.at({bh, row});
  };
  return ref.judge(o, &lse, nonfinite, {rule, true, scheme});
}

struct Case {
  DType dtype;
  bool fp8;
  bool causal;
};

class RuleCatchesFaults : public testing::TestWithParam<Case> {};

TEST_P(RuleCatchesFaults, AtN4096) {
  const Case c = GetParam();
  Shape s;
  s.B = 1;
  s.H = 2;
  s.N = 4096;
  s.d = 64;
  s.causal = c.causal;
  s.dtype = c.dtype;
  std::vector<reference::Head> heads;
  for (std::int64_t bh = 0; bh < s.heads_total(); ++bh)
    heads.push_back(random_head(s.N, s.d, s.dtype, 100 + bh));
  const bench::ReferenceSample ref(
      s, [&](std::int64_t bh) { return heads[static_cast<std::size_t>(bh)]; }, 7);
  const AccuracyRule rule = c.fp8 ? AccuracyRule::fp8_rmse : AccuracyRule::same_precision;
  const int br = 128, bc = c.fp8 ? 128 : 64;  // fa2's and fp8's default tiles
  const int blocks = static_cast<int>(s.N / bc);

  const auto clean = judge(ref, emulate(s, heads, ref, rule, {}, false, br, bc), rule);
  EXPECT_TRUE(clean.passed) << bench::verification_failure_reason(clean);

  struct Named {
    const char* name;
    FaultInjection f;
    bool zero = false;
  };
  std::vector<Named> faults;
  faults.push_back({"last K/V block dropped", {}});
  faults.back().f.drop_kv_block = blocks - 1;
  faults.push_back({"interior K/V block dropped", {}});
  faults.back().f.drop_kv_block = blocks / 2;
  faults.push_back({"scale x1.05", {}});
  faults.back().f.scale_factor = 1.05f;
  faults.push_back({"exp for exp2", {}});
  faults.back().f.natural_exp = true;
  faults.push_back({"wrong V tile (last block)", {}});
  faults.back().f.wrong_v_block = blocks - 1;
  faults.push_back({"last query block not written", {}});
  faults.back().f.skip_last_query_block = true;
  faults.push_back({"all-zero O", {}, true});
  if (c.causal) {
    faults.push_back({"causal mask off by one (+1)", {}});
    faults.back().f.mask_shift = 1;
    faults.push_back({"causal mask off by one (-1)", {}});
    faults.back().f.mask_shift = -1;
  }
  for (const auto& nf : faults) {
    const auto v = judge(ref, emulate(s, heads, ref, rule, nf.f, nf.zero, br, bc), rule);
    EXPECT_FALSE(v.passed) << nf.name << ": worst row ratio " << v.worst_row_ratio << ", lse ratio "
                           << v.lse_worst_row_ratio.value_or(0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, RuleCatchesFaults,
    testing::Values(Case{DType::bf16, false, false}, Case{DType::bf16, false, true},
                    Case{DType::fp16, false, false}, Case{DType::fp16, false, true},
                    Case{DType::bf16, true, false}, Case{DType::bf16, true, true}),
    [](const testing::TestParamInfo<Case>& p) {
      return std::string(p.param.fp8 ? "fp8" : to_string(p.param.dtype)) +
             (p.param.causal ? "_causal" : "_full");
    });

// Above N ~ 27k an all-zero output passed the old absolute RMSE bar of 1e-2 (RMS(O) ~ 0.009 at
// N = 32768); relative to each row's size it is a 100% error.
TEST(RuleCatchesFaults, AllZeroOutputAtN32768) {
  Shape s;
  s.N = 32768;
  s.d = 64;
  std::vector<reference::Head> heads{random_head(s.N, s.d, s.dtype, 5)};
  const bench::ReferenceSample ref(
      s, [&](std::int64_t) { return heads[0]; }, 3);
  Emulated zero;
  for (std::int64_t row : ref.sampled_rows(0)) {
    zero.o[{0, row}] = std::vector<double>(static_cast<std::size_t>(s.d), 0.0);
    std::vector<double> o(static_cast<std::size_t>(s.d));
    zero.lse[{0, row}] = reference::attention_row(heads[0], row, false, s.scale(), o.data());
  }
  const auto v = judge(ref, zero, AccuracyRule::same_precision);
  EXPECT_FALSE(v.passed);
  EXPECT_GT(v.worst_row_ratio, 10.0);
}

// What the FP8 kernels compute for one row, emulated: the scheme's E4M3 inputs (`quantised`),
// fp32 scores, and the online softmax over blocks of `bc` keys, P rounded to E4M3 as 256 P
// against the running maximum (not the row's), the accumulator rescaled as the maximum grows.
// Its roundings of P are other draws than the modelled baseline's; its Q, K, V roundings the same.
double online_fp8_row(const reference::Head& h, const reference::Fp8Head& f, std::int64_t row,
                      bool causal, double scale, int bc, double* out) {
  const std::int64_t N = h.N, d = h.d;
  std::vector<float> s(static_cast<std::size_t>(N), -INFINITY), acc(static_cast<std::size_t>(d));
  for (std::int64_t k = 0; k < N && !(causal && k > row); ++k) {
    float dot = 0;
    for (std::int64_t c = 0; c < d; ++c) dot += f.q8[row * d + c] * f.k8[k * d + c];
    s[k] = static_cast<float>(dot * (f.q_descale[row] * f.k_descale[k] * scale));
  }
  float m = -INFINITY, l = 0;
  for (std::int64_t j0 = 0; j0 < N; j0 += bc) {
    const std::int64_t j1 = std::min<std::int64_t>(N, j0 + bc);
    float mb = m;
    for (std::int64_t k = j0; k < j1; ++k) mb = std::max(mb, s[k]);
    if (mb == -INFINITY) continue;
    const float a = m == -INFINITY ? 0.0f : std::exp(m - mb);
    l *= a;
    for (float& x : acc) x *= a;
    m = mb;
    for (std::int64_t k = j0; k < j1; ++k) {
      if (s[k] == -INFINITY) continue;
      const float p = std::exp(s[k] - m);
      l += p;
      const float w = static_cast<float>(reference::round_to_e4m3(256.0 * p) * f.v_descale[k]);
      for (std::int64_t c = 0; c < d; ++c) acc[c] += w * f.v8[k * d + c];
    }
  }
  for (std::int64_t c = 0; c < d; ++c)
    out[c] = reference::round_to(acc[c] / 256.0 / l, DType::bf16);
  return m + std::log(l);
}

// An honest FP8 kernel passes the fp8 rule on every input family. Held to a plain per-head FP8
// computation instead (the rule before 2026-11-24), rows ruled by a few keys failed by chance:
// their error is mostly the rounding of Q and K in those keys' scores, and the plain baseline
// rounds other values (no rotation, other scales), so its row figure is an independent draw. The
// figure under both baselines is printed (docs/accuracy.md, "FP8").
TEST(Fp8RowRule, AnHonestKernelPassesOnEveryInputFamily) {
  auto family_name = [](Inputs f) {
    return f == Inputs::normal
               ? "normal"
               : (f == Inputs::outliers ? "outliers"
                                        : (f == Inputs::uniform ? "uniform" : "heavy"));
  };
  const fp8::Scale grans[] = {fp8::Scale::block, fp8::Scale::head};
  for (Inputs family : {Inputs::normal, Inputs::outliers, Inputs::uniform, Inputs::heavy}) {
    for (bool causal : {false, true}) {
      for (fp8::Scale gran : grans) {
        Shape s;
        s.B = 1;
        s.H = 3;
        s.N = 1000;
        s.d = 128;
        s.causal = causal;
        std::vector<reference::Head> heads(static_cast<std::size_t>(s.heads_total()));
        const std::uint64_t seed = 31 + static_cast<std::uint64_t>(family);
        for (std::size_t bh = 0; bh < heads.size(); ++bh) {
          auto& h = heads[bh];
          h.N = s.N;
          h.d = s.d;
          for (int t = 0; t < 3; ++t) {
            auto& v = t == 0 ? h.q : (t == 1 ? h.k : h.v);
            v.resize(static_cast<std::size_t>(s.N * s.d));
            for (std::size_t i = 0; i < v.size(); ++i)
              v[i] = reference::round_to(
                  sample_input(seed * 3 + static_cast<std::uint64_t>(t), bh * v.size() + i, family),
                  DType::bf16);
          }
        }
        const bench::ReferenceSample ref(
            s, [&](std::int64_t bh) { return heads[static_cast<std::size_t>(bh)]; }, seed);
        OptionValues options;
        options[kOptionFp8Scale] = std::string(fp8::scale_name(gran));
        const Fp8Scheme scheme = fp8::scheme(options);
        Emulated e;
        for (std::int64_t bh : ref.sampled_heads()) {
          const auto& h = heads[static_cast<std::size_t>(bh)];
          const reference::Fp8Head quantised = reference::fp8_quantise(h, scheme);
          for (std::int64_t row : ref.sampled_rows(bh)) {
            std::vector<double> out(static_cast<std::size_t>(s.d));
            e.lse[{bh, row}] =
                online_fp8_row(h, quantised, row, s.causal, s.scale(), 128, out.data());
            e.o[{bh, row}] = out;
          }
        }
        const auto v = judge(ref, e, AccuracyRule::fp8_rmse, scheme);
        const auto plain = judge(ref, e, AccuracyRule::fp8_rmse, kPlainFp8);
        std::printf(
            "fp8 rule, %s inputs, causal %d, %s scales: worst row %.2f, lse %.2f of the "
            "tolerance (against plain FP8: row %.2f, lse %.2f); relative RMSE %.3g "
            "(plain per-head %.3g)\n",
            family_name(family), causal, fp8::scale_name(gran), v.worst_row_ratio,
            v.lse_worst_row_ratio.value_or(0), plain.worst_row_ratio,
            plain.lse_worst_row_ratio.value_or(0), v.relative_rmse.value_or(0),
            v.baseline_relative_rmse.value_or(0));
        EXPECT_TRUE(v.passed) << family_name(family) << " causal=" << causal << " "
                              << fp8::scale_name(gran) << ": "
                              << bench::verification_failure_reason(v);
      }
    }
  }
}

TEST(VerificationRows, CoverEveryBlockEdgeAndThePartialLastBlock) {
  const auto rows = bench::verification_rows(1000, 1);
  auto has = [&](std::int64_t r) { return std::find(rows.begin(), rows.end(), r) != rows.end(); };
  for (std::int64_t b = 0; b < 1000 / 64; ++b) {
    EXPECT_TRUE(has(b * 64)) << b;
    EXPECT_TRUE(has(b * 64 + 63)) << b;
  }
  EXPECT_TRUE(has(960) && has(961) && has(896) && has(897) && has(999) && has(998));
  const auto small = bench::verification_rows(17, 1);
  EXPECT_EQ(small.size(), 17u);
  const auto big = bench::verification_rows(65536, 1);
  EXPECT_TRUE(std::find(big.begin(), big.end(), 65535) != big.end());
  EXPECT_LT(big.size(), 600u);  // a spread past N = 16384 keeps the fp64 reference affordable
}

TEST(VerificationRows, UlpOfTheDtype) {
  EXPECT_DOUBLE_EQ(bench::ulp_of(1.0, DType::bf16), std::ldexp(1.0, -7));
  EXPECT_DOUBLE_EQ(bench::ulp_of(0.03, DType::bf16), std::ldexp(1.0, -6 - 7));
  EXPECT_DOUBLE_EQ(bench::ulp_of(1.0, DType::fp16), std::ldexp(1.0, -10));
}

}  // namespace
}  // namespace fa

// ---- Backward: the per-row rule of bench::BackwardReferenceSample ----
namespace fa {
namespace {

struct BwdFixture {
  Shape s;
  std::vector<bench::BackwardReferenceSample::HeadInputs> heads;
  std::unique_ptr<bench::BackwardReferenceSample> ref;

  explicit BwdFixture(bool causal) {
    s.B = 1;
    s.H = 2;
    s.N = 80;
    s.d = 64;
    s.causal = causal;
    s.dtype = DType::bf16;
    for (std::int64_t bh = 0; bh < 2; ++bh) {
      bench::BackwardReferenceSample::HeadInputs h;
      h.head = random_head(s.N, s.d, s.dtype, 40 + bh);
      std::mt19937_64 rng(50 + bh);
      std::normal_distribution<double> normal;
      h.d_o.resize(static_cast<std::size_t>(s.N * s.d));
      for (auto& x : h.d_o) x = reference::round_to(normal(rng), s.dtype);
      h.o = h.d_o;  // stands in: only checked for being unchanged
      h.lse.assign(static_cast<std::size_t>(s.N), 0.0f);
      heads.push_back(std::move(h));
    }
    ref = std::make_unique<bench::BackwardReferenceSample>(
        s, [this](std::int64_t bh) { return heads[static_cast<std::size_t>(bh)]; }, 3);
  }

  // The gradients of a kernel that computes like the plain backward, with keys [drop_lo, drop_hi)
  // dropped as fa2's fault drops a K/V block: their dK and dV rows written as 0.
  bench::Verification judge_plain(std::int64_t drop_lo = 0, std::int64_t drop_hi = 0,
                                  bool nan_at_dk = false, std::string* worst = nullptr) {
    std::map<std::int64_t, reference::GradRows> grads;
    std::vector<std::int64_t> all(static_cast<std::size_t>(s.N));
    for (std::int64_t r = 0; r < s.N; ++r) all[static_cast<std::size_t>(r)] = r;
    for (std::int64_t bh = 0; bh < 2; ++bh) {
      const auto& h = heads[static_cast<std::size_t>(bh)];
      grads[bh] = reference::plain_lowp_backward_rows(h.head, h.d_o, s.causal, s.scale(), s.dtype,
                                                      all, all, 2);
      for (std::int64_t j = drop_lo; j < drop_hi; ++j) {
        for (std::int64_t c = 0; c < s.d; ++c)
          grads[bh].dk[static_cast<std::size_t>(j * s.d + c)] =
              grads[bh].dv[static_cast<std::size_t>(j * s.d + c)] = 0;
      }
    }
    const auto at = [&](bench::BackwardReferenceSample::Gradient g, std::int64_t bh,
                        std::int64_t row, std::int64_t c) {
      const auto& G = grads.at(bh);
      const auto& v = g == 0 ? G.dq : g == 1 ? G.dk : G.dv;
      if (nan_at_dk && g == 1 && row == 5 && c == 3) return kNaN;
      return v[static_cast<std::size_t>(row * s.d + c)];
    };
    return ref->judge(at, 0, worst);
  }
};

TEST(BackwardRule, ARowWhosePlainErrorIsSmallByChanceIsHeldToTheTypicalRow) {
  // H200, 2026-11-23: standard's causal dQ row 127 of head 30 (N=4096, d=128) failed at 1.13x
  // while other seeds of the same shape passed at 0.43-0.71: the plain backward's own error on
  // that row was small by chance. The row is now held to the typical row's relative error too.
  const std::vector<double> plain_err{1e-3, 2e-3, 4e-3, 1e-5 /* lucky */, 3e-3};
  const std::vector<double> ref_max{1.0, 1.0, 2.0, 1.0, 1.0};
  const double typical = bench::typical_relative_error(plain_err, ref_max);
  EXPECT_DOUBLE_EQ(typical, 2e-3);  // median of 1e-3, 2e-3, 2e-3, 1e-5, 3e-3
  const double floor = bench::ulp_of(2.0, DType::bf16);
  const double lucky = bench::backward_row_tolerance(1e-5, 1.0, typical, floor, DType::bf16);
  EXPECT_DOUBLE_EQ(lucky, 2 * 2e-3 + floor);  // the typical row's error, not its own 1e-5
  // A row whose own plain error is above typical keeps its own.
  EXPECT_DOUBLE_EQ(bench::backward_row_tolerance(3e-3, 1.0, typical, floor, DType::bf16),
                   2 * 3e-3 + floor);
  // Scaled to the row: a row 10x smaller gets a 10x smaller typical allowance.
  EXPECT_DOUBLE_EQ(bench::backward_row_tolerance(0, 0.1, typical, 0, DType::bf16),
                   2 * 2e-4 + bench::ulp_of(0.1, DType::bf16));
  // Rows of zero scale (causal dQ row 0) and non-finite figures do not move the median.
  EXPECT_DOUBLE_EQ(bench::typical_relative_error({5.0, 1e-3, NAN, 3e-3}, {0.0, 1.0, 1.0, 1.0}),
                   3e-3);
  EXPECT_EQ(bench::typical_relative_error({}, {}), 0.0);
  // An error of a dropped block's size (the row's own scale) still fails by far.
  EXPECT_GT(0.5 / lucky, 10.0);
}

TEST(BackwardRule, PlainComputationPassesFaultsFail) {
  for (bool causal : {false, true}) {
    BwdFixture f(causal);
    const auto ok = f.judge_plain();
    EXPECT_TRUE(ok.passed) << "causal " << causal << " ratio " << ok.worst_row_ratio;
    EXPECT_LE(ok.worst_row_ratio, 0.5 + 1e-9);  // its own error against 2x its own error
    EXPECT_GT(ok.baseline_max_abs_error, 0.0);
    EXPECT_EQ(ok.rows_checked, static_cast<std::int64_t>(f.ref->sampled_rows(0).size() +
                                                         f.ref->sampled_rows(1).size()));
    std::string worst;
    const auto dropped = f.judge_plain(64, 80, false, &worst);  // the last (partial) block
    EXPECT_FALSE(dropped.passed) << "causal " << causal;
    EXPECT_GT(dropped.worst_row_ratio, 1.0);
    EXPECT_FALSE(worst.empty());
    const auto nan = f.judge_plain(0, 0, true, &worst);
    EXPECT_FALSE(nan.passed);
    EXPECT_EQ(worst, "dK");
    EXPECT_NE(bench::backward_failure_reason(nan, worst).find("dK row 5"), std::string::npos)
        << bench::backward_failure_reason(nan, worst);
  }
}

}  // namespace
}  // namespace fa
