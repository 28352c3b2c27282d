// The result file: C++ writer -> C++ reader round trip, refusal of malformed input with the
// file and the problem named, and the C++ reader on the Python writer's output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/result_json.hpp"
#include "bench/runner.hpp"
#include "bench/writers.hpp"

namespace fa::bench {
namespace {

RunResult sample_record() {
  RunResult r;
  r.tool_version = "0.1.0";
  r.git_revision = "abc";
  r.created_utc = "2026-11-21T00:00:00Z";
  r.command_line = "fa-bench --N 17";
  r.complete = true;
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.uuid = "GPU-0";
  d.cc_major = 9;
  d.sm_count = 132;
  d.l2_bytes = 62914560;
  d.driver_version = "580.159.04";
  r.device = d;
  r.settings.seed = 7;
  r.ceilings = Ceilings{"datasheet (H200)", 4.8e12, 989.4e12, 989.4e12, 1978.9e12};
  ConfigResult c;
  c.shape.B = 3;
  c.shape.H = 5;
  c.shape.N = 17;
  c.shape.d = 64;
  c.shape.causal = true;
  c.seed = 7;
  VariantResult ok;
  ok.spec.variant = "fa2";
  ok.algorithm = Algorithm::fa2;
  ok.status = Status::ok;
  ok.spec.kernel_config = KernelConfig{128, 64, 2, 0, {1, 1, 1}};
  ok.spec.options = {{"block_order", std::string("blocks")}};
  ok.model = model::io_model(Algorithm::fa2, c.shape, ok.spec.tiles(), 233472);
  Verification v;
  v.passed = true;
  v.all_finite = true;
  v.max_abs_error = 1e-3;
  v.tolerance = 5e-3;
  v.lse_max_abs_error = 1e-6;
  ok.verification = v;
  Timing t;
  t.samples_ms = {1.0, 1.1, 0.9, 1.05};
  t.stats = summarize(t.samples_ms);
  t.sm_clock_before_mhz = 1980;
  ok.derived =
      derive(ok.model, t, r.ceilings, tensor_peak_for(r.ceilings, ok.algorithm, c.shape.dtype));
  ok.timing = t;
  VariantResult failed = ok;
  failed.spec.variant = "standard";
  failed.algorithm = Algorithm::standard;
  failed.status = Status::failed;
  failed.verification->passed = false;
  failed.timing.reset();
  failed.derived.reset();
  VariantResult skipped;
  skipped.spec.variant = "other";
  skipped.status = Status::skipped;
  skipped.reason = "needs 9 GiB, 1 GiB free";
  c.results = {ok, failed, skipped};
  r.configs.push_back(c);
  return r;
}

TEST(ResultJson, PeerRatioAndKernelBreakdownRoundTrip) {
  RunResult a = sample_record();
  auto& c = a.configs[0];
  VariantResult peer = c.results[0];
  peer.spec.variant = "cudnn";
  peer.peer = true;
  peer.timing->samples_ms = {0.5, 0.5, 0.5};
  peer.timing->stats = summarize(peer.timing->samples_ms);
  c.results.push_back(peer);
  compare_with_peers(c);
  // fa2's median is 1.025 ms, the peer's 0.5 ms: fa2 runs at 0.5/1.025 of the peer's speed.
  EXPECT_EQ(c.results[0].derived->best_peer, "cudnn");
  EXPECT_NEAR(c.results[0].derived->speed_vs_best_peer, 0.5 / 1.025, 1e-12);
  EXPECT_EQ(c.results[3].derived->best_peer, "");  // peers are not compared with themselves
  EXPECT_FALSE(c.results[1].derived);              // untimed rows get no ratio
  CounterResult counters;
  counters.values = {{"dram__bytes_read.sum", 3e6}};
  counters.kernels = {{"gemm", {{"dram__bytes_read.sum", 1e6}}},
                      {"softmax", {{"dram__bytes_read.sum", 2e6}}}};
  c.results[0].counters = counters;
  c.results[3].counters =
      CounterResult{"ok", "", {{"dram__bytes_read.sum", 1e6}}, 0.1, {}, "per-kernel: failed"};
  const RunResult b = from_json_text(to_json_text(a), "mem");
  const auto& r = b.configs[0].results[0];
  ASSERT_EQ(r.counters->kernels.size(), 2u);
  EXPECT_EQ(r.counters->kernels[1].name, "softmax");
  EXPECT_DOUBLE_EQ(r.counters->kernels[1].values.at("dram__bytes_read.sum"), 2e6);
  EXPECT_EQ(b.configs[0].results[3].counters->kernels_reason, "per-kernel: failed");
  EXPECT_TRUE(b.configs[0].results[3].peer);
  EXPECT_EQ(r.derived->best_peer, "cudnn");
  EXPECT_DOUBLE_EQ(r.derived->speed_vs_best_peer, c.results[0].derived->speed_vs_best_peer);
  EXPECT_EQ(to_json_text(b), to_json_text(a));
}

TEST(ResultJson, RoundTrip) {
  const RunResult a = sample_record();
  const RunResult b = from_json_text(to_json_text(a), "mem");
  ASSERT_TRUE(b.device);
  EXPECT_EQ(b.device->name, "NVIDIA H200");
  ASSERT_EQ(b.configs.size(), 1u);
  const auto& c = b.configs[0];
  EXPECT_EQ(c.shape.B, 3);
  EXPECT_TRUE(c.shape.causal);
  ASSERT_EQ(c.results.size(), 3u);
  EXPECT_EQ(c.results[0].status, Status::ok);
  EXPECT_EQ(c.results[0].timing->samples_ms, a.configs[0].results[0].timing->samples_ms);
  EXPECT_DOUBLE_EQ(c.results[0].timing->stats.median, a.configs[0].results[0].timing->stats.median);
  EXPECT_DOUBLE_EQ(c.results[0].model.bytes(), a.configs[0].results[0].model.bytes());
  EXPECT_DOUBLE_EQ(*c.results[0].verification->lse_max_abs_error, 1e-6);
  EXPECT_EQ(c.results[1].status, Status::failed);
  EXPECT_EQ(c.results[2].reason, "needs 9 GiB, 1 GiB free");
  EXPECT_EQ(c.results[0].timing->launch, "stream");
  EXPECT_EQ(b.settings.launch, "stream");
  // Writing what was read gives the same text.
  EXPECT_EQ(to_json_text(b), to_json_text(a));
}

void expect_refused(const std::string& text, const std::string& must_mention) {
  try {
    from_json_text(text, "bad.json");
    FAIL() << "accepted: " << must_mention;
  } catch (const ResultFileError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.json: ", 0), 0u) << what;
    EXPECT_NE(what.find(must_mention), std::string::npos) << what;
  }
}

TEST(ResultJson, RefusesMalformedInput) {
  const std::string good = to_json_text(sample_record());
  expect_refused(good.substr(0, good.size() / 2), "not valid JSON");
  expect_refused("[]", "expected a JSON object");
  std::string s = good;
  s.replace(s.find("fa-bench/5"), 10, "fa-bench/9");
  expect_refused(s, "unknown version");
  s = good;
  s.replace(s.find("\"status\": \"ok\""), 14, "\"status\": \"great\"");
  expect_refused(s, "configs[0].results[0].status");
  s = good;
  s.replace(s.find("\"N\": 17"), 7, "\"N\": \"x\"");
  expect_refused(s, "configs[0].N");
  s = good;
  s.replace(s.find("\"variant\": \"standard\""), 21, "\"variant\": \"fa2\"");
  expect_refused(s, "appears twice");
  // Found by the fuzzer (CI, 2026-11-21): a float where an optional integer belongs was converted
  // to int, undefined behaviour for 1e30. Now refused like any wrong type.
  s = good;
  s.replace(s.find("\"memory_bus_bits\": 0"), 20, "\"memory_bus_bits\": 1e30");
  expect_refused(s, "device.memory_bus_bits");
}

// Impossible values (issue 13): the gate passed a file whose times and counters were all zero or
// negative. Each is refused with the file, the key and the value.
// The sample record's text with its first row changed by `change`.
std::function<std::string(const std::function<void(nlohmann::json&)>&)> first_row_changed() {
  const nlohmann::json good = nlohmann::json::parse(to_json_text(sample_record()));
  return [good](const std::function<void(nlohmann::json & row)>& change) {
    nlohmann::json doc = good;
    change(doc["configs"][0]["results"][0]);
    return doc.dump();
  };
}

TEST(ResultJson, RefusesImpossibleValues) {
  const auto with = first_row_changed();
  const std::string p = "configs[0].results[0].";
  expect_refused(with([](auto& r) { r["timing"]["samples_ms"][0] = -5.04; }),
                 p + "timing.samples_ms[0]: impossible value -5.04 (accepted: a time in ms > 0)");
  expect_refused(with([](auto& r) { r["timing"]["samples_ms"][2] = 0; }),
                 p + "timing.samples_ms[2]: impossible value 0");
  expect_refused(with([](auto& r) { r["timing"]["samples_ms"][0] = nullptr; }),
                 "samples_ms[0]: expected a number");
  expect_refused(with([](auto& r) { r["timing"]["samples_ms"] = nlohmann::json::array(); }),
                 "samples_ms: empty");
  expect_refused(with([](auto& r) { r["derived"]["tflops_convention"] = -109.0; }),
                 p + "derived.tflops_convention: impossible value -109.0");
  expect_refused(with([](auto& r) { r["model"]["bytes_read"] = -1; }),
                 p + "model.bytes_read: impossible value -1");
  expect_refused(with([](auto& r) { r["model"]["flops_matrix"] = nullptr; }),
                 p + "model.flops_matrix: impossible value null");
  expect_refused(with([](auto& r) { r["model"]["terms"][0]["bytes"] = -2; }),
                 p + "model.terms[0].bytes: impossible value -2");
  expect_refused(with([](auto& r) { r["verification"]["nonfinite_count"] = -1; }),
                 "nonfinite_count: impossible value -1");
  // The values that are possible still read.
  EXPECT_NO_THROW(
      from_json_text(with([](auto& r) { r["timing"]["samples_ms"][0] = 1e-6; }), "ok.json"));
}

TEST(ResultJson, RefusesNegativeOrMissingCounters) {
  RunResult a = sample_record();
  CounterResult c;
  c.values = {{"dram__bytes_read.sum", -3e6}};
  a.configs[0].results[0].counters = c;
  expect_refused(to_json_text(a),
                 "configs[0].results[0].counters.values.dram__bytes_read.sum: impossible value");
  a.configs[0].results[0].counters->values = {{"dram__bytes_read.sum", 0.0}};  // zero is a count
  EXPECT_NO_THROW(from_json_text(to_json_text(a), "ok.json"));
  // A metric without a finite value (the H200's write-back image left NaN metrics) is left out of
  // the file rather than written as null, which no reader accepts.
  a.configs[0].results[0].counters->values = {{"dram__bytes_read.sum", NAN},
                                              {"lts__t_bytes.sum", 5.0}};
  const RunResult read = from_json_text(to_json_text(a), "nan-counter.json");
  EXPECT_EQ(read.configs[0].results[0].counters->values,
            (std::map<std::string, double>{{"lts__t_bytes.sum", 5.0}}));
  nlohmann::json doc = nlohmann::json::parse(to_json_text(a));
  doc["configs"][0]["results"][0]["counters"]["values"]["dram__bytes_read.sum"] = nullptr;
  expect_refused(doc.dump(), "counters.values.dram__bytes_read.sum: expected a number");
  a.configs[0].results[0].counters->values = {{"dram__bytes_read.sum", 1.0}};
  a.configs[0].results[0].counters->kernels = {{"gemm", {{"dram__bytes_read.sum", -1.0}}}};
  expect_refused(to_json_text(a),
                 "counters.kernels[0].values.dram__bytes_read.sum: impossible value -1");
}

// The writer never writes a file its reader refuses: a timed row with a sample that is not a time
// > 0 (NaN, inf, 0) is written untimed, as an error naming the sample; a verification whose output
// held NaN (infinite worst-row ratio) is written with null figures and read back.
TEST(ResultJson, WriterKeepsImpossibleTimesOutOfTheFile) {
  for (const double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), 0.0, -1.0}) {
    RunResult a = sample_record();
    a.configs[0].results[0].timing->samples_ms[2] = bad;
    a.configs[0].results[0].placement = Placement{"compulsory", 800, 0, 700e12, 0.61, "compute"};
    const RunResult b = from_json_text(to_json_text(a), "bad-sample.json");
    const VariantResult& r = b.configs[0].results[0];
    EXPECT_EQ(r.status, Status::error);
    EXPECT_NE(r.reason.find("timing: sample 2 is "), std::string::npos) << r.reason;
    EXPECT_FALSE(r.timing);
    EXPECT_FALSE(r.derived);
    EXPECT_FALSE(r.placement);
    EXPECT_TRUE(r.verification->passed);  // verified and right; its time is what was not kept
  }
  RunResult a = sample_record();
  Verification& v = *a.configs[0].results[1].verification;  // the failed row
  v.all_finite = false;
  v.nonfinite_count = 3;
  v.max_abs_error = NAN;
  v.worst_row_ratio = INFINITY;
  v.lse_worst_row_ratio = INFINITY;
  const RunResult b = from_json_text(to_json_text(a), "nan-output.json");
  EXPECT_TRUE(std::isnan(b.configs[0].results[1].verification->worst_row_ratio));
  EXPECT_EQ(to_json_text(b), to_json_text(a));
  // A negative error is impossible, and refused.
  nlohmann::json doc = nlohmann::json::parse(to_json_text(sample_record()));
  doc["configs"][0]["results"][0]["verification"]["worst_row_ratio"] = -0.5;
  expect_refused(doc.dump(), "verification.worst_row_ratio: impossible value -0.5");
  doc = nlohmann::json::parse(to_json_text(sample_record()));
  doc["configs"][0]["results"][0]["timing"].erase("median_ms");
  expect_refused(doc.dump(), "configs[0].results[0].timing.median_ms: missing");
  doc = nlohmann::json::parse(to_json_text(sample_record()));
  doc["configs"][0]["results"][0]["timing"]["q1_ms"] = 0;
  expect_refused(doc.dump(), "configs[0].results[0].timing.q1_ms: impossible value 0");
}

// Every key the writer can emit, in one record: with FA_RESULT_DUMP set it is written to that file,
// which CI validates against schema/fa-bench-result.schema.json (tests/CMakeLists.txt,
// scripts/test.sh, tests/python/test_json_schema.py).
TEST(ResultJson, FullRecordReadsBackAndDumps) {
  RunResult a = sample_record();
  a.device->pci_bus_id = "0000:18:00.0";
  a.device->memory_bytes = 150ll << 30;
  a.device->smem_per_sm_bytes = 233472;
  a.device->smem_per_block_optin_bytes = 232448;
  a.device->memory_bus_bits = 6144;
  a.device->sm_clock_max_mhz = 1980;
  a.device->mem_clock_max_mhz = 3201;
  a.device->cuda_driver_version = 13000;
  a.device->cuda_runtime_version = 13000;
  a.settings.timing_engine = "google-benchmark";
  a.settings.model_smem_per_sm_bytes = 233472;
  auto& c = a.configs[0];
  VariantResult& ok = c.results[0];
  ok.spec.options = {{"block_order", std::string("heads")}};
  ok.default_config = true;
  ok.verification->baseline_rmse = 2e-4;
  ok.verification->rows_checked = 17;
  ok.verification->heads_checked = 4;
  ok.verification->worst_row_ratio = 0.25;
  ok.verification->worst_head = 3;
  ok.verification->worst_row = 16;
  ok.verification->lse_worst_row_ratio = 0.1;
  ok.verification->relative_rmse = 0.01;
  ok.verification->baseline_relative_rmse = 0.02;
  CounterResult counters;
  counters.values = {{"dram__bytes_read.sum", 3e6}, {"lts__t_bytes.sum", 9e6}};
  counters.collect_seconds = 0.2;
  counters.kernels = {{"gemm", {{"dram__bytes_read.sum", 1e6}}},
                      {"softmax", {{"dram__bytes_read.sum", 2e6}}}};
  ok.counters = counters;
  MeasuredDerived m;
  m.dram_bytes = 3e6;
  m.dram_over_model = 0.5;
  m.l2_bytes = 9e6;
  m.intensity_dram = 100;
  m.intensity_l2 = 30;
  ok.measured = m;
  ok.placement = Placement{"counters", 100, 30, 480e12, 0.4, "dram"};
  VariantResult peer = ok;
  peer.spec.variant = "cudnn";
  peer.spec.kernel_config.reset();
  peer.spec.options = {{kOptionStats, true}};
  peer.peer = true;
  peer.counters =
      CounterResult{"unavailable", "another profiler holds the counters", {}, 0, {}, ""};
  peer.measured.reset();
  peer.placement = Placement{"compulsory", 800, 0, 700e12, 0.61, "compute"};
  c.results.push_back(peer);
  compare_with_peers(c);
  ASSERT_FALSE(c.results[0].derived->best_peer.empty());
  const std::string text = to_json_text(a);
  EXPECT_EQ(to_json_text(from_json_text(text, "full.json")), text);
  if (const char* out = std::getenv("FA_RESULT_DUMP")) {
    const std::filesystem::path dir = std::filesystem::path(out).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    std::ofstream f(out, std::ios::binary);
    f << text;
    f.close();
    ASSERT_TRUE(f) << "cannot write " << out;
  }
}

TEST(ResultJson, RefusesDuplicateConfigurations) {
  RunResult a = sample_record();
  a.configs.push_back(a.configs[0]);
  expect_refused(to_json_text(a), "configs[1]: the same configuration as configs[0]");
  a.configs[1].shape.causal = false;  // another configuration: fine
  EXPECT_NO_THROW(from_json_text(to_json_text(a), "ok.json"));
  a.configs[1].shape.causal = true;
  a.configs[1].shape.dtype = DType::fp16;
  EXPECT_NO_THROW(from_json_text(to_json_text(a), "ok.json"));
}

// fa-bench/4: the K/V heads and length on every configuration (H and N when square), read back;
// a file of /3 reads as square multi-head attention; a configuration differing only by them is
// another one.
TEST(ResultJson, KvHeadsAndLengthRoundTrip) {
  RunResult a = sample_record();
  const auto square = nlohmann::json::parse(to_json_text(a));
  EXPECT_EQ(square["configs"][0]["H_kv"], 5);
  EXPECT_EQ(square["configs"][0]["N_kv"], 17);
  a.configs.push_back(a.configs[0]);
  a.configs[1].shape.H = 4;
  a.configs[1].shape.H_kv = 2;
  a.configs[1].shape.N_kv = 4096;
  const RunResult b = from_json_text(to_json_text(a), "mem");
  ASSERT_EQ(b.configs.size(), 2u);
  EXPECT_FALSE(b.configs[0].shape.grouped());
  EXPECT_TRUE(b.configs[0].shape.square());
  EXPECT_EQ(b.configs[1].shape.kv_heads(), 2);
  EXPECT_EQ(b.configs[1].shape.kv_len(), 4096);
  EXPECT_EQ(to_json_text(b), to_json_text(a));
  EXPECT_NE(format_config_header(b.configs[1]).find("B=3 H=4 H_kv=2 N=17 N_kv=4096 d=64"),
            std::string::npos)
      << format_config_header(b.configs[1]);
  EXPECT_EQ(format_config_header(b.configs[0]).rfind("B=3 H=5 N=17 d=64 causal=on", 0), 0u);
  // Two configurations apart only by H_kv are two.
  RunResult c = sample_record();
  c.configs.push_back(c.configs[0]);
  c.configs[1].shape.H_kv = 1;
  EXPECT_NO_THROW(from_json_text(to_json_text(c), "ok.json"));
  // /4 without them, or with H_kv not dividing H, is refused; /3 reads as square.
  std::string text = to_json_text(sample_record());
  auto doc = nlohmann::json::parse(text);
  doc["configs"][0].erase("H_kv");
  expect_refused(doc.dump(), "configs[0].H_kv: missing");
  doc["configs"][0]["H_kv"] = 3;
  expect_refused(doc.dump(), "configs[0].H_kv: must be a positive divisor of H");
  doc["schema"] = "fa-bench/3";
  doc["configs"][0].erase("H_kv");
  doc["configs"][0].erase("N_kv");
  const RunResult v3 = from_json_text(doc.dump(), "v3.json");
  EXPECT_EQ(v3.configs.at(0).shape.kv_heads(), 5);
  EXPECT_EQ(v3.configs.at(0).shape.kv_len(), 17);
  // The CSV's last columns: H_kv, N_kv, the row's launch, page_size, kv_lengths.
  EXPECT_NE(to_csv(b).find(",2,4096,stream,0,\n"), std::string::npos) << to_csv(b);
}

// fa-bench/5: a paged cache and lengths per sequence round-trip, are the configuration's
// identity, and are checked on read; /4 reads as contiguous, every sequence at N_kv.
TEST(ResultJson, PagedCacheAndLengthsRoundTrip) {
  RunResult a = sample_record();
  a.configs.push_back(a.configs[0]);
  Shape& s = a.configs[1].shape;
  s.N_kv = 4096;
  s.page_size = 64;
  s.kv_lengths = {100, 4096, 7};
  const auto doc = nlohmann::json::parse(to_json_text(a));
  EXPECT_EQ(doc["schema"], "fa-bench/5");
  EXPECT_EQ(doc["configs"][0]["page_size"], 0);
  EXPECT_TRUE(doc["configs"][0]["kv_lengths"].is_null());
  EXPECT_EQ(doc["configs"][1]["kv_lengths"], nlohmann::json::array({100, 4096, 7}));
  const RunResult b = from_json_text(to_json_text(a), "mem");
  EXPECT_EQ(b.configs[1].shape.page_size, 64);
  EXPECT_EQ(b.configs[1].shape.kv_lengths, (std::vector<std::int64_t>{100, 4096, 7}));
  EXPECT_EQ(to_json_text(b), to_json_text(a));
  EXPECT_NE(to_csv(b).find(",64,\"100 4096 7\"\n"), std::string::npos) << to_csv(b);
  EXPECT_NE(format_config_header(b.configs[1]).find("N_kv=4096 kv_lengths=100,4096,7 page=64"),
            std::string::npos);
  // Apart only by the lengths: two configurations.
  RunResult c = a;
  c.configs[0] = a.configs[1];
  c.configs[0].shape.kv_lengths = {100, 4096, 8};
  EXPECT_NO_THROW(from_json_text(to_json_text(c), "two.json"));
  auto bad = [&](const char* field, nlohmann::json value, const std::string& why) {
    auto d = doc;
    d["configs"][1][field] = value;
    expect_refused(d.dump(), why);
  };
  bad("page_size", 48, "configs[1].page_size: must be 0 or a power of two");
  bad("kv_lengths", nlohmann::json::array({1, 2}), "expected null or an array of B lengths");
  bad("kv_lengths", nlohmann::json::array({1, 2, 4097}), "from 1 to N_kv");
  bad("kv_lengths", nlohmann::json::array({0, 2, 3}), "from 1 to N_kv");
  auto missing = doc;
  missing["configs"][1].erase("page_size");
  expect_refused(missing.dump(), "configs[1].page_size: missing");
  auto v4 = doc;
  v4["schema"] = "fa-bench/4";
  v4["configs"][1].erase("page_size");
  v4["configs"][1].erase("kv_lengths");
  const RunResult old = from_json_text(v4.dump(), "v4.json");
  EXPECT_FALSE(old.configs[1].shape.paged());
  EXPECT_FALSE(old.configs[1].shape.ragged());
}

// Without FA_RESULT_FILE (a plain ctest or fa_tests_cpu run) it reads a committed H200 file, so it
// runs everywhere instead of showing as skipped; ctest also points it at the Python writer's
// output and other fixtures (tests/CMakeLists.txt).
TEST(ResultJson, ReadsFileNamedInEnvironment) {
  const char* env = std::getenv("FA_RESULT_FILE");
  const std::string path = env ? env : FA_SOURCE_DIR "/tests/data/sweep-all-variants-h200.json";
  const RunResult r = read_result_file(path);
  ASSERT_FALSE(r.configs.empty());
  for (const auto& c : r.configs) {
    EXPECT_FALSE(c.results.empty());
    for (const auto& v : c.results) {
      EXPECT_EQ(v.timing.has_value(), v.status == Status::ok);
    }
  }
}

// A row whose counters failed says why under the table, once per reason with the rows it names;
// a run without counters (--no-counters, or none available: said once at the start) adds nothing.
TEST(ResultJson, CounterFailuresAreNamedUnderTheTable) {
  RunResult a = sample_record();
  ConfigResult& c = a.configs[0];
  ASSERT_FALSE(c.results.empty());
  c.results.push_back(c.results[0]);
  for (auto& r : c.results) r.counters = CounterResult{};
  c.results[0].counters->status = "error";
  c.results[0].counters->reason = "cuptiRangeProfilerStop: not all passes submitted";
  EXPECT_NE(format_table(c).find("  counters not counted (" + row_label(c, c.results[0]) +
                                 "): cuptiRangeProfilerStop: not all passes submitted\n"),
            std::string::npos)
      << format_table(c);
  c.results[1].counters->status = "error";
  c.results[1].counters->reason = c.results[0].counters->reason;
  const std::string both = format_table(c);
  EXPECT_EQ(both.find("counters not counted"), both.rfind("counters not counted")) << both;
  for (auto& r : c.results) r.counters->status = "skipped";
  EXPECT_EQ(format_table(c).find("counters not counted"), std::string::npos);
}

// One row, one placement: the console table, the CSV, the Markdown and the JSON give the same bound
// and fraction (the report reads the JSON's: tests/python).
TEST(ResultJson, OnePlacementInEveryWriter) {
  RunResult a = sample_record();
  VariantResult& row = a.configs[0].results[0];
  row.placement = Placement{"counters", 31.5, 12.25, 410e12, 0.4321, "dram"};
  const std::string label = placement_label(row);
  EXPECT_EQ(label, "43% dram");
  EXPECT_NE(format_table(a.configs[0]).find(label), std::string::npos);
  EXPECT_NE(to_markdown(a).find("| " + label + " |"), std::string::npos);
  const std::string csv = to_csv(a);
  EXPECT_NE(csv.find(",counters,31.5,12.25,0.4321,dram,"), std::string::npos) << csv;
  const RunResult b = from_json_text(to_json_text(a), "mem");
  ASSERT_TRUE(b.configs[0].results[0].placement);
  EXPECT_DOUBLE_EQ(b.configs[0].results[0].placement->fraction, 0.4321);
  EXPECT_EQ(b.configs[0].results[0].placement->bound, "dram");
  // Without counters the row is placed on the compulsory bytes, and says so everywhere.
  row.placement = Placement{"compulsory", 800, 0, 700e12, 0.61, "compute"};
  EXPECT_EQ(placement_label(row), "61% compute (c)");
  EXPECT_NE(to_csv(a).find(",compulsory,800,,0.61,compute,"), std::string::npos);
}

// ---- fa-bench/2: the row spec ----

TEST(ResultJson, WritesAndReadsTheRowSpec) {
  RunResult a = sample_record();
  a.configs[0].results[0].spec.kernel_config->warpgroups = 2;
  a.configs[0].results[0].spec.kernel_config->cluster = {2, 1, 1};
  a.configs[0].results[2].spec.direction = Direction::backward;
  a.configs[0].results[2].spec.options = {{"n", 2.0}, {"on", true}};
  const std::string text = to_json_text(a);
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["schema"], "fa-bench/5");
  const auto& row = doc["configs"][0]["results"][0];
  EXPECT_EQ(row["variant"], "fa2");
  EXPECT_EQ(row["direction"], "forward");
  EXPECT_EQ(row["kernel_config"]["block_q"], 128);
  EXPECT_EQ(row["kernel_config"]["stages"], 2);
  EXPECT_EQ(row["kernel_config"]["warpgroups"], 2);
  EXPECT_EQ(row["kernel_config"]["cluster"], nlohmann::json::parse("[2, 1, 1]"));
  EXPECT_EQ(row["options"]["block_order"], "blocks");
  EXPECT_EQ(row["block_order"], "blocks");  // /1's field, kept one version
  EXPECT_TRUE(doc["configs"][0]["results"][2]["kernel_config"].is_null());
  EXPECT_EQ(doc["configs"][0]["results"][2]["options"]["on"], true);
  const RunResult b = from_json_text(text, "mem");
  for (std::size_t i = 0; i < a.configs[0].results.size(); ++i) {
    EXPECT_EQ(b.configs[0].results[i].spec, a.configs[0].results[i].spec) << i;
  }
  EXPECT_EQ(b.configs[0].results[2].spec.direction, Direction::backward);
}

// An optional bool of a row (default_config, default_options): written when known, read back;
// absent stays unknown; `not_a_bool` in its place is refused.
void expect_optional_row_bool(std::optional<bool> VariantResult::*field, const std::string& key,
                              const nlohmann::json& not_a_bool) {
  RunResult a = sample_record();
  a.configs[0].results[0].*field = false;
  a.configs[0].results[1].*field = true;
  const std::string text = to_json_text(a);
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["configs"][0]["results"][0][key], false);
  EXPECT_EQ(doc["configs"][0]["results"][1][key], true);
  EXPECT_FALSE(doc["configs"][0]["results"][2].contains(key));
  const RunResult b = from_json_text(text, "mem");
  EXPECT_EQ(b.configs[0].results[0].*field, std::optional<bool>(false));
  EXPECT_EQ(b.configs[0].results[1].*field, std::optional<bool>(true));
  EXPECT_FALSE((b.configs[0].results[2].*field).has_value());
  expect_refused(first_row_changed()([&](auto& r) { r[key] = not_a_bool; }),
                 "configs[0].results[0]." + key + ": expected true or false");
}

TEST(ResultJson, DefaultConfigIsOptional) {
  expect_optional_row_bool(&VariantResult::default_config, "default_config", 1);
}

TEST(ResultJson, DefaultOptionsIsOptional) {
  expect_optional_row_bool(&VariantResult::default_options, "default_options", "yes");
}

TEST(ResultJson, RefusesABadRowSpec) {
  const nlohmann::json good = nlohmann::json::parse(to_json_text(sample_record()));
  const auto with = first_row_changed();
  const std::string p = "configs[0].results[0].";
  expect_refused(with([](auto& r) { r.erase("direction"); }), p + "direction: missing");
  expect_refused(with([](auto& r) { r["direction"] = "sideways"; }), "unknown direction");
  expect_refused(with([](auto& r) { r.erase("kernel_config"); }), p + "kernel_config: missing");
  expect_refused(with([](auto& r) { r["kernel_config"]["block_q"] = 0; }),
                 p + "kernel_config.block_q: impossible value 0");
  expect_refused(with([](auto& r) { r["kernel_config"]["stages"] = 0; }), "kernel_config.stages");
  expect_refused(with([](auto& r) { r["kernel_config"]["warpgroups"] = -1; }),
                 "kernel_config.warpgroups");
  expect_refused(with([](auto& r) {
                   r["kernel_config"]["cluster"] = {1, 1};
                 }),
                 "kernel_config.cluster");
  expect_refused(with([](auto& r) {
                   r["kernel_config"]["cluster"] = {1, 0, 1};
                 }),
                 "kernel_config.cluster");
  expect_refused(with([](auto& r) { r["options"] = "heads"; }), p + "options: expected an object");
  expect_refused(with([](auto& r) { r["options"]["block_order"] = nullptr; }),
                 "options.block_order");
  // Two rows of one variant are fine when their specs differ; the same spec twice is refused.
  nlohmann::json doc = good;
  auto& rows = doc["configs"][0]["results"];
  rows[1] = rows[0];
  rows[1]["options"]["block_order"] = "heads";
  EXPECT_NO_THROW(from_json_text(doc.dump(), "ok.json"));
  rows[1]["options"]["block_order"] = "blocks";
  expect_refused(doc.dump(), "appears twice");
}

// A fa-bench/1 file: every row forward, its spec rebuilt from the name, tiles and block order
// /1 wrote (the cudnn peer's recorded block order is not an option it declares).
TEST(ResultJson, ReadsFaBench1AsForward) {
  nlohmann::json doc = nlohmann::json::parse(to_json_text(sample_record()));
  doc["schema"] = "fa-bench/1";
  auto& rows = doc["configs"][0]["results"];
  for (auto& r : rows) {
    r.erase("direction");
    r.erase("kernel_config");
    r.erase("options");
  }
  rows[0]["variant"] = "fa2@64x64~heads";
  rows[0]["tiles"] = {{"block_q", 64}, {"block_kv", 64}};
  rows[0]["block_order"] = "heads";
  rows[2]["variant"] = "cudnn";
  rows[2]["peer"] = true;
  rows[2]["block_order"] = "blocks";
  const RunResult r = from_json_text(doc.dump(), "v1.json");
  const RowSpec& fa2 = r.configs[0].results[0].spec;
  EXPECT_EQ(fa2.variant, "fa2");
  EXPECT_EQ(fa2.direction, Direction::forward);
  ASSERT_TRUE(fa2.kernel_config);
  EXPECT_EQ(*fa2.kernel_config, (KernelConfig{64, 64, 2, 0, {1, 1, 1}}));
  EXPECT_EQ(fa2.options, (OptionValues{{"block_order", std::string("heads")}}));
  const RowSpec& cudnn = r.configs[0].results[2].spec;
  EXPECT_FALSE(cudnn.kernel_config);
  // The option the cudnn peer declares since issue 17, at the value its /1 rows had.
  EXPECT_EQ(cudnn.options, (OptionValues{{kOptionStats, true}}));
  // Every committed /1 file still reads (the H200 sweep: fa2 rows with tiles, fp8 with its option).
  const RunResult sweep =
      read_result_file(std::string(FA_SOURCE_DIR) + "/tests/data/sweep-all-variants-h200.json");
  for (const auto& c : sweep.configs) {
    for (const auto& v : c.results) {
      EXPECT_EQ(v.spec.direction, Direction::forward);
      EXPECT_EQ(v.spec.variant.find_first_of("@~"), std::string::npos) << v.spec.variant;
      if (v.spec.variant == "fp8") {
        EXPECT_NE(v.spec.option("prequantized"), nullptr);
      }
    }
  }
}

}  // namespace
}  // namespace fa::bench
