// --shard, --devices and fa-bench merge without a GPU: the split is a partition, the dealing is
// balanced, merging round-trips and refuses duplicates and conflicts, the job-array variables
// are read (docs/multi-gpu.md).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/devices.hpp"
#include "bench/merge.hpp"
#include "bench/options.hpp"
#include "bench/plan.hpp"
#include "bench/result_json.hpp"
#include "bench/runner.hpp"
#include "tests/parse_args.hpp"

namespace fa::bench {
namespace {

using test::parse;

Options options(std::vector<std::string> args) {
  const auto out = parse(std::move(args));
  EXPECT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  return out.options;
}

void expect_bad(std::vector<std::string> args, const std::string& must_mention) {
  const auto out = parse(std::move(args));
  EXPECT_EQ(out.exit_code, kExitBadInput) << out.output;
  EXPECT_NE(out.output.find(must_mention), std::string::npos) << out.output;
  EXPECT_EQ(out.output.rfind("error: ", 0), 0u) << out.output;
  EXPECT_EQ(out.output.find('\n'), out.output.size() - 1) << out.output;  // one line
}

// Clears the job-array variables before and after a test.
struct CleanEnvironment {
  static void clear() {
    for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                          "SLURM_ARRAY_TASK_STEP", "JOB_COMPLETION_INDEX", "FA_BENCH_SHARD_COUNT"})
      ::unsetenv(v);
  }
  CleanEnvironment() { clear(); }
  ~CleanEnvironment() { clear(); }
};

// ---- the split -------------------------------------------------------------------------------

TEST(Shard, IsAPartitionOverRandomWork) {
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t size = rng() % 60;
    std::vector<Work> work(size);
    for (auto& w : work) w = static_cast<Work>(rng() % 7) << (rng() % 80);  // ties and huge ones
    const int n = 1 + static_cast<int>(rng() % 9);
    std::vector<int> owner(size, -1);
    for (int i = 0; i < n; ++i) {
      const auto mine = shard_of(work, i, n);
      EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
      EXPECT_EQ(mine, shard_of(work, i, n));  // deterministic
      for (std::size_t k : mine) {
        ASSERT_LT(k, size);
        EXPECT_EQ(owner[k], -1) << "configuration " << k << " in two shards";
        owner[k] = i;
      }
      // Balanced in count: a snake gives each shard floor or ceil of size / n.
      EXPECT_LE(mine.size(), (size + n - 1) / n);
      EXPECT_GE(mine.size(), size / n);
    }
    for (std::size_t k = 0; k < size; ++k) EXPECT_NE(owner[k], -1) << "configuration lost";
  }
}

TEST(Shard, IsAPartitionOverRandomPlans) {
  std::mt19937_64 rng(7);
  const std::vector<std::string> Ns{"128", "1000", "1024", "2048", "4096", "16384"};
  for (int trial = 0; trial < 40; ++trial) {
    std::string N, d;
    for (const auto& v : Ns)
      if (rng() % 2) N += (N.empty() ? "" : ",") + v;
    for (const char* v : {"64", "128", "256"})
      if (rng() % 2) d += (d.empty() ? "" : ",") + std::string(v);
    if (N.empty()) N = "512";
    if (d.empty()) d = "64";
    const char* causal[] = {"off", "on", "both"};
    Options o = options({"--N", N, "--d", d, "--causal", causal[rng() % 3], "--model-only"});
    const auto plan = make_plan(o);
    const int n = 1 + static_cast<int>(rng() % 6);
    std::multiset<std::size_t> seen;
    for (int i = 0; i < n; ++i) {
      for (std::size_t k : shard_configs(o, plan, i, n)) seen.insert(k);
    }
    ASSERT_EQ(seen.size(), plan.size());
    for (std::size_t k = 0; k < plan.size(); ++k) EXPECT_EQ(seen.count(k), 1u);
  }
}

TEST(Shard, RowsOfAShardAreTheUnshardedRows) {
  CleanEnvironment env;
  Options whole = options({"--N", "1024:8192", "--d", "64,128", "--causal", "both"});
  const RunResult all = plan_run(whole, std::nullopt, "no GPU");
  std::vector<RunResult> parts;
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    Options o = options({"--N", "1024:8192", "--d", "64,128", "--causal", "both", "--shard",
                         std::to_string(i) + "/3"});
    parts.push_back(plan_run(o, std::nullopt, "no GPU"));
    ASSERT_TRUE(parts.back().shard);
    EXPECT_EQ(parts.back().shard->index, i);
    names.push_back("shard" + std::to_string(i));
  }
  std::reverse(parts.begin(), parts.end());  // the files' order does not matter
  std::vector<std::string> warnings;
  RunResult merged = merge_results(parts, names, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(merged.shard);
  RunResult expect = all;
  merged.created_utc = expect.created_utc;
  merged.command_line = expect.command_line;
  EXPECT_EQ(to_json_text(merged), to_json_text(expect));
  // One shard missing: said, and the merged file is incomplete.
  parts.pop_back();
  warnings.clear();
  merged = merge_results(parts, {"a", "b"}, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("shard(s) 0 of 3"), std::string::npos) << warnings[0];
  EXPECT_FALSE(merged.complete);
}

// ---- the flag and the variables ---------------------------------------------------------------

TEST(Shard, FlagAndBadValues) {
  CleanEnvironment env;
  const Options o = options({"--shard", "2/5"});
  EXPECT_EQ(o.shard_index, 2);
  EXPECT_EQ(o.shard_count, 5);
  EXPECT_EQ(o.shard_source, "");
  for (const char* bad : {"5/5", "-1/2", "1", "a/b", "1/0", "0/2/3", "", "1/ 2"})
    expect_bad({"--shard", bad}, "--shard");
}

TEST(Shard, SlurmArrayVariables) {
  CleanEnvironment env;
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
  Options o = options({});
  EXPECT_EQ(o.shard_index, 3);
  EXPECT_EQ(o.shard_count, 4);
  EXPECT_NE(o.shard_source.find("SLURM_ARRAY_TASK_ID=3"), std::string::npos);
  // --array=1-7:2 (tasks 1, 3, 5, 7): task 5 is the third.
  ::setenv("SLURM_ARRAY_TASK_ID", "5", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  ::setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
  o = options({});
  EXPECT_EQ(o.shard_index, 2);
  // The flag wins over the variables.
  o = options({"--shard", "0/1"});
  EXPECT_EQ(o.shard_count, 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "4", 1);  // not a task of 1-7:2
  expect_bad({}, "SLURM_ARRAY_TASK_ID=4");
  ::setenv("SLURM_ARRAY_TASK_ID", "x", 1);
  expect_bad({}, "SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ::setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  expect_bad({}, "SLURM_ARRAY_TASK_COUNT");
}

TEST(Shard, KubernetesIndexedJob) {
  CleanEnvironment env;
  ::setenv("JOB_COMPLETION_INDEX", "1", 1);
  expect_bad({}, "FA_BENCH_SHARD_COUNT");
  ::setenv("FA_BENCH_SHARD_COUNT", "3", 1);
  const Options o = options({});
  EXPECT_EQ(o.shard_index, 1);
  EXPECT_EQ(o.shard_count, 3);
  EXPECT_NE(o.shard_source.find("JOB_COMPLETION_INDEX=1"), std::string::npos);
  ::setenv("FA_BENCH_SHARD_COUNT", "1", 1);
  expect_bad({}, "JOB_COMPLETION_INDEX=1");
}

TEST(Devices, FlagValues) {
  CleanEnvironment env;
  EXPECT_EQ(options({"--devices", "1,0,1"}).device_list, (std::vector<int>{1, 0}));
  EXPECT_TRUE(options({"--devices", "all"}).device_list.empty());
  expect_bad({"--devices", "x"}, "--devices");
  expect_bad({"--devices", "0,,1"}, "--devices");
  expect_bad({"--devices", "-1"}, "--devices");
  expect_bad({"--devices", "all", "--device", "1"}, "--device and --devices");
  expect_bad({"--devices", "all", "--model-only"}, "--model-only");
  expect_bad({"--test-fake-devices", "2"}, "only with --devices");
}

// ---- dealing and the workers' command lines ---------------------------------------------------

TEST(Devices, LongestFirstIsAPartitionAndBalanced) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<double> cost(rng() % 40);
    for (auto& c : cost) c = 0.1 + (rng() % 1000) / 10.0;
    const int m = 1 + static_cast<int>(rng() % 8);
    const auto dealt = deal_longest_first(cost, m);
    ASSERT_EQ(dealt.size(), static_cast<std::size_t>(m));
    std::vector<int> seen(cost.size(), 0);
    double total = 0, biggest = 0, worst = 0;
    for (double c : cost) total += c, biggest = std::max(biggest, c);
    for (const auto& w : dealt) {
      double load = 0;
      for (std::size_t k : w) ++seen[k], load += cost[k];
      worst = std::max(worst, load);
    }
    for (int s : seen) EXPECT_EQ(s, 1);
    // Greedy's bound: no worker ends more than one item past the mean.
    EXPECT_LE(worst, total / m + biggest + 1e-9);
  }
  // The longest first, each to the least loaded: 9 -> 0, 8 -> 1, 2 -> 1, 1 -> 0.
  const auto two = deal_longest_first({1, 9, 8, 2}, 2);
  EXPECT_EQ(two[0], (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(two[1], (std::vector<std::size_t>{2, 3}));
}

TEST(Devices, WorkerArguments) {
  const auto args = worker_arguments({"--N", "1024", "--devices", "all", "--json=r.json", "--csv",
                                      "r.csv", "--shard", "0/2", "--markdown=r.md", "--d", "64"},
                                     1, {0, 3}, "/tmp/w/gpu1.json");
  EXPECT_EQ(args, (std::vector<std::string>{"--N", "1024", "--d", "64", "--device", "1", "--json",
                                            "/tmp/w/gpu1.json", "--worker-configs", "0,3"}));
  const Options o = options(args);
  EXPECT_EQ(o.worker_configs, (std::vector<std::size_t>{0, 3}));
}

TEST(Devices, EstimateGrowsWithTheWork) {
  CleanEnvironment env;
  Options o = options({"--N", "1024,8192", "--variants", "fa2"});
  RunResult r = plan_run(o, fake_device(0), "");
  ASSERT_EQ(r.configs.size(), 2u);
  const auto& small = r.configs[0].results[0];
  const auto& big = r.configs[1].results[0];
  EXPECT_EQ(small.status, Status::interrupted);  // planned, to run
  const double a = estimated_row_seconds(small, r.configs[0].shape, r.ceilings, o);
  const double b = estimated_row_seconds(big, r.configs[1].shape, r.ceilings, o);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);
}

TEST(Devices, AFailedWorkerShowsInItsRows) {
  CleanEnvironment env;
  Options o = options({"--N", "1024,2048", "--variants", "fa2,standard"});
  const std::vector<DeviceInfo> gpus{fake_device(0), fake_device(1)};
  RunResult planned = plan_run(o, gpus[0], "");
  std::vector<WorkerOutcome> outcomes(2);
  outcomes[0].device = 0;
  outcomes[0].plan_indices = {0};
  outcomes[0].exit_code = 0;
  outcomes[1].device = 1;
  outcomes[1].plan_indices = {1};
  outcomes[1].signal = 9;
  // Worker 0 finished (its rows model_only here); worker 1 died before writing anything.
  Options w0 = o;
  w0.worker_configs = {0};
  w0.device = 0;
  RunResult r0 = plan_run(w0, gpus[0], "");
  fake_execute(r0, w0, {});
  const RunResult merged = merge_worker_records(planned, gpus, outcomes, {&r0, nullptr}, false);
  ASSERT_EQ(merged.configs.size(), 2u);
  EXPECT_TRUE(merged.complete);
  ASSERT_EQ(merged.devices.size(), 2u);
  EXPECT_EQ(merged.configs[0].gpu->uuid, gpus[0].uuid);
  EXPECT_EQ(merged.configs[1].gpu->uuid, gpus[1].uuid);
  for (const auto& v : merged.configs[0].results) EXPECT_EQ(v.status, Status::model_only);
  for (const auto& v : merged.configs[1].results) {
    EXPECT_EQ(v.status, Status::error);
    EXPECT_NE(v.reason.find("killed by signal 9"), std::string::npos) << v.reason;
    EXPECT_NE(v.reason.find(gpus[1].uuid), std::string::npos) << v.reason;
  }
  // It reads back: the file keeps both GPUs and each configuration's.
  const RunResult back = from_json_text(to_json_text(merged), "merged");
  ASSERT_EQ(back.devices.size(), 2u);
  EXPECT_EQ(back.devices[1].info.uuid, gpus[1].uuid);
  EXPECT_EQ(back.configs[1].gpu->name, gpus[1].name);
}

// ---- merge -------------------------------------------------------------------------------------

RunResult on_gpu(const DeviceInfo& d, std::vector<std::string> args) {
  Options o = options(std::move(args));
  RunResult r = plan_run(o, d, "");
  fake_execute(r, o, {});
  return r;
}

TEST(Merge, RefusesDuplicatesAndConflicts) {
  CleanEnvironment env;
  const RunResult a = on_gpu(fake_device(0), {"--N", "1024", "--variants", "fa2"});
  const RunResult b = on_gpu(fake_device(0), {"--N", "1024", "--variants", "standard"});
  // Other rows of the same configuration on the same GPU: put together.
  const RunResult ab = merge_results({a, b}, {"a", "b"}, nullptr);
  ASSERT_EQ(ab.configs.size(), 1u);
  EXPECT_EQ(ab.configs[0].results.size(), 2u);
  // The same row on the same GPU twice.
  try {
    merge_results({a, ab}, {"a.json", "ab.json"}, nullptr);
    FAIL() << "duplicate accepted";
  } catch (const MergeConflict& e) {
    EXPECT_NE(std::string(e.what()).find("row fa2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a.json"), std::string::npos) << e.what();
  }
  // Conflicting settings, build, schema, seeds.
  auto refused = [&](RunResult other, const std::string& what) {
    try {
      merge_results({a, other}, {"a.json", "other.json"}, nullptr);
      ADD_FAILURE() << what << " accepted";
    } catch (const MergeConflict& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  RunResult c = b;
  c.settings.warmup = 3;
  refused(c, "settings.warmup");
  c = b;
  c.git_revision = "other";
  refused(c, "tool.git_revision");
  c = b;
  c.schema = kSchemaV2;
  refused(c, "schema");
  c = b;
  c.settings.l2 = "warm";
  refused(c, "settings.l2");
  c = b;
  c.settings.launch = "graph";
  refused(c, "settings.launch");
  c = b;
  c.configs[0].seed += 1;
  refused(c, "seed");
  c = b;
  c.shard = Shard{0, 2};
  refused(c, "shard.count");
}

TEST(Merge, OtherGpuModelsSideBySide) {
  CleanEnvironment env;
  DeviceInfo other = fake_device(1);
  other.name = "fake GPU, another model";
  const RunResult a = on_gpu(fake_device(0), {"--N", "1024,2048", "--variants", "fa2"});
  const RunResult b = on_gpu(other, {"--N", "1024,2048", "--variants", "fa2"});
  const RunResult m = merge_results({a, b}, {"a", "b"}, nullptr);
  ASSERT_EQ(m.configs.size(), 4u);  // each shape on each GPU
  ASSERT_EQ(m.devices.size(), 2u);
  EXPECT_EQ(m.configs[0].gpu->uuid, fake_device(0).uuid);
  EXPECT_EQ(m.configs[1].gpu->uuid, other.uuid);
  EXPECT_EQ(m.configs[1].shape.N, 1024);
  // Written and read back unchanged; merging the merged file alone round-trips.
  const std::string text = to_json_text(m);
  const RunResult back = from_json_text(text, "m");
  EXPECT_EQ(to_json_text(back), text);
  EXPECT_EQ(to_json_text(merge_results({back}, {"m"}, nullptr)), text);
  // ... and a configuration on one GPU appears once: the reader refuses two.
  RunResult twice = m;
  twice.configs.push_back(twice.configs[0]);
  EXPECT_THROW(from_json_text(to_json_text(twice), "twice"), ResultFileError);
}

TEST(Merge, OlderFilesTakeTheirGpuFromTheDevice) {
  const RunResult r =
      read_result_file(std::string(FA_SOURCE_DIR) + "/tests/data/sweep-schema2-h200.json");
  EXPECT_EQ(r.schema, kSchemaV2);
  ASSERT_TRUE(r.device);
  for (const auto& c : r.configs) {
    ASSERT_TRUE(c.gpu);
    EXPECT_EQ(c.gpu->uuid, r.device->uuid);
    EXPECT_EQ(c.gpu->name, r.device->name);
  }
}

}  // namespace
}  // namespace fa::bench
