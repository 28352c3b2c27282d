// The gate's decisions: row matching, the time rule (Mann-Whitney U and a bootstrap interval of
// the median ratio, in time and in SM cycles, against an effect-size tolerance), the counter
// rule, peers as sentinels, calibration, the exit code. Outputs (table, Markdown, JUnit, exports)
// are in bench/gate_outputs.cpp; the command line in bench/gate_cli.cpp.
#include "bench/gate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

#include "profiler/counters.hpp"

namespace fa::bench {

const char* to_string(TimeVerdict v) {
  switch (v) {
    case TimeVerdict::same:
      return "same";
    case TimeVerdict::slower:
      return "slower";
    case TimeVerdict::faster:
      return "faster";
    case TimeVerdict::ambiguous:
      return "ambiguous";
    case TimeVerdict::maybe_faster:
      return "faster?";
    case TimeVerdict::not_compared:
      return "-";
  }
  return "?";
}

const char* to_string(RowOutcome o) {
  switch (o) {
    case RowOutcome::pass:
      return "pass";
    case RowOutcome::improved:
      return "improved";
    case RowOutcome::warning:
      return "warning";
    case RowOutcome::regression:
      return "REGRESSION";
    case RowOutcome::failed:
      return "FAILED";
    case RowOutcome::error:
      return "ERROR";
    case RowOutcome::new_row:
      return "new";
    case RowOutcome::environment:
      return "env change";
  }
  return "?";
}

int GateReport::count(RowOutcome o) const {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [&](const GateRow& r) { return r.outcome == o; }));
}

std::string legacy_row_key(const Shape& s, const std::string& label) {
  return fmt::format("{} {} causal={} {}", label, shape_text(s), s.causal ? 1 : 0,
                     to_string(s.dtype));
}

std::string row_key(const Shape& s, const RowSpec& spec) {
  return legacy_row_key(s, to_string(spec));
}

bool RowSelector::selects(const RowSpec& spec) const {
  if (spec.variant != variant) return false;
  if (tiles && !(spec.kernel_config && spec.tiles() == *tiles)) return false;
  for (const auto& want : option_values) {
    const bool found = std::any_of(spec.options.begin(), spec.options.end(), [&](const auto& kv) {
      return fa::to_string(kv.second) == want;
    });
    if (!found) return false;
  }
  return true;
}

bool parse_row_selector(const std::string& text, RowSelector* out) {
  RowSelector sel;
  const std::size_t cut = text.find_first_of("@~");
  sel.variant = text.substr(0, cut);
  if (sel.variant.empty()) return false;
  std::string rest = cut == std::string::npos ? "" : text.substr(cut);
  if (!rest.empty() && rest[0] == '@') {
    const std::size_t end = rest.find('~');
    const std::string t = rest.substr(1, end == std::string::npos ? std::string::npos : end - 1);
    int q = 0, kv = 0;
    char x = 0;
    int used = 0;
    if (std::sscanf(t.c_str(), "%d%c%d%n", &q, &x, &kv, &used) != 3 || x != 'x' ||
        static_cast<std::size_t>(used) != t.size() || q <= 0 || kv <= 0) {
      return false;
    }
    sel.tiles = Tiles{q, kv};
    rest = end == std::string::npos ? "" : rest.substr(end);
  }
  std::size_t at = 0;
  while (at < rest.size()) {  // "~value" ...
    const std::size_t next = rest.find('~', at + 1);
    const std::string v =
        rest.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (v.empty()) return false;
    sel.option_values.push_back(v);
    at = next == std::string::npos ? rest.size() : next;
  }
  *out = std::move(sel);
  return true;
}

namespace {

double pct(double x) {
  return 100.0 * x;
}

std::vector<double> usable_samples(const Timing& t) {
  std::vector<double> xs;
  xs.reserve(t.samples_ms.size());
  for (double x : t.samples_ms) {
    if (std::isfinite(x) && x > 0) xs.push_back(x);
  }
  return xs;
}

// The type-7 median (as profiler/stats.cpp); reorders xs.
double median_inplace(std::vector<double>& xs) {
  const std::size_t n = xs.size();
  const std::size_t k = n / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
  const double hi = xs[k];
  if (n % 2) return hi;
  const double lo = *std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k));
  return 0.5 * (lo + hi);
}

double quantile_sorted(const std::vector<double>& xs, double q) {
  const double pos = q * static_cast<double>(xs.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (xs[hi] - xs[lo]) * (pos - static_cast<double>(lo));
}

// SplitMix64: a small, fully specified generator, so the bootstrap is the same on every machine.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) {  // uniform in [0, n), from the top 53 bits
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return std::min(static_cast<std::size_t>(u * static_cast<double>(n)), n - 1);
  }
};

bool clock_known(int mhz) {
  return mhz > 0;
}

}  // namespace

TimeSide side_of(const Timing& t) {
  TimeSide s;
  std::vector<double> xs = usable_samples(t);
  s.n = static_cast<int>(xs.size());
  if (s.n > 0) {
    const SampleStats st = summarize(xs);
    s.median = st.median;
    s.min = st.min;
    s.q1 = st.q1;
    s.q3 = st.q3;
    s.dispersion = st.median > 0 ? (st.q3 - st.q1) / st.median : 0;
  }
  const int a = t.sm_clock_before_mhz, b = t.sm_clock_after_mhz;
  if (clock_known(a) && clock_known(b)) {
    s.clock_mhz = 0.5 * (a + b);  // the average over the timed loop, if the clock moved linearly
  } else if (clock_known(a) || clock_known(b)) {
    s.clock_mhz = std::max(a, b);
  }
  return s;
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0) return 1.0;
  std::vector<std::pair<double, int>> all;
  all.reserve(n1 + n2);
  for (double x : a) all.push_back({x, 0});
  for (double x : b) all.push_back({x, 1});
  std::sort(all.begin(), all.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  const std::size_t n = all.size();
  double rank_sum_a = 0, tie_term = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double avg_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rank_sum_a += avg_rank;
    }
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2);
  const double u = rank_sum_a - dn1 * (dn1 + 1) / 2;  // pairs with a > b
  if (tie_term == 0 && n1 * n2 <= 2500) {
    // Exact null distribution of U: p(m, n; u) = m/(m+n) p(m-1, n; u-n) + n/(m+n) p(m, n-1; u)
    // (the largest of the m+n values is an a, above all n b's, or a b).
    std::vector<std::vector<double>> prev(n2 + 1, std::vector<double>{1.0});  // m = 0
    for (std::size_t m = 1; m <= n1; ++m) {
      std::vector<std::vector<double>> cur(n2 + 1);
      cur[0] = {1.0};
      for (std::size_t k = 1; k <= n2; ++k) {
        std::vector<double> p(m * k + 1, 0.0);
        const double wa = static_cast<double>(m) / static_cast<double>(m + k);
        const double wb = static_cast<double>(k) / static_cast<double>(m + k);
        for (std::size_t v = 0; v < prev[k].size(); ++v) p[v + k] += wa * prev[k][v];
        for (std::size_t v = 0; v < cur[k - 1].size(); ++v) p[v] += wb * cur[k - 1][v];
        cur[k] = std::move(p);
      }
      prev = std::move(cur);
    }
    const std::vector<double>& dist = prev[n2];
    const auto ui = static_cast<std::size_t>(std::llround(u));
    double le = 0, ge = 0;
    for (std::size_t v = 0; v < dist.size(); ++v) {
      if (v <= ui) le += dist[v];
      if (v >= ui) ge += dist[v];
    }
    return std::min(1.0, 2 * std::min(le, ge));
  }
  const double mean = dn1 * dn2 / 2;
  const double var = dn1 * dn2 / 12 *
                     ((static_cast<double>(n) + 1) - tie_term / (static_cast<double>(n) * (n - 1)));
  if (!(var > 0)) return 1.0;  // every value equal
  const double z = std::max(0.0, std::fabs(u - mean) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

std::pair<double, double> bootstrap_median_ratio(const std::vector<double>& base,
                                                 const std::vector<double>& cur, double confidence,
                                                 int resamples, std::uint64_t seed) {
  if (base.empty() || cur.empty() || resamples < 1) return {NAN, NAN};
  SplitMix64 rng{seed};
  std::vector<double> rb(base.size()), rc(cur.size()), ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    for (auto& x : rb) x = base[rng.below(base.size())];
    for (auto& x : rc) x = cur[rng.below(cur.size())];
    ratios.push_back(median_inplace(rc) / median_inplace(rb));
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  return {quantile_sorted(ratios, tail), quantile_sorted(ratios, 1 - tail)};
}

namespace {

RatioTest ratio_test(const std::vector<double>& base, const std::vector<double>& cur,
                     const GateOptions& o, double tol) {
  RatioTest r;
  std::vector<double> b = base, c = cur;
  r.ratio = median_inplace(c) / median_inplace(b);
  // Fewer resamples for very long sample lists (thousands per row under --min-time), so a file
  // of many such rows is judged in seconds; the interval is then narrow anyway.
  const double n = static_cast<double>(base.size() + cur.size());
  const int resamples = std::clamp(static_cast<int>(2e7 / n), std::min(200, o.bootstrap_resamples),
                                   o.bootstrap_resamples);
  std::tie(r.lo, r.hi) = bootstrap_median_ratio(base, cur, o.confidence, resamples);
  r.p = mann_whitney_p(base, cur);
  r.slower_confirmed = r.p < o.alpha && r.lo > 1 + tol;
  r.faster_confirmed = r.p < o.alpha && r.hi < 1 - tol;
  return r;
}

std::string interval(const RatioTest& t) {
  return fmt::format("[{:+.1f}%, {:+.1f}%]", pct(t.lo - 1), pct(t.hi - 1));
}

// The repetitions that would narrow the interval enough: the width shrinks about as 1/sqrt(n).
int suggested_repetitions(int n) {
  const int want = std::max(100, 4 * n);
  return (want + 99) / 100 * 100;
}

}  // namespace

TimeComparison compare_time(const Timing& base, const Timing& cur, const GateOptions& o,
                            double tolerance) {
  TimeComparison c;
  c.base = side_of(base);
  c.cur = side_of(cur);
  const double tol = tolerance >= 0 ? tolerance : o.time_tolerance;
  c.tolerance = tol;
  const double limit = o.max_dispersion < 0 ? 0.05 : o.max_dispersion;
  const bool clocks = c.base.clock_mhz > 0 && c.cur.clock_mhz > 0;
  if (clocks) {
    c.clock_diff = c.cur.clock_mhz / c.base.clock_mhz - 1;
    c.clock_flag = std::fabs(c.clock_diff) > o.clock_tolerance;
  }
  if (c.base.n == 0 || c.cur.n == 0) {
    c.verdict = TimeVerdict::not_compared;
    c.why = "no usable timing samples";
    return c;
  }
  if (c.base.n < o.min_samples || c.cur.n < o.min_samples) {
    c.verdict = TimeVerdict::not_compared;
    c.why = fmt::format("too few samples ({} and {}; {} or more needed)", c.base.n, c.cur.n,
                        o.min_samples);
    return c;
  }
  c.gap = c.cur.median / c.base.median - 1;
  c.noisy = c.base.dispersion > limit || c.cur.dispersion > limit;
  const std::vector<double> xb = usable_samples(base), xc = usable_samples(cur);
  c.time = ratio_test(xb, xc, o, tol);
  if (clocks) {
    // Cycles = time x SM clock: the clock ratio scales every current sample.
    const double k = c.cur.clock_mhz / c.base.clock_mhz;
    std::vector<double> xk = xc;
    for (auto& x : xk) x *= k;
    c.cycles = ratio_test(xb, xk, o, tol);
  }
  // A slowdown must show in time and in cycles (a lower clock explains only its share; a clock
  // reading higher in the current file cannot make a regression of an unchanged time).
  const double slow = c.cycles ? std::min(c.time.ratio, c.cycles->ratio) : c.time.ratio;
  const double fast = c.cycles ? std::max(c.time.ratio, c.cycles->ratio) : c.time.ratio;
  const bool slow_confirmed = c.time.slower_confirmed && (!c.cycles || c.cycles->slower_confirmed);
  const bool fast_confirmed = c.time.faster_confirmed && (!c.cycles || c.cycles->faster_confirmed);
  const std::string measures =
      c.cycles ? fmt::format("time {:+.1f}%, cycles {:+.1f}%", pct(c.time.ratio - 1),
                             pct(c.cycles->ratio - 1))
               : fmt::format("time {:+.1f}% (clocks unknown)", pct(c.time.ratio - 1));
  const int reps = suggested_repetitions(std::max(c.base.n, c.cur.n));
  // The measure that decides (the one nearer to no change).
  const RatioTest& deciding =
      c.cycles && (slow > 1 ? c.cycles->ratio < c.time.ratio : c.cycles->ratio > c.time.ratio)
          ? *c.cycles
          : c.time;
  if (slow > 1 + tol) {
    c.effect = slow - 1;
    if (slow_confirmed) {
      c.verdict = TimeVerdict::slower;
      c.why = fmt::format("{}: {:.0f}% interval {} above +{:.1f}%, p = {:.2g}", measures,
                          pct(o.confidence), interval(deciding), pct(tol), deciding.p);
    } else {
      c.verdict = TimeVerdict::ambiguous;
      const RatioTest& weak = !c.time.slower_confirmed ? c.time : *c.cycles;
      c.why = fmt::format(
          "{} but not confirmed: {}", measures,
          weak.p >= o.alpha
              ? fmt::format("p = {:.2g} (not significant at {:.0f}%)", weak.p, pct(o.alpha))
              : fmt::format("the {:.0f}% interval {} reaches below +{:.1f}%", pct(o.confidence),
                            interval(weak), pct(tol)));
      c.rerun = fmt::format("rerun baseline and current with --repetitions {}", reps);
    }
  } else if (fast < 1 - tol) {
    c.effect = fast - 1;
    if (fast_confirmed) {
      c.verdict = TimeVerdict::faster;
      c.why = fmt::format("{}: {:.0f}% interval {} below -{:.1f}%", measures, pct(o.confidence),
                          interval(deciding), pct(tol));
    } else {
      c.verdict = TimeVerdict::maybe_faster;
      c.why = fmt::format("{} but not confirmed (interval {}, p = {:.2g})", measures,
                          interval(deciding), deciding.p);
    }
  } else {
    c.effect = slow > 1 ? slow - 1 : fast < 1 ? fast - 1 : 0;
    c.verdict = TimeVerdict::same;
    c.why = fmt::format("{} within {:.1f}%", measures, pct(tol));
    if (deciding.hi > 1 + tol) {
      c.why += fmt::format(" (interval reaches {:+.1f}%: --repetitions {} would narrow it)",
                           pct(deciding.hi - 1), reps);
    }
  }
  return c;
}

std::map<std::string, double> gated_counters(const VariantResult& r) {
  std::map<std::string, double> out;
  if (!r.counters || r.counters->status != "ok") return out;
  const auto& v = r.counters->values;
  auto have = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      auto it = v.find(n);
      if (it == v.end() || !std::isfinite(it->second)) return false;
    }
    return true;
  };
  const counters::Measured m = counters::interpret(v);
  if (have({"dram__bytes_read.sum", "dram__bytes_write.sum"})) out["dram_bytes"] = m.dram_bytes();
  if (have({counters::kSmFromL2Sectors, counters::kSmToL2Sectors}) ||
      have({counters::kL2SideReadSectors, counters::kL2SideWriteSectors})) {
    out["l2_bytes"] = m.l2_bytes();
  }
  if (have({"sm__ops_path_tensor_src_bf16_dst_fp32.sum"}) ||
      have({"sm__ops_path_tensor_src_fp16.sum"}) || have({"sm__ops_path_tensor_src_fp8.sum"})) {
    double t = 0;
    for (const char* n : {"sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                          "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp8.sum"}) {
      auto it = v.find(n);
      if (it != v.end() && std::isfinite(it->second)) t += it->second;
    }
    out["tensor_flops"] = t;
  }
  if (have({"sm__inst_executed.sum"})) {
    out["instructions"] = m.instructions;
  } else if (have({"smsp__inst_executed.sum"})) {
    out["instructions"] = v.at("smsp__inst_executed.sum");
  }
  return out;
}

std::string impossible_values(const VariantResult& r) {
  if (r.status != Status::ok) return "";
  if (!r.timing) return "status ok but no timing";
  const Timing& t = *r.timing;
  if (t.samples_ms.empty()) return "status ok but no timing samples";
  for (std::size_t i = 0; i < t.samples_ms.size(); ++i) {
    const double x = t.samples_ms[i];
    if (!std::isfinite(x) || x <= 0) {
      return fmt::format("timing sample {} is {} ms (a time must be finite and positive)", i, x);
    }
  }
  for (const int mhz : {t.sm_clock_before_mhz, t.sm_clock_after_mhz}) {
    if (mhz != -1 && (mhz < 1 || mhz > 100000)) {
      return fmt::format("SM clock {} MHz (-1 = unknown, else 1 to 100000)", mhz);
    }
  }
  if (r.counters && r.counters->status == "ok") {
    for (const auto& [name, value] : r.counters->values) {
      if (std::isnan(value) || value < 0) {
        return fmt::format("counter {} is {} (counts are finite and >= 0)", name, value);
      }
    }
  }
  return "";
}

namespace {

using ShapeKey = decltype(Shape{}.key());
// A row's identity within a file: its configuration and its spec.
using Key = std::pair<ShapeKey, RowSpec>;

ShapeKey shape_key(const Shape& s) {
  return s.key();
}

Key key_of(const Shape& s, const RowSpec& spec) {
  return {shape_key(s), spec};
}

std::string config_label(const Shape& s) {
  return fmt::format("{}{} {}", shape_text(s), s.causal ? " causal" : "", to_string(s.dtype));
}

std::string device_name(const RunResult& r) {
  return r.device ? r.device->name : "(no GPU)";
}

bool measured_run(const RunResult& r) {
  return r.device.has_value() && !r.settings.model_only;
}

bool has_counters(const RunResult& r) {
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) {
      if (!gated_counters(v).empty()) return true;
    }
  }
  return false;
}

void finish_row(GateRow& row, bool any_error, bool any_failed) {
  bool regression = false, improved = false, warning = false;
  if (row.time) {
    regression |= row.time->verdict == TimeVerdict::slower;
    improved |= row.time->verdict == TimeVerdict::faster;
    warning |= row.time->verdict == TimeVerdict::ambiguous;
  }
  for (const auto& c : row.counters) {
    regression |= c.regressed;
    improved |= c.improved;
  }
  if (any_error) {
    row.outcome = RowOutcome::error;
  } else if (any_failed) {
    row.outcome = RowOutcome::failed;
  } else if (regression) {
    row.outcome = RowOutcome::regression;
  } else if (warning) {
    row.outcome = RowOutcome::warning;
  } else if (improved) {
    row.outcome = RowOutcome::improved;
  } else {
    row.outcome = RowOutcome::pass;
  }
}

// A peer (cuDNN) row that is not gated: whatever changed, the environment changed.
void as_sentinel(GateRow& row) {
  if (row.outcome == RowOutcome::pass) return;
  std::string what;
  if (row.time && row.time->verdict != TimeVerdict::same &&
      row.time->verdict != TimeVerdict::not_compared) {
    what += fmt::format("time {:+.1f}% ({})", pct(row.time->gap), to_string(row.time->verdict));
  }
  for (const auto& c : row.counters) {
    if (c.regressed || c.improved) {
      what += fmt::format("{}{} {:+.1f}%", what.empty() ? "" : ", ", c.name, pct(c.change));
    }
  }
  for (const auto& p : row.problems) what += (what.empty() ? "" : "; ") + p;
  row.problems.clear();
  row.notes.insert(row.notes.begin(),
                   fmt::format("peer changed ({}): a change of the environment (driver, library, "
                               "clocks), not of our kernels; not gated (--gate-peers fails on it)",
                               what.empty() ? to_string(row.outcome) : what));
  row.outcome = RowOutcome::environment;
}

// The calibration's tolerance for a row, looked up by its key (a fa-bench-gate-calibration/1 by
// the row's legacy key, its label).
struct CalibrationKey {
  std::string key, legacy;
};

double calibrated(const GateOptions& o, const CalibrationKey& k, const std::string& metric,
                  bool given, double fallback, bool* used) {
  *used = false;
  if (given || !o.calibration) return fallback;
  const std::string& key = o.calibration->legacy_keys ? k.legacy : k.key;
  auto r = o.calibration->tolerances.find(key);
  if (r == o.calibration->tolerances.end()) return fallback;
  auto m = r->second.find(metric);
  if (m == r->second.end()) return fallback;
  *used = true;
  return m->second;
}

// Rows of one file that share (configuration, row spec): the gate cannot tell which to compare.
void check_duplicates(const RunResult& r, const std::string& src,
                      std::vector<std::string>* problems) {
  std::set<Key> seen;
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) {
      if (!seen.insert(key_of(c.shape, v.spec)).second) {
        problems->push_back(fmt::format(
            "{}: duplicate row {} {}: one configuration and row spec appear twice; the gate "
            "cannot tell which to compare (merge or rerun)",
            src, to_string(v.spec), config_label(c.shape)));
      }
    }
  }
}

void environment_diff(const RunResult& base, const RunResult& cur, GateReport* rep) {
  if (!base.device || !cur.device) return;
  auto diff = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) rep->environment.push_back(fmt::format("{} {} -> {}", what, a, b));
  };
  diff("driver", base.device->driver_version, cur.device->driver_version);
  diff("CUDA driver API", std::to_string(base.device->cuda_driver_version),
       std::to_string(cur.device->cuda_driver_version));
  diff("CUDA runtime", std::to_string(base.device->cuda_runtime_version),
       std::to_string(cur.device->cuda_runtime_version));
  diff("GPU", base.device->uuid, cur.device->uuid);
}

}  // namespace

namespace {

// ---- run_gate's steps ----

// The files as a whole: measured, the same GPU model, the same settings, no duplicate rows.
void check_files(const RunResult& base, const RunResult& cur, const GateOptions& o,
                 GateReport* rep) {
  auto no_measurements = [&](const RunResult& r, const std::string& src) {
    rep->file_problems.push_back(
        fmt::format("{}: no measurements: taken without a GPU ({}); run fa-bench on the GPU runner",
                    src, r.no_gpu_reason.empty() ? "model only" : r.no_gpu_reason));
  };
  if (!measured_run(base)) no_measurements(base, rep->baseline_source);
  if (!measured_run(cur)) no_measurements(cur, rep->current_source);
  if (base.device && cur.device && base.device->name != cur.device->name) {
    const std::string msg =
        fmt::format("different GPU models: baseline {} ({}), current {} ({})", base.device->name,
                    rep->baseline_source, cur.device->name, rep->current_source);
    if (o.allow_device_mismatch) {
      rep->file_notes.push_back(msg + " (--allow-device-mismatch)");
    } else {
      rep->file_problems.push_back(
          msg + ": compare runs of the same GPU model, or pass --allow-device-mismatch");
    }
  }
  auto setting = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) {
      rep->file_problems.push_back(
          fmt::format("settings differ: {} is {} in the baseline, {} in the current run; "
                      "the times are not comparable",
                      what, a, b));
    }
  };
  setting("l2", base.settings.l2, cur.settings.l2);
  setting("launch", base.settings.launch, cur.settings.launch);
  setting("inputs", base.settings.inputs, cur.settings.inputs);
  setting("fp8_prequantized", base.settings.fp8_prequantized ? "true" : "false",
          cur.settings.fp8_prequantized ? "true" : "false");
  if (!cur.complete)
    rep->file_notes.push_back(rep->current_source + ": the run was interrupted (complete: false)");
  check_duplicates(base, rep->baseline_source, &rep->file_problems);
  check_duplicates(cur, rep->current_source, &rep->file_problems);
  environment_diff(base, cur, rep);
}

// Whether counters are gated: both files have them (or --time-only). Problems otherwise.
bool counters_gated(const RunResult& base, const RunResult& cur, const GateOptions& o,
                    GateReport* rep) {
  const bool base_counters = has_counters(base), cur_counters = has_counters(cur);
  bool counters_on = false;
  if (o.time_only) {
    rep->file_notes.push_back("--time-only: bytes and FLOPs are not gated");
  } else if (measured_run(base) && measured_run(cur)) {
    if (base_counters && !cur_counters) {
      rep->file_problems.push_back(fmt::format(
          "{}: no counters (run with --no-counters, or counters unavailable), but the baseline "
          "has them: rerun with counters, or pass --time-only to gate time alone",
          rep->current_source));
    } else if (!base_counters && cur_counters) {
      rep->file_problems.push_back(fmt::format(
          "{}: the baseline has no counters, the current run has: bytes and FLOPs cannot be "
          "gated; refresh the baseline from a run with counters (--update-baseline), or pass "
          "--time-only",
          rep->baseline_source));
    } else if (!base_counters && !cur_counters) {
      rep->file_problems.push_back(
          "neither file has counters (--no-counters, or counters unavailable): bytes and FLOPs "
          "cannot be gated; run with counters, or pass --time-only to gate time alone");
    } else {
      counters_on = true;
    }
  }
  if (o.calibration) {
    rep->file_notes.push_back(
        fmt::format("tolerances per row from the baseline's calibration ({} runs){}",
                    o.calibration->runs.size(),
                    o.time_tolerance_given || o.counter_tolerance_given
                        ? "; tolerances given on the command line take precedence"
                        : ""));
  }
  return counters_on;
}

// The current run's rows by the key of the baseline row each is compared with: its own spec, or
// under --map-variant the spec of the baseline row the map names. Mapped rows first: they take
// the place of a current row of the baseline's spec, which is then not compared (`shadowed`).
struct CurrentRows {
  std::map<Key, const VariantResult*> rows;
  std::map<Key, std::string> labels;
  std::map<const VariantResult*, Key> key_of_row;
  std::set<const VariantResult*> shadowed;
};

// The baseline spec a mapped current row stands for: the one baseline row of the configuration
// the map's right side selects. Problems when it selects several.
Key mapped_key(const RunResult& base, const Shape& shape, const std::string& target,
               GateReport* rep) {
  RowSelector sel;
  parse_row_selector(target, &sel);  // checked by the CLI; a bad one selects nothing
  std::vector<const RowSpec*> found;
  for (const auto& bc : base.configs) {
    if (shape_key(bc.shape) != shape_key(shape)) continue;
    for (const auto& bv : bc.results) {
      if (sel.selects(bv.spec)) found.push_back(&bv.spec);
    }
  }
  if (found.size() > 1) {
    rep->file_problems.push_back(fmt::format(
        "--map-variant: {} names {} baseline rows of {}; name one (e.g. {}@BrxBc~value)", target,
        found.size(), config_label(shape), sel.variant));
  }
  if (found.size() == 1) return key_of(shape, *found.front());
  RowSpec none;
  none.variant = "(" + target + ")";  // no baseline row has it: the row is new
  return key_of(shape, none);
}

CurrentRows index_current_rows(const RunResult& base, const RunResult& cur, const GateOptions& o,
                               GateReport* rep) {
  std::vector<std::pair<RowSelector, std::string>> maps;
  for (const auto& [from, to] : o.variant_map) {
    RowSelector sel;
    if (parse_row_selector(from, &sel)) maps.emplace_back(sel, to);
  }
  CurrentRows out;
  std::set<Key> mapped_keys;
  for (const bool mapped_pass : {true, false}) {
    for (const auto& c : cur.configs) {
      for (const auto& v : c.results) {
        auto m = std::find_if(maps.begin(), maps.end(),
                              [&](const auto& mp) { return mp.first.selects(v.spec); });
        const bool mapped = m != maps.end();
        if (mapped != mapped_pass) continue;
        const Key k = mapped ? mapped_key(base, c.shape, m->second, rep) : key_of(c.shape, v.spec);
        out.key_of_row[&v] = k;
        const std::string label = row_label(c, v);
        if (out.rows.count(k)) {
          if (mapped) {
            rep->file_problems.push_back(
                fmt::format("{}: two rows map to baseline row {} {} (--map-variant)",
                            rep->current_source, m->second, config_label(c.shape)));
          } else if (mapped_keys.count(k)) {
            rep->file_notes.push_back(
                fmt::format("current row {} {} not compared: {} takes its place", label,
                            config_label(c.shape), out.labels[k]));
            out.shadowed.insert(&v);
          }  // else: a duplicate, reported above
          continue;
        }
        out.rows[k] = &v;
        out.labels[k] = label;
        if (mapped) mapped_keys.insert(k);
      }
    }
  }
  return out;
}

// A row whose kernel configuration alone changed (a variant's default tiles retuned): where a
// configuration has, on each side, exactly one row of a (variant, direction, options) that found
// no row of its full spec, the two are the same row, compared with a note on the configuration.
// Rows that differ in direction or options are never paired.
void pair_reconfigured_rows(const RunResult& base, const RunResult& cur, CurrentRows* rows) {
  using Loose = std::tuple<ShapeKey, std::string, Direction, OptionValues>;
  auto loose = [](const Shape& s, const RowSpec& spec) {
    return Loose{shape_key(s), spec.variant, spec.direction, spec.options};
  };
  std::map<Loose, std::vector<Key>> base_left;
  for (const auto& bc : base.configs) {
    for (const auto& bv : bc.results) {
      const Key k = key_of(bc.shape, bv.spec);
      if (!rows->rows.count(k)) base_left[loose(bc.shape, bv.spec)].push_back(k);
    }
  }
  std::set<Key> base_keys;
  for (const auto& bc : base.configs) {
    for (const auto& bv : bc.results) base_keys.insert(key_of(bc.shape, bv.spec));
  }
  std::map<Loose, std::vector<std::pair<const ConfigResult*, const VariantResult*>>> cur_left;
  for (const auto& c : cur.configs) {
    for (const auto& v : c.results) {
      const Key& k = rows->key_of_row.at(&v);
      // Only rows standing for their own spec (not mapped, not shadowed) that no baseline row has.
      if (base_keys.count(k) || rows->shadowed.count(&v) || k != key_of(c.shape, v.spec)) continue;
      cur_left[loose(c.shape, v.spec)].push_back({&c, &v});
    }
  }
  for (const auto& [l, keys] : base_left) {
    auto it = cur_left.find(l);
    if (keys.size() != 1 || it == cur_left.end() || it->second.size() != 1) continue;
    const auto [c, v] = it->second.front();
    rows->rows.erase(rows->key_of_row[v]);
    rows->labels.erase(rows->key_of_row[v]);
    rows->rows[keys.front()] = v;
    rows->labels[keys.front()] = row_label(*c, *v);
    rows->key_of_row[v] = keys.front();
  }
}

// Notes on how a current row differs from the baseline row it is compared with (mapped, or
// reconfigured).
void spec_notes(const RowSpec& b, const RowSpec& c, GateRow* row) {
  const Tiles bt = b.tiles(), ct = c.tiles();
  if (!(bt == ct)) {
    row->notes.push_back(
        fmt::format("tiles {}x{} -> {}x{}", bt.block_q, bt.block_kv, ct.block_q, ct.block_kv));
  }
  const KernelConfig none{};
  const KernelConfig bk = b.kernel_config.value_or(none), ck = c.kernel_config.value_or(none);
  if (bk.stages != ck.stages || bk.warpgroups != ck.warpgroups || bk.cluster != ck.cluster) {
    row->notes.push_back(fmt::format("kernel config {} -> {}", to_string(bk), to_string(ck)));
  }
  if (b.direction != c.direction) {
    row->notes.push_back(
        fmt::format("direction {} -> {}", to_string(b.direction), to_string(c.direction)));
  }
  std::set<std::string> names;
  for (const auto& [k, v] : b.options) names.insert(k);
  for (const auto& [k, v] : c.options) names.insert(k);
  for (const auto& name : names) {
    const OptionValue* bv = b.option(name);
    const OptionValue* cv = c.option(name);
    if (bv && cv && *bv == *cv) continue;
    row->notes.push_back(fmt::format("{} {} -> {}", name, bv ? fa::to_string(*bv) : "-",
                                     cv ? fa::to_string(*cv) : "-"));
  }
}

// The counters of a matched, measured row compared. Sets `error` for a counter missing from the
// current run (unless --allow-missing).
void compare_counters(const VariantResult& bv, const VariantResult& cv, const GateOptions& o,
                      const CalibrationKey& ckey, GateRow* row, bool* error) {
  auto bcnt = gated_counters(bv);
  const auto ccnt = gated_counters(cv);
  if (bcnt.count("l2_bytes") && ccnt.count("l2_bytes")) {
    const bool base_at_sm = counters::l2_counted_at_sm(bv.counters->values);
    const bool cur_at_sm = counters::l2_counted_at_sm(cv.counters->values);
    if (base_at_sm != cur_at_sm) {
      row->problems.push_back(fmt::format(
          "l2_bytes counted at the {} in the baseline, at the {} in the current run: not "
          "comparable; record the baseline again with this fa-bench",
          base_at_sm ? "SM" : "L2", cur_at_sm ? "SM" : "L2"));
      *error = true;
      bcnt.erase("l2_bytes");
    }
  }
  for (const char* name : kGateCounters) {
    auto b = bcnt.find(name);
    if (b == bcnt.end()) continue;
    auto c = ccnt.find(name);
    if (c == ccnt.end()) {
      const std::string msg =
          fmt::format("{} counted in the baseline but not in the current run (counters {})", name,
                      cv.counters ? cv.counters->status : std::string("absent"));
      if (o.allow_missing) {
        row->notes.push_back(msg + " (--allow-missing)");
      } else {
        row->problems.push_back(msg);
        *error = true;
      }
      continue;
    }
    CounterComparison cc;
    cc.name = name;
    cc.base = b->second;
    cc.cur = c->second;
    cc.tolerance =
        calibrated(o, ckey, name, o.counter_tolerance_given, o.tolerance_for(name), &cc.calibrated);
    if (cc.base > 0) {
      cc.change = cc.cur / cc.base - 1;
      cc.regressed = cc.change > cc.tolerance;
      cc.improved = cc.change < -cc.tolerance;
    } else {
      cc.regressed = cc.cur > 0;  // from nothing to something
    }
    row->counters.push_back(cc);
  }
}

// The energy per launch of a matched, measured row compared (--gate-energy). A side without the
// counter's figure cannot be compared: an error (a note under --allow-missing).
void compare_energy(const VariantResult& bv, const VariantResult& cv, const GateOptions& o,
                    const CalibrationKey& ckey, GateRow* row, bool* error) {
  auto figure = [](const VariantResult& v) {
    return v.energy ? v.energy->energy_per_launch_mj : std::nullopt;
  };
  auto why_not = [](const VariantResult& v) {
    if (!v.energy) return std::string("no energy in the file (--no-energy, or an older fa-bench)");
    return v.energy->status + (v.energy->reason.empty() ? "" : ": " + v.energy->reason);
  };
  const std::optional<double> b = figure(bv), c = figure(cv);
  if (!b || !c) {
    const std::string msg = fmt::format(
        "energy per launch not measured in the {} ({}): --gate-energy cannot compare it",
        b ? "current run" : "baseline", why_not(b ? cv : bv));
    if (o.allow_missing) {
      row->notes.push_back(msg + " (--allow-missing)");
    } else {
      row->problems.push_back(msg);
      *error = true;
    }
    return;
  }
  CounterComparison cc;
  cc.name = kGateEnergy;
  cc.base = *b;
  cc.cur = *c;
  cc.tolerance = calibrated(o, ckey, kGateEnergy, o.energy_tolerance_given, o.energy_tolerance,
                            &cc.calibrated);
  if (cc.base > 0) {
    cc.change = cc.cur / cc.base - 1;
    cc.regressed = cc.change > cc.tolerance;
    cc.improved = cc.change < -cc.tolerance;
  }
  row->counters.push_back(cc);
  // A clock held down by power or heat on one side only moves the energy with it.
  auto held = [](const VariantResult& v) {
    std::string out;
    for (const auto& r : v.energy->clock_event_reasons)
      if (r != "idle") out += (out.empty() ? "" : ", ") + r;
    return out;
  };
  if (held(bv) != held(cv)) {
    row->notes.push_back(fmt::format(
        "SM clock held down during the energy window: baseline {}, "
        "current {}",
        held(bv).empty() ? "no" : "by " + held(bv), held(cv).empty() ? "no" : "by " + held(cv)));
  }
}

// The current row's energy per launch among its exported figures (--gate-energy).
void export_energy(const VariantResult& v, const GateOptions& o, GateRow* row) {
  if (o.gate_energy && v.energy && v.energy->energy_per_launch_mj)
    row->cur_counters[kGateEnergy] = *v.energy->energy_per_launch_mj;
}

// Time (and counters) of a row measured in both files. Sets `error` / `hard_error`.
void compare_measured(const VariantResult& bv, const VariantResult& cv, const GateOptions& o,
                      const CalibrationKey& ckey, bool counters_on, GateRow* row, bool* error,
                      bool* hard_error) {
  spec_notes(bv.spec, cv.spec, row);
  row->cur_time = side_of(*cv.timing);
  if (counters_on) row->cur_counters = gated_counters(cv);
  bool cal = false;
  const double ttol = calibrated(o, ckey, "time", o.time_tolerance_given, o.time_tolerance, &cal);
  row->time = compare_time(*bv.timing, *cv.timing, o, ttol);
  row->time->calibrated = cal;
  const TimeComparison& t = *row->time;
  if (t.base.n < o.min_samples) {
    row->problems.push_back(fmt::format(
        "{} timing samples in the baseline, {} or more needed: refresh the baseline from a "
        "run with --repetitions 100",
        t.base.n, o.min_samples));
    *error = *hard_error = true;
  }
  if (t.cur.n < o.min_samples) {
    row->problems.push_back(
        fmt::format("{} timing samples in the current run, {} or more needed to decide: rerun with "
                    "--repetitions 100 (under --min-time a slow row gets few samples)",
                    t.cur.n, o.min_samples));
    *error = *hard_error = true;
  }
  if (t.clock_flag) {
    row->notes.push_back(
        fmt::format("SM clock differs: {:.0f} MHz (baseline) vs {:.0f} MHz (current), {:+.1f}%; "
                    "judged in cycles as well as time",
                    t.base.clock_mhz, t.cur.clock_mhz, pct(t.clock_diff)));
  }
  if (t.noisy) {
    row->notes.push_back(fmt::format("spread (IQR/median) {:.1f}% / {:.1f}%: a noisy machine?",
                                     pct(t.base.dispersion), pct(t.cur.dispersion)));
  }
  if (counters_on) compare_counters(bv, cv, o, ckey, row, error);
  export_energy(cv, o, row);
  if (o.gate_energy) compare_energy(bv, cv, o, ckey, row, error);
}

// A gate row for a file's row: its spec, label, shape, peer flag and configuration label.
GateRow gate_row_of(const ConfigResult& c, const VariantResult& v) {
  GateRow row;
  row.spec = v.spec;
  row.base_variant = row.variant = row_label(c, v);
  row.shape = c.shape;
  row.peer = v.peer;
  row.config_label = config_label(c.shape);
  return row;
}

// One baseline row against its current row (if any); appends the gate's row to the report.
void compare_baseline_row(const ConfigResult& bc, const VariantResult& bv, CurrentRows& cur,
                          std::map<Key, bool>& matched, const GateOptions& o, bool counters_on,
                          GateReport* rep) {
  GateRow row = gate_row_of(bc, bv);
  const CalibrationKey ckey{row_key(bc.shape, bv.spec), legacy_row_key(bc.shape, row.base_variant)};
  bool error = false, failed = false;
  bool hard_error = false;  // impossible values or too few samples: exit 2 even for peers
  const Key k = key_of(bc.shape, bv.spec);
  auto it = cur.rows.find(k);
  if (it != cur.rows.end()) {
    matched[k] = true;
    row.variant = cur.labels[k];
    row.peer = row.peer || it->second->peer;
  }
  auto done = [&] {
    finish_row(row, error, failed);
    if (row.peer && !o.gate_peers && !hard_error) as_sentinel(row);
    rep->rows.push_back(std::move(row));
  };
  auto warn_missing = [&](const std::string& msg) {  // --allow-missing
    row.notes.push_back(msg + " (--allow-missing)");
    row.outcome = RowOutcome::warning;
    rep->rows.push_back(std::move(row));
  };
  if (const std::string why = impossible_values(bv); !why.empty()) {
    row.problems.push_back(fmt::format("the baseline row cannot be trusted: {}", why));
    error = hard_error = true;
    return done();
  }
  if (bv.status != Status::ok) {
    if (bv.status == Status::failed || bv.status == Status::error) {
      row.problems.push_back(fmt::format("the baseline row is {} ({}): refresh the baseline",
                                         to_string(bv.status), bv.reason));
      error = true;
    } else {
      row.notes.push_back(
          fmt::format("not compared: the baseline row is {}", to_string(bv.status)));
      if (it == cur.rows.end()) return;  // e.g. unsupported on both sides: nothing to say
    }
    return done();
  }
  if (it == cur.rows.end()) {
    const std::string msg = fmt::format("missing from the current run ({})", rep->current_source);
    if (o.allow_missing) return warn_missing(msg);
    row.problems.push_back(msg + ": run the baseline's command line, or pass --allow-missing");
    error = true;
    return done();
  }
  const VariantResult& cv = *it->second;
  if (const std::string why = impossible_values(cv); !why.empty()) {
    row.problems.push_back(fmt::format("the current row cannot be trusted: {}", why));
    error = hard_error = true;
    return done();
  }
  if (cv.status == Status::failed || cv.status == Status::error) {
    row.problems.push_back(
        fmt::format("the current run's {} {}{}", row.variant,
                    cv.status == Status::failed ? "failed verification" : "errored",
                    cv.reason.empty() ? "" : " (" + cv.reason + ")"));
    failed = true;
  } else if (cv.status != Status::ok) {
    const std::string msg =
        fmt::format("not measured in the current run (status {}{})", to_string(cv.status),
                    cv.reason.empty() ? "" : ": " + cv.reason);
    if (o.allow_missing) return warn_missing(msg);
    row.problems.push_back(msg);
    error = true;
  } else if (bv.timing && cv.timing && bv.timing->launch != cv.timing->launch) {
    // A row whose graph capture failed was timed with stream launches (its reason says why).
    row.problems.push_back(fmt::format(
        "timed with {} launches in the baseline, {} in the current run: the times are not "
        "comparable",
        bv.timing->launch, cv.timing->launch));
    error = true;
  } else {
    compare_measured(bv, cv, o, ckey, counters_on, &row, &error, &hard_error);
  }
  done();
}

// Current rows no baseline row matched: reported, not gated.
void report_new_rows(const RunResult& cur, const CurrentRows& rows,
                     const std::map<Key, bool>& matched, bool counters_on, const GateOptions& o,
                     GateReport* rep) {
  for (const auto& c : cur.configs) {
    for (const auto& v : c.results) {
      if (matched.count(rows.key_of_row.at(&v)) || v.status != Status::ok) continue;
      if (rows.shadowed.count(&v)) continue;
      GateRow row = gate_row_of(c, v);
      row.outcome = RowOutcome::new_row;
      if (v.timing) row.cur_time = side_of(*v.timing);
      if (counters_on) row.cur_counters = gated_counters(v);
      export_energy(v, o, &row);
      row.notes.push_back("not in the baseline: not gated (refresh the baseline to gate it)");
      rep->rows.push_back(std::move(row));
    }
  }
}

// 2: a file or row cannot be compared; 1: a regression or a failure; else 0.
int exit_code_of(const GateReport& rep, const GateOptions& o) {
  bool errors = !rep.file_problems.empty(), fails = false;
  for (const auto& r : rep.rows) {
    errors |= r.outcome == RowOutcome::error && !r.problems.empty();
    fails |= r.outcome == RowOutcome::regression || r.outcome == RowOutcome::failed;
    fails |= o.strict && r.outcome == RowOutcome::warning && r.time &&
             r.time->verdict == TimeVerdict::ambiguous;
  }
  return errors ? 2 : fails ? 1 : 0;
}

}  // namespace

GateReport run_gate(const RunResult& base, const RunResult& cur, const GateOptions& o,
                    const std::string& base_source, const std::string& cur_source) {
  GateReport rep;
  rep.strict = o.strict;
  rep.calibrated = o.calibration.has_value();
  rep.baseline_source = base_source;
  rep.current_source = cur_source;
  rep.device_base = device_name(base);
  rep.device_cur = device_name(cur);
  rep.revision_base = base.git_revision;
  rep.revision_cur = cur.git_revision;
  check_files(base, cur, o, &rep);
  const bool counters_on = counters_gated(base, cur, o, &rep);
  if (measured_run(base) && measured_run(cur)) {  // else: reported above
    CurrentRows rows = index_current_rows(base, cur, o, &rep);
    pair_reconfigured_rows(base, cur, &rows);
    std::map<Key, bool> matched;
    for (const auto& bc : base.configs) {
      for (const auto& bv : bc.results)
        compare_baseline_row(bc, bv, rows, matched, o, counters_on, &rep);
    }
    report_new_rows(cur, rows, matched, counters_on, o, &rep);
  }
  if (const int n = rep.count(RowOutcome::environment)) {
    std::string env;
    for (const auto& e : rep.environment) env += (env.empty() ? "" : ", ") + e;
    rep.file_notes.push_back(fmt::format(
        "{} peer row(s) changed: the environment moved ({}); our rows are judged on their own", n,
        env.empty() ? "driver and runtime versions recorded equal: library, clocks or load?"
                    : env));
  }
  rep.exit_code = exit_code_of(rep, o);
  return rep;
}

// ---- calibration ----

namespace {

using json = nlohmann::json;

struct RowRef {
  const ConfigResult* config;
  const VariantResult* row;
};

std::map<std::string, RowRef> rows_by_key(const RunResult& r) {
  std::map<std::string, RowRef> out;
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) out[row_key(c.shape, v.spec)] = {&c, &v};
  }
  return out;
}

bool known_metric(const std::string& m) {
  if (m == "time" || m == kGateEnergy) return true;
  for (const char* c : kGateCounters) {
    if (m == c) return true;
  }
  return false;
}

}  // namespace

Calibration calibrate(const std::vector<RunResult>& runs, const std::vector<std::string>& sources) {
  auto bad = [](const std::string& s) { throw std::invalid_argument(s); };
  if (runs.size() < 2 || sources.size() != runs.size()) {
    bad("--calibrate needs at least two result files of one build (three or more recommended)");
  }
  Calibration cal;
  cal.runs = sources;
  const RunResult& first = runs[0];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    if (!measured_run(r)) bad(sources[i] + ": no measurements (taken without a GPU)");
    if (!r.complete) bad(sources[i] + ": the run was interrupted");
    if (r.device->name != first.device->name) {
      bad(fmt::format("{}: GPU {} differs from {} in {}", sources[i], r.device->name,
                      first.device->name, sources[0]));
    }
    if (r.git_revision != first.git_revision) {
      bad(fmt::format("{}: revision {} differs from {} in {}: calibrate on runs of one build",
                      sources[i], r.git_revision, first.git_revision, sources[0]));
    }
    if (r.settings.l2 != first.settings.l2 || r.settings.launch != first.settings.launch ||
        r.settings.inputs != first.settings.inputs ||
        r.settings.fp8_prequantized != first.settings.fp8_prequantized) {
      bad(fmt::format("{}: settings (l2, launch, inputs, fp8_prequantized) differ from {}",
                      sources[i], sources[0]));
    }
    if (has_counters(r) != has_counters(first)) {
      bad(fmt::format("{}: counters in some runs and not in others ({} {})", sources[i], sources[0],
                      has_counters(first) ? "has them" : "has none"));
    }
    std::vector<std::string> dup;
    check_duplicates(r, sources[i], &dup);
    if (!dup.empty()) bad(dup.front());
  }
  std::vector<std::map<std::string, RowRef>> maps;
  for (const auto& r : runs) maps.push_back(rows_by_key(r));
  GateOptions o;
  for (const auto& [key, ref0] : maps[0]) {
    if (ref0.row->status != Status::ok) continue;
    std::vector<const VariantResult*> rows;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      auto it = maps[i].find(key);
      if (it == maps[i].end() || it->second.row->status != Status::ok) {
        bad(
            fmt::format("{}: row {} missing or not measured: calibration needs every row in every "
                        "run (same command line)",
                        sources[i], key));
      }
      if (const std::string why = impossible_values(*it->second.row); !why.empty()) {
        bad(fmt::format("{}: row {}: {}", sources[i], key, why));
      }
      const TimeSide s = side_of(*it->second.row->timing);
      if (s.n < o.min_samples) {
        bad(fmt::format("{}: row {}: {} timing samples, {} or more needed (--repetitions 100)",
                        sources[i], key, s.n, o.min_samples));
      }
      rows.push_back(it->second.row);
    }
    std::map<std::string, double> observed;
    observed["time"] = 0;
    for (std::size_t a = 0; a < rows.size(); ++a) {
      for (std::size_t b = 0; b < rows.size(); ++b) {
        if (a == b) continue;
        const TimeSide sa = side_of(*rows[a]->timing), sb = side_of(*rows[b]->timing);
        double t = sb.median / sa.median, slow = t, fast = t;
        if (sa.clock_mhz > 0 && sb.clock_mhz > 0) {
          const double c = t * sb.clock_mhz / sa.clock_mhz;
          slow = std::min(t, c);
          fast = std::max(t, c);
        }
        // What the gate would compare with the tolerance, in either direction.
        const double e = slow > 1 ? slow - 1 : fast < 1 ? 1 - fast : 0;
        observed["time"] = std::max(observed["time"], e);
      }
    }
    std::vector<std::map<std::string, double>> counts;
    for (const auto* r : rows) counts.push_back(gated_counters(*r));
    for (const char* name : kGateCounters) {
      bool all = true, zero = false;
      for (const auto& m : counts) {
        auto it = m.find(name);
        all = all && it != m.end();
        zero = zero || (it != m.end() && it->second <= 0);
      }
      if (!all || zero) continue;  // not in every run, or zero somewhere: the default applies
      double worst = 0;
      for (const auto& ma : counts) {
        for (const auto& mb : counts)
          worst = std::max(worst, std::fabs(mb.at(name) / ma.at(name) - 1));
      }
      observed[name] = worst;
    }
    // Energy per launch, where every run measured it (--gate-energy uses it).
    std::vector<double> energies;
    for (const auto* r : rows)
      if (r->energy && r->energy->energy_per_launch_mj && *r->energy->energy_per_launch_mj > 0)
        energies.push_back(*r->energy->energy_per_launch_mj);
    if (energies.size() == rows.size()) {
      double worst = 0;
      for (double ea : energies)
        for (double eb : energies) worst = std::max(worst, std::fabs(eb / ea - 1));
      observed[kGateEnergy] = worst;
    }
    for (const auto& [metric, v] : observed) {
      const double floor = metric == "time" ? kCalibrationFloorTime : kCalibrationFloorCounter;
      cal.tolerances[key][metric] = std::max(floor, kCalibrationFactor * v);
      cal.observed[key][metric] = v;
    }
  }
  if (cal.tolerances.empty()) bad(sources[0] + ": no measured rows to calibrate");
  return cal;
}

std::string calibrated_baseline(const std::string& first_run_text, const Calibration& c) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(first_run_text);
  nlohmann::ordered_json cal;
  cal["schema"] = kCalibrationSchema;
  cal["rule"] = fmt::format(
      "tolerance = max(floor, {:g} x the largest change between any two of the runs); floors: "
      "time {:g}%, counters {:g}%; time changes as the gate measures them (median ratio, the "
      "smaller of time and cycles)",
      kCalibrationFactor, pct(kCalibrationFloorTime), pct(kCalibrationFloorCounter));
  cal["runs"] = c.runs;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& [key, tol] : c.tolerances) {
    nlohmann::ordered_json row;
    row["row"] = key;
    row["tolerances"] = tol;
    auto obs = c.observed.find(key);
    if (obs != c.observed.end()) row["observed"] = obs->second;
    rows.push_back(row);
  }
  cal["rows"] = rows;
  doc[kCalibrationKey] = cal;
  return doc.dump(1) + "\n";
}

std::optional<Calibration> read_calibration(const std::string& json_text,
                                            const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains(kCalibrationKey)) return std::nullopt;
  const std::string at = source + ": " + kCalibrationKey;
  auto bad = [&](const std::string& where, const std::string& what) {
    throw std::invalid_argument(at + where + ": " + what +
                                " (rewrite it with fa-bench gate --calibrate)");
  };
  const json& cal = doc[kCalibrationKey];
  if (!cal.is_object()) bad("", "not an object");
  if (!cal.contains("schema") || !cal["schema"].is_string()) bad(".schema", "missing");
  const std::string version = cal["schema"].get<std::string>();
  if (version != kCalibrationSchema && version != kCalibrationSchemaV1) {
    bad(".schema", "unknown version " + cal["schema"].dump() + "; this gate understands " +
                       kCalibrationSchema + " and " + kCalibrationSchemaV1);
  }
  Calibration c;
  c.legacy_keys = version == kCalibrationSchemaV1;
  if (cal.contains("runs")) {
    if (!cal["runs"].is_array()) bad(".runs", "not an array");
    for (const auto& r : cal["runs"]) {
      if (!r.is_string()) bad(".runs", "not an array of file names");
      c.runs.push_back(r.get<std::string>());
    }
  }
  if (!cal.contains("rows") || !cal["rows"].is_array()) bad(".rows", "missing or not an array");
  for (std::size_t i = 0; i < cal["rows"].size(); ++i) {
    const json& row = cal["rows"][i];
    const std::string where = fmt::format(".rows[{}]", i);
    if (!row.is_object()) bad(where, "not an object");
    if (!row.contains("row") || !row["row"].is_string()) bad(where + ".row", "missing");
    const std::string key = row["row"].get<std::string>();
    if (c.tolerances.count(key)) bad(where + ".row", "duplicate row " + key);
    for (const char* part : {"tolerances", "observed"}) {
      if (!row.contains(part)) {
        if (std::string(part) == "tolerances") bad(where + ".tolerances", "missing");
        continue;
      }
      const json& m = row[part];
      if (!m.is_object()) bad(where + "." + part, "not an object");
      for (const auto& [metric, v] : m.items()) {
        if (!known_metric(metric)) {
          bad(where + "." + part + "." + metric,
              "unknown metric (accepted: time, dram_bytes, l2_bytes, tensor_flops, instructions)");
        }
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
            v.get<double>() >= 10) {
          bad(where + "." + part + "." + metric, "not a fraction in [0, 10): " + v.dump());
        }
        (std::string(part) == "tolerances" ? c.tolerances : c.observed)[key][metric] =
            v.get<double>();
      }
    }
    c.tolerances[key];  // a row with no metrics still exists
  }
  return c;
}

}  // namespace fa::bench
