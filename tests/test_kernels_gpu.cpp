// GPU tests: every variant against the fp64 reference on fresh random inputs, outputs poisoned
// first, across odd shapes. Skipped with a reason when no GPU is present.
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>

#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

bool have_gpu(std::string* why) { return query_device(0, why).has_value(); }

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *lse = nullptr, *ws = nullptr;
  ~Buffers() {
    for (void* p : {q, k, v, o, lse, ws}) {
      if (p) cudaFree(p);
    }
  }
};

// Runs `variant` once on fresh inputs and returns the verification.
bench::Verification run_and_check(const std::string& variant, const Shape& s, std::uint64_t seed,
                                  bool skip_launch = false) {
  const VariantInfo* info = find_variant(variant);
  auto launcher = info->make_launcher();
  Buffers b;
  const std::size_t bytes = static_cast<std::size_t>(s.qkv_elements()) * 2;
  FA_CUDA_CHECK(cudaMalloc(&b.q, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.k, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.v, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.o, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.lse, s.heads_total() * s.N * 4));
  const std::size_t ws = launcher->workspace_bytes(s);
  if (ws) FA_CUDA_CHECK(cudaMalloc(&b.ws, ws));
  FA_CUDA_CHECK(fill_normal(b.q, s.qkv_elements(), s.dtype, seed * 3, nullptr));
  FA_CUDA_CHECK(fill_normal(b.k, s.qkv_elements(), s.dtype, seed * 3 + 1, nullptr));
  FA_CUDA_CHECK(fill_normal(b.v, s.qkv_elements(), s.dtype, seed * 3 + 2, nullptr));
  FA_CUDA_CHECK(poison_nan16(b.o, s.qkv_elements(), nullptr));
  FA_CUDA_CHECK(poison_nan32(static_cast<float*>(b.lse), s.heads_total() * s.N, nullptr));
  DeviceBuffers db{b.q, b.k, b.v, b.o, static_cast<float*>(b.lse), b.ws, ws};
  if (!skip_launch) {
    const std::string err = launcher->run(s, db, nullptr);
    EXPECT_EQ(err, "");
  }
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  bench::ReferenceSample ref(s, db, seed);
  return ref.check(db, info->algorithm == Algorithm::fa2);
}

struct Case {
  std::string variant;
  int d;
  DType dtype;
  bool causal;
  std::int64_t N;
};

// Readable names in ctest output instead of the parameter's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.variant << " d=" << c.d << " " << to_string(c.dtype) << (c.causal ? " causal" : "")
      << " N=" << c.N;
}

std::string case_name(const testing::TestParamInfo<Case>& p) {
  const Case& c = p.param;
  return c.variant + "_d" + std::to_string(c.d) + "_" + std::string(to_string(c.dtype)) +
         (c.causal ? "_causal" : "_full") + "_N" + std::to_string(c.N);
}

class VariantMatchesReference : public testing::TestWithParam<Case> {};

TEST_P(VariantMatchesReference, OnFreshRandomInputs) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const Case& c = GetParam();
  Shape s;
  s.N = c.N;
  s.d = c.d;
  s.causal = c.causal;
  s.dtype = c.dtype;
  // Odd batch and head counts; fewer heads at long N to keep the test quick.
  s.B = c.N >= 1000 ? 1 : 3;
  s.H = c.N >= 1000 ? 3 : 5;
  const auto v = run_and_check(c.variant, s, 1000 + c.N * 7 + c.d + (c.causal ? 1 : 0));
  EXPECT_TRUE(v.all_finite) << v.nonfinite_count << " non-finite outputs";
  EXPECT_LE(v.max_abs_error, v.tolerance) << "baseline " << v.baseline_max_abs_error;
  if (v.lse_max_abs_error) {
    EXPECT_LE(*v.lse_max_abs_error, 1e-3);
  }
  EXPECT_TRUE(v.passed);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* variant : {"standard", "fa2"}) {
    for (int d : {64, 128}) {
      for (DType t : {DType::bf16, DType::fp16}) {
        for (bool causal : {false, true}) {
          for (std::int64_t N : {1, 17, 128, 1000, 4096}) cases.push_back({variant, d, t, causal, N});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, VariantMatchesReference, testing::ValuesIn(all_cases()), case_name);

TEST(Verification, CatchesAnOutputNobodyWrote) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  Shape s;
  s.N = 64;
  s.d = 64;
  const auto v = run_and_check("fa2", s, 5, /*skip_launch=*/true);
  EXPECT_FALSE(v.all_finite);
  EXPECT_FALSE(v.passed);
}

}  // namespace
}  // namespace fa
