// GPU tests of the backward pass: every backward row (standard, fa2 in each compiled tile and
// dq mode, fa3 on sm_90a) against the fp64 reference on fresh random inputs (dQ, dK, dV poisoned
// first, workspace poisoned), across odd shapes, and the fault tests (a dropped K/V block, a
// shifted causal mask, a wrong scale must fail; fa3 also a wrong D and lost dQ contributions). O
// and lse come from fa2's forward, as in fa-bench (bench/runner.cpp). Skipped with a reason without
// a GPU.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "bench/runner.hpp"
#include "bench/verify.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/registry.hpp"
#include "profiler/device_info.hpp"

namespace fa {
namespace {

struct Alloc {
  void* p = nullptr;
  explicit Alloc(std::size_t bytes) {
    if (bytes) FA_CUDA_CHECK(cudaMalloc(&p, bytes));
  }
  ~Alloc() {
    if (p) cudaFree(p);
  }
};

struct Outcome {
  bench::Verification v;
  std::string worst;
};

// The backward configuration a case runs: its tiles ({0, 0}: the variant's default) and, for fa2,
// option dq.
struct Config {
  Tiles tiles{};
  bool dq_separate = false;
};

Tiles tiles_of(const VariantInfo& info, const Shape& s, const Config& c) {
  if (c.tiles.block_q > 0) return c.tiles;
  return info.backward_tile_options ? info.backward_tile_options(int(s.d)).front()
                                    : info.default_tiles(int(s.d));
}

Outcome run_backward_and_check(const std::string& variant, const Shape& s, std::uint64_t seed,
                               const FaultInjection& fault = {}, const Config& config = {}) {
  const VariantInfo* info = find_variant(variant);
  LaunchOptions lo;
  lo.fault = fault;
  if (config.dq_separate) lo.options[kOptionDq] = std::string(kDqSeparate);
  auto launcher = info->make_launcher(lo);
  const Tiles tiles = tiles_of(*info, s, config);
  const std::size_t bytes = static_cast<std::size_t>(s.qo_elements()) * 2;
  const std::size_t rows = static_cast<std::size_t>(s.heads_total() * s.N) * 4;
  const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_elements()) * 2;
  Alloc q(bytes), k(kv_bytes), v(kv_bytes), o(bytes), d_o(bytes), lse(rows), dq(bytes),
      dk(kv_bytes), dv(kv_bytes);
  FA_CUDA_CHECK(fill_normal(q.p, s.qo_elements(), s.dtype, seed * 3, nullptr));
  FA_CUDA_CHECK(fill_normal(k.p, s.kv_elements(), s.dtype, seed * 3 + 1, nullptr));
  FA_CUDA_CHECK(fill_normal(v.p, s.kv_elements(), s.dtype, seed * 3 + 2, nullptr));
  FA_CUDA_CHECK(fill_normal(d_o.p, s.qo_elements(), s.dtype, seed * 3 + 3, nullptr));
  // the forward whose O and lse the backward starts from: fa-bench's (fa2, or standard at d=256)
  EXPECT_EQ(bench::run_backward_forward(s, q.p, k.p, v.p, o.p, static_cast<float*>(lse.p), nullptr),
            "");
  FA_CUDA_CHECK(poison_nan16(dq.p, s.qo_elements(), nullptr));
  for (void* g : {dk.p, dv.p}) FA_CUDA_CHECK(poison_nan16(g, s.kv_elements(), nullptr));
  const std::size_t ws_bytes = launcher->backward_workspace_bytes(s, tiles);
  Alloc ws(ws_bytes);
  if (ws_bytes) FA_CUDA_CHECK(cudaMemset(ws.p, 0xff, ws_bytes));
  const BackwardBuffers b{q.p,  k.p,  v.p,  o.p,  d_o.p,   static_cast<const float*>(lse.p),
                          dq.p, dk.p, dv.p, ws.p, ws_bytes};
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  bench::BackwardReferenceSample ref(s, b, seed);
  EXPECT_EQ(launcher->prepare_backward(s, tiles, b, nullptr), "");
  EXPECT_EQ(launcher->run_backward(s, tiles, b, nullptr), "");
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  Outcome out;
  out.v = ref.check(b, &out.worst);
  return out;
}

struct Case {
  std::string variant;
  int d;
  DType dtype;
  bool causal;
  std::int64_t N;
  Config config{};
};

// "fa2", "fa2@64x128", "fa2~dq-separate", "fa2@64x128~dq-separate".
std::string config_label(const Case& c) {
  std::string out = c.variant;
  if (c.config.tiles.block_q > 0)
    out += "@" + std::to_string(c.config.tiles.block_q) + "x" +
           std::to_string(c.config.tiles.block_kv);
  if (c.config.dq_separate) out += "~dq-separate";
  return out;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << config_label(c) << " d=" << c.d << " " << to_string(c.dtype) << (c.causal ? " causal" : "")
      << " N=" << c.N;
}

std::string case_name(const testing::TestParamInfo<Case>& p) {
  const Case& c = p.param;
  std::string config = c.variant;
  if (c.config.tiles.block_q > 0)
    config += "_" + std::to_string(c.config.tiles.block_q) + "x" +
              std::to_string(c.config.tiles.block_kv);
  if (c.config.dq_separate) config += "_dqseparate";
  return config + "_d" + std::to_string(c.d) + "_" + std::string(to_string(c.dtype)) +
         (c.causal ? "_causal" : "_full") + "_N" + std::to_string(c.N);
}

// A variant's backward configurations at head dim d: every compiled tile (the default as
// {0, 0}), fa2's with both dq modes; standard: its one.
std::vector<Config> configs_of(const std::string& variant, int d) {
  const VariantInfo* info = find_variant(variant);
  if (!info->backward_tile_options) return {Config{}};
  std::vector<Config> out;
  const auto tiles = info->backward_tile_options(d);
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    out.push_back({i == 0 ? Tiles{} : tiles[i], false});
    if (variant == "fa2") out.push_back({i == 0 ? Tiles{} : tiles[i], true});
  }
  return out;
}

Shape shape_of(const Case& c) {
  Shape s;
  s.N = c.N;
  s.d = c.d;
  s.causal = c.causal;
  s.dtype = c.dtype;
  s.B = c.N >= 1000 ? 1 : 3;
  s.H = c.N >= 4096 ? 2 : (c.N >= 1000 ? 3 : 5);
  return s;
}

bool skip_without_gpu(std::string* why) {
  return !query_device(0, why).has_value();
}

// Whether this build and device run the variant (fa3: built with CuTe, an sm_90 device).
bool skip_variant(const std::string& variant, const Shape& s, std::string* why) {
  const VariantInfo* info = find_variant(variant);
  *why = info->unsupported_reason(s);
  if (why->empty()) {
    const auto device = query_device(0, why);
    if (device) *why = info->unsupported_on_device(device->cc_major, device->cc_minor);
  }
  return !why->empty();
}

// The backward variants under test.
constexpr const char* kVariants[] = {"standard", "fa2", "fa3"};

class BackwardMatchesReference : public testing::TestWithParam<Case> {};

TEST_P(BackwardMatchesReference, OnFreshRandomInputs) {
  std::string why;
  if (skip_without_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const Case& c = GetParam();
  if (skip_variant(c.variant, shape_of(c), &why)) GTEST_SKIP() << why;
  const Outcome r =
      run_backward_and_check(c.variant, shape_of(c), 7000 + c.N * 7 + c.d, {}, c.config);
  EXPECT_TRUE(r.v.all_finite) << r.v.nonfinite_count << " non-finite gradient elements";
  EXPECT_TRUE(r.v.inputs_unchanged);
  EXPECT_LE(r.v.worst_row_ratio, 1.0) << r.worst << " row " << r.v.worst_row << " of head "
                                      << r.v.worst_head << "; max error " << r.v.max_abs_error;
  EXPECT_TRUE(r.v.passed) << bench::backward_failure_reason(r.v, r.worst);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* v : kVariants)
    for (int d : find_variant(v)->backward_dims())
      for (const Config& config : configs_of(v, d))
        for (DType t : {DType::bf16, DType::fp16})
          for (bool causal : {false, true})
            for (std::int64_t N : {1, 17, 127, 128, 129, 1000, 4096})
              out.push_back({v, d, t, causal, N, config});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BackwardMatchesReference, testing::ValuesIn(cases()), case_name);

// Each fault must fail verification (the check can fail), and the same run without it passes.
class BackwardFaultsAreCaught : public testing::TestWithParam<Case> {};

TEST_P(BackwardFaultsAreCaught, DroppedBlockShiftedMaskWrongScale) {
  std::string why;
  if (skip_without_gpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const Case& c = GetParam();
  const Shape s = shape_of(c);
  if (skip_variant(c.variant, s, &why)) GTEST_SKIP() << why;
  const std::uint64_t seed = 9100 + c.N + c.d;
  std::vector<std::pair<std::string, FaultInjection>> faults;
  const Tiles tiles = tiles_of(*find_variant(c.variant), s, c.config);
  const int block_kv = tiles.block_kv > 0 ? tiles.block_kv : 64;  // standard: 64-key blocks
  for (int block : {0, static_cast<int>((c.N - 1) / block_kv)}) {
    FaultInjection f;
    f.drop_kv_block = block;
    faults.push_back({"drop K/V block " + std::to_string(block), f});
  }
  if (c.causal) {
    FaultInjection f;
    f.mask_shift = 1;
    faults.push_back({"causal mask shifted by one key", f});
  }
  FaultInjection scale;
  scale.scale_factor = 1.05f;
  faults.push_back({"softmax scale x1.05", scale});
  if (c.variant == "fa3") {
    FaultInjection delta;
    delta.delta_factor = 1.05f;
    faults.push_back({"D = rowsum(dO o O) x1.05", delta});
    for (int block : {0, static_cast<int>((c.N - 1) / tiles.block_q)}) {
      FaultInjection f;
      f.drop_dq_block = block;
      faults.push_back({"dQ of query block " + std::to_string(block) + " lost", f});
    }
  }
  for (const auto& [name, f] : faults) {
    const Outcome r = run_backward_and_check(c.variant, s, seed, f, c.config);
    EXPECT_FALSE(r.v.passed) << config_label(c) << ": " << name
                             << " passed verification (worst ratio " << r.v.worst_row_ratio << ")";
  }
  EXPECT_TRUE(run_backward_and_check(c.variant, s, seed, {}, c.config).v.passed);
}

std::vector<Case> fault_cases() {
  std::vector<Case> out;
  for (const char* v : kVariants)
    for (int d : find_variant(v)->backward_dims())
      for (const Config& config : configs_of(v, d))
        for (bool causal : {false, true}) out.push_back({v, d, DType::bf16, causal, 300, config});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BackwardFaultsAreCaught, testing::ValuesIn(fault_cases()),
                         case_name);

}  // namespace
}  // namespace fa
