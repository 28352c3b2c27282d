// The CLI: defaults, lists and ranges, and every bad-input case (one line, exit code 2).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/options.hpp"
#include "bench/plan.hpp"

namespace fa::bench {
namespace {

ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fa-bench");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_cli(static_cast<int>(argv.size()), argv.data());
}

void expect_bad(std::vector<std::string> args, const std::string& must_mention) {
  const auto out = parse(args);
  EXPECT_EQ(out.action, ParseOutcome::Action::exit);
  EXPECT_EQ(out.exit_code, kExitBadInput) << out.output;
  EXPECT_NE(out.output.find(must_mention), std::string::npos) << out.output;
  // One line, starting with "error:".
  EXPECT_EQ(out.output.rfind("error: ", 0), 0u) << out.output;
  EXPECT_EQ(out.output.find('\n'), out.output.size() - 1) << out.output;
}

TEST(Cli, TheReadmeCommandParses) {
  const auto out = parse({"--N", "4096", "--d", "64", "--variants", "all"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  EXPECT_EQ(out.options.N, std::vector<std::int64_t>{4096});
  EXPECT_EQ(out.options.variants, (std::vector<std::string>{"standard", "fa1", "fa2", "fp8", "cudnn"}));
  EXPECT_TRUE(out.options.cold_l2);
  const auto plan = make_plan(out.options);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].B, 4);   // 16384 / 4096
  EXPECT_EQ(plan[0].H, 32);  // 2048 / 64
}

TEST(Cli, ListsRangesAndDefaults) {
  auto out = parse({"--N", "1024:8192", "--d", "64,128", "--causal", "both", "--dtype", "fp16"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  EXPECT_EQ(out.options.N, (std::vector<std::int64_t>{1024, 2048, 4096, 8192}));
  const auto plan = make_plan(out.options);
  EXPECT_EQ(plan.size(), 4u * 2 * 2);
  EXPECT_EQ(plan.back().B, 2);
  EXPECT_EQ(plan.back().H, 16);
  EXPECT_TRUE(plan.back().causal);
  EXPECT_EQ(plan.back().dtype, DType::fp16);
  out = parse({"--N", "1,17,1000", "--batch", "3", "--heads", "5", "--warm"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  EXPECT_EQ(make_plan(out.options)[1].B, 3);
  EXPECT_FALSE(out.options.cold_l2);
  EXPECT_EQ(parse({"--N", "64..256"}).options.N, (std::vector<std::int64_t>{64, 128, 256}));
  EXPECT_EQ(parse({"--N", "32768"}).options.N.size(), 1u);
  EXPECT_EQ(make_plan(parse({"--N", "32768"}).options)[0].B, 1);  // max(1, 16384/N)
}

TEST(Cli, BenchmarkFlagsGoToGoogleBenchmark) {
  const auto out = parse({"--benchmark_format=json", "--N", "128"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  EXPECT_EQ(out.options.benchmark_args, std::vector<std::string>{"--benchmark_format=json"});
}

TEST(Cli, BadInputIsOneLineAndExitTwo) {
  expect_bad({"--N", "0"}, "--N");
  expect_bad({"--N", "-5"}, "--N");
  expect_bad({"--N", "abc"}, "--N");
  expect_bad({"--N", "1000:4096"}, "power-of-two");
  expect_bad({"--d", "96"}, "--d");
  expect_bad({"--variants", "fa9"}, "unknown variant 'fa9'");
  expect_bad({"--causal", "maybe"}, "--causal");
  expect_bad({"--dtype", "fp64"}, "--dtype");
  expect_bad({"--batch", "0"}, "--batch");
  expect_bad({"--repetitions", "-1"}, "--repetitions");
  expect_bad({"--min-time", "0"}, "--min-time");
  expect_bad({"--cold", "--warm"}, "--cold");
  expect_bad({"--no-such-flag"}, "no-such-flag");
  expect_bad({"--N", "1048576", "--batch", "1000000", "--heads", "100000"}, "overflows 64-bit");
}

TEST(Cli, TileFlagsPickCompiledShapesOrAreRefused) {
  auto out = parse({"--variants", "fa2", "--d", "64", "--block-q", "64,128", "--block-kv", "64"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  std::vector<PlannedVariant> rows;
  ASSERT_EQ(plan_variants(out.options, 64, &rows), "");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].row_name, "fa2");  // 128x64, the default, keeps the plain name
  EXPECT_EQ(rows[1].row_name, "fa2@64x64");
  EXPECT_EQ(rows[1].tiles.block_q, 64);
  EXPECT_EQ(variant_of_row("fa2@64x64")->name, "fa2");
  // standard is not tiled: one row whatever the flags say.
  out = parse({"--variants", "standard,fa2", "--d", "128", "--block-kv", "32"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  rows.clear();
  plan_variants(out.options, 128, &rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].row_name, "fa2@128x32");
  expect_bad({"--variants", "fa2", "--block-q", "96"}, "valid Br x Bc: 128x64");
  expect_bad({"--fa2-order", "random"}, "--fa2-order");
  out = parse({"--variants", "standard,fa2", "--fa2-order", "both"});
  ASSERT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  rows.clear();
  plan_variants(out.options, 64, &rows);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].row_name, "fa2");
  EXPECT_EQ(rows[2].row_name, "fa2~heads");
  EXPECT_TRUE(rows[2].heads_interleaved);
  EXPECT_EQ(variant_of_row("fa2@64x64~heads")->name, "fa2");
  expect_bad({"--variants", "all", "--d", "128", "--block-kv", "32"}, "fa1");  // fa1 has no Bc=32
}

TEST(Cli, VersionHelpAndListExitZero) {
  for (const char* flag : {"--version", "--help", "--list-variants"}) {
    const auto out = parse({flag});
    EXPECT_EQ(out.action, ParseOutcome::Action::exit) << flag;
    EXPECT_EQ(out.exit_code, kExitOk) << flag;
    EXPECT_FALSE(out.output.empty()) << flag;
  }
  const auto list = parse({"--list-variants"}).output;
  EXPECT_NE(list.find("fa2"), std::string::npos);
  EXPECT_NE(list.find("Br=128"), std::string::npos);
  EXPECT_NE(list.find("mma.sync"), std::string::npos);
}

}  // namespace
}  // namespace fa::bench
