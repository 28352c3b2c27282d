// A row's energy in the record: the JSON round trip and its refusals, one figure in the console,
// CSV and Markdown, the reasons under the table, the model's figure only with counted
// instructions, the ceilings cache refitting an older model, and the gate's optional energy check
// (--gate-energy) on the H200 gate fixture. CPU only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/gate.hpp"
#include "bench/gate_outputs.hpp"
#include "bench/merge.hpp"
#include "bench/result_json.hpp"
#include "bench/writers.hpp"
#include "profiler/ceilings.hpp"

namespace fa::bench {
namespace {

energy::Measurement measured(double mj) {
  energy::Measurement m;
  m.status = "ok";
  m.launches = 1200;
  m.busy_s = 1.2;
  m.seconds_per_launch = 1e-3;
  m.window_s = 1.01;
  m.counter_mj = 404000;
  m.counter_updates = 50;
  m.power_w = mj;  // mj mJ per 1 ms launch
  m.sampled_power_w = mj * 1.01;
  m.power_samples = 40;
  m.counter_vs_sampled = 1 / 1.01 - 1;
  m.energy_per_launch_mj = mj;
  m.sampled_energy_per_launch_mj = mj * 1.01;
  m.sm_clock_mean_mhz = 1960;
  m.sm_clock_min_mhz = 1905;
  m.clock_samples = 180;
  m.clock_event_reasons = {"power cap"};
  m.temperature_mean_c = 51.5;
  m.temperature_max_c = 54;
  m.temperature_samples = 180;
  return m;
}

energy::Fit device_fit() {
  energy::Fit f;
  f.eps_flop16_pj = 0.6;
  f.eps_flop8_pj = 0.35;
  f.eps_inst_pj = 450;
  f.eps_byte_pj = 22;
  f.idle_w = 160;
  f.f_ref_mhz = 1980;
  f.points = {{"sleep 1 ms", 0, 0, 0, 1e-3, 0.16, 6.9e7, 1980, 45, 46}};
  f.residuals = {0.0};
  return f;
}

// What the row's counters read: 2e8 warp instructions, 3e8 DRAM bytes.
CounterResult counted() {
  CounterResult cr;
  cr.values = {{"sm__inst_executed.sum", 2e8},
               {"dram__bytes_read.sum", 2e8},
               {"dram__bytes_write.sum", 1e8}};
  return cr;
}

// One timed configuration of three rows: measured, refused, not measured (--no-energy).
RunResult record() {
  RunResult r;
  r.tool_version = "0.1.0";
  r.git_revision = "abc";
  r.created_utc = "2026-11-21T00:00:00Z";
  r.command_line = "fa-bench --N 1024";
  r.complete = true;
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.uuid = "GPU-0";
  d.cc_major = 9;
  r.device = d;
  r.ceilings = Ceilings{"datasheet (H200)", 4.8e12, 989.4e12, 989.4e12, 1978.9e12};
  r.ceilings.energy_model = device_fit();
  ConfigResult c;
  c.shape.B = 16;
  c.shape.H = 32;
  c.shape.N = 1024;
  c.shape.d = 64;
  c.gpu = GpuId{"GPU-0", "NVIDIA H200"};
  VariantResult row;
  row.spec.variant = "fa2";
  row.algorithm = Algorithm::fa2;
  row.status = Status::ok;
  row.model = model::io_model(Algorithm::fa2, c.shape, {128, 64}, 233472);
  Timing t;
  t.samples_ms = {1.0, 1.01, 0.99};
  t.stats = summarize(t.samples_ms);
  row.timing = t;
  row.energy = measured(412.345);
  row.counters = counted();
  row.measured = MeasuredDerived{};
  row.measured->dram_bytes = 3e8;
  row.energy_model = energy_model_of(row, r.ceilings, false, &row.energy_model_reason);
  VariantResult refused = row;
  refused.spec.variant = "standard";
  refused.algorithm = Algorithm::standard;
  refused.energy = energy::not_measured("refused", "the energy counter changed 2 times");
  refused.energy_model.reset();
  VariantResult skipped = row;
  skipped.spec.variant = "fa1";
  skipped.algorithm = Algorithm::fa1;
  skipped.energy = energy::not_measured("skipped", "--no-energy");
  skipped.energy_model.reset();
  // Measured, its counters off: no model figure, and why.
  VariantResult uncounted = row;
  uncounted.spec.variant = "fa3";
  uncounted.counters = CounterResult{"skipped", "--no-counters", {}, 0, {}, ""};
  uncounted.measured.reset();
  uncounted.energy_model =
      energy_model_of(uncounted, r.ceilings, false, &uncounted.energy_model_reason);
  c.results = {row, refused, skipped, uncounted};
  r.configs.push_back(c);
  return r;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

TEST(EnergyRecord, RoundTripsThroughTheJson) {
  const RunResult a = record();
  const RunResult b = from_json_text(to_json_text(a), "mem");
  const VariantResult& row = b.configs[0].results[0];
  ASSERT_TRUE(row.energy);
  EXPECT_EQ(row.energy->status, "ok");
  EXPECT_DOUBLE_EQ(*row.energy->energy_per_launch_mj, 412.345);
  EXPECT_EQ(row.energy->clock_event_reasons, std::vector<std::string>{"power cap"});
  EXPECT_DOUBLE_EQ(row.energy->sm_clock_min_mhz, 1905);
  EXPECT_DOUBLE_EQ(row.energy->temperature_mean_c, 51.5);
  EXPECT_DOUBLE_EQ(row.energy->temperature_max_c, 54);
  ASSERT_TRUE(row.energy_model);
  const energy::Breakdown& written = *a.configs[0].results[0].energy_model;
  EXPECT_DOUBLE_EQ(row.energy_model->total_mj(), written.total_mj());
  EXPECT_DOUBLE_EQ(row.energy_model->inst_mj, written.inst_mj);
  EXPECT_DOUBLE_EQ(row.energy_model->instructions, 2e8);
  EXPECT_DOUBLE_EQ(row.energy_model->clock_scale, written.clock_scale);
  EXPECT_EQ(row.energy_model->bytes_basis, "counters");
  EXPECT_EQ(b.configs[0].results[1].energy->status, "refused");
  EXPECT_FALSE(b.configs[0].results[1].energy->energy_per_launch_mj);
  const VariantResult& uncounted = b.configs[0].results[3];
  EXPECT_FALSE(uncounted.energy_model);
  EXPECT_EQ(uncounted.energy_model_reason,
            "the energy model needs the counted instructions: counters off (--no-counters)");
  ASSERT_TRUE(b.ceilings.energy_model);
  EXPECT_DOUBLE_EQ(b.ceilings.energy_model->eps_byte_pj, 22);
  EXPECT_EQ(b.ceilings.energy_model->eps_flop8_pj, 0.35);
  EXPECT_DOUBLE_EQ(b.ceilings.energy_model->eps_inst_pj, 450);
  EXPECT_DOUBLE_EQ(b.ceilings.energy_model->f_ref_mhz, 1980);
  EXPECT_DOUBLE_EQ(b.ceilings.energy_model->points[0].instructions, 6.9e7);
  EXPECT_DOUBLE_EQ(b.ceilings.energy_model->points[0].temperature_c, 45);
  // A file without energy (older, or --no-energy) reads as before.
  RunResult none = a;
  for (auto& v : none.configs[0].results) v.energy.reset();
  none.ceilings.energy_model.reset();
  const RunResult c = from_json_text(to_json_text(none), "mem");
  EXPECT_FALSE(c.configs[0].results[0].energy);
  EXPECT_FALSE(c.ceilings.energy_model);
}

TEST(EnergyRecord, ImpossibleEnergyIsRefusedWithItsPath) {
  auto doc = nlohmann::json::parse(to_json_text(record()));
  doc["configs"][0]["results"][0]["energy"]["energy_per_launch_mj"] = -3;
  try {
    from_json_text(doc.dump(), "bad.json");
    FAIL() << "accepted a negative energy";
  } catch (const ResultFileError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "bad.json: configs[0].results[0].energy: energy_per_launch_mj: impossible value -3"),
        std::string::npos)
        << e.what();
  }
  doc = nlohmann::json::parse(to_json_text(record()));
  doc["ceilings"]["energy_model"]["idle_w"] = "many";
  try {
    from_json_text(doc.dump(), "bad.json");
    FAIL() << "accepted a text idle power";
  } catch (const ResultFileError& e) {
    EXPECT_NE(std::string(e.what()).find("ceilings.energy_model: idle_w"), std::string::npos)
        << e.what();
  }
}

TEST(EnergyRecord, OneFigureInEveryWriter) {
  const RunResult a = record();
  const ConfigResult& c = a.configs[0];
  EXPECT_EQ(energy_label(c.results[0]), "412");
  EXPECT_EQ(energy_label(c.results[1]), "n/a");
  EXPECT_EQ(energy_label(c.results[2]), "-");
  const std::string table = format_table(c);
  EXPECT_NE(table.find(" mJ "), std::string::npos) << table;
  EXPECT_NE(table.find(" 412 "), std::string::npos) << table;
  // The refused row's reason under the table; the skipped row says nothing; the power cap shows.
  EXPECT_NE(table.find("  energy refused: the energy counter changed 2 times (standard)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("--no-energy"), std::string::npos) << table;
  EXPECT_NE(table.find("  SM clock held down (power cap) (fa2, fa3)\n"), std::string::npos)
      << table;
  // The measured row without counters: no model figure, and why.
  EXPECT_NE(table.find("  no model figure: the energy model needs the counted instructions: "
                       "counters off (--no-counters) (fa3)\n"),
            std::string::npos)
      << table;
  const std::string md = to_markdown(a);
  EXPECT_NE(md.find("| 412 |"), std::string::npos) << md;
  EXPECT_NE(md.find("- energy refused: the energy counter changed 2 times (standard)"),
            std::string::npos);
  // Markdown: every row has as many cells as the header.
  std::istringstream lines(md);
  std::string line;
  std::size_t cells = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("| variant", 0) == 0) cells = std::count(line.begin(), line.end(), '|');
    if (cells && line.rfind("|", 0) == 0) {
      EXPECT_EQ(static_cast<std::size_t>(std::count(line.begin(), line.end(), '|')), cells) << line;
    }
  }
  // CSV: every row as wide as the header; the energy and the model's parts by name.
  std::istringstream csv(to_csv(a));
  std::getline(csv, line);
  const auto header = csv_fields(line);
  std::getline(csv, line);
  const auto fa2 = csv_fields(line);
  ASSERT_EQ(fa2.size(), header.size()) << line;
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return fa2[it - header.begin()];
  };
  EXPECT_EQ(column("energy_status"), "ok");
  EXPECT_EQ(column("energy_per_launch_mj"), "412.345");
  EXPECT_EQ(column("clock_event_reasons"), "power cap");
  EXPECT_EQ(column("model_energy_bytes_basis"), "counters");
  EXPECT_EQ(std::stod(column("model_idle_mj")), 160.0);  // 160 W for 1 ms
  // 2e8 instructions x 450 pJ at (1960 / 1980)^2 of f_ref's energy.
  const double scale = (1960.0 / 1980) * (1960.0 / 1980);
  EXPECT_NEAR(std::stod(column("model_inst_mj")), 90 * scale, 1e-9);
  EXPECT_NEAR(std::stod(column("model_clock_scale")), scale, 1e-12);
  EXPECT_EQ(std::stod(column("energy_temperature_max_c")), 54);
  EXPECT_EQ(column("model_energy_reason"), "");
  EXPECT_EQ(column("launch"), "stream");  // the row's timing.launch
  std::vector<std::string> last;
  while (std::getline(csv, line)) {
    EXPECT_EQ(csv_fields(line).size(), header.size()) << line;
    last = csv_fields(line);
  }
  ASSERT_EQ(last.size(), header.size());
  const auto reason = std::find(header.begin(), header.end(), "model_energy_reason");
  ASSERT_NE(reason, header.end());
  EXPECT_EQ(last[reason - header.begin()],
            "the energy model needs the counted instructions: counters off (--no-counters)");
  // Columns are added at the end: the energy model's last, then the K/V heads and length, the
  // row's launch, the cache's pages and lengths.
  const auto l2 = std::find(header.begin(), header.end(), "model_l2_bytes");
  ASSERT_NE(l2, header.end());
  EXPECT_EQ(last[l2 - header.begin()], "");
  EXPECT_EQ(header.back(), "kv_lengths");
}

TEST(EnergyRecord, ModelFigureOnlyWithCountedInstructions) {
  const RunResult a = record();
  const Ceilings& c = a.ceilings;
  VariantResult row = a.configs[0].results[0];
  std::string why;
  auto b = energy_model_of(row, c, false, &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(why, "");
  const double scale = (1960.0 / 1980) * (1960.0 / 1980);
  EXPECT_DOUBLE_EQ(b->clock_scale, scale);
  EXPECT_DOUBLE_EQ(b->flop_mj, scale * 0.6e-9 * row.model.flops_matrix);
  EXPECT_DOUBLE_EQ(b->inst_mj, scale * 450e-9 * 2e8);
  EXPECT_DOUBLE_EQ(b->byte_mj, 22e-9 * 3e8);
  // An mma.sync row (VariantInfo::uses_mma_sync) is priced at the mma.sync energy per FLOP, and
  // gets no figure, with the reason, from a model calibrated without mma.sync kernels.
  EXPECT_FALSE(energy_model_of(row, c, true, &why));
  EXPECT_NE(why.find("no energy per bf16 mma.sync FLOP"), std::string::npos) << why;
  Ceilings with_mma = c;
  with_mma.energy_model->eps_mma16_pj = 1.5;
  b = energy_model_of(row, with_mma, true, &why);
  ASSERT_TRUE(b) << why;
  EXPECT_DOUBLE_EQ(b->flop_mj, scale * 1.5e-9 * row.model.flops_matrix);
  // Counters that failed: their reason, never instructions taken as 0.
  row.counters =
      CounterResult{"error", "cuptiRangeProfilerStop: not all passes submitted", {}, 0, {}, ""};
  row.measured.reset();
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_EQ(why,
            "the energy model needs the counted instructions: counters error: "
            "cuptiRangeProfilerStop: not all passes submitted");
  row.counters = CounterResult{"unavailable", "cuptiProfilerInitialize failed", {}, 0, {}, ""};
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_NE(why.find("counters unavailable: cuptiProfilerInitialize failed"), std::string::npos);
  row.counters.reset();  // a file without counters at all
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_EQ(why, "the energy model needs the counted instructions: counters off (--no-counters)");
  // Counted, without the instruction metric (a metric list of its own).
  row.counters = counted();
  row.counters->values.erase("sm__inst_executed.sum");
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_NE(why.find("sm__inst_executed.sum was not collected"), std::string::npos) << why;
  // No clock in the window: no figure, said.
  row.counters = counted();
  row.energy->sm_clock_mean_mhz = 0;
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_NE(why.find("no SM clock reading"), std::string::npos) << why;
  // Nothing said where there is no model or no window: the legend and the energy say it.
  row = a.configs[0].results[0];
  Ceilings none = c;
  none.energy_model->status = "refused";
  EXPECT_FALSE(energy_model_of(row, none, false, &why));
  EXPECT_EQ(why, "");
  row.energy = energy::not_measured("unavailable", "NVML not found");
  EXPECT_FALSE(energy_model_of(row, c, false, &why));
  EXPECT_EQ(why, "");
}

TEST(EnergyRecord, CacheRefitsAnOlderEnergyModel) {
  const auto dir = std::filesystem::temp_directory_path() / "fa-bench-test-energy-cache";
  std::filesystem::remove_all(dir);
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  DeviceInfo d;
  d.uuid = "GPU-5678";
  d.driver_version = "580.159.04";
  const std::string path = ceilings_cache_path(d, "0.1.0");
  MeasuredCeilings m;
  m.key = ceilings_cache_key(d, "0.1.0");
  m.dram_bytes_per_s = 4.25e12;
  m.measured_utc = "2026-11-21T00:00:00Z";
  m.energy_model = device_fit();
  save_ceilings(path, m);
  auto back = load_ceilings(path, m.key);
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->energy_model);
  EXPECT_DOUBLE_EQ(back->energy_model->eps_inst_pj, 450);
  EXPECT_DOUBLE_EQ(back->energy_model->f_ref_mhz, 1980);
  EXPECT_DOUBLE_EQ(back->energy_model->points[0].sm_clock_mhz, 1980);
  // The same file as an fa-bench before the L2 term wrote it, and one before the mma.sync terms
  // and the fitted exponent: the roofs stay, the model is missing (the run measures it again),
  // never used.
  auto j = nlohmann::json::parse(std::ifstream(path));
  j["energy_model"].erase("dram_active_w");
  std::ofstream(path) << j.dump();
  back = load_ceilings(path, m.key);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->energy_model);
  for (const char* key : {"eps_l2_byte_pj", "busy_w", "clock_knee_mhz"})
    j["energy_model"].erase(key);
  std::ofstream(path) << j.dump();
  back = load_ceilings(path, m.key);
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->dram_bytes_per_s, 4.25e12);
  EXPECT_FALSE(back->energy_model);
  for (const char* key : {"eps_mma16_pj", "eps_mma8_pj", "clock_exponent", "clock_exponent_basis"})
    j["energy_model"].erase(key);
  std::ofstream(path) << j.dump();
  back = load_ceilings(path, m.key);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->energy_model);
  unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(dir);
}

TEST(EnergyRecord, LegendNamesTheWindowAndTheModel) {
  RunResult a = record();
  a.settings.energy_window_s = 1;
  EXPECT_NE(energy_legend(a).find("over 1 s of launches"), std::string::npos) << energy_legend(a);
  a.ceilings.energy_model->eps_mma16_pj = 1.2;
  a.ceilings.energy_model->clock_exponent = 1.35;
  a.ceilings.energy_model->clock_exponent_basis =
      "fitted over calibration clocks 1305-1980 MHz, with a floor at 1650 MHz";
  a.ceilings.energy_model->clock_knee_mhz = 1650;
  a.ceilings.energy_model->eps_l2_byte_pj = 41;
  a.ceilings.energy_model->busy_w = 23;
  a.ceilings.energy_model->dram_active_w = 29;
  EXPECT_NE(energy_legend(a).find(
                "pJ per FLOP bf16/fp16 0.6 (wgmma), 1.2 (mma.sync); fp8 0.35 (wgmma), - "
                "(mma.sync); 450 pJ per warp instruction; these at 1980 MHz, scaled by "
                "(max(row's SM clock, 1650 MHz) / 1980 MHz)^1.35 (fitted over calibration clocks "
                "1305-1980 MHz, with a floor at 1650 MHz); 41 pJ per SM<->L2 byte, 22 pJ per DRAM "
                "byte + 29 W while moving them, 160 W constant + 23 W with every SM busy"),
            std::string::npos)
      << energy_legend(a);
  a.ceilings.energy_model->version = 4;  // before DRAM's active power
  EXPECT_NE(energy_legend(a).find("22 pJ per DRAM byte, 160 W constant + 23 W with every SM busy"),
            std::string::npos)
      << energy_legend(a);
  a.ceilings.energy_model->version = 3;  // a file of an fa-bench before the L2 term
  a.ceilings.energy_model->clock_exponent_basis = "fitted over calibration clocks 1305-1980 MHz";
  EXPECT_NE(energy_legend(a).find(
                "pJ per FLOP bf16/fp16 0.6 (wgmma), 1.2 (mma.sync); fp8 0.35 (wgmma), - "
                "(mma.sync); 450 pJ per warp instruction; these at 1980 MHz, scaled by (row's SM "
                "clock / 1980 MHz)^1.35 (fitted over calibration clocks 1305-1980 MHz); 22 pJ per "
                "DRAM byte, 160 W constant"),
            std::string::npos)
      << energy_legend(a);
  a.ceilings.energy_model->version = 2;  // a file of an fa-bench before the mma.sync terms
  EXPECT_NE(energy_legend(a).find("0.6 pJ per bf16/fp16 FLOP, 0.35 per fp8 FLOP, 450 pJ per warp "
                                  "instruction (at 1980 MHz, scaled by the square of the row's SM "
                                  "clock), 22 pJ per DRAM byte, 160 W constant"),
            std::string::npos)
      << energy_legend(a);
  a.ceilings.energy_model->version = 1;  // a file of an older fa-bench
  EXPECT_NE(energy_legend(a).find("0.6 pJ per bf16/fp16 FLOP, 0.35 per fp8 FLOP, 22 pJ per DRAM "
                                  "byte, 160 W constant"),
            std::string::npos)
      << energy_legend(a);
  a.ceilings.energy_model->status = "refused";
  a.ceilings.energy_model->reason = "degenerate calibration";
  EXPECT_NE(energy_legend(a).find("no energy model: degenerate calibration"), std::string::npos);
  a.settings.energy_window_s = 0;
  EXPECT_EQ(energy_legend(a), "mJ: not measured (--no-energy)");
}

TEST(EnergyRecord, MergeKeepsEnergyAndRefusesAnotherWindow) {
  RunResult a = record(), b = record();
  a.settings.energy_window_s = b.settings.energy_window_s = 1;
  b.configs[0].shape.N = 2048;
  std::vector<std::string> warnings;
  const RunResult m = merge_results({a, b}, {"a.json", "b.json"}, &warnings);
  ASSERT_EQ(m.configs.size(), 2u);
  for (const auto& c : m.configs) {
    ASSERT_TRUE(c.results[0].energy);
    EXPECT_DOUBLE_EQ(*c.results[0].energy->energy_per_launch_mj, 412.345);
  }
  ASSERT_TRUE(m.ceilings.energy_model);
  b.settings.energy_window_s = 2;
  try {
    merge_results({a, b}, {"a.json", "b.json"}, &warnings);
    FAIL() << "merged files of different energy windows";
  } catch (const MergeConflict& e) {
    EXPECT_NE(std::string(e.what()).find("settings.energy_window_s"), std::string::npos)
        << e.what();
  }
}

// ---- the gate's optional energy check ----

RunResult with_energy(RunResult r, double mj, const std::string& variant = "", double factor = 1) {
  for (auto& c : r.configs) {
    for (auto& v : c.results) {
      if (v.status != Status::ok) continue;
      v.energy = measured(v.spec.variant == variant ? mj * factor : mj);
    }
  }
  return r;
}

RunResult base_file() {
  return read_result_file(std::string(FA_SOURCE_DIR) + "/tests/data/gate-h200-base.json");
}

const CounterComparison* energy_of(const GateRow& row) {
  for (const auto& c : row.counters)
    if (c.name == kGateEnergy) return &c;
  return nullptr;
}

TEST(EnergyGate, OffByDefaultAndRegressesUnderGateEnergy) {
  const RunResult base = with_energy(base_file(), 100);
  const RunResult cur = with_energy(base_file(), 100, "fa2", 1.10);
  GateOptions o;
  const GateReport off = run_gate(base, cur, o, "base", "cur");
  EXPECT_EQ(off.exit_code, 0) << gate_table(off, o);
  for (const auto& row : off.rows) EXPECT_FALSE(energy_of(row)) << row.variant;
  EXPECT_NE(gate_table(off, o).find("energy not gated"), std::string::npos);

  o.gate_energy = true;
  const GateReport on = run_gate(base, cur, o, "base", "cur");
  EXPECT_EQ(on.exit_code, 1) << gate_table(on, o);
  int regressed = 0;
  for (const auto& row : on.rows) {
    const CounterComparison* e = energy_of(row);
    ASSERT_TRUE(e) << row.variant;
    if (row.spec.variant == "fa2") {
      EXPECT_TRUE(e->regressed);
      EXPECT_NEAR(e->change, 0.10, 1e-9);
      EXPECT_EQ(row.outcome, RowOutcome::regression);
      ++regressed;
    } else {
      EXPECT_FALSE(e->regressed) << row.variant;
    }
  }
  EXPECT_GT(regressed, 0);
  const std::string table = gate_table(on, o);
  EXPECT_NE(table.find("energy_mj: 100 -> 110 (+10.00%, tolerance 5.0%)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("+10.0% !"), std::string::npos) << table;
  EXPECT_NE(gate_markdown(on, o).find("| energy |"), std::string::npos);
  EXPECT_NE(gate_bmf(on).find("energy-mj"), std::string::npos);

  o.energy_tolerance = 0.15;
  EXPECT_EQ(run_gate(base, cur, o, "base", "cur").exit_code, 0);
}

TEST(EnergyGate, RowWithoutEnergyCannotBeGated) {
  const RunResult base = with_energy(base_file(), 100);
  RunResult cur = base_file();  // no energy at all (--no-energy, or an older fa-bench)
  GateOptions o;
  o.gate_energy = true;
  const GateReport r = run_gate(base, cur, o, "base", "cur");
  EXPECT_EQ(r.exit_code, 2) << gate_table(r, o);
  EXPECT_NE(gate_table(r, o).find("energy per launch not measured in the current run"),
            std::string::npos);
  o.allow_missing = true;
  const GateReport allowed = run_gate(base, cur, o, "base", "cur");
  EXPECT_EQ(allowed.exit_code, 0) << gate_table(allowed, o);
  // A refused figure on one side says why.
  for (auto& c : cur.configs)
    for (auto& v : c.results) v.energy = energy::not_measured("refused", "too coarse");
  o.allow_missing = false;
  EXPECT_NE(gate_table(run_gate(base, cur, o, "base", "cur"), o).find("(refused: too coarse)"),
            std::string::npos);
}

TEST(EnergyGate, CalibrationLearnsTheEnergySpread) {
  const RunResult a = with_energy(base_file(), 100), b = with_energy(base_file(), 100, "fa2", 1.03);
  const Calibration cal = calibrate({a, b}, {"a.json", "b.json"});
  bool seen = false;
  for (const auto& [key, tol] : cal.tolerances) {
    if (key.rfind("fa2 ", 0) != 0) continue;
    ASSERT_TRUE(tol.count(kGateEnergy)) << key;
    EXPECT_NEAR(tol.at(kGateEnergy), 2 * 0.03, 1e-9);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace fa::bench
