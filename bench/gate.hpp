// fa-bench gate: compares a current result file with a baseline and decides, per row, whether the
// change made attention slower (time, noise-aware) or made it move more bytes / issue more work
// (counters, nearly deterministic). docs/ci-gates.md explains the rules; nothing here touches a
// GPU.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/result.hpp"

namespace fa::bench {

struct GateOptions {
  std::string baseline_path, current_path;
  double counter_tolerance = 0.02;  // a counter regresses above baseline x (1 + this)
  // Per counter, over counter_tolerance. L2 bytes: 5%, because two runs of the same build on the
  // H200 differed by 2.3% in SM->L2 sectors (fa2, N=4096 d=64; docs/ci-gates.md).
  std::map<std::string, double> counter_tolerance_for{{"l2_bytes", 0.05}};
  double tolerance_for(const std::string& counter) const {
    auto it = counter_tolerance_for.find(counter);
    return it == counter_tolerance_for.end() ? counter_tolerance : it->second;
  }
  double time_tolerance = 0.05;  // relative median gap that counts as faster / slower
  double max_dispersion =
      -1;  // relative IQR above which a file is too noisy (<0: = time_tolerance)
  double clock_tolerance = 0.05;  // relative SM-clock difference that flags a row
  int min_samples = 10;           // fewer timing samples: ambiguous
  bool strict = false;            // ambiguous time results fail
  bool allow_missing =
      false;  // baseline rows absent from (or not measured in) the current run warn
  bool allow_device_mismatch = false;
  std::map<std::string, std::string> variant_map;  // current row name -> baseline row name
  std::string update_baseline_path, markdown_path, junit_path, github_benchmark_path, bmf_path;
};

// Time decision for one row (GateOptions::time_tolerance etc.).
enum class TimeVerdict {
  same,          // |gap| <= tolerance, both files quiet enough
  slower,        // a regression: fails
  faster,        // an improvement: reported
  ambiguous,     // cannot tell (noise, too few samples, clocks differ): warns; --strict fails
  maybe_faster,  // median faster beyond tolerance but not separated: reported, never fails
  not_compared,  // no timing on one side (see the row's problems)
};
const char* to_string(TimeVerdict v);

// Robust summary of one file's samples for one row.
struct TimeSide {
  int n = 0;
  double median = 0, min = 0, q1 = 0, q3 = 0;
  double dispersion = 0;  // (q3 - q1) / median
  int clock_mhz = -1;     // min(before, after) of the recorded SM clocks; -1 unknown
};

struct TimeComparison {
  TimeSide base, cur;
  double gap = 0;           // cur.median / base.median - 1
  bool separated = false;   // [min, q3] intervals disjoint, in the direction of the gap
  bool noisy = false;       // a side's dispersion above the limit
  bool clock_flag = false;  // SM clocks differ by more than clock_tolerance
  double clock_diff = 0;    // cur / base - 1 (0 when unknown)
  TimeVerdict verdict = TimeVerdict::not_compared;
  std::string why;  // one phrase: what decided it
};

// The counters the gate compares (bytes and work: nearly deterministic).
struct CounterComparison {
  std::string name;  // dram_bytes | l2_bytes | tensor_flops | instructions
  double base = 0, cur = 0;
  double change = 0;  // cur / base - 1
  bool regressed = false;
  bool improved = false;  // below baseline by more than the tolerance
};

enum class RowOutcome {
  pass,        // nothing worse (may have improved)
  improved,    // at least one gate better beyond its tolerance, none worse
  warning,     // ambiguous time or a flag; passes unless --strict
  regression,  // exit 1
  failed,      // the current run's variant failed verification or errored: exit 1
  error,       // the comparison cannot be made (missing row, no measurements): exit 2
  new_row,     // only in the current run: reported
};
const char* to_string(RowOutcome o);

struct GateRow {
  // Identity: the device name is checked per file; this is the rest of the key.
  std::string variant;       // as in the current run
  std::string base_variant;  // as in the baseline (differs under --map-variant)
  Shape shape;
  std::string config_label;  // "B=4 H=32 N=4096 d=64 causal bf16"
  RowOutcome outcome = RowOutcome::pass;
  std::optional<TimeComparison> time;
  std::vector<CounterComparison> counters;
  std::optional<TimeSide> cur_time;            // the current run's, for the exports
  std::map<std::string, double> cur_counters;  // likewise
  std::vector<std::string> problems;           // errors (exit 2) or failures, one sentence each
  std::vector<std::string> notes;              // warnings and remarks
};

struct GateReport {
  std::string baseline_source, current_source;
  std::string device_base, device_cur;
  std::string revision_base, revision_cur;
  std::vector<std::string> file_problems;  // errors not tied to a row (exit 2)
  std::vector<std::string> file_notes;
  std::vector<GateRow> rows;
  int exit_code = 0;
  int count(RowOutcome o) const;
  bool strict = false;
};

// The robust summary of one row's samples (non-finite and non-positive samples dropped).
TimeSide side_of(const Timing& t);

// Compares one row's timing samples (exposed for tests).
TimeComparison compare_time(const Timing& base, const Timing& cur, const GateOptions& o);

// The counters gated, read from the raw counter values (absent: not gated).
std::map<std::string, double> gated_counters(const VariantResult& r);

// The whole comparison. Sets exit_code: 0 pass, 1 regression/failure, 2 cannot compare.
GateReport run_gate(const RunResult& base, const RunResult& cur, const GateOptions& o,
                    const std::string& base_source, const std::string& cur_source);

// `fa-bench gate ...` (argv[0] is "gate"). Returns the process exit code.
int gate_main(int argc, const char* const* argv);

}  // namespace fa::bench
