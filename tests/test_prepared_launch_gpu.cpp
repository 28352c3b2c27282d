// fa3's and fp8's launchers do their host work in prepare(): run() after prepare() encodes no TMA
// descriptor (Nsight Compute's range replay cannot capture one, and the timed loop would pay for
// it), and a run() on another buffer encodes again, so its output lands there. Skipped with a
// reason when no GPU runs the variant.
#include <gtest/gtest.h>

#include <string>

#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

struct Allocation {
  void* p = nullptr;
  explicit Allocation(std::size_t bytes) { FA_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Allocation() { cudaFree(p); }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
};

class PreparedLaunchGpu : public testing::TestWithParam<const char*> {};

TEST_P(PreparedLaunchGpu, RunEncodesNothingAfterPrepareAndAgainForANewBuffer) {
  const VariantInfo* info = find_variant(GetParam());
  ASSERT_NE(info, nullptr);
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  if (auto r = info->unsupported_on_device(device->cc_major, device->cc_minor); !r.empty())
    GTEST_SKIP() << r;
  Shape s;
  s.B = 1;
  s.H = 3;
  s.N = 640;  // several query blocks, the last one partial
  s.d = 128;
  if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
  const Tiles tiles = info->default_tiles(s);
  auto launcher = info->make_launcher(LaunchOptions{});

  const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
  const std::size_t ws_bytes = launcher->workspace_bytes(s, tiles);
  const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_elements()) * 2;
  Allocation q(bytes), k(kv_bytes), v(kv_bytes), o(bytes), o2(bytes);
  Allocation lse(static_cast<std::size_t>(s.heads_total() * s.N) * 4), ws(ws_bytes + 16);
  FA_CUDA_CHECK(cudaMemset(ws.p, 0xff, ws_bytes + 16));
  FA_CUDA_CHECK(fill_normal(q.p, s.qo_elements(), s.dtype, 11, nullptr));
  FA_CUDA_CHECK(fill_normal(k.p, s.kv_elements(), s.dtype, 12, nullptr));
  FA_CUDA_CHECK(fill_normal(v.p, s.kv_elements(), s.dtype, 13, nullptr));
  const DeviceBuffers b{q.p, k.p, v.p, o.p, static_cast<float*>(lse.p), ws.p, ws_bytes};
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  const bench::ReferenceSample ref(s, b, 7);
  const auto rule = bench::ReferenceSample::rule_for(*info, {});
  auto run_and_check = [&](const DeviceBuffers& buffers) {
    FA_CUDA_CHECK(poison_nan16(buffers.o, s.qo_elements(), nullptr));
    EXPECT_EQ(launcher->run(s, tiles, buffers, nullptr), "");
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    const auto verdict = ref.check(buffers, rule);
    EXPECT_TRUE(verdict.passed) << bench::verification_failure_reason(verdict);
  };

  ASSERT_EQ(launcher->prepare(s, tiles, b, nullptr), "");
  const auto prepared = hopper::launches_prepared().load();
  for (int i = 0; i < 3; ++i) run_and_check(b);
  EXPECT_EQ(hopper::launches_prepared().load(), prepared)
      << GetParam() << ": run() encoded descriptors after prepare()";

  // Another O: a descriptor kept from b would write the old buffer and leave this one NaN.
  DeviceBuffers b2 = b;
  b2.o = o2.p;
  run_and_check(b2);
  EXPECT_EQ(hopper::launches_prepared().load(), prepared + 1);
}

INSTANTIATE_TEST_SUITE_P(Hopper, PreparedLaunchGpu, testing::Values("fa3", "fp8"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace fa
