// Fault injection on the GPU: every deliberately wrong kernel (kernels/common/fault.hpp) must FAIL
// verification, for every variant it applies to, in bf16, fp16 and fp8, causal and not; the same
// launches without the fault must pass. Each case prints one "fault-table" line, which
// scripts/gpu_check.sh collects into the fault x variant table.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/gate.hpp"
#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/fa3/fa3.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

struct NamedFault {
  std::string name;
  FaultInjection fault;
  bool zero_output = false;   // the kernel writes zeros: applied after the launch
  bool causal_only = false;   // the mask fault means nothing without a mask
  bool not_standard = false;  // cuBLAS reads V: no V tile to get wrong
};

// Faults at a shape of `kv_blocks` K/V blocks of the variant's Bc (standard: 64 keys).
std::vector<NamedFault> faults_for(int kv_blocks) {
  std::vector<NamedFault> f;
  auto add = [&](std::string name, auto set) {
    NamedFault nf;
    nf.name = std::move(name);
    set(nf);
    f.push_back(nf);
  };
  add("last K/V block dropped", [&](NamedFault& x) { x.fault.drop_kv_block = kv_blocks - 1; });
  add("interior K/V block dropped", [&](NamedFault& x) { x.fault.drop_kv_block = kv_blocks / 2; });
  add("scale x1.05", [](NamedFault& x) { x.fault.scale_factor = 1.05f; });
  add("exp for exp2", [](NamedFault& x) { x.fault.natural_exp = true; });
  add("causal mask off by one (+1)", [](NamedFault& x) {
    x.fault.mask_shift = 1;
    x.causal_only = true;
  });
  add("causal mask off by one (-1)", [](NamedFault& x) {
    x.fault.mask_shift = -1;
    x.causal_only = true;
  });
  add("wrong V tile (last block)", [&](NamedFault& x) {
    x.fault.wrong_v_block = kv_blocks - 1;
    x.not_standard = true;
  });
  add("last query block not written", [](NamedFault& x) { x.fault.skip_last_query_block = true; });
  add("all-zero O", [](NamedFault& x) { x.zero_output = true; });
  return f;
}

// A grid's buffers: Q, K, V (fresh N(0, 1) from `seed`), O and the lse; run_one grows the
// workspace.
struct Device {
  Device(const Shape& s, std::uint64_t seed) {
    const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
    const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_elements()) * 2;
    for (void** p : {&q, &o}) FA_CUDA_CHECK(cudaMalloc(p, bytes));
    for (void** p : {&k, &v}) FA_CUDA_CHECK(cudaMalloc(p, kv_bytes));
    FA_CUDA_CHECK(cudaMalloc(&lse, static_cast<std::size_t>(s.heads_total() * s.N) * 4));
    FA_CUDA_CHECK(fill_normal(q, s.qo_elements(), s.dtype, seed * 3, nullptr));
    FA_CUDA_CHECK(fill_normal(k, s.kv_elements(), s.dtype, seed * 3 + 1, nullptr));
    FA_CUDA_CHECK(fill_normal(v, s.kv_elements(), s.dtype, seed * 3 + 2, nullptr));
    FA_CUDA_CHECK(cudaDeviceSynchronize());
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  DeviceBuffers inputs() const { return {q, k, v, nullptr, nullptr, nullptr, 0}; }
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *lse = nullptr, *ws = nullptr;
  std::size_t ws_bytes = 0;
  ~Device() {
    for (void* p : {q, k, v, o, lse, ws}) {
      if (p) cudaFree(p);
    }
  }
};

// Runs `variant` with `nf` (or no fault) on the buffers and returns its verification; `tile`: the
// compiled tile to run (default: the variant's default).
bench::Verification run_one(const VariantInfo& info, const Shape& s, Device& d,
                            const bench::ReferenceSample& ref, const NamedFault* nf,
                            const Tiles* tile = nullptr, LaunchOptions lo = {}) {
  if (nf) lo.fault = nf->fault;
  auto launcher = info.make_launcher(lo);
  const Tiles tiles = tile ? *tile : info.default_tiles(static_cast<int>(s.d));
  const std::size_t ws = launcher->workspace_bytes(s, tiles);
  if (ws > d.ws_bytes) {
    if (d.ws) cudaFree(d.ws);
    FA_CUDA_CHECK(cudaMalloc(&d.ws, ws));
    d.ws_bytes = ws;
  }
  FA_CUDA_CHECK(poison_nan16(d.o, s.qo_elements(), nullptr));
  FA_CUDA_CHECK(poison_nan32(static_cast<float*>(d.lse), s.heads_total() * s.N, nullptr));
  if (ws) FA_CUDA_CHECK(cudaMemset(d.ws, 0xff, ws));
  DeviceBuffers db{d.q, d.k, d.v, d.o, static_cast<float*>(d.lse), d.ws, ws};
  EXPECT_EQ(launcher->prepare(s, tiles, db, nullptr), "");
  EXPECT_EQ(launcher->run(s, tiles, db, nullptr), "") << info.name << (nf ? " " + nf->name : "");
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  if (nf && nf->zero_output)
    FA_CUDA_CHECK(cudaMemset(d.o, 0, static_cast<std::size_t>(s.qo_elements()) * 2));
  return ref.check(db, bench::ReferenceSample::rule_for(info, lo.options));
}

struct Grid {
  int d;
  DType dtype;
  bool causal;
  std::int64_t N;
};

// gtest prints a failing parameter with this (otherwise as raw bytes, padding included).
void PrintTo(const Grid& g, std::ostream* os) {
  *os << "d=" << g.d << " " << to_string(g.dtype) << (g.causal ? " causal" : " full")
      << " N=" << g.N;
}

// The variants a grid runs, each with the option values it runs with (fa3 and fp8: the default
// schedule, and also the dynamic TMA-store one, the one other build with the fault hooks: the
// persistent grid and the TMA-store epilogue, kernels/hopper/pipeline.cuh).
struct Runner {
  const char* variant;
  LaunchOptions options;
  std::string label;
  Tiles tiles{};  // {0, 0}: the variant's default at d
};
std::vector<Runner> runners(const Shape& s) {
  std::vector<Runner> out;
  // Without options fa3's launcher runs the shape's default schedule (fa3_default_schedule:
  // no-pingpong at d=64), as a planned row does; at d=64 in bf16 also full, the ping-pong build
  // (fp16 has the default schedule alone: fa3::schedule_built).
  for (const char* name : {"standard", "fa1", "fa2", "fa3", "fp8", "fp8-sm89"})
    out.push_back({name, {}, name});
  if (s.d == 64 && s.dtype == DType::bf16) {
    LaunchOptions lo;
    lo.options[kOptionFa3Schedule] = std::string("full");
    out.push_back({"fa3", lo, "fa3~full"});
  }
  // fa3's d=64 causal default at N <= 2048 (fa3_shape_default_tiles): 128 rows on the dynamic
  // grid with the TMA store (fa3::default_plan), in both types.
  if (s.d == 64 && s.causal) out.push_back({"fa3", {}, "fa3@128x128", Tiles{128, 128}});
  // fp8's dynamic grid with the TMA-store epilogue (fp8_sm90_launch.hpp), the other fp8 build
  // with the hooks; the causal 192-row tile (d=64) has none.
  if (s.dtype == DType::bf16 && !(s.d == 64 && s.causal)) {
    LaunchOptions lo;
    lo.options[kOptionFp8Schedule] = std::string("dynamic-tma-store");
    out.push_back({"fp8", lo, "fp8~dynamic-tma-store"});
  }
  return out;
}

// The fault grids' shape: one batch, three heads.
Shape grid_shape(const Grid& g) {
  Shape s;
  s.B = 1;
  s.H = 3;
  s.N = g.N;
  s.d = g.d;
  s.causal = g.causal;
  s.dtype = g.dtype;
  return s;
}

// A grid's inputs on the device (seed: seed_base + N + d + causal) and the reference sample
// computed from them before any variant runs: what the fault grid and the fa2 tile grid share.
struct GridInputs {
  GridInputs(const Grid& g, std::uint64_t seed_base)
      : s(grid_shape(g)),
        seed(seed_base + static_cast<std::uint64_t>(g.N + g.d + g.causal)),
        d(s, seed),
        ref(s, d.inputs(), seed) {}
  const Shape s;
  const std::uint64_t seed;
  Device d;
  const bench::ReferenceSample ref;
};

void run_grid(const Grid& g) {
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  GridInputs in(g, 4242);
  const Shape& s = in.s;
  for (const Runner& runner : runners(s)) {
    const char* name = runner.label.c_str();
    const VariantInfo& info = *find_variant(runner.variant);
    if (!info.unsupported_reason(s).empty() ||
        !info.unsupported_on_device(device->cc_major, device->cc_minor).empty()) {
      continue;
    }
    const std::string prec =
        info.algorithm == Algorithm::fp8 ? "fp8" : std::string(to_string(s.dtype));
    // The true kernel passes on these inputs ...
    const Tiles* tile = runner.tiles.block_q ? &runner.tiles : nullptr;
    const auto clean = run_one(info, s, in.d, in.ref, nullptr, tile, runner.options);
    EXPECT_TRUE(clean.passed) << name << ": " << bench::verification_failure_reason(clean);
    const int bc = info.algorithm == Algorithm::standard
                       ? 64
                       : (tile ? *tile : info.default_tiles(static_cast<int>(s.d))).block_kv;
    const int kv_blocks = static_cast<int>((s.N + bc - 1) / bc);
    // ... and every fault that applies to it fails.
    for (const NamedFault& nf : faults_for(kv_blocks)) {
      if ((nf.causal_only && !s.causal) ||
          (nf.not_standard && info.algorithm == Algorithm::standard))
        continue;
      const auto v = run_one(info, s, in.d, in.ref, &nf, tile, runner.options);
      EXPECT_FALSE(v.passed) << name << " " << prec << " d=" << s.d << (s.causal ? " causal" : "")
                             << " N=" << s.N << ": fault '" << nf.name
                             << "' passed verification (worst row ratio " << v.worst_row_ratio
                             << ", lse ratio " << v.lse_worst_row_ratio.value_or(0) << ")";
      std::printf("fault-table | %s | %s | %s | d=%lld | %s | N=%lld | %s | %s\n", nf.name.c_str(),
                  name, prec.c_str(), static_cast<long long>(s.d), s.causal ? "causal" : "full",
                  static_cast<long long>(s.N), v.passed ? "PASSED (not caught)" : "caught",
                  v.passed ? "" : bench::verification_failure_reason(v).c_str());
    }
    std::printf(
        "fault-table | (none: the true kernel) | %s | %s | d=%lld | %s | N=%lld | %s | worst row "
        "%.2f of tol\n",
        name, prec.c_str(), static_cast<long long>(s.d), s.causal ? "causal" : "full",
        static_cast<long long>(s.N), clean.passed ? "passes" : "FAILS", clean.worst_row_ratio);
  }
}

class FaultsAreCaught : public testing::TestWithParam<Grid> {};

TEST_P(FaultsAreCaught, ForEveryVariant) {
  run_grid(GetParam());
}

std::vector<Grid> grids() {
  std::vector<Grid> out;
  for (int d : {64, 128}) {
    for (DType t : {DType::bf16, DType::fp16}) {
      for (bool causal : {false, true}) {
        out.push_back({d, t, causal, 4096});
        out.push_back({d, t, causal, 1000});  // a partial last block (of 64 and of 128 rows)
      }
    }
  }
  out.push_back(
      {64, DType::bf16, false, 32768});  // the all-zero output an absolute bar let through
  out.push_back({128, DType::bf16, true, 16384});
  // d=256: fa3's 128x80 tile (and standard); the other variants have no d=256 kernel.
  for (bool causal : {false, true}) {
    out.push_back({256, DType::bf16, causal, 1000});
    out.push_back({256, DType::fp16, causal, 4096});
  }
  return out;
}

std::string grid_name(const testing::TestParamInfo<Grid>& p) {
  return "d" + std::to_string(p.param.d) + "_" + std::string(to_string(p.param.dtype)) +
         (p.param.causal ? "_causal" : "_full") + "_N" + std::to_string(p.param.N);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FaultsAreCaught, testing::ValuesIn(grids()), grid_name);

// fa2's every compiled tile (each its own warp layout: kernels/fa2/fa2_tiles.hpp, Fa2Tiles)
// catches every fault, so any tile --block-q/--block-kv picks, or a retuning makes the default, is
// checked the way the default is. N=1000: a partial last query and K/V block in every tile.
class Fa2TileFaults : public testing::TestWithParam<Grid> {};

TEST_P(Fa2TileFaults, EveryTileCatchesEveryFault) {
  const Grid& g = GetParam();
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  GridInputs in(g, 5151);
  const Shape& s = in.s;
  const VariantInfo& info = *find_variant("fa2");
  const auto tiles = info.tile_options(g.d);
  ASSERT_GE(tiles.size(), 2u) << "fa2 compiles more than one tile at d=" << g.d;
  for (const Tiles& t : tiles) {
    const std::string label = "fa2@" + std::to_string(t.block_q) + "x" + std::to_string(t.block_kv);
    const auto clean = run_one(info, s, in.d, in.ref, nullptr, &t);
    EXPECT_TRUE(clean.passed) << label << ": " << bench::verification_failure_reason(clean);
    const int kv_blocks = static_cast<int>((s.N + t.block_kv - 1) / t.block_kv);
    for (const NamedFault& nf : faults_for(kv_blocks)) {
      if (nf.causal_only && !s.causal) continue;
      const auto v = run_one(info, s, in.d, in.ref, &nf, &t);
      EXPECT_FALSE(v.passed) << label << " d=" << s.d << (s.causal ? " causal" : "") << " N=" << s.N
                             << ": fault '" << nf.name << "' passed verification (worst row ratio "
                             << v.worst_row_ratio << ")";
      std::printf("fault-table | %s | %s | %s | d=%lld | %s | N=%lld | %s | %s\n", nf.name.c_str(),
                  label.c_str(), std::string(to_string(s.dtype)).c_str(),
                  static_cast<long long>(s.d), s.causal ? "causal" : "full",
                  static_cast<long long>(s.N), v.passed ? "PASSED (not caught)" : "caught",
                  v.passed ? "" : bench::verification_failure_reason(v).c_str());
    }
  }
}

std::vector<Grid> fa2_tile_grids() {
  std::vector<Grid> out;
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) out.push_back({d, DType::bf16, causal, 1000});
  }
  out.push_back({128, DType::fp16, true, 1000});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fa2, Fa2TileFaults, testing::ValuesIn(fa2_tile_grids()), grid_name);

// The slowdown fault (FaultInjection::slowdown_percent: each fa2 thread block holds its SM slot
// longer) against the gate's time decision (bench/gate.hpp, compare_time, the gate's default
// tolerance of 3%): the slowed kernel must be called slower, and two runs of one kernel the same;
// the slowed kernel's output must still verify. Every side runs fa2's FAULTS instantiation (a
// slowdown of 0 would select the production kernel, other code): the baseline holds 1%, the slowed
// kernel 11%: with two blocks per SM the kernel slows by little more than half the hold (the
// other block runs on alone meanwhile), so the hold is well past twice the gate's tolerance. The
// three launchers take turns, so drift in clocks or temperature hits all alike.
TEST(Fa2Slowdown, GateCallsItSlower) {
  std::string why;
  const auto device = query_device(0, &why);
  if (!device) GTEST_SKIP() << "no GPU: " << why;
  Shape s;  // d=128's default tile, several waves of blocks
  s.B = 4;
  s.H = 16;
  s.N = 4096;
  s.d = 128;
  s.dtype = DType::bf16;
  const std::uint64_t seed = 6161;
  Device d(s, seed);
  const bench::ReferenceSample ref(s, d.inputs(), seed);
  const VariantInfo& info = *find_variant("fa2");
  const Tiles tiles = info.default_tiles(static_cast<int>(s.d));
  const DeviceBuffers db{d.q, d.k, d.v, d.o, static_cast<float*>(d.lse), nullptr, 0};
  constexpr int kBasePercent = 1, kSlowPercent = 11;
  constexpr double kHold = (100.0 + kSlowPercent) / (100.0 + kBasePercent) - 1.0;  // 0.099
  auto make = [&](int percent) {
    LaunchOptions lo;
    lo.fault.slowdown_percent = static_cast<std::uint8_t>(percent);
    auto l = info.make_launcher(lo);
    EXPECT_EQ(l->prepare(s, tiles, db, nullptr), "");
    return l;
  };
  const auto base = make(kBasePercent), again = make(kBasePercent), slow = make(kSlowPercent);
  cudaEvent_t start, stop;
  FA_CUDA_CHECK(cudaEventCreate(&start));
  FA_CUDA_CHECK(cudaEventCreate(&stop));
  auto time_ms = [&](Launcher& l) {
    FA_CUDA_CHECK(cudaEventRecord(start, nullptr));
    EXPECT_EQ(l.run(s, tiles, db, nullptr), "");
    FA_CUDA_CHECK(cudaEventRecord(stop, nullptr));
    FA_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  for (int i = 0; i < 3; ++i) {  // warm-up
    for (Launcher* l : {base.get(), again.get(), slow.get()}) time_ms(*l);
  }
  bench::Timing t_base, t_again, t_slow;
  for (int i = 0; i < 30; ++i) {
    t_base.samples_ms.push_back(time_ms(*base));
    t_again.samples_ms.push_back(time_ms(*again));
    t_slow.samples_ms.push_back(time_ms(*slow));
  }
  FA_CUDA_CHECK(cudaEventDestroy(start));
  FA_CUDA_CHECK(cudaEventDestroy(stop));
  const auto v = ref.check(db, bench::ReferenceSample::rule_for(info, {}));  // the slowed run's
  EXPECT_TRUE(v.passed) << "the slowdown fault changed fa2's output: "
                        << bench::verification_failure_reason(v);

  const bench::GateOptions o;
  const bench::TimeComparison same = bench::compare_time(t_base, t_again, o);
  const bench::TimeComparison slower = bench::compare_time(t_base, t_slow, o);
  std::printf(
      "fa2 slowdown %d%% vs %d%%: median ratio %.4f (%s), same kernel %.4f (%s), "
      "tolerance %.2f\n",
      kSlowPercent, kBasePercent, slower.time.ratio, bench::to_string(slower.verdict),
      same.time.ratio, bench::to_string(same.verdict), slower.tolerance);
  EXPECT_EQ(same.verdict, bench::TimeVerdict::same) << same.why;
  EXPECT_EQ(slower.verdict, bench::TimeVerdict::slower) << slower.why;
  // The hold is what slows it: a real part of it, and no more than all of it.
  EXPECT_GT(slower.time.ratio, 1.0 + kHold / 4) << slower.why;
  EXPECT_LT(slower.time.ratio, 1.0 + kHold * 1.5) << slower.why;
}

}  // namespace
}  // namespace fa
