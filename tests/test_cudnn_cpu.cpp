// The cuDNN peer without a GPU: its plan cache's keying and eviction, the stats option from the
// command line to the row (planned rows, labels, which rows have their lse checked).
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "bench/plan.hpp"
#include "bench/result.hpp"
#include "bench/result_json.hpp"
#include "kernels/cudnn/cudnn.hpp"
#include "kernels/cudnn/plan_cache.hpp"
#include "kernels/registry.hpp"
#include "profiler/io_model.hpp"

namespace fa {
namespace {

using cudnn::GraphKind;
using cudnn::PlanKey;

Shape shape(std::int64_t N = 129, std::int64_t d = 64, bool causal = false, DType t = DType::bf16) {
  Shape s;
  s.B = 2;
  s.H = 3;
  s.N = N;
  s.d = d;
  s.causal = causal;
  s.dtype = t;
  return s;
}

TEST(CudnnPlanKey, EveryFieldAGraphDependsOnSeparatesPlans) {
  const PlanKey base = cudnn::plan_key(GraphKind::forward, shape(), true, 0);
  std::vector<PlanKey> others = {
      cudnn::plan_key(GraphKind::backward, shape(), true, 0),
      cudnn::plan_key(GraphKind::forward_fp8, shape(), true, 0),
      cudnn::plan_key(GraphKind::forward, shape(), false, 0),  // the inference forward
      cudnn::plan_key(GraphKind::forward, shape(), true, 1),   // another device
      cudnn::plan_key(GraphKind::forward, shape(130), true, 0),
      cudnn::plan_key(GraphKind::forward, shape(129, 128), true, 0),
      cudnn::plan_key(GraphKind::forward, shape(129, 64, true), true, 0),
      cudnn::plan_key(GraphKind::forward, shape(129, 64, false, DType::fp16), true, 0),
  };
  Shape more_heads = shape();
  more_heads.H = 4;
  others.push_back(cudnn::plan_key(GraphKind::forward, more_heads, true, 0));
  Shape more_batch = shape();
  more_batch.B = 3;
  others.push_back(cudnn::plan_key(GraphKind::forward, more_batch, true, 0));
  // The cache: paged (the pool's and the table's dims), ragged (the padding mask). The lengths'
  // values are the graph's inputs, not its shape: two draws share a plan.
  Shape paged = shape();
  paged.page_size = 64;
  others.push_back(cudnn::plan_key(GraphKind::forward, paged, true, 0));
  Shape ragged = shape();
  ragged.kv_lengths = {100, 129};
  others.push_back(cudnn::plan_key(GraphKind::forward, ragged, true, 0));
  Shape other_draw = ragged;
  other_draw.kv_lengths = {7, 20};
  EXPECT_TRUE(cudnn::plan_key(GraphKind::forward, other_draw, true, 0) == others.back());
  std::set<PlanKey> all{base};
  for (const PlanKey& k : others) {
    EXPECT_FALSE(k == base) << to_string(k);
    EXPECT_TRUE(all.insert(k).second) << "two requests share a key: " << to_string(k);
  }
  EXPECT_EQ(to_string(base), "forward bf16 B=2 H=3 N=129 d=64 stats device 0");
  EXPECT_EQ(to_string(others[2]), "forward bf16 B=2 H=3 N=129 d=64 no-stats device 0");
  EXPECT_EQ(to_string(others[others.size() - 2]),
            "forward bf16 B=2 H=3 N=129 page=64 d=64 stats device 0");
}

TEST(CudnnPlanKey, FieldsAGraphIgnoresDoNotSeparatePlans) {
  // The backward always reads the stats; the FP8 graph never writes them and takes E4M3 inputs.
  EXPECT_EQ(cudnn::plan_key(GraphKind::backward, shape(), true, 0),
            cudnn::plan_key(GraphKind::backward, shape(), false, 0));
  EXPECT_EQ(cudnn::plan_key(GraphKind::forward_fp8, shape(), true, 0),
            cudnn::plan_key(GraphKind::forward_fp8, shape(), false, 0));
  EXPECT_EQ(cudnn::plan_key(GraphKind::forward_fp8, shape(129, 128, false, DType::fp16), true, 0),
            cudnn::plan_key(GraphKind::forward_fp8, shape(129, 128, false, DType::bf16), true, 0));
  EXPECT_EQ(to_string(cudnn::plan_key(GraphKind::backward, shape(4096, 128, true), false, 2)),
            "backward bf16 B=2 H=3 N=4096 d=128 causal device 2");
}

struct FakePlan {
  int id = 0;
  bool held = false;  // its resources (the workspace of a real plan)
  int acquired = 0, released = 0;
  std::string refuse;  // acquire() fails with this
  std::string acquire() {
    if (!refuse.empty()) return refuse;
    if (!held) ++acquired;
    held = true;
    return "";
  }
  void release() {
    if (held) ++released;
    held = false;
  }
};

TEST(CudnnPlanCache, BuildsEachKeyOnceAndKeepsFailures) {
  cudnn::PlanCache<FakePlan> cache(4);
  int built = 0;
  auto build = [&](const PlanKey& k, std::string* error) -> std::shared_ptr<FakePlan> {
    ++built;
    if (k.N == 1) {
      *error = "refused";
      return nullptr;
    }
    return std::make_shared<FakePlan>(FakePlan{built});
  };
  const PlanKey a = cudnn::plan_key(GraphKind::forward, shape(), true, 0);
  const PlanKey b = cudnn::plan_key(GraphKind::forward, shape(), false, 0);
  const auto first = cache.get(a, build);
  ASSERT_TRUE(first.plan);
  EXPECT_EQ(cache.get(a, build).plan, first.plan);  // the same plan, not built again
  EXPECT_EQ(built, 1);
  EXPECT_NE(cache.get(b, build).plan, first.plan);
  EXPECT_EQ(built, 2);
  // A refused graph: its reason, remembered (asking again builds nothing).
  const PlanKey bad = cudnn::plan_key(GraphKind::forward, shape(1), true, 0);
  EXPECT_EQ(cache.get(bad, build).error, "refused");
  EXPECT_FALSE(cache.get(bad, build).plan);
  EXPECT_EQ(built, 3);
  EXPECT_EQ(cache.builds(), 3u);
  // A builder that fails without saying why still gives a reason.
  cudnn::PlanCache<FakePlan> silent(2);
  const auto e = silent.get(a, [](const PlanKey&, std::string*) { return nullptr; });
  EXPECT_FALSE(e.plan);
  EXPECT_NE(e.error.find("no plan for forward bf16"), std::string::npos) << e.error;
}

TEST(CudnnPlanCache, KeepsEveryPlanButOnlyTheMostRecentHoldTheirWorkspace) {
  // Destroying a cuDNN plan while CUPTI's range profiler is enabled crashed the next profiled
  // cuDNN launch (H200, 2026-11-23): plans live on; only their workspaces are given back.
  cudnn::PlanCache<FakePlan> cache(2);
  auto build = [](const PlanKey&, std::string*) { return std::make_shared<FakePlan>(); };
  const PlanKey k1 = cudnn::plan_key(GraphKind::forward, shape(100), true, 0);
  const PlanKey k2 = cudnn::plan_key(GraphKind::forward, shape(200), true, 0);
  const PlanKey k3 = cudnn::plan_key(GraphKind::forward, shape(300), true, 0);
  const auto p1 = cache.get(k1, build).plan;
  const auto p2 = cache.get(k2, build).plan;
  EXPECT_TRUE(p1->held);
  EXPECT_TRUE(p2->held);
  EXPECT_EQ(cache.get(k1, build).plan, p1);  // k1 used last: k2 is the oldest now
  const auto p3 = cache.get(k3, build).plan;
  EXPECT_EQ(cache.size(), 3u);  // nothing destroyed
  EXPECT_TRUE(cache.contains(k2));
  EXPECT_TRUE(p1->held);
  EXPECT_FALSE(p2->held);  // the least recently used gave its workspace back
  EXPECT_TRUE(p3->held);
  EXPECT_EQ(p2->released, 1);
  // Asked again: the same plan, not rebuilt, its workspace taken again; now k1 is the oldest.
  EXPECT_EQ(cache.get(k2, build).plan, p2);
  EXPECT_EQ(cache.builds(), 3u);
  EXPECT_TRUE(p2->held);
  EXPECT_EQ(p2->acquired, 2);
  EXPECT_FALSE(p1->held);
  EXPECT_TRUE(p3->held);
  // Held by two at most, whatever the order of use.
  for (const PlanKey& k : {k1, k3, k2, k2, k1, k3}) {
    cache.get(k, build);
    EXPECT_EQ(int{p1->held} + int{p2->held} + int{p3->held}, 2);
  }
}

TEST(CudnnPlanCache, AWorkspaceThatCannotBeTakenIsTheRowsReasonThisTime) {
  cudnn::PlanCache<FakePlan> cache(1);
  auto build = [](const PlanKey&, std::string*) { return std::make_shared<FakePlan>(); };
  const PlanKey k1 = cudnn::plan_key(GraphKind::forward, shape(100), true, 0);
  const auto p1 = cache.get(k1, build).plan;
  p1->release();
  p1->refuse = "cuDNN: workspace of 4096 bytes: allocation failed";
  const auto e = cache.get(k1, build);
  EXPECT_FALSE(e.plan);
  EXPECT_EQ(e.error, p1->refuse);
  p1->refuse.clear();  // memory freed elsewhere: the next request gets the plan, not rebuilt
  EXPECT_EQ(cache.get(k1, build).plan, p1);
  EXPECT_EQ(cache.builds(), 1u);
}

TEST(CudnnStatsOption, DefaultsToTrueAndReadsTheRowsValue) {
  EXPECT_TRUE(cudnn::stats_option({}));
  EXPECT_TRUE(cudnn::stats_option({{kOptionStats, true}}));
  EXPECT_FALSE(cudnn::stats_option({{kOptionStats, false}}));
  const VariantInfo* info = find_variant("cudnn");
  ASSERT_TRUE(info);
  const OptionDecl* decl = info->declared(kOptionStats);
  ASSERT_TRUE(decl);
  EXPECT_EQ(decl->accepted.front(), OptionValue{true});  // default: as before, lse written
  EXPECT_TRUE(info->row_writes_lse({{kOptionStats, true}}));
  EXPECT_FALSE(info->row_writes_lse({{kOptionStats, false}}));  // its lse is not checked
  EXPECT_TRUE(info->row_writes_lse({}));
  // A variant that writes no lse does not start to because of the option.
  EXPECT_FALSE(find_variant("cudnn-fp8")->row_writes_lse({{kOptionStats, true}}));
  // The backward is the cudnn peer's, not the FP8 one's.
  EXPECT_EQ(info->directions, (std::vector<Direction>{Direction::forward, Direction::backward}));
  EXPECT_EQ(find_variant("cudnn-fp8")->directions, std::vector<Direction>{Direction::forward});
  EXPECT_EQ(find_variant("cudnn-fp8")->declared(kOptionStats), nullptr);
}

// The inference forward writes no lse: its IO model has no lse term, 4 bytes per row less.
TEST(CudnnStatsOption, TheModelOfARowWithoutStatsHasNoLseWrite) {
  const Shape s = shape(4096, 128);
  model::ModelOptions with, without;
  without.writes_lse = false;
  const auto a = model::io_model(Algorithm::fa2, s, {128, 128}, 0, with);
  const auto b = model::io_model(Algorithm::fa2, s, {128, 128}, 0, without);
  const double lse_bytes = static_cast<double>(s.heads_total() * s.N) * 4;
  EXPECT_DOUBLE_EQ(a.bytes_written - b.bytes_written, lse_bytes);
  EXPECT_DOUBLE_EQ(a.bytes_read, b.bytes_read);
  EXPECT_DOUBLE_EQ(a.bytes_compulsory - b.bytes_compulsory, lse_bytes);
  EXPECT_EQ(a.terms.size(), b.terms.size() + 1);
  for (const auto& t : b.terms) EXPECT_EQ(t.name.find("lse"), std::string::npos) << t.name;
}

bench::ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fa-bench");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return bench::parse_cli(static_cast<int>(argv.size()), argv.data());
}

std::vector<bench::PlannedRow> rows_for(const std::vector<std::string>& args) {
  const auto out = parse(args);
  EXPECT_EQ(out.action, bench::ParseOutcome::Action::run) << out.output;
  std::vector<bench::PlannedRow> rows;
  EXPECT_EQ(bench::plan_rows(out.options, 64, &rows), "");
  return rows;
}

TEST(CudnnStatsOption, TheCommandLinePlansOneRowPerValue) {
  auto rows = rows_for({"--variants", "cudnn"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].spec.options.at(kOptionStats), OptionValue{true});
  rows = rows_for({"--variants", "cudnn", "--cudnn-stats", "off"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].spec.options.at(kOptionStats), OptionValue{false});
  rows = rows_for({"--variants", "fa2,cudnn,cudnn-fp8", "--cudnn-stats", "both", "--d", "128"});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].spec.options.at(kOptionStats), OptionValue{true});
  EXPECT_EQ(rows[2].spec.options.at(kOptionStats), OptionValue{false});
  EXPECT_EQ(rows[3].spec.variant, "cudnn-fp8");
  EXPECT_TRUE(rows[3].spec.options.empty());  // the option is the cudnn peer's alone
  // Labels: the plain name while one value runs, the value when both do.
  bench::ConfigResult config;
  for (const auto& r : rows) {
    bench::VariantResult v;
    v.spec = r.spec;
    config.results.push_back(v);
  }
  EXPECT_EQ(bench::row_label(config, config.results[1]), "cudnn~stats=true");
  EXPECT_EQ(bench::row_label(config, config.results[2]), "cudnn~stats=false");
  config.results.erase(config.results.begin() + 2);
  EXPECT_EQ(bench::row_label(config, config.results[1]), "cudnn");
  // Bad values: one line, exit 2, naming the flag.
  for (const char* bad : {"maybe", "", "On"}) {
    const auto out = parse({"--cudnn-stats", bad});
    EXPECT_EQ(out.exit_code, bench::kExitBadInput) << bad;
    EXPECT_EQ(out.output.rfind("error: --cudnn-stats: ", 0), 0u) << out.output;
    EXPECT_EQ(out.output.find('\n'), out.output.size() - 1) << out.output;
  }
}

// Result files from before the option: their cudnn rows wrote the lse, so they read as stats=true
// and an old baseline's row matches a new run's (fa-bench/1 and fa-bench/2 alike).
TEST(CudnnStatsOption, OlderResultFilesReadAsStatsOn) {
  bench::RunResult r = bench::read_result_file(std::string(FA_SOURCE_DIR) +
                                               "/tests/data/gate-peer-cudnn-x1.20.json");
  int cudnn_rows = 0;
  for (auto& c : r.configs) {
    for (auto& row : c.results) {
      if (row.spec.variant != "cudnn") continue;
      ++cudnn_rows;
      EXPECT_EQ(row.spec.options, (OptionValues{{kOptionStats, true}}));
      row.spec.options.clear();  // as fa-bench/2 wrote it before issue 17
    }
  }
  ASSERT_GT(cudnn_rows, 0);
  const std::string v2 = bench::to_json_text(r);
  ASSERT_NE(v2.find("\"options\": {}"), std::string::npos);
  for (const auto& c : bench::from_json_text(v2, "v2.json").configs) {
    for (const auto& row : c.results) {
      if (row.spec.variant == "cudnn")
        EXPECT_EQ(row.spec.options, (OptionValues{{kOptionStats, true}}));
      if (row.spec.variant == "fa2") EXPECT_EQ(row.spec.options.count(kOptionStats), 0u);
    }
  }
}

}  // namespace
}  // namespace fa
