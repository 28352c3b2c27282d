// fa-bench gate: compares a current result file with a baseline and decides, per row, whether the
// change made attention slower (time: a two-sample test on every repetition of both files, in
// time and in SM cycles, against an effect-size tolerance) or made it move more bytes / issue more
// work (counters, nearly deterministic). Peers (cuDNN) are sentinels of the environment.
// docs/ci-gates.md explains the rules; nothing here touches a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/result.hpp"

namespace fa::bench {

// The counters the gate compares, in output order.
inline const char* const kGateCounters[] = {"dram_bytes", "l2_bytes", "tensor_flops",
                                            "instructions"};

// Per-row tolerances learned from several same-build runs (`fa-bench gate --calibrate`), stored
// in the baseline under the optional top-level key "gate_calibration" (docs/ci-gates.md).
struct Calibration {
  std::vector<std::string> runs;  // the files it was learned from
  // fa-bench-gate-calibration/1 keyed rows by their fa-bench/1 name ("fa2 B=4 ...", "fa2@64x64
  // B=4 ..."): looked up by the row's label (row_label) when this is true.
  bool legacy_keys = false;
  // row key (row_key()) -> metric ("time", "dram_bytes", ...) -> tolerance (0.03 = 3%)
  std::map<std::string, std::map<std::string, double>> tolerances;
  // the same keys: the largest change seen between any two of the runs
  std::map<std::string, std::map<std::string, double>> observed;
};

inline constexpr const char* kCalibrationKey = "gate_calibration";
inline constexpr const char* kCalibrationSchema = "fa-bench-gate-calibration/2";
inline constexpr const char* kCalibrationSchemaV1 = "fa-bench-gate-calibration/1";
// Calibrated tolerance = max(floor, kCalibrationFactor x the largest change between two runs).
inline constexpr double kCalibrationFactor = 2.0;
inline constexpr double kCalibrationFloorTime = 0.02;
inline constexpr double kCalibrationFloorCounter = 0.02;

struct GateOptions {
  std::string baseline_path, current_path;
  // Counters: a counter regresses above baseline x (1 + tolerance).
  double counter_tolerance = 0.02;
  // Per counter, over counter_tolerance. L2 bytes: 5%, because two runs of the same build on the
  // H200 differed by 2.3% in SM->L2 sectors (fa2, N=4096 d=64; docs/ci-gates.md).
  std::map<std::string, double> counter_tolerance_for{{"l2_bytes", 0.05}};
  bool counter_tolerance_given = false;  // set on the command line: overrides a calibration
  // Time: the effect size (median ratio, in time and in cycles) that counts as slower / faster.
  double time_tolerance = 0.03;
  bool time_tolerance_given = false;  // set on the command line: overrides a calibration
  double alpha = 0.01;                // Mann-Whitney U significance level (two-sided)
  double confidence = 0.99;           // bootstrap interval of the median ratio
  int bootstrap_resamples = 2000;     // fixed seed: the same files give the same decision
  double max_dispersion = -1;         // spread (IQR/median) above which a row gets a note (<0: 5%)
  double clock_tolerance = 0.05;      // relative SM-clock difference that is noted on the row
  int min_samples = 5;                // fewer timing samples in either file: exit 2
  bool strict = false;                // ambiguous time results fail
  bool gate_peers = false;            // peers (cuDNN) fail like our variants instead of being noted
  bool time_only = false;             // counters not compared (and not required)
  // --gate-energy: energy per launch (the counter's, docs/energy.md) regresses above baseline x
  // (1 + energy_tolerance); off by default, since a window's energy also moves with the board's
  // temperature.
  bool gate_energy = false;
  double energy_tolerance = 0.05;
  bool energy_tolerance_given = false;  // set on the command line: overrides a calibration
  bool allow_missing =
      false;  // baseline rows absent from (or not measured in) the current run warn
  bool allow_device_mismatch = false;
  // --map-variant: current row selector -> baseline row selector (parse_row_selector).
  std::map<std::string, std::string> variant_map;
  std::optional<Calibration> calibration;  // from the baseline file
  std::string update_baseline_path, markdown_path, junit_path, github_benchmark_path, bmf_path;

  double tolerance_for(const std::string& counter) const {
    auto it = counter_tolerance_for.find(counter);
    return it == counter_tolerance_for.end() ? counter_tolerance : it->second;
  }
};

// Time decision for one row.
enum class TimeVerdict {
  same,          // the effect is within the tolerance
  slower,        // a regression: fails
  faster,        // an improvement: reported
  ambiguous,     // the median moved past the tolerance but the data cannot confirm it: warns
  maybe_faster,  // median faster beyond tolerance but not confirmed: reported, never fails
  not_compared,  // no timing on one side (see the row's problems)
};
const char* to_string(TimeVerdict v);

// Robust summary of one file's samples for one row.
struct TimeSide {
  int n = 0;
  double median = 0, min = 0, q1 = 0, q3 = 0;
  double dispersion = 0;  // (q3 - q1) / median
  double clock_mhz = -1;  // mean of the recorded SM clocks before and after; -1 unknown
};

// One measure (time, or cycles = time x SM clock) of a row compared between the files.
struct RatioTest {
  double ratio = 1;               // median(current) / median(baseline)
  double lo = 1, hi = 1;          // bootstrap interval of the ratio (GateOptions::confidence)
  double p = 1;                   // Mann-Whitney U, two-sided
  bool slower_confirmed = false;  // p < alpha and lo > 1 + tolerance
  bool faster_confirmed = false;  // p < alpha and hi < 1 - tolerance
};

struct TimeComparison {
  TimeSide base, cur;
  double gap = 0;  // cur.median / base.median - 1 (time)
  RatioTest time;
  std::optional<RatioTest> cycles;  // both SM clocks known
  double effect = 0;        // the change the verdict rests on (ratio - 1; see docs/ci-gates.md)
  double tolerance = 0;     // the effect size that counts
  bool calibrated = false;  // tolerance from the baseline's calibration
  bool noisy = false;       // a side's spread above the limit (a note)
  bool clock_flag = false;  // SM clocks differ by more than clock_tolerance (a note)
  double clock_diff = 0;    // cur / base - 1 (0 when unknown)
  TimeVerdict verdict = TimeVerdict::not_compared;
  std::string why;    // one phrase: what decided it
  std::string rerun;  // for ambiguous: what to rerun
};

// The counters the gate compares (bytes and work: nearly deterministic), and under --gate-energy
// the energy per launch.
struct CounterComparison {
  std::string name;  // dram_bytes | l2_bytes | tensor_flops | instructions | energy_mj
  double base = 0, cur = 0;
  double change = 0;  // cur / base - 1
  double tolerance = 0;
  bool calibrated = false;
  bool regressed = false;
  bool improved = false;  // below baseline by more than the tolerance
};

enum class RowOutcome {
  pass,         // nothing worse (may have improved)
  improved,     // at least one gate better beyond its tolerance, none worse
  warning,      // ambiguous time; passes unless --strict
  regression,   // exit 1
  failed,       // the current run's variant failed verification or errored: exit 1
  error,        // the comparison cannot be made (missing row, no measurements): exit 2
  new_row,      // only in the current run: reported
  environment,  // a peer changed: the environment (driver, library, clocks) did; --gate-peers fails
};
const char* to_string(RowOutcome o);

struct GateRow {
  // Identity: the device name is checked per file; the rest of the key is the shape and the
  // baseline row's spec (variant, direction, kernel configuration, options).
  RowSpec spec;              // the baseline's (the current run's for a new row)
  std::string variant;       // the row's label in the current run (row_label)
  std::string base_variant;  // its label in the baseline (differs under --map-variant)
  Shape shape;
  bool peer = false;
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
  std::vector<std::string> environment;  // what differs between the two files' environments
  std::vector<GateRow> rows;
  int exit_code = 0;
  int count(RowOutcome o) const;
  bool strict = false;
  bool calibrated = false;
};

// "fa2 forward 128x64 s2 block_order=blocks B=4 H=32 N=4096 d=64 causal=0 bf16": the key of a
// row in a calibration (fa-bench-gate-calibration/2): the spec, then the shape.
std::string row_key(const Shape& s, const RowSpec& spec);
// The fa-bench-gate-calibration/1 key: a row's name (now its label), then the shape.
std::string legacy_row_key(const Shape& s, const std::string& label);

// Which rows --map-variant names: "fa2" (every fa2 row), "fa2@64x64" (its rows of those tiles),
// "fa2~heads" or "fa2@64x64~heads" (also an option set to that value). User input, written as
// the console labels rows; a result file's rows are never named this way.
struct RowSelector {
  std::string variant;
  std::optional<Tiles> tiles;
  std::vector<std::string> option_values;
  bool selects(const RowSpec& spec) const;
};
// False when `text` is not a selector (empty variant, tiles not BrxBc of positive integers).
bool parse_row_selector(const std::string& text, RowSelector* out);

// The robust summary of one row's samples (non-finite and non-positive samples dropped).
TimeSide side_of(const Timing& t);

// Mann-Whitney U test, two-sided p-value (exact without ties for small samples, else the normal
// approximation with tie and continuity corrections, as scipy.stats.mannwhitneyu).
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

// Percentile bootstrap interval of median(cur) / median(base): `resamples` resamples of each
// side, a fixed seed, so the same samples always give the same interval.
std::pair<double, double> bootstrap_median_ratio(const std::vector<double>& base,
                                                 const std::vector<double>& cur, double confidence,
                                                 int resamples,
                                                 std::uint64_t seed = 0x6a09e667f3bcc909ull);

// Compares one row's timing samples (exposed for tests). `tolerance` < 0: o.time_tolerance.
TimeComparison compare_time(const Timing& base, const Timing& cur, const GateOptions& o,
                            double tolerance = -1);

// The name of the energy per launch among a gate row's comparisons and exported figures.
inline constexpr const char* kGateEnergy = "energy_mj";

// The counters gated, read from the raw counter values (absent: not gated).
std::map<std::string, double> gated_counters(const VariantResult& r);

// Why a row of status ok cannot be trusted (non-finite or non-positive samples, impossible
// clocks, negative counters), or "" when it can.
std::string impossible_values(const VariantResult& r);

// The whole comparison. Sets exit_code: 0 pass, 1 regression/failure, 2 cannot compare.
GateReport run_gate(const RunResult& base, const RunResult& cur, const GateOptions& o,
                    const std::string& base_source, const std::string& cur_source);

// ---- calibration ----

// Learns per-row tolerances from several runs of one build. Throws std::invalid_argument with one
// line when the runs cannot be used (fewer than two, different GPUs or settings, rows missing).
Calibration calibrate(const std::vector<RunResult>& runs, const std::vector<std::string>& sources);

// The calibration as the JSON text of the "gate_calibration" value, and the baseline document
// (the first run's text) with it added under that key.
std::string calibrated_baseline(const std::string& first_run_text, const Calibration& c);

// Reads "gate_calibration" from a baseline's JSON text: nullopt when absent; throws
// std::invalid_argument naming the source and the key when present but malformed.
std::optional<Calibration> read_calibration(const std::string& json_text,
                                            const std::string& source);

// `fa-bench gate ...` (argv[0] is "gate"). Returns the process exit code.
int gate_main(int argc, const char* const* argv);

}  // namespace fa::bench
