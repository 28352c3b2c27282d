// GPU tests of the cuDNN peer on cudnn-frontend: the backward against an fp64 backward of our own
// (dQ, dK, dV from the lse our forward convention defines: natural log, [B*H, N] fp32), with the
// faults it must catch; the inference forward (stats=false) writes no lse and is still right;
// plans are built once per shape. Skipped with a reason when no GPU or no cuDNN is present.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/cudnn/cudnn.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

// "" when the cuDNN peer can run here, else why not.
std::string cannot_run() {
  std::string why;
  if (!query_device(0, &why)) return "no GPU: " + why;
  const std::string status = cudnn_library_status();
  if (status.rfind("cuDNN ", 0) != 0 || status.find("(libcudnn.so.9)") == std::string::npos)
    return status;
  return "";
}

std::uint16_t to_bits(double x, DType t) {
  std::uint16_t bits = 0;
  if (t == DType::bf16) {
    const __nv_bfloat16 h = __float2bfloat16(static_cast<float>(x));
    std::memcpy(&bits, &h, 2);
  } else {
    const __half h = __float2half(static_cast<float>(x));
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}
double from_bits(std::uint16_t bits, DType t) {
  if (t == DType::bf16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &bits, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}

// One problem on the host in fp64, inputs already rounded to the dtype: [B*H][N][d] each.
struct Problem {
  Shape s;
  std::vector<double> q, k, v, d_o;
  std::vector<double> o, lse;      // the exact forward
  std::vector<double> dq, dk, dv;  // the exact backward
};

// Square multi-head shapes only (the host reference's indexing): K, V, dO and every gradient are
// Q's size.
Problem make_problem(const Shape& s, std::uint64_t seed) {
  Problem p;
  p.s = s;
  const std::size_t n = static_cast<std::size_t>(s.qo_elements());
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* x : {&p.q, &p.k, &p.v, &p.d_o}) {
    x->resize(n);
    for (double& e : *x) e = from_bits(to_bits(normal(rng), s.dtype), s.dtype);
  }
  p.o.assign(n, 0);
  p.dq.assign(n, 0);
  p.dk.assign(n, 0);
  p.dv.assign(n, 0);
  p.lse.assign(static_cast<std::size_t>(s.heads_total() * s.N), 0);
  const std::int64_t N = s.N, d = s.d;
  const double scale = s.scale();
  std::vector<double> P(static_cast<std::size_t>(N * N)), dP(P.size());
  for (std::int64_t h = 0; h < s.heads_total(); ++h) {
    const std::size_t base = static_cast<std::size_t>(h * N * d);
    auto at = [&](const std::vector<double>& x, std::int64_t row, std::int64_t col) {
      return x[base + static_cast<std::size_t>(row * d + col)];
    };
    for (std::int64_t i = 0; i < N; ++i) {  // P, lse, O
      const std::int64_t keys = s.causal ? i + 1 : N;
      double m = -INFINITY;
      for (std::int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += at(p.q, i, c) * at(p.k, j, c);
        P[i * N + j] = dot * scale;
        m = std::max(m, P[i * N + j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < keys; ++j) sum += std::exp(P[i * N + j] - m);
      p.lse[static_cast<std::size_t>(h * N + i)] = m + std::log(sum);
      for (std::int64_t j = 0; j < N; ++j)
        P[i * N + j] = j < keys ? std::exp(P[i * N + j] - m) / sum : 0.0;
      for (std::int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < keys; ++j) acc += P[i * N + j] * at(p.v, j, c);
        p.o[base + static_cast<std::size_t>(i * d + c)] = acc;
      }
    }
    // dV = P^T dO; dP = dO V^T; D = rowsum(P o dP) = rowsum(dO o O); dS = P o (dP - D);
    // dQ = scale dS K; dK = scale dS^T Q.
    for (std::int64_t i = 0; i < N; ++i) {
      double D = 0;
      for (std::int64_t j = 0; j < N; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += at(p.d_o, i, c) * at(p.v, j, c);
        dP[i * N + j] = dot;
        D += P[i * N + j] * dot;
      }
      for (std::int64_t j = 0; j < N; ++j) dP[i * N + j] = P[i * N + j] * (dP[i * N + j] - D);
    }
    for (std::int64_t j = 0; j < N; ++j) {
      for (std::int64_t c = 0; c < d; ++c) {
        double dv = 0, dk = 0;
        for (std::int64_t i = 0; i < N; ++i) {
          dv += P[i * N + j] * at(p.d_o, i, c);
          dk += dP[i * N + j] * at(p.q, i, c);
        }
        p.dv[base + static_cast<std::size_t>(j * d + c)] = dv;
        p.dk[base + static_cast<std::size_t>(j * d + c)] = dk * scale;
      }
    }
    for (std::int64_t i = 0; i < N; ++i) {
      for (std::int64_t c = 0; c < d; ++c) {
        double dq = 0;
        for (std::int64_t j = 0; j < N; ++j) dq += dP[i * N + j] * at(p.k, j, c);
        p.dq[base + static_cast<std::size_t>(i * d + c)] = dq * scale;
      }
    }
  }
  return p;
}

struct DeviceArray {
  void* ptr = nullptr;
  explicit DeviceArray(std::size_t bytes) { FA_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
};

void upload16(void* dst, const std::vector<double>& x, DType t) {
  std::vector<std::uint16_t> bits(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) bits[i] = to_bits(x[i], t);
  FA_CUDA_CHECK(cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
}
std::vector<double> download16(const void* src, std::size_t n, DType t) {
  std::vector<std::uint16_t> bits(n);
  FA_CUDA_CHECK(cudaMemcpy(bits.data(), src, n * 2, cudaMemcpyDeviceToHost));
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = from_bits(bits[i], t);
  return x;
}

// max |got - want| / max |want|: the gradient's error relative to its size (NaN: infinite).
double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0, size = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::abs(got[i] - want[i]));
    size = std::max(size, std::abs(want[i]));
  }
  return err / std::max(size, 1e-30);
}

// The bar: a few units of the dtype's rounding (bf16 2^-8, fp16 2^-11) for gradients that sum
// N products in fp32 and are rounded once (measured errors are printed with each case).
double tolerance(DType t) {
  return t == DType::bf16 ? 2e-2 : 4e-3;
}

enum class LseFault { none, log2, plus_one };

// cuDNN's dQ, dK, dV for `p`, fed O rounded to the dtype and the lse (fp32), perhaps spoiled.
struct Gradients {
  std::string error;
  std::vector<double> dq, dk, dv;
};
Gradients cudnn_backward(const Problem& p, LseFault fault) {
  const Shape& s = p.s;
  const std::size_t n = static_cast<std::size_t>(s.qo_elements());
  DeviceArray q(n * 2), k(n * 2), v(n * 2), o(n * 2), d_o(n * 2), dq(n * 2), dk(n * 2), dv(n * 2);
  DeviceArray lse(p.lse.size() * 4);
  upload16(q.ptr, p.q, s.dtype);
  upload16(k.ptr, p.k, s.dtype);
  upload16(v.ptr, p.v, s.dtype);
  upload16(o.ptr, p.o, s.dtype);
  upload16(d_o.ptr, p.d_o, s.dtype);
  std::vector<float> lse32(p.lse.size());
  for (std::size_t i = 0; i < lse32.size(); ++i) {
    double x = p.lse[i];
    if (fault == LseFault::log2) x *= 1.4426950408889634;  // log2 instead of natural log
    if (fault == LseFault::plus_one) x += 1.0;
    lse32[i] = static_cast<float>(x);
  }
  FA_CUDA_CHECK(cudaMemcpy(lse.ptr, lse32.data(), lse32.size() * 4, cudaMemcpyHostToDevice));
  for (void* out : {dq.ptr, dk.ptr, dv.ptr}) FA_CUDA_CHECK(poison_nan16(out, n, nullptr));
  auto launcher = find_variant("cudnn")->make_launcher({});
  BackwardBuffers b{q.ptr,  k.ptr,  v.ptr, o.ptr, d_o.ptr, static_cast<const float*>(lse.ptr),
                    dq.ptr, dk.ptr, dv.ptr};
  Gradients g;
  g.error = launcher->run_backward(s, {}, b, nullptr);
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  if (!g.error.empty()) return g;
  g.dq = download16(dq.ptr, n, s.dtype);
  g.dk = download16(dk.ptr, n, s.dtype);
  g.dv = download16(dv.ptr, n, s.dtype);
  return g;
}

struct BackwardCase {
  std::int64_t N;
  int d;
  bool causal;
  DType dtype;
};

class CudnnBackward : public testing::TestWithParam<BackwardCase> {};

TEST_P(CudnnBackward, MatchesFp64AndCatchesAWrongLse) {
  if (std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  const BackwardCase c = GetParam();
  Shape s;
  s.B = 1;
  s.H = 2;
  s.N = c.N;
  s.d = c.d;
  s.causal = c.causal;
  s.dtype = c.dtype;
  const Problem p = make_problem(s, 77 + c.N + c.d + (c.causal ? 1 : 0));
  const Gradients g = cudnn_backward(p, LseFault::none);
  ASSERT_EQ(g.error, "");
  const double tol = tolerance(c.dtype);
  const double eq = relative_error(g.dq, p.dq), ek = relative_error(g.dk, p.dk),
               ev = relative_error(g.dv, p.dv);
  std::printf(
      "cudnn-backward N=%lld d=%d causal=%d %s: relative max error dQ %.2e dK %.2e dV %.2e "
      "(tolerance %.1e)\n",
      static_cast<long long>(c.N), c.d, c.causal ? 1 : 0, c.dtype == DType::bf16 ? "bf16" : "fp16",
      eq, ek, ev, tol);
  EXPECT_LE(eq, tol) << "dQ";
  EXPECT_LE(ek, tol) << "dK";
  EXPECT_LE(ev, tol) << "dV";
  // The check fails when cuDNN is handed an lse in another convention or off by one: so the
  // passing case says cuDNN's stats are our natural-log lse, and the bar can be missed.
  for (LseFault fault : {LseFault::log2, LseFault::plus_one}) {
    const Gradients bad = cudnn_backward(p, fault);
    ASSERT_EQ(bad.error, "");
    const double worst = std::max(
        {relative_error(bad.dq, p.dq), relative_error(bad.dk, p.dk), relative_error(bad.dv, p.dv)});
    EXPECT_GT(worst, tol) << (fault == LseFault::log2 ? "log2 lse" : "lse + 1") << " passed";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudnnBackward,
                         testing::Values(BackwardCase{129, 64, false, DType::bf16},
                                         BackwardCase{129, 64, true, DType::bf16},
                                         BackwardCase{129, 128, false, DType::bf16},
                                         BackwardCase{129, 128, true, DType::bf16},
                                         BackwardCase{256, 128, true, DType::fp16},
                                         BackwardCase{17, 64, true, DType::fp16}),
                         [](const testing::TestParamInfo<BackwardCase>& info) {
                           const BackwardCase& c = info.param;
                           return "N" + std::to_string(c.N) + "_d" + std::to_string(c.d) +
                                  (c.causal ? "_causal" : "") +
                                  (c.dtype == DType::bf16 ? "_bf16" : "_fp16");
                         });

// The forward through the variant as the runner drives it: prepare, run, the verification rule.
struct ForwardRun {
  std::string error;
  bench::Verification v;
  bool lse_untouched = false;  // every lse element still the NaN it was poisoned with
};
ForwardRun run_forward(const std::string& variant, const Shape& s, const LaunchOptions& lo,
                       std::uint64_t seed) {
  const VariantInfo* info = find_variant(variant);
  auto launcher = info->make_launcher(lo);
  const std::size_t n = static_cast<std::size_t>(s.qo_elements());
  const std::size_t n_kv = static_cast<std::size_t>(s.kv_elements());
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N);
  DeviceArray q(n * 2), k(n_kv * 2), v(n_kv * 2), o(n * 2), lse(rows * 4);
  const std::size_t ws_bytes = launcher->workspace_bytes(s, {});
  DeviceArray ws(std::max<std::size_t>(ws_bytes, 256));
  FA_CUDA_CHECK(fill_normal(q.ptr, s.qo_elements(), s.dtype, seed * 3, nullptr));
  FA_CUDA_CHECK(fill_normal(k.ptr, s.kv_elements(), s.dtype, seed * 3 + 1, nullptr));
  FA_CUDA_CHECK(fill_normal(v.ptr, s.kv_elements(), s.dtype, seed * 3 + 2, nullptr));
  FA_CUDA_CHECK(poison_nan16(o.ptr, s.qo_elements(), nullptr));
  FA_CUDA_CHECK(
      poison_nan32(static_cast<float*>(lse.ptr), static_cast<std::int64_t>(rows), nullptr));
  DeviceBuffers db{q.ptr, k.ptr, v.ptr, o.ptr, static_cast<float*>(lse.ptr), ws.ptr, ws_bytes};
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  bench::ReferenceSample ref(s, db, seed);
  ForwardRun r;
  r.error = launcher->prepare(s, {}, db, nullptr);
  if (r.error.empty()) r.error = launcher->run(s, {}, db, nullptr);
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  if (!r.error.empty()) return r;
  r.v = ref.check(db, bench::ReferenceSample::rule_for(*info, lo.options));
  std::vector<float> host(rows);
  FA_CUDA_CHECK(cudaMemcpy(host.data(), lse.ptr, rows * 4, cudaMemcpyDeviceToHost));
  r.lse_untouched = std::all_of(host.begin(), host.end(), [](float x) { return std::isnan(x); });
  return r;
}

TEST(CudnnForward, TheInferenceForwardWritesNoLseAndIsRight) {
  if (std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  for (bool causal : {false, true}) {
    Shape s;
    s.B = 2;
    s.H = 3;
    s.N = 129;
    s.d = 64;
    s.causal = causal;
    LaunchOptions with, without;
    with.options[kOptionStats] = true;
    without.options[kOptionStats] = false;
    const ForwardRun a = run_forward("cudnn", s, with, 11);
    ASSERT_EQ(a.error, "");
    EXPECT_TRUE(a.v.passed) << bench::verification_failure_reason(a.v);
    ASSERT_TRUE(a.v.lse_worst_row_ratio.has_value());  // lse checked (natural log, as ours)
    EXPECT_LE(*a.v.lse_worst_row_ratio, 1.0);
    EXPECT_FALSE(a.lse_untouched);
    const ForwardRun b = run_forward("cudnn", s, without, 11);
    ASSERT_EQ(b.error, "");
    EXPECT_TRUE(b.v.passed) << bench::verification_failure_reason(b.v);
    EXPECT_FALSE(b.v.lse_worst_row_ratio.has_value());  // not checked: not written
    EXPECT_TRUE(b.lse_untouched) << "stats=false wrote the lse";
  }
}

TEST(CudnnForward, PlansAreBuiltOncePerShape) {
  if (std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  Shape s;
  s.B = 1;
  s.H = 2;
  s.N = 333;  // a shape no other test uses
  s.d = 128;
  const std::size_t before = cudnn_plans_built();
  ASSERT_EQ(run_forward("cudnn", s, {}, 5).error, "");
  const std::size_t after_first = cudnn_plans_built();
  EXPECT_EQ(after_first, before + 1);
  ASSERT_EQ(run_forward("cudnn", s, {}, 6).error, "");  // a new launcher, the same plan
  EXPECT_EQ(cudnn_plans_built(), after_first);
  s.causal = true;
  ASSERT_EQ(run_forward("cudnn", s, {}, 7).error, "");
  EXPECT_EQ(cudnn_plans_built(), after_first + 1);
}

// Known issues of the hand-built FP8 graph on cuDNN 9.14 (docs/peers.md), re-checked with the
// frontend's graph. Run on request only (FA_CUDNN_FP8_RECHECK=1, as scripts/cudnn_check.sh does):
// the registry offers cudnn-fp8 at d=128 only until this passes on the H200.
TEST(CudnnFp8Recheck, D64) {
  if (std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  if (!std::getenv("FA_CUDNN_FP8_RECHECK")) {
    GTEST_SKIP() << "a known-issue re-check, run on request: FA_CUDNN_FP8_RECHECK=1 "
                    "(scripts/cudnn_check.sh)";
  }
  for (bool causal : {false, true}) {
    Shape s;
    s.B = 4;
    s.H = 8;
    s.N = 1024;
    s.d = 64;
    s.causal = causal;
    const ForwardRun r = run_forward("cudnn-fp8", s, {}, 21);
    ASSERT_EQ(r.error, "");
    std::printf("cudnn-fp8 d=64 N=1024 causal=%d: relative RMSE %.3e (plain FP8 %.3e) %s\n",
                causal ? 1 : 0, r.v.relative_rmse.value_or(-1),
                r.v.baseline_relative_rmse.value_or(-1), r.v.passed ? "passes" : "FAILS");
    EXPECT_TRUE(r.v.passed) << bench::verification_failure_reason(r.v);
  }
}

}  // namespace
}  // namespace fa
