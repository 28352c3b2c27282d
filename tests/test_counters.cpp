// Counter plumbing that needs no GPU: metric names against the chip (CUPTI's host API works
// without a device), the measured figures, and the ceilings cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench/explain.hpp"
#include "bench/result.hpp"
#include "bench/result_json.hpp"
#include "profiler/ceilings.hpp"
#include "profiler/counters.hpp"
#include "profiler/cupti_range.hpp"

namespace fa {
namespace {

TEST(Counters, DefaultMetricsExistOnGH100) {
  std::vector<std::string> bad;
  try {
    bad = CounterSession::unsupported(std::string("GH100"), counters::default_metrics());
  } catch (const std::exception& e) {
    GTEST_SKIP() << "CUPTI host API unavailable here: " << e.what();
  }
  EXPECT_TRUE(bad.empty()) << bad.front();
  bad = CounterSession::unsupported(
      std::string("GH100"),
      {"dram__bytes_read.sum", "nosuch__metric.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"});
  // The second does not exist anywhere; the third does not exist on GH100 (facts/h200.md).
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0], "nosuch__metric.sum");
  EXPECT_EQ(bad[1], "sm__ops_path_tensor_src_fp16_dst_fp32.sum");
}

// --stall-reasons asks for these by name: every one must exist on the chip the tool is built for
// (the run drops and names any a GPU refuses; here a wrong name is caught without a GPU).
TEST(Counters, StallReasonMetricsExistOnGH100) {
  std::vector<std::string> names;
  for (const auto& s : counters::stall_reasons()) names.push_back(s.metric);
  ASSERT_EQ(names.size(), 18u);
  std::vector<std::string> bad;
  try {
    bad = CounterSession::unsupported(std::string("GH100"), names);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "CUPTI host API unavailable here: " << e.what();
  }
  EXPECT_TRUE(bad.empty()) << bad.size() << " refused, first " << bad.front();
}

// The replay loop is sized from CUPTI's pass count (with a guard against a loop): on the H200 the
// count made with the GPU's availability said 1 where these metrics need several, so the session
// takes the chip's own schedule as well. These are that schedule's facts the fix rests on
// (CUPTI 13.0, GH100): the defaults need more than one pass and the stall reasons add more.
TEST(Counters, StallReasonsNeedMorePassesThanTheDefaults) {
  std::vector<std::string> all = counters::default_metrics();
  for (const auto& s : counters::stall_reasons()) all.push_back(s.metric);
  int defaults = 0, with_stalls = 0;
  try {
    defaults = CounterSession::passes("GH100", counters::default_metrics());
    with_stalls = CounterSession::passes("GH100", all);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "CUPTI host API unavailable here: " << e.what();
  }
  EXPECT_GT(defaults, 1);
  EXPECT_GT(with_stalls, defaults);
  // The GPU's availability-based count said 1 on the H200; a guard of 2 x 1 + 4 (the loop's
  // before the mend) is below what these metrics take.
  EXPECT_GT(with_stalls, 2 * 1 + 4);
}

TEST(Counters, TopStallsAreTheLargestInOrder) {
  const auto metric = [](const char* reason) {
    return std::string("smsp__average_warps_issue_stalled_") + reason + "_per_issue_active.ratio";
  };
  const std::map<std::string, double> v{{metric("wait"), 2.21},
                                        {metric("short_scoreboard"), 0.72},
                                        {metric("dispatch_stall"), 0.32},
                                        {metric("math_pipe_throttle"), 0.34},
                                        {"dram__bytes_read.sum", 1e9}};
  const auto top = counters::top_stalls(v, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, "wait");
  EXPECT_EQ(top[1].first, "short_scoreboard");
  EXPECT_EQ(top[2].first, "math_pipe_throttle");
  EXPECT_DOUBLE_EQ(top[2].second, 0.34);
  EXPECT_EQ(bench::stall_summary(v),
            "; stalls per issued instruction: wait 2.21, short_scoreboard 0.72, "
            "math_pipe_throttle 0.34");
  // Without stall metrics the line says nothing (runs without --stall-reasons).
  EXPECT_EQ(bench::stall_summary({{"dram__bytes_read.sum", 1e9}}), "");
  EXPECT_TRUE(counters::top_stalls(v, 0).empty());
}

TEST(Counters, InterpretSumsTheRightThings) {
  const auto m = counters::interpret({{"dram__bytes_read.sum", 100},
                                      {"dram__bytes_write.sum", 50},
                                      {"l1tex__m_xbar2l1tex_read_sectors.sum", 10},
                                      {"l1tex__m_l1tex2xbar_write_sectors.sum", 2},
                                      // counted at the L2 too: the SM's count wins
                                      {"lts__t_sectors_srcunit_tex_op_read.sum", 99},
                                      {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1000},
                                      {"sm__ops_path_tensor_src_fp8.sum", 24},
                                      {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 7},
                                      {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 1},
                                      {"gpu__time_duration.sum", 2e6}});
  EXPECT_DOUBLE_EQ(m.dram_bytes(), 150);
  EXPECT_DOUBLE_EQ(m.l2_bytes(), 12 * 32);  // sectors of 32 bytes
  EXPECT_DOUBLE_EQ(m.tensor_flops, 1024);
  EXPECT_DOUBLE_EQ(m.fp32_flops, 15);  // FFMA counts 2
  EXPECT_DOUBLE_EQ(m.seconds, 2e-3);   // ns
}

// Files written before 2026-11-22 counted SM <-> L2 traffic at the L2: still read, and said so.
TEST(Counters, OlderFilesCountL2AtTheL2) {
  const std::map<std::string, double> old{{"lts__t_sectors_srcunit_tex_op_read.sum", 10},
                                          {"lts__t_sectors_srcunit_tex_op_write.sum", 2}};
  EXPECT_FALSE(counters::l2_counted_at_sm(old));
  EXPECT_DOUBLE_EQ(counters::interpret(old).l2_bytes(), 12 * 32);
  EXPECT_TRUE(counters::l2_counted_at_sm({{"l1tex__m_xbar2l1tex_read_sectors.sum", 1}}));
  const auto& m = counters::default_metrics();
  EXPECT_NE(std::find(m.begin(), m.end(), counters::kSmFromL2Sectors), m.end());
  EXPECT_EQ(std::find(m.begin(), m.end(), counters::kL2SideReadSectors), m.end());
}

TEST(Counters, MeasuredSetAgainstTheModel) {
  bench::VariantResult r;
  r.model.flops_matrix = 1e12;
  r.model.bytes_read = 3e9;
  r.model.bytes_written = 1e9;
  r.model.bytes_compulsory = 1e9;
  bench::Timing t;
  t.samples_ms.assign(1, 2.0);  // not = {2.0}: GCC 13 reports a false -Wstringop-overflow there
  t.stats = summarize(t.samples_ms);
  r.timing = t;
  bench::CounterResult c;
  c.values = {{"dram__bytes_read.sum", 1.5e9},
              {"dram__bytes_write.sum", 0.5e9},
              {"l1tex__m_xbar2l1tex_read_sectors.sum", 4e9 / 32},
              {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1e12}};
  r.counters = c;
  Ceilings roofs{"test", 4e12, 800e12, 800e12, 1600e12};
  const auto m = bench::derive_measured(r, roofs, 800e12);
  EXPECT_DOUBLE_EQ(m.dram_over_model, 0.5);
  EXPECT_DOUBLE_EQ(m.dram_over_compulsory, 2.0);
  EXPECT_DOUBLE_EQ(m.l2_over_model, 1.0);
  EXPECT_DOUBLE_EQ(m.tensor_over_model, 1.0);
  EXPECT_DOUBLE_EQ(m.intensity_dram, 500);  // 1e12 / 2e9
  // 1e12 FLOP in 2 ms = 500 TFLOP/s; roof at I=500: min(800, 500 * 4) = 800 TFLOP/s.
  const Placement p = bench::placement_of(r, roofs, 800e12);
  EXPECT_EQ(p.basis, "counters");
  EXPECT_DOUBLE_EQ(p.fraction, 500.0 / 800.0);
  EXPECT_EQ(p.bound, "compute");
  // With an L2 roof of 1 TB/s the 4 GB of SM<->L2 traffic (I = 250) caps it at 250 TFLOP/s.
  roofs.l2_bytes_per_s = 1e12;
  const Placement h = bench::placement_of(r, roofs, 800e12);
  EXPECT_EQ(h.bound, "l2");
  EXPECT_DOUBLE_EQ(h.fraction, 500.0 / 250.0);
  // Without counters: the compulsory bytes (1 GB, I = 1000), never the model's 4 GB.
  r.counters->status = "unavailable";
  roofs.l2_bytes_per_s = 0;
  const Placement c0 = bench::placement_of(r, roofs, 800e12);
  EXPECT_EQ(c0.basis, "compulsory");
  EXPECT_DOUBLE_EQ(c0.intensity_dram, 1000);
  EXPECT_DOUBLE_EQ(c0.fraction, 500.0 / 800.0);
}

TEST(Counters, ReadingFollowsTheNumbers) {
  bench::ConfigResult c;
  bench::VariantResult standard, fa2, other;
  standard.spec.variant = "standard";
  standard.measured =
      bench::MeasuredDerived{17.45e9, 1.00, 65.0, 19e9, 1.12, 5.5e11, 1.0, 0, 31, 28, 0, ""};
  standard.placement = Placement{"counters", 31, 28, 1.3e14, 0.88, "dram"};
  fa2.spec.variant = "fa2";
  fa2.measured = bench::MeasuredDerived{0.26e9, 0.06, 0.96, 4e9, 0.91, 5.5e11,
                                        1.0,    0,    2100, 137, 0.33, "compute"};
  other.spec.variant = "odd";
  other.measured = bench::MeasuredDerived{2e9, 0.7, 3.0, 2e9, 0.7, 5.6e11, 1.02, 0, 0, 0, 0, ""};
  c.results = {standard, fa2, other};
  const std::string text = bench::explain_counters(c);
  EXPECT_NE(text.find("standard: DRAM follows the model (1.00x"), std::string::npos) << text;
  EXPECT_NE(text.find("dram-bound, 88% of the lowest roof"), std::string::npos) << text;
  EXPECT_NE(text.find("fa2: DRAM at the compulsory minimum (0.96x of it, 0.06x the model)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("odd: DRAM 0.70x the model"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor FLOPs 1.020x the model"), std::string::npos) << text;
  bench::ConfigResult none;
  none.results = {bench::VariantResult{}};
  EXPECT_EQ(bench::explain_counters(none), "");  // no counters, no reading
}

TEST(Counters, ReadingBreaksMultiKernelVariantsDown) {
  bench::ConfigResult c;
  bench::VariantResult standard;
  standard.spec.variant = "standard";
  standard.measured =
      bench::MeasuredDerived{4e9, 1.00, 15.0, 4e9, 1.0, 5.5e11, 1.0, 0, 31, 28, 0.88, "memory"};
  bench::CounterResult counters;
  counters.values = {{"dram__bytes_read.sum", 3e9}, {"dram__bytes_write.sum", 1e9}};
  counters.kernels = {{"S = scale Q K^T (cuBLAS)",
                       {{"dram__bytes_read.sum", 1e9}, {"gpu__time_duration.sum", 250e3}}},
                      {"P = softmax(S), in place",
                       {{"dram__bytes_read.sum", 2e9}, {"dram__bytes_write.sum", 1e9}}}};
  standard.counters = counters;
  c.results = {standard};
  const std::string text = bench::explain_counters(c);
  EXPECT_NE(text.find("S = scale Q K^T (cuBLAS)"), std::string::npos) << text;
  EXPECT_NE(text.find("DRAM 1000.0 MB ( 25%)"), std::string::npos) << text;
  EXPECT_NE(text.find("250.0 us"), std::string::npos) << text;
  EXPECT_NE(text.find("DRAM 3000.0 MB ( 75%)"), std::string::npos) << text;
  // One kernel: nothing to break down.
  c.results[0].counters->kernels.resize(1);
  EXPECT_EQ(bench::explain_counters(c).find("S = scale"), std::string::npos);
}

TEST(Counters, ForcedNoPermissionIsClassifiedWithItsHint) {
  // The path a machine without profiling rights takes; forced, since no CI machine has a GPU
  // whose counters are locked. Same classification and message as CUPTI's real error.
  CounterSession::force_error_for_tests(CounterError::no_permission);
  const CounterSession s = CounterSession::create(0, counters::default_metrics());
  CounterSession::force_error_for_tests(CounterError::none);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, CounterError::no_permission);
  EXPECT_NE(s.error().message.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos)
      << s.error().message;
  CounterSession::force_error_for_tests(CounterError::busy);
  const CounterSession busy = CounterSession::create(0, counters::default_metrics());
  CounterSession::force_error_for_tests(CounterError::none);
  EXPECT_EQ(busy.error().kind, CounterError::busy);
  // Reset, nothing is forced (the negative test): no failure says it was forced.
  const CounterSession plain = CounterSession::create(0, counters::default_metrics());
  EXPECT_EQ(plain.error().message.find("forced"), std::string::npos) << plain.error().message;
  EXPECT_NE(busy.error().message.find("another profiler"), std::string::npos)
      << busy.error().message;
}

TEST(Counters, ReadingOfARealH200Run) {
  // fa-bench --N 1024,4096 --d 64,128 --causal both on the H200 (2026-11-21).
  const auto run = bench::read_result_file(std::string(FA_SOURCE_DIR) +
                                           "/tests/data/counters-4variants-h200.json");
  for (const auto& c : run.configs) {
    const std::string text = bench::explain_counters(c);
    EXPECT_NE(text.find("standard: DRAM follows the model"), std::string::npos) << text;
    EXPECT_NE(text.find("fa2: DRAM at the compulsory minimum"), std::string::npos) << text;
    EXPECT_EQ(text.find("tensor FLOPs 1."), std::string::npos) << "tensor FLOPs off the model:\n"
                                                               << text;
  }
}

TEST(Ceilings, CacheRoundTripKeyedByDeviceDriverAndTool) {
  const auto dir = std::filesystem::temp_directory_path() / "fa-bench-test-cache";
  std::filesystem::remove_all(dir);
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  DeviceInfo d;
  d.uuid = "GPU-1234";
  d.driver_version = "580.159.04";
  const std::string path = ceilings_cache_path(d, "0.1.0");
  EXPECT_EQ(path.rfind(dir.string() + "/fa-bench/ceilings-", 0), 0u) << path;
  EXPECT_FALSE(load_ceilings(path, ceilings_cache_key(d, "0.1.0")));  // nothing yet
  MeasuredCeilings m;
  m.key = ceilings_cache_key(d, "0.1.0");
  m.dram_bytes_per_s = 4.25e12;
  m.bf16_flops_per_s = 781e12;
  m.measured_utc = "2026-11-21T00:00:00Z";
  save_ceilings(path, m);
  const auto back = load_ceilings(path, m.key);
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->dram_bytes_per_s, 4.25e12);
  // Another driver (or tool version) must not reuse these figures.
  DeviceInfo other = d;
  other.driver_version = "590.1";
  EXPECT_NE(ceilings_cache_path(other, "0.1.0"), path);
  EXPECT_FALSE(load_ceilings(path, ceilings_cache_key(other, "0.1.0")));
  // A damaged file is remeasured, not trusted.
  std::ofstream(path) << "{ not json";
  EXPECT_FALSE(load_ceilings(path, m.key));
  const Ceilings c = to_ceilings(m, datasheet_ceilings("NVIDIA H200", 0), "test");
  EXPECT_DOUBLE_EQ(c.dram_bytes_per_s, 4.25e12);
  EXPECT_DOUBLE_EQ(c.datasheet_dram_bytes_per_s, 4.8e12);  // the datasheet stays beside
  unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fa
