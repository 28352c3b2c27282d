// `fa-bench gate`: the command line, reading the two files, writing the outputs, the exit code.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/gate.hpp"
#include "bench/gate_outputs.hpp"
#include "bench/options.hpp"
#include "bench/result_json.hpp"

namespace fa::bench {
namespace {

struct BadGateInput {
  std::string message;
};

// "5%", "0.05" -> 0.05. Must be finite and in [0, 10).
double parse_fraction(const std::string& flag, const std::string& text) {
  std::string t = text;
  bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != t.size() || !std::isfinite(v)) {
    throw BadGateInput{fmt::format("{}: '{}' is not a number (accepted: 0.05 or 5%)", flag, text)};
  }
  if (percent) v /= 100;
  if (v < 0 || v >= 10)
    throw BadGateInput{fmt::format("{}: {} out of range (accepted: 0 to 1000%)", flag, text)};
  return v;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ResultFileError(path + ": cannot open for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_output(const std::string& path, const std::string& text, const char* what) {
  if (path.empty()) return;
  try {
    write_file_atomically(path, text);
  } catch (const std::exception& e) {
    throw BadGateInput{fmt::format("{}: cannot write {}: {}", what, path, e.what())};
  }
}

// The current run must be fit to be a baseline: measured, complete, nothing failed, counters
// (unless time_only).
std::string unfit_as_baseline(const RunResult& r, bool time_only) {
  if (!r.device || r.settings.model_only) return "it has no measurements (no GPU)";
  if (!r.complete) return "the run was interrupted";
  bool counters = false;
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) {
      if (v.status == Status::failed || v.status == Status::error) {
        return fmt::format("{} {}", row_label(c, v),
                           v.status == Status::failed ? "failed verification" : "errored");
      }
      if (const std::string why = impossible_values(v); !why.empty()) {
        return fmt::format("{}: {}", row_label(c, v), why);
      }
      counters = counters || !gated_counters(v).empty();
    }
  }
  if (!counters && !time_only) {
    return "it has no counters (--no-counters, or counters unavailable: see the rows' "
           "counters.reason), so bytes and FLOPs could never be gated against it; rerun with "
           "counters, or pass --time-only to accept a time-only baseline";
  }
  return "";
}

// `--calibrate A.json B.json ... --update-baseline OUT`: tolerances learned from same-build runs,
// written into OUT (A.json with the "gate_calibration" key).
int calibrate_command(const std::vector<std::string>& files, const GateOptions& o) {
  if (o.update_baseline_path.empty()) {
    throw BadGateInput{
        "--calibrate: --update-baseline FILE is required (the calibrated baseline "
        "is written there)"};
  }
  if (!o.baseline_path.empty() || !o.current_path.empty()) {
    throw BadGateInput{
        "--calibrate writes a baseline from its files: do not pass --baseline or "
        "--current with it"};
  }
  std::vector<RunResult> runs;
  std::string first_text;
  for (const auto& f : files) {
    const std::string text = read_text(f);
    if (first_text.empty()) first_text = text;
    runs.push_back(from_json_text(text, f));
  }
  if (const std::string why = unfit_as_baseline(runs[0], o.time_only); !why.empty()) {
    throw BadGateInput{fmt::format("{}: not written as a baseline: {}", files[0], why)};
  }
  Calibration cal;
  try {
    cal = calibrate(runs, files);
  } catch (const std::invalid_argument& e) {
    throw BadGateInput{std::string("--calibrate: ") + e.what()};
  }
  write_output(o.update_baseline_path, calibrated_baseline(first_text, cal), "--update-baseline");
  std::printf(
      "calibration from %zu runs (tolerance = max(floor, %g x the largest change between "
      "two runs)):\n",
      files.size(), kCalibrationFactor);
  std::printf("  %-44s %9s %9s %9s %9s %9s\n", "row", "time", "DRAM", "L2", "tensor", "inst");
  for (const auto& [key, tol] : cal.tolerances) {
    auto cell = [&](const char* m) {
      auto it = tol.find(m);
      return it == tol.end() ? std::string("default") : fmt::format("{:.2f}%", 100 * it->second);
    };
    std::printf("  %-44s %9s %9s %9s %9s %9s\n", key.c_str(), cell("time").c_str(),
                cell("dram_bytes").c_str(), cell("l2_bytes").c_str(), cell("tensor_flops").c_str(),
                cell("instructions").c_str());
    for (const auto& [m, t] : tol) {
      if (t > 0.10) {
        std::printf(
            "  warning: %s: %s varies by %.1f%% between the runs: a noisy row; consider "
            "more repetitions or a quieter runner\n",
            key.c_str(), m.c_str(), 100 * cal.observed[key][m]);
      }
    }
  }
  std::printf("baseline written: %s (from %s, with \"%s\")\n", o.update_baseline_path.c_str(),
              files[0].c_str(), kCalibrationKey);
  return kExitOk;
}

int gate(int argc, const char* const* argv) {
  GateOptions o;
  std::string time_tol = "3%", dispersion, clock_tol = "5%", energy_tol = "5%";
  std::vector<std::string> counter_tols;
  std::vector<std::string> maps;
  std::vector<std::string> calibrate_files;
  CLI::App app{"fa-bench gate: compare a result file with a baseline (CI performance gate)",
               "fa-bench gate"};
  app.add_option("--baseline", o.baseline_path, "the baseline result file (fa-bench --json)");
  app.add_option("--current", o.current_path, "the result file of the run under test");
  app.add_option("--calibrate", calibrate_files,
                 "FILE...: two or more runs of one build; learns per-row tolerances and writes "
                 "the first file with them as the baseline (--update-baseline FILE)")
      ->expected(2, 1000);
  auto* ctol = app.add_option(
      "--counter-tolerance", counter_tols,
      "a counter (dram_bytes, l2_bytes, tensor_flops, instructions) regresses above baseline x "
      "(1 + this): X sets all four, NAME=X one (default 2%, l2_bytes 5%; overrides a "
      "calibration); repeatable");
  auto* ttol = app.add_option(
      "--time-tolerance", time_tol,
      "the median change (time and cycles) that counts as slower or faster (default 3%; "
      "overrides a calibration)");
  app.add_option("--max-dispersion", dispersion,
                 "spread (IQR/median) above which a row gets a note (default 5%)");
  app.add_option("--clock-tolerance", clock_tol,
                 "SM clock difference that is noted on a row (default 5%)");
  app.add_option("--min-samples", o.min_samples,
                 "fewer timing samples than this in either file: exit 2 (default 5)")
      ->check(CLI::Range(5, 1000000));
  app.add_flag("--strict", o.strict, "ambiguous time results fail (exit 1) instead of warning");
  app.add_flag("--gate-peers", o.gate_peers,
               "peer rows (cuDNN) fail like ours; by default a peer's change is reported as a "
               "change of the environment");
  app.add_flag("--gate-energy", o.gate_energy,
               "also compare the energy per launch (NVML's counter; docs/energy.md): a row "
               "regresses above baseline x (1 + --energy-tolerance); a row without it in either "
               "file cannot be compared (exit 2, or a warning with --allow-missing)");
  auto* etol = app.add_option(
      "--energy-tolerance", energy_tol,
      "with --gate-energy: the energy change that counts as a regression (default 5%; overrides "
      "a calibration)");
  app.add_flag("--time-only", o.time_only,
               "do not compare counters (and accept files or a baseline without them)");
  app.add_flag(
      "--allow-missing", o.allow_missing,
      "baseline rows missing from (or not measured in) the current run warn instead of erroring");
  app.add_flag("--allow-device-mismatch", o.allow_device_mismatch,
               "compare files from different GPU models");
  app.add_option("--map-variant", maps,
                 "CURRENT=BASELINE: compare the current rows CURRENT selects with the baseline row "
                 "BASELINE selects in each configuration; a selector is a variant, optionally "
                 "with @BrxBc tiles and ~value option values (e.g. fa2@64x64=fa2, "
                 "fa2~heads=fa2~blocks); repeatable");
  app.add_option("--update-baseline", o.update_baseline_path,
                 "write the current file here as the new baseline (unless it failed, is "
                 "unmeasured or has no counters)");
  app.add_option("--markdown", o.markdown_path,
                 "write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)");
  app.add_option("--junit", o.junit_path, "write JUnit XML, one test case per row");
  app.add_option("--github-benchmark", o.github_benchmark_path,
                 "write the current figures as github-action-benchmark customSmallerIsBetter JSON");
  app.add_option("--bmf", o.bmf_path,
                 "write the current figures in Bencher's metric format (BMF JSON)");
  app.footer(
      "Rows match by (GPU model, B, H, N, d, causal, dtype, and the row spec: variant, direction, "
      "kernel configuration, option values). Time: slower when the "
      "median ratio exceeds 1 + tolerance in time and in SM cycles, confirmed by a Mann-Whitney U "
      "test (p < 0.01) and the 99% bootstrap interval of the ratio lying above the tolerance; "
      "past the tolerance but unconfirmed is ambiguous (a warning saying what to rerun). Peers "
      "are sentinels of the environment. See docs/ci-gates.md.\n"
      "Exit codes: 0 pass (warnings allowed), 1 a regression or a failed variant, 2 bad input or "
      "the comparison cannot be made.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: gate: %s\n", e.what());
    return kExitBadInput;
  }
  try {
    o.counter_tolerance_given = ctol->count() > 0;
    o.time_tolerance_given = ttol->count() > 0;
    for (const auto& t : counter_tols) {
      const auto eq = t.find('=');
      if (eq == std::string::npos) {
        o.counter_tolerance = parse_fraction("--counter-tolerance", t);
        o.counter_tolerance_for.clear();
        continue;
      }
      const std::string name = t.substr(0, eq);
      if (name != "dram_bytes" && name != "l2_bytes" && name != "tensor_flops" &&
          name != "instructions") {
        throw BadGateInput{
            fmt::format("--counter-tolerance: unknown counter '{}' (accepted: "
                        "dram_bytes, l2_bytes, tensor_flops, instructions)",
                        name)};
      }
      o.counter_tolerance_for[name] = parse_fraction("--counter-tolerance", t.substr(eq + 1));
    }
    o.time_tolerance = parse_fraction("--time-tolerance", time_tol);
    o.energy_tolerance_given = etol->count() > 0;
    if (o.energy_tolerance_given && !o.gate_energy) {
      throw BadGateInput{
          "--energy-tolerance: only with --gate-energy (accepted: add --gate-energy)"};
    }
    o.energy_tolerance = parse_fraction("--energy-tolerance", energy_tol);
    if (!dispersion.empty()) o.max_dispersion = parse_fraction("--max-dispersion", dispersion);
    o.clock_tolerance = parse_fraction("--clock-tolerance", clock_tol);
    for (const auto& m : maps) {
      const auto eq = m.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
        throw BadGateInput{
            fmt::format("--map-variant: '{}' (accepted: CURRENT=BASELINE, e.g. fa2@64x64=fa2)", m)};
      }
      RowSelector sel;
      for (const std::string& side : {m.substr(0, eq), m.substr(eq + 1)}) {
        if (!parse_row_selector(side, &sel)) {
          throw BadGateInput{fmt::format(
              "--map-variant: '{}' is not a row selector (accepted: VARIANT[@BrxBc][~value...], "
              "e.g. fa2@64x64=fa2)",
              side)};
        }
      }
      o.variant_map[m.substr(0, eq)] = m.substr(eq + 1);
    }
    if (!calibrate_files.empty()) return calibrate_command(calibrate_files, o);
    if (o.current_path.empty()) {
      throw BadGateInput{"--current is required (or --calibrate FILE... to calibrate a baseline)"};
    }
    if (o.baseline_path.empty() && o.update_baseline_path.empty()) {
      throw BadGateInput{"--baseline is required (or --update-baseline alone, to start one)"};
    }

    const std::string cur_text = read_text(o.current_path);
    const RunResult cur = from_json_text(cur_text, o.current_path);
    if (o.baseline_path.empty()) {  // start a baseline: check the run, copy it
      if (const std::string why = unfit_as_baseline(cur, o.time_only); !why.empty()) {
        std::fprintf(stderr, "error: %s: not written as a baseline: %s\n", o.current_path.c_str(),
                     why.c_str());
        return kExitBadInput;
      }
      write_output(o.update_baseline_path, cur_text, "--update-baseline");
      std::printf(
          "baseline written: %s (from %s; no calibration: fa-bench gate --calibrate adds "
          "per-row tolerances)\n",
          o.update_baseline_path.c_str(), o.current_path.c_str());
      return kExitOk;
    }
    const std::string base_text = read_text(o.baseline_path);
    const RunResult base = from_json_text(base_text, o.baseline_path);
    try {
      o.calibration = read_calibration(base_text, o.baseline_path);
    } catch (const std::invalid_argument& e) {
      throw BadGateInput{e.what()};
    }

    const GateReport rep = run_gate(base, cur, o, o.baseline_path, o.current_path);
    std::fputs(gate_table(rep, o).c_str(), stdout);
    write_output(o.markdown_path, gate_markdown(rep, o), "--markdown");
    write_output(o.junit_path, gate_junit(rep, o), "--junit");
    write_output(o.github_benchmark_path, gate_github_benchmark(rep), "--github-benchmark");
    write_output(o.bmf_path, gate_bmf(rep), "--bmf");
    if (!o.update_baseline_path.empty()) {
      const std::string why = rep.exit_code == 2 ? "the comparison could not be made"
                                                 : unfit_as_baseline(cur, o.time_only);
      if (why.empty()) {
        write_output(o.update_baseline_path, cur_text, "--update-baseline");
        std::printf("baseline written: %s (from %s%s)\n", o.update_baseline_path.c_str(),
                    o.current_path.c_str(),
                    o.calibration ? "; the old baseline's calibration is not carried over: run "
                                    "fa-bench gate --calibrate on runs of the new build"
                                  : "");
      } else {
        std::fprintf(stderr, "warning: --update-baseline: not written: %s\n", why.c_str());
      }
    }
    return rep.exit_code;
  } catch (const BadGateInput& e) {
    std::fprintf(stderr, "error: %s\n", e.message.c_str());
    return kExitBadInput;
  } catch (const ResultFileError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace

int gate_main(int argc, const char* const* argv) {
  try {
    return gate(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: gate: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace fa::bench
