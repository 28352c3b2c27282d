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

// The current run must be fit to be a baseline: measured, complete, nothing failed.
std::string unfit_as_baseline(const RunResult& r) {
  if (!r.device || r.settings.model_only) return "it has no measurements (no GPU)";
  if (!r.complete) return "the run was interrupted";
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) {
      if (v.status == Status::failed || v.status == Status::error) {
        return fmt::format("{} {}", v.variant,
                           v.status == Status::failed ? "failed verification" : "errored");
      }
    }
  }
  return "";
}

int gate(int argc, const char* const* argv) {
  GateOptions o;
  std::string time_tol = "5%", dispersion, clock_tol = "5%";
  std::vector<std::string> counter_tols;
  std::vector<std::string> maps;
  CLI::App app{"fa-bench gate: compare a result file with a baseline (CI performance gate)",
               "fa-bench gate"};
  app.add_option("--baseline", o.baseline_path, "the baseline result file (fa-bench --json)");
  app.add_option("--current", o.current_path, "the result file of the run under test")->required();
  app.add_option(
      "--counter-tolerance", counter_tols,
      "a counter (dram_bytes, l2_bytes, tensor_flops, instructions) regresses above baseline x "
      "(1 + this): X sets all four, NAME=X one (default 2%, l2_bytes 5%); repeatable");
  app.add_option("--time-tolerance", time_tol,
                 "median gap that counts as slower or faster (default 5%)");
  app.add_option(
      "--max-dispersion", dispersion,
      "relative IQR above which a file's samples are too noisy to decide (default: the time "
      "tolerance)");
  app.add_option("--clock-tolerance", clock_tol,
                 "SM clock difference that flags a row (default 5%)");
  app.add_option("--min-samples", o.min_samples,
                 "fewer timing samples than this: ambiguous (default 10)")
      ->check(CLI::Range(1, 1000000));
  app.add_flag("--strict", o.strict, "ambiguous time results fail (exit 1) instead of warning");
  app.add_flag(
      "--allow-missing", o.allow_missing,
      "baseline rows missing from (or not measured in) the current run warn instead of erroring");
  app.add_flag("--allow-device-mismatch", o.allow_device_mismatch,
               "compare files from different GPU models");
  app.add_option("--map-variant", maps,
                 "CURRENT=BASELINE: compare the current row CURRENT with the baseline row BASELINE "
                 "(e.g. fa2@64x64=fa2); repeatable");
  app.add_option(
      "--update-baseline", o.update_baseline_path,
      "write the current file here as the new baseline (unless it failed or is unmeasured)");
  app.add_option("--markdown", o.markdown_path,
                 "write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)");
  app.add_option("--junit", o.junit_path, "write JUnit XML, one test case per row");
  app.add_option("--github-benchmark", o.github_benchmark_path,
                 "write the current figures as github-action-benchmark customSmallerIsBetter JSON");
  app.add_option("--bmf", o.bmf_path,
                 "write the current figures in Bencher's metric format (BMF JSON)");
  app.footer(
      "Rows match by (GPU model, variant, B, H, N, d, causal, dtype). Time: slower when the "
      "current "
      "median exceeds the baseline's by more than the tolerance, every current sample (min) lies "
      "above "
      "the baseline's q3, both spreads are under the limit and the SM clocks agree; otherwise "
      "ambiguous "
      "(a warning). See docs/ci-gates.md.\n"
      "Exit codes: 0 pass (warnings allowed), 1 a regression or a failed variant, 2 bad input or "
      "the "
      "comparison cannot be made.");
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
    if (!dispersion.empty()) o.max_dispersion = parse_fraction("--max-dispersion", dispersion);
    o.clock_tolerance = parse_fraction("--clock-tolerance", clock_tol);
    for (const auto& m : maps) {
      const auto eq = m.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
        throw BadGateInput{
            fmt::format("--map-variant: '{}' (accepted: CURRENT=BASELINE, e.g. fa2@64x64=fa2)", m)};
      }
      o.variant_map[m.substr(0, eq)] = m.substr(eq + 1);
    }
    if (o.baseline_path.empty() && o.update_baseline_path.empty()) {
      throw BadGateInput{"--baseline is required (or --update-baseline alone, to start one)"};
    }

    const std::string cur_text = read_text(o.current_path);
    const RunResult cur = from_json_text(cur_text, o.current_path);
    if (o.baseline_path.empty()) {  // start a baseline: check the run, copy it
      if (const std::string why = unfit_as_baseline(cur); !why.empty()) {
        std::fprintf(stderr, "error: %s: not written as a baseline: %s\n", o.current_path.c_str(),
                     why.c_str());
        return kExitBadInput;
      }
      write_output(o.update_baseline_path, cur_text, "--update-baseline");
      std::printf("baseline written: %s (from %s)\n", o.update_baseline_path.c_str(),
                  o.current_path.c_str());
      return kExitOk;
    }
    const RunResult base = read_result_file(o.baseline_path);

    const GateReport rep = run_gate(base, cur, o, o.baseline_path, o.current_path);
    std::fputs(gate_table(rep, o).c_str(), stdout);
    write_output(o.markdown_path, gate_markdown(rep, o), "--markdown");
    write_output(o.junit_path, gate_junit(rep, o), "--junit");
    write_output(o.github_benchmark_path, gate_github_benchmark(rep), "--github-benchmark");
    write_output(o.bmf_path, gate_bmf(rep), "--bmf");
    if (!o.update_baseline_path.empty()) {
      const std::string why =
          rep.exit_code == 2 ? "the comparison could not be made" : unfit_as_baseline(cur);
      if (why.empty()) {
        write_output(o.update_baseline_path, cur_text, "--update-baseline");
        std::printf("baseline written: %s (from %s)\n", o.update_baseline_path.c_str(),
                    o.current_path.c_str());
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
