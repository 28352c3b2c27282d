// GPU tests: every variant against the fp64 reference on fresh random inputs, outputs poisoned
// first, across odd shapes. Skipped with a reason when no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/fa3/fa3.hpp"
#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/hopper/plan.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

bool have_gpu(std::string* why) {
  return query_device(0, why).has_value();
}

// Watchdog: a kernel that never finishes (a deadlocked barrier) must fail its test within seconds,
// not stall the whole run. Armed before the launcher's run() and disarmed after the device is
// synchronised, from a thread of its own: a hang that blocks the host inside run() (the H200's
// fp8 quantise hang of 2026-11-23 held cudaFuncSetAttribute behind the stuck kernel) is caught as
// well as one in the synchronisation. `on_timeout` runs on the watchdog's thread if `seconds`
// pass while armed.
class Watchdog {
 public:
  Watchdog(double seconds, std::function<void()> on_timeout)
      : thread_([this, seconds, f = std::move(on_timeout)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_.wait_for(lock, std::chrono::duration<double>(seconds),
                              [&] { return disarmed_; }))
            f();
        }) {}
  ~Watchdog() { disarm(); }
  void disarm() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      disarmed_ = true;
    }
    done_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool disarmed_ = false;
  std::thread thread_;  // last: started once the members above exist
};

// FA_TEST_KERNEL_TIMEOUT_S (default 10): every run here takes milliseconds.
double kernel_timeout_s() {
  const char* env = std::getenv("FA_TEST_KERNEL_TIMEOUT_S");
  const double v = env ? std::atof(env) : 0.0;
  return v > 0 ? v : 10.0;
}

// Exit code of a test binary whose kernel hung (the same as timeout(1)'s).
constexpr int kHangExitCode = 124;

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *lse = nullptr, *ws = nullptr;
  void *page_table = nullptr, *kv_lengths = nullptr;
  ~Buffers() {
    for (void* p : {q, k, v, o, lse, ws, page_table, kv_lengths}) {
      if (p) cudaFree(p);
    }
  }
};

// A paged or ragged cache's page table (scattered by `seed`) and lengths, on the device.
void upload_kv_cache(const Shape& s, std::uint64_t seed, Buffers* b) {
  if (!s.paged() && !s.ragged()) return;
  const std::vector<std::int32_t> lengths = kv_lengths_i32(s);
  FA_CUDA_CHECK(cudaMalloc(&b->kv_lengths, lengths.size() * 4));
  FA_CUDA_CHECK(
      cudaMemcpy(b->kv_lengths, lengths.data(), lengths.size() * 4, cudaMemcpyHostToDevice));
  if (!s.paged()) return;
  const std::vector<std::int32_t> table = kv_page_table(s, seed);
  FA_CUDA_CHECK(cudaMalloc(&b->page_table, table.size() * 4));
  FA_CUDA_CHECK(cudaMemcpy(b->page_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
}

// Why `info` cannot run on this machine ("no GPU: ...", or the GPU is not one the variant runs on);
// "" when it can.
std::string cannot_run_here(const VariantInfo& info) {
  std::string why;
  if (!have_gpu(&why)) return "no GPU: " + why;
  const auto device = query_device(0, &why);
  if (!device) return "no GPU: " + why;
  return info.unsupported_on_device(device->cc_major, device->cc_minor);
}

// One batch, three heads: the shape of most tests here (several query blocks of several heads).
Shape three_heads(std::int64_t N, std::int64_t d, bool causal) {
  Shape s;
  s.N = N;
  s.d = d;
  s.B = 1;
  s.H = 3;
  s.causal = causal;
  return s;
}

// Runs `variant` once on fresh inputs and returns the verification; `tiles` {0,0} = default.
// `output` (if given) receives O's raw 16-bit elements; `fp8_per_tensor` (if given) plain FP8's
// relative RMSE with one scale per whole tensor on the sampled rows (the baseline of issue 16's
// outlier bar; the verification's own plain baseline is per head).
bench::Verification run_and_check(const std::string& variant, const Shape& s, std::uint64_t seed,
                                  bool skip_launch = false, Tiles tiles = {},
                                  std::vector<std::uint16_t>* output = nullptr,
                                  Inputs inputs = Inputs::normal, LaunchOptions launch_options = {},
                                  double* fp8_per_tensor = nullptr) {
  const VariantInfo* info = find_variant(variant);
  auto launcher = info->make_launcher(launch_options);
  if (tiles.block_q == 0) tiles = info->default_tiles(static_cast<int>(s.d));
  Buffers b;
  const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
  const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_stored_elements()) * 2;
  FA_CUDA_CHECK(cudaMalloc(&b.q, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.k, kv_bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.v, kv_bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.o, bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.lse, s.heads_total() * s.N * 4));
  const std::size_t ws = launcher->workspace_bytes(s, tiles);
  if (ws) FA_CUDA_CHECK(cudaMalloc(&b.ws, ws));
  FA_CUDA_CHECK(fill_normal(b.q, s.qo_elements(), s.dtype, seed * 3, nullptr, inputs));
  FA_CUDA_CHECK(fill_normal(b.k, s.kv_stored_elements(), s.dtype, seed * 3 + 1, nullptr, inputs));
  FA_CUDA_CHECK(fill_normal(b.v, s.kv_stored_elements(), s.dtype, seed * 3 + 2, nullptr, inputs));
  upload_kv_cache(s, seed, &b);
  FA_CUDA_CHECK(poison_nan16(b.o, s.qo_elements(), nullptr));
  FA_CUDA_CHECK(poison_nan32(static_cast<float*>(b.lse), s.heads_total() * s.N, nullptr));
  if (ws) FA_CUDA_CHECK(cudaMemset(b.ws, 0xff, ws));  // NaN in every type a workspace holds
  DeviceBuffers db{b.q,
                   b.k,
                   b.v,
                   b.o,
                   static_cast<float*>(b.lse),
                   b.ws,
                   ws,
                   static_cast<const std::int32_t*>(b.page_table),
                   static_cast<const std::int32_t*>(b.kv_lengths)};
  // The reference from the inputs as they are before the run (a run that corrupts its inputs
  // must not be checked against the corrupted ones).
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  bench::ReferenceSample ref(s, db, seed);
  if (fp8_per_tensor) *fp8_per_tensor = ref.fp8_per_tensor_relative_rmse(db);
  if (!skip_launch) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    Watchdog watchdog(kernel_timeout_s(), [&] {
      // A hung kernel cannot be stopped and its context is lost: report and end the process
      // (gtest's own output would never come).
      std::fprintf(stderr,
                   "FAILED %s.%s: kernel did not finish in %g s (hang): variant %s N=%lld d=%lld "
                   "B=%lld H=%lld causal=%d tiles %dx%d\n",
                   test ? test->test_suite_name() : "?", test ? test->name() : "?",
                   kernel_timeout_s(), variant.c_str(), static_cast<long long>(s.N),
                   static_cast<long long>(s.d), static_cast<long long>(s.B),
                   static_cast<long long>(s.H), s.causal ? 1 : 0, tiles.block_q, tiles.block_kv);
      std::fflush(stderr);
      std::_Exit(kHangExitCode);
    });
    const std::string err = launcher->run(s, tiles, db, nullptr);
    EXPECT_EQ(err, "");
    FA_CUDA_CHECK(cudaDeviceSynchronize());  // under the watchdog
  }
  if (output) {
    output->resize(static_cast<std::size_t>(s.qo_elements()));
    FA_CUDA_CHECK(cudaMemcpy(output->data(), b.o, bytes, cudaMemcpyDeviceToHost));
  }
  return ref.check(db, bench::ReferenceSample::rule_for(*info, launch_options.options));
}

struct Case {
  std::string variant;
  int d;
  DType dtype;
  bool causal;
  std::int64_t N;
  Tiles tiles{};  // {0,0}: the variant's default
};

// Readable names in ctest output instead of the parameter's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.variant << " d=" << c.d << " " << to_string(c.dtype) << (c.causal ? " causal" : "")
      << " N=" << c.N << " tiles " << c.tiles.block_q << "x" << c.tiles.block_kv;
}

std::string case_name(const testing::TestParamInfo<Case>& p) {
  const Case& c = p.param;
  std::string variant = c.variant;  // gtest names allow [A-Za-z0-9_] only
  for (char& ch : variant) {
    if (ch == '-') ch = '_';
  }
  return variant + "_d" + std::to_string(c.d) + "_" + std::string(to_string(c.dtype)) +
         (c.causal ? "_causal" : "_full") + "_N" + std::to_string(c.N) +
         (c.tiles.block_q
              ? "_" + std::to_string(c.tiles.block_q) + "x" + std::to_string(c.tiles.block_kv)
              : "");
}

class VariantMatchesReference : public testing::TestWithParam<Case> {};

TEST_P(VariantMatchesReference, OnFreshRandomInputs) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const Case& c = GetParam();
  const auto device = query_device(0, &why);
  const VariantInfo* info = find_variant(c.variant);
  if (auto r = info->unsupported_on_device(device->cc_major, device->cc_minor); !r.empty()) {
    GTEST_SKIP() << r;
  }
  // A peer library that is not installed is a skip with its reason, not a failure.
  if (info->peer && info->availability &&
      info->availability().find("not available") != std::string::npos) {
    GTEST_SKIP() << info->availability();
  }
  Shape s;
  s.N = c.N;
  s.d = c.d;
  s.causal = c.causal;
  s.dtype = c.dtype;
  // Odd batch and head counts; fewer heads at long N to keep the test quick.
  s.B = c.N >= 1000 ? 1 : 3;
  s.H = c.N >= 1000 ? 3 : 5;
  if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
  const auto v =
      run_and_check(c.variant, s, 1000 + c.N * 7 + c.d + (c.causal ? 1 : 0), false, c.tiles);
  EXPECT_TRUE(v.all_finite) << v.nonfinite_count << " non-finite outputs";
  EXPECT_TRUE(v.inputs_unchanged);
  EXPECT_LE(v.worst_row_ratio, 1.0)
      << "row " << v.worst_row << " of head " << v.worst_head << "; max error " << v.max_abs_error
      << ", plain " << v.baseline_max_abs_error;
  if (info->writes_lse) {
    ASSERT_TRUE(v.lse_worst_row_ratio.has_value());
    EXPECT_LE(*v.lse_worst_row_ratio, 1.0) << "lse error " << v.lse_max_abs_error.value_or(0);
  }
  EXPECT_TRUE(v.passed) << bench::verification_failure_reason(v);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* variant : {"standard", "fa1", "fa2", "fa3", "fp8", "fp8-sm89"}) {
    for (int d : {64, 128, 256}) {
      if (!find_variant(variant)->supports_head_dim(d)) continue;
      for (DType t : {DType::bf16, DType::fp16}) {
        if (!find_variant(variant)->supports_dtype(t)) continue;
        for (bool causal : {false, true}) {
          for (std::int64_t N : {1, 17, 127, 128, 129, 1000, 4096}) {
            cases.push_back({variant, d, t, causal, N});
          }
        }
      }
    }
  }
  // The cuDNN peer: fewer sizes, since every shape is a new graph cuDNN compiles at run time.
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      for (std::int64_t N : {17, 129, 1000}) cases.push_back({"cudnn", d, DType::bf16, causal, N});
    }
    cases.push_back({"cudnn", d, DType::fp16, true, 129});
    if (d == 128) {
      cases.push_back({"cudnn-fp8", d, DType::bf16, false, 1000});
      cases.push_back({"cudnn-fp8", d, DType::bf16, true, 129});
    }
  }
  // d=256, where fa3's 128x80 tile needs a yardstick: two shapes per mask.
  for (bool causal : {false, true}) {
    for (std::int64_t N : {129, 1000}) cases.push_back({"cudnn", 256, DType::bf16, causal, N});
  }
  return cases;
}

// Every compiled tile shape that is not a default, on the sizes where tails and the diagonal
// fall inside blocks.
std::vector<Case> tile_cases() {
  std::vector<Case> cases;
  for (const char* variant : {"fa1", "fa2", "fa3"}) {
    const VariantInfo* info = find_variant(variant);
    for (int d : {64, 128}) {
      const auto options = info->tile_options(d);
      for (std::size_t i = 1; i < options.size(); ++i) {
        for (bool causal : {false, true}) {
          for (std::int64_t N : {129, 1000})
            cases.push_back({variant, d, DType::bf16, causal, N, options[i]});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, VariantMatchesReference, testing::ValuesIn(all_cases()),
                         case_name);
INSTANTIATE_TEST_SUITE_P(OtherTiles, VariantMatchesReference, testing::ValuesIn(tile_cases()),
                         case_name);

// fa3's ablation schedules (option schedule; the default, full, runs in AllVariants): the same
// function, so the same check, on the sizes where tails and the diagonal fall inside blocks.
struct Fa3ScheduleCase {
  std::string schedule;
  int d;
  bool causal;
  std::int64_t N;
  Tiles tiles{};  // {0,0}: the default
};

class Fa3Schedule : public testing::TestWithParam<Fa3ScheduleCase> {};

TEST_P(Fa3Schedule, MatchesReference) {
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  const Fa3ScheduleCase& c = GetParam();
  const VariantInfo* info = find_variant("fa3");
  if (auto r = info->unsupported_on_device(device->cc_major, device->cc_minor); !r.empty())
    GTEST_SKIP() << r;
  const Shape s = three_heads(c.N, c.d, c.causal);
  if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
  // The row rule, as fa-bench applies it: every case here is one the build has.
  RowSpec row;
  row.variant = "fa3";
  const Tiles t = c.tiles.block_q ? c.tiles : info->default_tiles(c.d);
  row.kernel_config = KernelConfig{t.block_q, t.block_kv};
  row.options[kOptionFa3Schedule] = c.schedule;
  if (const std::string r = info->row_rule(s, row); !r.empty())
    FAIL() << "the case list asks for a row the build refuses: " << r;
  LaunchOptions lo;
  lo.options[kOptionFa3Schedule] = c.schedule;
  const auto v =
      run_and_check("fa3", s, 900 + c.N + c.d, false, c.tiles, nullptr, Inputs::normal, lo);
  EXPECT_TRUE(v.passed) << c.schedule << ": " << bench::verification_failure_reason(v);
}

std::vector<Fa3ScheduleCase> fa3_schedule_cases() {
  std::vector<Fa3ScheduleCase> out;
  // "full" by name: at d=64 it is not the default (fa3_default_schedule), so AllVariants no
  // longer runs its ping-pong build there.
  for (const char* schedule : {"full", "no-pingpong", "no-overlap", "persistent"}) {
    for (int d : {64, 128, 256}) {
      for (bool causal : {false, true}) {
        // d=256 has its default schedule alone (fa3::ablation_built).
        if (d == 256 && std::string(schedule) != "full") continue;
        // d=64's default (192 rows) has no causal persistent build: 128 rows there.
        const Tiles tiles =
            d == 64 && causal && std::string(schedule) == "persistent" ? Tiles{128, 128} : Tiles{};
        // 4096 with B*H = 3: 96 tiles on 132 SMs; 16384: 384 tiles, several per thread block in
        // the persistent grid (the ring and the turns carried across tiles).
        for (std::int64_t N : {1, 129, 1000, 4096, 16384})
          out.push_back({schedule, d, causal, N, tiles});
      }
    }
  }
  // The 128-row tile at d=64 (not the default there): every schedule (causal persistent above).
  for (const char* schedule : {"full", "no-pingpong", "no-overlap", "persistent"}) {
    for (bool causal : {false, true}) {
      if (causal && std::string(schedule) == "persistent") continue;
      for (std::int64_t N : {129, 1000, 4096}) out.push_back({schedule, 64, causal, N, {128, 128}});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ablation, Fa3Schedule, testing::ValuesIn(fa3_schedule_cases()),
                         [](const testing::TestParamInfo<Fa3ScheduleCase>& p) {
                           std::string name = p.param.schedule + "_d" + std::to_string(p.param.d) +
                                              (p.param.causal ? "_causal" : "_full") + "_N" +
                                              std::to_string(p.param.N);
                           if (p.param.tiles.block_q)
                             name += "_" + std::to_string(p.param.tiles.block_q) + "x" +
                                     std::to_string(p.param.tiles.block_kv);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// The dynamic grid's tile counter (kernels/hopper/pipeline.cuh) lives at the end of the row's
// workspace: the launcher zeroes it before the first launch on that workspace and every launch
// leaves it zero. Several launches on one workspace must each compute every tile; a counter left
// non-zero must be caught by the verification (the blocks then skip tiles), and the next launch
// recovers. Causal, N=16384, 3 heads: several tiles per thread block.
void expect_counter_carries_across_launches(const std::string& variant, const char* option,
                                            const char* schedule, int d, const Tiles& tiles) {
  // 128 query blocks x 3 heads: 384 tiles, about 3 per thread block.
  const Shape s = three_heads(16384, d, true);
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  const VariantInfo* info = find_variant(variant);
  if (auto r = info->unsupported_on_device(device->cc_major, device->cc_minor); !r.empty())
    GTEST_SKIP() << r;
  if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
  LaunchOptions lo;
  lo.options[option] = std::string(schedule);
  auto launcher = info->make_launcher(lo);
  Buffers b;
  const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
  const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_elements()) * 2;
  for (void** p : {&b.q, &b.o}) FA_CUDA_CHECK(cudaMalloc(p, bytes));
  for (void** p : {&b.k, &b.v}) FA_CUDA_CHECK(cudaMalloc(p, kv_bytes));
  FA_CUDA_CHECK(cudaMalloc(&b.lse, s.heads_total() * s.N * 4));
  const std::size_t ws = launcher->workspace_bytes(s, tiles);
  ASSERT_GE(ws, hopper::kTileCounterBytes)
      << "the dynamic schedule declares no workspace for its counter";
  FA_CUDA_CHECK(cudaMalloc(&b.ws, ws));
  FA_CUDA_CHECK(cudaMemset(b.ws, 0xff, ws));  // poisoned, as the runner does
  const std::uint64_t seed = 77;
  FA_CUDA_CHECK(fill_normal(b.q, s.qo_elements(), s.dtype, seed * 3, nullptr));
  FA_CUDA_CHECK(fill_normal(b.k, s.kv_elements(), s.dtype, seed * 3 + 1, nullptr));
  FA_CUDA_CHECK(fill_normal(b.v, s.kv_elements(), s.dtype, seed * 3 + 2, nullptr));
  DeviceBuffers db{b.q, b.k, b.v, b.o, static_cast<float*>(b.lse), b.ws, ws};
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  bench::ReferenceSample ref(s, db, seed);
  auto launch_and_check = [&] {
    FA_CUDA_CHECK(poison_nan16(b.o, s.qo_elements(), nullptr));
    FA_CUDA_CHECK(poison_nan32(static_cast<float*>(b.lse), s.heads_total() * s.N, nullptr));
    EXPECT_EQ(launcher->run(s, tiles, db, nullptr), "");
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    return ref.check(db, bench::ReferenceSample::rule_for(*info, lo.options));
  };
  for (int i = 0; i < 3; ++i) {
    const auto v = launch_and_check();
    EXPECT_TRUE(v.passed) << "launch " << i << ": " << bench::verification_failure_reason(v);
  }
  // A stale counter (as if a launch had not reset it): tiles go missing, and the check sees it.
  FA_CUDA_CHECK(cudaMemset(static_cast<char*>(b.ws) + ws - hopper::kTileCounterBytes, 0x01, 4));
  const auto stale = launch_and_check();
  EXPECT_FALSE(stale.passed) << "a launch on a stale tile counter passed verification";
  const auto after = launch_and_check();  // that launch reset the counter
  EXPECT_TRUE(after.passed) << bench::verification_failure_reason(after);
}

// fa3's dynamic grid: the default plan of d=64's causal 128-row tile (fa3::default_plan).
TEST(Fa3Dynamic, CounterCarriesAcrossLaunches) {
  expect_counter_carries_across_launches("fa3", kOptionFa3Schedule, "full", 64, Tiles{128, 128});
}

// fp8's dynamic grid: the counter after the quantisation's workspace (fp8_sm90_launch.hpp).
TEST(Fp8Dynamic, CounterCarriesAcrossLaunches) {
  expect_counter_carries_across_launches("fp8", kOptionFp8Schedule, "dynamic-tma-store", 128,
                                         Tiles{128, 128});
}

// fp8's schedules (kFp8Schedules: the grid and the epilogue, kernels/fp8/fp8_sm90_launch.hpp),
// each against the reference on both head dims, causal both, N from one row to several tiles per
// thread block of the persistent grids (N=16384 with 3 heads: 384 tiles at d=128, 258 at d=64),
// both scale granularities.
TEST(Fp8Schedules, EveryScheduleMatchesTheReference) {
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  const VariantInfo* info = find_variant("fp8");
  if (auto r = info->unsupported_on_device(device->cc_major, device->cc_minor); !r.empty())
    GTEST_SKIP() << r;
  for (const char* schedule : kFp8Schedules) {
    for (const char* scale : {"block", "head"}) {
      LaunchOptions lo;
      lo.options[kOptionFp8Schedule] = std::string(schedule);
      lo.options[kOptionFp8Scale] = std::string(scale);
      for (int d : {64, 128}) {
        for (bool causal : {false, true}) {
          for (std::int64_t N : {1, 129, 1000, 4096, 16384}) {
            const Shape s = three_heads(N, d, causal);
            if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
            RowSpec row;  // the causal 192-row tile (d=64) has no persistent build: skipped
            row.variant = "fp8";
            const Tiles t = info->default_tiles(d);
            row.kernel_config = KernelConfig{t.block_q, t.block_kv};
            row.options = lo.options;
            if (!info->row_rule(s, row).empty()) continue;
            const auto v =
                run_and_check("fp8", s, 500 + N + d, false, {}, nullptr, Inputs::normal, lo);
            EXPECT_TRUE(v.passed) << schedule << " scale=" << scale << " d=" << d
                                  << " causal=" << causal << " N=" << N << ": "
                                  << bench::verification_failure_reason(v);
          }
        }
      }
    }
  }
}

// fa1 and fa2 compute the same function in different loop orders: on the same inputs their
// outputs must agree to bf16 rounding, element by element and on average.
TEST(LoopOrders, Fa1AndFa2AgreeToRounding) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  for (bool causal : {false, true}) {
    for (int d : {64, 128}) {
      Shape s;
      s.N = 1000;
      s.d = d;
      s.B = 2;
      s.H = 3;
      s.causal = causal;
      std::vector<std::uint16_t> a, b;
      const auto va = run_and_check("fa1", s, 77, false, {}, &a);
      const auto vb = run_and_check("fa2", s, 77, false, {}, &b);
      ASSERT_TRUE(va.passed && vb.passed);
      double worst = 0, sq = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        const double diff = std::abs(bench::half_bits_to_double(a[i], s.dtype) -
                                     bench::half_bits_to_double(b[i], s.dtype));
        worst = std::max(worst, diff);
        sq += diff * diff;
      }
      const double rms = std::sqrt(sq / static_cast<double>(a.size()));
      // Every element: within twice the larger same-precision tolerance (both orders round P to
      // bf16, at different maxima: fa1 at the block's, fa2 at the running one). On average: no
      // further apart than twice the larger RMSE against fp64 (measured on the H200, 2026-11-21:
      // worst 9.8e-4 non-causal, 3.9e-3 causal, where a 2^-6 relative bound was too tight for
      // outputs near zero).
      const double tolerance =
          2 * std::max(va.baseline_max_abs_error, vb.baseline_max_abs_error) + 1e-3;
      EXPECT_LE(worst, 2 * tolerance) << "causal=" << causal << " d=" << d;
      EXPECT_LE(rms, 2 * std::max(va.rmse, vb.rmse)) << "causal=" << causal << " d=" << d;
    }
  }
}

// Issue 16's outlier bar: ours' relative RMSE at most this share of plain FP8 with one scale per
// whole tensor (FlashAttention-3, Table 3: 9.1e-3 against 2.4e-2 for per-tensor FP8). Open: the
// test reports it (lines "fp8-outlier-bar"); scripts/fp8_check.sh prints them.
constexpr double kIssue16OutlierBar = 0.40;
// What the test asserts on outlier inputs at N >= 4096: the rotation must buy at least 15% against
// plain per-tensor FP8. Without it the kernel measured exactly the plain figures (ratio 1.0,
// docs/accuracy.md); with it 0.46-0.70x plain per-tensor on the H200 (2026-11-23, this test,
// both kernels and scale granularities). At N=1000 the causal d=64 rows have few keys and the
// rotation buys less (up to 0.90x): reported only. N=16384 (since 2026-11-26): the CPU emulation
// of the scheme (Fp8Accuracy.OutlierErrorBudget) put ours against per-tensor at 0.65-0.68x
// (N=512), 0.45-0.46x (4096) and 0.35-0.41x (8192; docs/accuracy.md): the ratio falls with N, so
// the bar is reported at a long sequence too.
constexpr double kRotationMustHelp = 0.85;

// FP8 against the issue's bars at sequence lengths where they apply: RMSE <= 1e-2 on N(0,1)
// inputs, and <= 2.4e-2 (the FlashAttention-3 paper's per-tensor FP8 baseline) on its outlier
// inputs, where also relative RMSE <= 0.85x plain per-tensor FP8 on the same inputs (the rotation
// helps; issue 16's 0.40x is reported, not asserted: kIssue16OutlierBar) (the verification's
// rule, in v.passed, holds it to <= 1.5x plain per-head FP8); both kernels (fp8:
// wgmma on sm_90a, fp8-sm89: mma.sync), both scale granularities. Prints both ratios per case
// (lines "fp8-baselines | ..."). (Short sequences are judged against a plain FP8 implementation
// instead: docs/accuracy.md.)
TEST(Fp8, MeetsTheRmseBarsOnNormalAndOutlierInputs) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const auto device = query_device(0, &why);
  int ran = 0;
  for (const char* variant : {"fp8", "fp8-sm89"}) {
    if (!find_variant(variant)->unsupported_on_device(device->cc_major, device->cc_minor).empty())
      continue;
    for (const char* scale : {"block", "head"}) {
      LaunchOptions lo;
      lo.options[kOptionFp8Scale] = std::string(scale);
      for (Inputs inputs : {Inputs::normal, Inputs::outliers}) {
        const bool outliers = inputs == Inputs::outliers;
        const double bar = outliers ? 2.4e-2 : 1e-2;
        for (std::int64_t N : {1000, 4096, 16384}) {
          for (bool causal : {false, true}) {
            for (int d : {64, 128}) {
              const Shape s = three_heads(N, d, causal);
              double per_tensor = 0;
              const auto v =
                  run_and_check(variant, s, 99 + N, false, {}, nullptr, inputs, lo, &per_tensor);
              ++ran;
              const std::string label =
                  std::string(variant) + " scale=" + scale + " " +
                  (outliers ? "outliers" : "normal") + " N=" + std::to_string(N) +
                  " causal=" + std::to_string(causal) + " d=" + std::to_string(d);
              EXPECT_TRUE(v.all_finite);
              EXPECT_TRUE(v.passed) << label << ": " << bench::verification_failure_reason(v);
              EXPECT_LE(v.rmse, bar) << label << " (plain fp8 " << v.baseline_rmse << ")";
              // Relative RMSE over the two plain FP8 baselines: per head (the verification's,
              // bounded by v.passed: <= 1.5x) and per tensor (FlashAttention-3's Table 3).
              const double rel = v.relative_rmse.value_or(NAN);
              const double vs_head = rel / v.baseline_relative_rmse.value_or(NAN);
              const double vs_tensor = rel / per_tensor;
              std::printf(
                  "fp8-baselines | %s | rel rmse %.3e | / plain per-head %.2f | "
                  "/ plain per-tensor %.2f\n",
                  label.c_str(), rel, vs_head, vs_tensor);
              if (outliers && N >= 4096) {
                EXPECT_LE(vs_tensor, kRotationMustHelp)
                    << label << ": relative RMSE " << rel << ", plain per-tensor " << per_tensor
                    << ", plain per-head " << v.baseline_relative_rmse.value_or(NAN);
              }
              if (outliers) {
                std::printf("fp8-outlier-bar | %s | %.2fx plain per-tensor | bar %.2fx: %s\n",
                            label.c_str(), vs_tensor, kIssue16OutlierBar,
                            vs_tensor <= kIssue16OutlierBar ? "met" : "not met");
              }
            }
          }
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no fp8 kernel runs on this device";
}

// The four input families (--inputs) through both FP8 kernels: the verification rule passes.
TEST(Fp8, PassesOnEveryInputFamily) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const auto device = query_device(0, &why);
  for (const char* variant : {"fp8", "fp8-sm89"}) {
    if (!find_variant(variant)->unsupported_on_device(device->cc_major, device->cc_minor).empty())
      continue;
    for (Inputs inputs : {Inputs::normal, Inputs::outliers, Inputs::uniform, Inputs::heavy}) {
      for (bool causal : {false, true}) {
        const Shape s = three_heads(1000, 128, causal);
        if (!find_variant(variant)->unsupported_reason(s).empty()) continue;  // not built
        const auto v =
            run_and_check(variant, s, 7 + static_cast<int>(inputs), false, {}, nullptr, inputs);
        EXPECT_TRUE(v.passed) << variant << " inputs " << static_cast<int>(inputs)
                              << " causal=" << causal << ": "
                              << bench::verification_failure_reason(v);
      }
    }
  }
}

// fa3 on every input family, each schedule a shape runs by default and d=64's ping-pong build.
// The outlier and heavy-tailed inputs make a row's max jump by more than the lazy rescale's
// threshold (fa3::kRescaleThreshold: 2^8) after blocks whose rescale was skipped, so both of its
// paths run within one row: a late rescale that missed an earlier skipped block shows in O.
TEST(Fa3, PassesOnEveryInputFamily) {
  const VariantInfo* info = find_variant("fa3");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  for (Inputs inputs : {Inputs::outliers, Inputs::uniform, Inputs::heavy}) {
    for (int d : {64, 128, 256}) {
      for (bool causal : {false, true}) {
        for (std::int64_t N : {1000, 4096}) {
          const Shape s = three_heads(N, d, causal);
          if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
          std::vector<LaunchOptions> schedules(1);  // the shape's default
          if (d == 64) {
            schedules.emplace_back();
            schedules.back().options[kOptionFa3Schedule] = std::string("full");
          }
          for (const LaunchOptions& lo : schedules) {
            const auto v = run_and_check("fa3", s, 40 + N + d + static_cast<int>(inputs), false, {},
                                         nullptr, inputs, lo);
            EXPECT_TRUE(v.passed) << "inputs " << static_cast<int>(inputs) << " d=" << d
                                  << " N=" << N << " causal=" << causal
                                  << (lo.options.empty() ? " (default schedule)" : " full") << ": "
                                  << bench::verification_failure_reason(v);
          }
        }
      }
    }
  }
}

// ---- Grouped-query heads and K/V lengths apart from N ----

struct InferenceCase {
  std::string variant;
  int d;
  DType dtype;
  bool causal;
  std::int64_t N, N_kv, H, H_kv;
  std::int64_t page_size = 0;            // a paged cache
  std::vector<std::int64_t> kv_lengths;  // lengths per sequence (the batch: their count)
};

void PrintTo(const InferenceCase& c, std::ostream* os) {
  *os << c.variant << " d=" << c.d << " " << to_string(c.dtype) << (c.causal ? " causal" : "")
      << " N=" << c.N << " N_kv=" << c.N_kv << " H=" << c.H << " H_kv=" << c.H_kv;
  if (c.page_size) *os << " page=" << c.page_size;
  if (!c.kv_lengths.empty()) *os << " kv_lengths=" << kv_lengths_text(c.kv_lengths);
}

std::string inference_case_name(const testing::TestParamInfo<InferenceCase>& p) {
  const InferenceCase& c = p.param;
  std::string lengths;
  for (std::int64_t len : c.kv_lengths) lengths += "_" + std::to_string(len);
  return c.variant + "_d" + std::to_string(c.d) + "_" + std::string(to_string(c.dtype)) +
         (c.causal ? "_causal" : "_full") + "_N" + std::to_string(c.N) + "_Nkv" +
         std::to_string(c.N_kv) + "_H" + std::to_string(c.H) + "_Hkv" + std::to_string(c.H_kv) +
         (c.page_size ? "_page" + std::to_string(c.page_size) : "") +
         (lengths.empty() ? "" : "_lengths" + lengths);
}

Shape inference_shape(const InferenceCase& c) {
  Shape s;
  s.B = c.kv_lengths.empty() ? 2 : static_cast<std::int64_t>(c.kv_lengths.size());
  s.page_size = c.page_size;
  s.kv_lengths = c.kv_lengths;
  s.H = c.H;
  s.H_kv = c.H_kv;
  s.N = c.N;
  s.N_kv = c.N_kv;
  s.d = c.d;
  s.causal = c.causal;
  s.dtype = c.dtype;
  return s;
}

class InferenceShapes : public testing::TestWithParam<InferenceCase> {};

// Each variant that declares grouped heads or K/V lengths apart, on fresh inputs against the fp64
// reference (query head bh reads K/V head bh / g; causal aligned bottom-right).
TEST_P(InferenceShapes, MatchReference) {
  const InferenceCase& c = GetParam();
  const VariantInfo* info = find_variant(c.variant);
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  if (info->peer && info->availability &&
      info->availability().find("not available") != std::string::npos)
    GTEST_SKIP() << info->availability();
  const Shape s = inference_shape(c);
  ASSERT_EQ(info->unsupported_reason(s), "");
  const auto v = run_and_check(c.variant, s, 500 + c.N + c.N_kv + c.H_kv + c.d + c.causal);
  EXPECT_TRUE(v.inputs_unchanged);
  EXPECT_TRUE(v.passed) << bench::verification_failure_reason(v);
}

std::vector<InferenceCase> inference_cases() {
  std::vector<InferenceCase> cases;
  for (const char* variant : {"fa3", "cudnn"}) {
    for (int d : {64, 128}) {
      for (bool causal : {false, true}) {
        for (std::int64_t N : {17, 129, 1000}) {
          for (std::int64_t H_kv : {2, 1})  // 8 query heads: g = 4 (GQA) and 8 (MQA)
            cases.push_back({variant, d, DType::bf16, causal, N, 0, 8, H_kv});
        }
      }
    }
    cases.push_back({variant, 128, DType::fp16, true, 1000, 0, 8, 2});
  }
  // cuDNN's K/V lengths apart: decode rows and a chunk of queries against a longer cache.
  for (bool causal : {false, true}) {
    for (auto [N, N_kv] : {std::pair<std::int64_t, std::int64_t>{1, 4096}, {16, 1000}, {129, 700}})
      cases.push_back({"cudnn", 128, DType::bf16, causal, N, N_kv, 8, 2});
  }
  cases.push_back({"cudnn", 64, DType::bf16, false, 1000, 129, 4, 4});  // fewer keys than queries
  // decode: one to four query positions of a group packed into 16 rows, K/V lengths from one tile
  // to many splits (decode_splits on 132 SMs with B H_kv = 4: 16 at 4096 keys, 32 at 10000), MQA
  // too.
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      for (auto [N, N_kv] : {std::pair<std::int64_t, std::int64_t>{1, 1},
                             {1, 17},
                             {1, 255},
                             {1, 4096},
                             {4, 4},
                             {4, 1000},
                             {3, 10000}})
        cases.push_back({"decode", d, DType::bf16, causal, N, N_kv, 8, 2});
      cases.push_back({"decode", d, DType::bf16, causal, 2, 3000, 8, 1});  // MQA: 16 rows
    }
  }
  cases.push_back({"decode", 128, DType::fp16, true, 1, 4096, 8, 2});
  cases.push_back({"decode", 128, DType::bf16, true, 1, 65536, 32, 8});
  // The inference cache: pages of 64 (a tile a page), 16 and 1 (a tile over several), 256 (several
  // tiles a page), each sequence at its own length (one key to the whole cache), and both apart.
  using Lengths = std::vector<std::int64_t>;
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      cases.push_back(
          {"decode", d, DType::bf16, causal, 1, 4096, 8, 2, 64, Lengths{4096, 1, 1000, 65}});
      cases.push_back({"decode", d, DType::bf16, causal, 4, 10000, 8, 2, 256, Lengths{10000, 4}});
      cases.push_back(
          {"cudnn", d, DType::bf16, causal, 1, 4096, 8, 2, 64, Lengths{4096, 1000, 65}});
    }
  }
  cases.push_back({"decode", 128, DType::bf16, false, 1, 1000, 8, 2, 16, Lengths{1000, 333}});
  cases.push_back({"decode", 128, DType::bf16, true, 1, 100, 8, 8, 1, Lengths{100, 50}});
  cases.push_back({"decode", 128, DType::bf16, true, 1, 5000, 8, 2, 0, Lengths{5000, 1, 2500}});
  cases.push_back({"decode", 128, DType::fp16, false, 1, 4096, 32, 8, 64});
  cases.push_back({"cudnn", 128, DType::bf16, false, 1, 4096, 32, 8, 64});
  for (bool causal : {false, true})
    cases.push_back({"cudnn", 128, DType::bf16, causal, 16, 1000, 8, 2, 0, Lengths{1000, 500}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(GroupedHeadsAndKvLengths, InferenceShapes,
                         testing::ValuesIn(inference_cases()), inference_case_name);

// The wrong group mapping (the heads of a group interleaved: bh % H_kv for bh / g) must fail the
// check, with grouped heads; with one query head per K/V head it is no fault at all.
TEST(Fa3, WrongGroupMappingIsCaught) {
  const VariantInfo* info = find_variant("fa3");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  LaunchOptions faulty;
  faulty.fault.kv_head_interleaved = true;
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      Shape s = three_heads(1000, d, causal);
      s.H = 8;
      s.H_kv = 2;
      const auto v =
          run_and_check("fa3", s, 90 + d + causal, false, {}, nullptr, Inputs::normal, faulty);
      EXPECT_FALSE(v.passed) << "d=" << d << " causal=" << causal
                             << ": the interleaved group mapping passed";
      s.H_kv = 8;
      const auto mha =
          run_and_check("fa3", s, 90 + d + causal, false, {}, nullptr, Inputs::normal, faulty);
      EXPECT_TRUE(mha.passed) << bench::verification_failure_reason(mha);
    }
  }
}

// decode's faults, each of which must fail the check while the true kernel passes: a split's part
// left out of the combine, the group's heads interleaved, a K/V tile dropped, the causal limit one
// key off either way, a wrong scale.
TEST(Decode, FaultsAreCaught) {
  const VariantInfo* info = find_variant("decode");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  for (bool causal : {false, true}) {
    const InferenceCase c{"decode", 128, DType::bf16, causal, 4, 4096, 8, 2};
    const Shape s = inference_shape(c);
    const std::uint64_t seed = 300 + causal;
    EXPECT_TRUE(run_and_check("decode", s, seed).passed);
    std::vector<std::pair<const char*, FaultInjection>> faults;
    auto add = [&](const char* name, auto set) {
      FaultInjection f;
      set(f);
      faults.push_back({name, f});
    };
    add("a split left out", [](FaultInjection& f) { f.drop_split = 5; });
    add("heads of a group interleaved", [](FaultInjection& f) { f.kv_head_interleaved = true; });
    add("last K/V tile dropped", [](FaultInjection& f) { f.drop_kv_block = 4096 / 64 - 1; });
    add("scale x1.05", [](FaultInjection& f) { f.scale_factor = 1.05f; });
    if (causal) {
      add("causal limit +1", [](FaultInjection& f) { f.mask_shift = 1; });
      add("causal limit -1", [](FaultInjection& f) { f.mask_shift = -1; });
    }
    for (const auto& [name, fault] : faults) {
      LaunchOptions lo;
      lo.fault = fault;
      const auto v = run_and_check("decode", s, seed, false, {}, nullptr, Inputs::normal, lo);
      EXPECT_FALSE(v.passed) << name << (causal ? " (causal)" : "") << " passed: worst row "
                             << v.worst_row_ratio;
    }
  }
}

// The cache's faults, on a paged cache with lengths per sequence (pages of 64 and of 16): a page
// table entry off by one, every sequence read to N_kv past its own length; each must fail while
// the true kernel passes.
TEST(Decode, CacheFaultsAreCaught) {
  const VariantInfo* info = find_variant("decode");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  for (std::int64_t page : {64, 16}) {
    const InferenceCase c{
        "decode", 128, DType::bf16, true, 1,
        4096,     8,   2,           page, std::vector<std::int64_t>{4096, 1000, 65}};
    const Shape s = inference_shape(c);
    const std::uint64_t seed = 310 + page;
    EXPECT_TRUE(run_and_check("decode", s, seed).passed) << "page " << page;
    for (auto [name, set] : std::vector<std::pair<const char*, void (*)(FaultInjection&)>>{
             {"page table entry off by one", [](FaultInjection& f) { f.page_off_by_one = true; }},
             {"lengths ignored", [](FaultInjection& f) { f.kv_lengths_ignored = true; }}}) {
      LaunchOptions lo;
      set(lo.fault);
      const auto v = run_and_check("decode", s, seed, false, {}, nullptr, Inputs::normal, lo);
      EXPECT_FALSE(v.passed) << name << " (page " << page << ") passed: worst row "
                             << v.worst_row_ratio;
    }
  }
}

// The lazy rescale's fault (FaultInjection::o_rescale_skipped: O not rescaled when the row max
// moves) must fail verification on the outlier inputs, whose rows' max jumps past the threshold
// (2^8) after O has taken weight. On normal inputs such a jump is rare, so the line printed for
// them says whether that family alone would have caught it (not asserted: that it may not is why
// the outlier family runs).
TEST(Fa3, LazyRescaleFaultIsCaughtOnOutliers) {
  const VariantInfo* info = find_variant("fa3");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  LaunchOptions faulty;
  faulty.fault.o_rescale_skipped = true;
  for (int d : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      const Shape s = three_heads(4096, d, causal);
      if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
      const int seed = 70 + d + causal;
      const auto outliers =
          run_and_check("fa3", s, seed, false, {}, nullptr, Inputs::outliers, faulty);
      EXPECT_FALSE(outliers.passed) << "d=" << d << " causal=" << causal
                                    << ": O not rescaled passed on the outlier inputs (worst row "
                                    << outliers.worst_row_ratio << " of the tolerance)";
      const auto normal = run_and_check("fa3", s, seed, false, {}, nullptr, Inputs::normal, faulty);
      std::printf(
          "lazy-rescale fault | d=%d | %s | outliers: %s (worst row %.3g) | normal: %s "
          "(worst row %.3g)\n",
          d, causal ? "causal" : "full", outliers.passed ? "PASSED" : "caught",
          outliers.worst_row_ratio, normal.passed ? "passed" : "caught", normal.worst_row_ratio);
    }
  }
}

// fp8 (sm_90a) under the same fault: O keeps its scale after a block (neither alpha nor the V
// descale ratio a_j-1 / a_j applied). fp8's update is eager (a lazy one was measured slower:
// docs/perf-notes.md), so every block after the first needs the rescale, and with the default
// per-block V scales the ratio differs from 1 at almost every block: both input families must
// catch it.
TEST(Fp8, SkippedRescaleFaultIsCaught) {
  const VariantInfo* info = find_variant("fp8");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  LaunchOptions faulty;
  faulty.fault.o_rescale_skipped = true;
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      const Shape s = three_heads(4096, d, causal);
      if (auto r = info->unsupported_reason(s); !r.empty()) GTEST_SKIP() << r;
      const int seed = 170 + d + causal;
      for (Inputs inputs : {Inputs::normal, Inputs::outliers}) {
        const auto v = run_and_check("fp8", s, seed, false, {}, nullptr, inputs, faulty);
        EXPECT_FALSE(v.passed) << "d=" << d << " causal=" << causal << " inputs "
                               << static_cast<int>(inputs) << ": O not rescaled passed (worst row "
                               << v.worst_row_ratio << " of the tolerance)";
        std::printf("fp8 skipped-rescale fault | d=%d | %s | inputs %d: %s (worst row %.3g)\n", d,
                    causal ? "causal" : "full", static_cast<int>(inputs),
                    v.passed ? "PASSED" : "caught", v.worst_row_ratio);
      }
    }
  }
}

// The value of an E4M3 byte (NaN for 0x7f and 0xff, the workspace's poison).
double e4m3_value(std::uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (b & 0x80) ? -mag : mag;
}

// V8 as the quantisation pass must write it, against the bytes it wrote: for every head, column c
// and position pos < Npad, the key permuted_key(pos) of V (bf16 bits, [heads][N][d]) scaled by
// 448 / amax of its scale block (fp32, as the kernel) and rounded to E4M3, or 0 past N; and
// amax_v per 128-key block. `key_of` maps a position to its key (permuted_key; the negative passes
// another order). Returns the mismatches (the first few printed if `print`).
std::int64_t v8_mismatches(const Shape& s, fp8::Scale scale, const std::vector<std::uint16_t>& v,
                           const std::vector<std::uint8_t>& vt8, const std::vector<float>& amax_v,
                           int (*key_of)(int), bool print) {
  const std::int64_t N = s.N, d = s.d, npad = fp8::padded(N), blocks = fp8::kv_scale_blocks(N);
  auto value = [&](std::int64_t h, std::int64_t key, std::int64_t c) {  // exact in fp32
    return static_cast<float>(bench::half_bits_to_double(v[(h * N + key) * d + c], DType::bf16));
  };
  std::int64_t bad = 0;
  auto report = [&](const char* what, std::int64_t h, std::int64_t c, std::int64_t pos, double got,
                    double want) {
    if (++bad <= 5 && print)
      std::printf("  V8 mismatch: %s head %lld column %lld position %lld: %.9g, expected %.9g\n",
                  what, static_cast<long long>(h), static_cast<long long>(c),
                  static_cast<long long>(pos), got, want);
  };
  for (std::int64_t h = 0; h < s.heads_total(); ++h) {
    float head_amax = 0.0f;
    std::vector<float> block_amax(blocks, 0.0f);
    for (std::int64_t key = 0; key < N; ++key) {
      for (std::int64_t c = 0; c < d; ++c) {
        const float a = std::fabs(value(h, key, c));
        block_amax[key / fp8::kKvScaleRows] = std::max(block_amax[key / fp8::kKvScaleRows], a);
        head_amax = std::max(head_amax, a);
      }
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
      const float want = std::max(scale == fp8::Scale::head ? head_amax : block_amax[b], 1e-30f);
      if (amax_v[h * blocks + b] != want) report("amax", h, -1, b, amax_v[h * blocks + b], want);
    }
    for (std::int64_t c = 0; c < d; ++c) {
      for (std::int64_t pos = 0; pos < npad; ++pos) {
        const std::int64_t key = (pos & ~std::int64_t{15}) + key_of(static_cast<int>(pos & 15));
        double want = 0.0;
        if (key < N) {
          const float sc = fp8::kE4m3Max / amax_v[h * blocks + key / fp8::kKvScaleRows];
          want = reference::round_to_e4m3(static_cast<double>(value(h, key, c) * sc));
        }
        const double got = e4m3_value(vt8[(h * d + c) * npad + pos]);
        if (!(got == want)) report("byte", h, c, pos, got, want);
      }
    }
  }
  return bad;
}

// The quantisation pass's V8 (the transposed, key-permuted E4M3 copy that P V reads) byte for byte
// against its definition, on both head dims and scale granularities, outlier inputs (scale blocks
// with different amax), N with a partial last block and (d=64, 256-row items) an item whose second
// block lies past Npad. The workspace is poisoned first. The negative: the same bytes read in the
// natural key order must mismatch.
TEST(Fp8Quant, V8MatchesItsDefinition) {
  const VariantInfo* info = find_variant("fp8");
  if (const std::string r = cannot_run_here(*info); !r.empty()) GTEST_SKIP() << r;
  for (int d : {64, 128}) {
    for (std::int64_t N : {300, 1000, 4096}) {
      for (fp8::Scale scale : {fp8::Scale::block, fp8::Scale::head}) {
        const Shape s = three_heads(N, d, false);
        Buffers b;
        const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
        const std::size_t ws = fp8::workspace_bytes(s);
        FA_CUDA_CHECK(cudaMalloc(&b.q, bytes));
        FA_CUDA_CHECK(cudaMalloc(&b.k, bytes));
        FA_CUDA_CHECK(cudaMalloc(&b.v, bytes));
        FA_CUDA_CHECK(cudaMalloc(&b.ws, ws));
        std::uint64_t seed = 900 + d + N;
        for (void* t : {b.q, b.k, b.v})
          FA_CUDA_CHECK(
              fill_normal(t, s.qo_elements(), s.dtype, seed++, nullptr, Inputs::outliers));
        FA_CUDA_CHECK(cudaMemset(b.ws, 0xff, ws));
        const DeviceBuffers db{b.q, b.k, b.v, nullptr, nullptr, b.ws, ws};
        ASSERT_EQ(fp8::quantise(s, db, scale, nullptr), "");
        FA_CUDA_CHECK(cudaDeviceSynchronize());
        const fp8::Workspace w = fp8::carve(s, b.ws);
        std::vector<std::uint16_t> v(static_cast<std::size_t>(s.qo_elements()));
        std::vector<std::uint8_t> vt8(
            static_cast<std::size_t>(s.heads_total() * d * fp8::padded(N)));
        std::vector<float> amax_v(
            static_cast<std::size_t>(s.heads_total() * fp8::kv_scale_blocks(N)));
        FA_CUDA_CHECK(cudaMemcpy(v.data(), b.v, bytes, cudaMemcpyDeviceToHost));
        FA_CUDA_CHECK(cudaMemcpy(vt8.data(), w.vt8, vt8.size(), cudaMemcpyDeviceToHost));
        FA_CUDA_CHECK(
            cudaMemcpy(amax_v.data(), w.amax_v, amax_v.size() * 4, cudaMemcpyDeviceToHost));
        const char* name = fp8::scale_name(scale);
        int (*const stored_order)(int) = [](int p) { return fp8::permuted_key(p); };
        int (*const natural_order)(int) = [](int p) { return p; };
        EXPECT_EQ(v8_mismatches(s, scale, v, vt8, amax_v, stored_order, true), 0)
            << "d=" << d << " N=" << N << " scale " << name;
        EXPECT_GT(v8_mismatches(s, scale, v, vt8, amax_v, natural_order, false), 0)
            << "d=" << d << " N=" << N << " scale " << name
            << ": the natural key order matched too (the check cannot fail)";
        // (A write past a head's Npad would land in the next head's first column: caught there.)
      }
    }
  }
}

// The watchdog's negative: a host call that blocks past the timeout (as run() did behind a hung
// kernel) is reported while it still blocks; the same work inside the timeout is not.
TEST(Watchdog, ReportsAHostCallThatBlocksPastTheTimeout) {
  std::atomic<bool> fired{false};
  {
    Watchdog dog(0.2, [&] { fired = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // blocked "inside run()"
    EXPECT_TRUE(fired.load()) << "the watchdog did not fire while the call was still blocked";
  }
  fired = false;
  {
    Watchdog dog(5.0, [&] { fired = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(fired.load()) << "the watchdog fired after it was disarmed";
}

// fa2 with thread blocks walking heads first computes the same thing.
TEST(Fa2Order, HeadsInterleavedMatchesReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  LaunchOptions lo;
  lo.options[kOptionBlockOrder] = std::string("heads");
  for (bool causal : {false, true}) {
    for (int d : {64, 128}) {
      Shape s;
      s.N = 1000;
      s.d = d;
      s.B = 3;
      s.H = 5;
      s.causal = causal;
      const auto v = run_and_check("fa2", s, 31, false, {}, nullptr, Inputs::normal, lo);
      EXPECT_TRUE(v.passed) << "causal=" << causal << " d=" << d << " err " << v.max_abs_error;
    }
  }
}

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
