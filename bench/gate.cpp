// The gate's decisions: row matching, the noise-aware time rule, the counter rule, the exit code.
// Outputs (table, Markdown, JUnit, exports) are in bench/gate_outputs.cpp; the command line in
// bench/gate_cli.cpp.
#include "bench/gate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
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
  }
  return "?";
}

int GateReport::count(RowOutcome o) const {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [&](const GateRow& r) { return r.outcome == o; }));
}

namespace {}  // namespace

TimeSide side_of(const Timing& t) {
  TimeSide s;
  std::vector<double> xs;
  for (double x : t.samples_ms) {
    if (std::isfinite(x) && x > 0) xs.push_back(x);
  }
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
  if (a > 0 && b > 0) {
    s.clock_mhz = std::min(a, b);
  } else if (a > 0 || b > 0) {
    s.clock_mhz = std::max(a, b);
  }
  return s;
}

namespace {

double pct(double x) {
  return 100.0 * x;
}

}  // namespace

TimeComparison compare_time(const Timing& base, const Timing& cur, const GateOptions& o) {
  TimeComparison c;
  c.base = side_of(base);
  c.cur = side_of(cur);
  const double tol = o.time_tolerance;
  const double limit = o.max_dispersion < 0 ? tol : o.max_dispersion;
  if (c.base.clock_mhz > 0 && c.cur.clock_mhz > 0) {
    c.clock_diff = static_cast<double>(c.cur.clock_mhz) / c.base.clock_mhz - 1;
    c.clock_flag = std::fabs(c.clock_diff) > o.clock_tolerance;
  }
  if (c.base.n == 0 || c.cur.n == 0 || c.base.median <= 0) {
    c.verdict = TimeVerdict::ambiguous;
    c.why = "no usable timing samples";
    return c;
  }
  c.gap = c.cur.median / c.base.median - 1;
  c.noisy = c.base.dispersion > limit || c.cur.dispersion > limit;
  if (c.base.n < o.min_samples || c.cur.n < o.min_samples) {
    c.verdict = TimeVerdict::ambiguous;
    c.why = fmt::format("too few samples ({} and {}; want {} or more)", c.base.n, c.cur.n,
                        o.min_samples);
    return c;
  }
  const std::string noise = fmt::format("spread (IQR/median) {:.1f}% / {:.1f}% above {:.1f}%",
                                        pct(c.base.dispersion), pct(c.cur.dispersion), pct(limit));
  const std::string clock = fmt::format("SM clock {} -> {} MHz", c.base.clock_mhz, c.cur.clock_mhz);
  if (c.gap > tol) {
    c.separated = c.cur.min > c.base.q3;  // every current sample slower than 3/4 of the baseline's
    if (c.separated && !c.noisy && !c.clock_flag) {
      c.verdict = TimeVerdict::slower;
      c.why = fmt::format("median +{:.1f}% > {:.1f}%, current min above baseline q3", pct(c.gap),
                          pct(tol));
    } else {
      c.verdict = TimeVerdict::ambiguous;
      c.why = fmt::format("median +{:.1f}% but ", pct(c.gap)) +
              (c.noisy        ? noise
               : !c.separated ? "the [min, q3] intervals overlap"
                              : clock);
    }
  } else if (c.gap < -tol) {
    c.separated =
        c.cur.q3 < c.base.min;  // 3/4 of the current samples faster than every baseline one
    if (c.separated && !c.noisy && !c.clock_flag) {
      c.verdict = TimeVerdict::faster;
      c.why = fmt::format("median {:.1f}%, current q3 below baseline min", pct(c.gap));
    } else {
      c.verdict = TimeVerdict::maybe_faster;
      c.why = fmt::format("median {:.1f}% but ", pct(c.gap)) +
              (c.noisy        ? noise
               : !c.separated ? "the [min, q3] intervals overlap"
                              : clock);
    }
  } else if (c.noisy) {
    c.verdict = TimeVerdict::ambiguous;
    c.why = fmt::format("median {:+.1f}% but ", pct(c.gap)) + noise;
  } else {
    c.verdict = TimeVerdict::same;
    c.why = fmt::format("median {:+.1f}% within {:.1f}%", pct(c.gap), pct(tol));
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
  if (have({"lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"})) {
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

namespace {

using Key =
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, int, std::string>;

Key key_of(const Shape& s, const std::string& variant) {
  return {s.B, s.H, s.N, s.d, s.causal, static_cast<int>(s.dtype), variant};
}

std::string config_label(const Shape& s) {
  return fmt::format("B={} H={} N={} d={}{} {}", s.B, s.H, s.N, s.d, s.causal ? " causal" : "",
                     to_string(s.dtype));
}

std::string device_name(const RunResult& r) {
  return r.device ? r.device->name : "(no GPU)";
}

bool measured_run(const RunResult& r) {
  return r.device.has_value() && !r.settings.model_only;
}

// The counters' order in every output.
const char* const kCounterOrder[] = {"dram_bytes", "l2_bytes", "tensor_flops", "instructions"};

void finish_row(GateRow& row, bool any_error, bool any_failed) {
  bool regression = false, improved = false, warning = false;
  if (row.time) {
    regression |= row.time->verdict == TimeVerdict::slower;
    improved |= row.time->verdict == TimeVerdict::faster;
    warning |= row.time->verdict == TimeVerdict::ambiguous || row.time->clock_flag;
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

}  // namespace

GateReport run_gate(const RunResult& base, const RunResult& cur, const GateOptions& o,
                    const std::string& base_source, const std::string& cur_source) {
  GateReport rep;
  rep.strict = o.strict;
  rep.baseline_source = base_source;
  rep.current_source = cur_source;
  rep.device_base = device_name(base);
  rep.device_cur = device_name(cur);
  rep.revision_base = base.git_revision;
  rep.revision_cur = cur.git_revision;

  // ---- the files as a whole ----
  auto no_measurements = [&](const RunResult& r, const std::string& src) {
    rep.file_problems.push_back(
        fmt::format("{}: no measurements: taken without a GPU ({}); run fa-bench on the GPU runner",
                    src, r.no_gpu_reason.empty() ? "model only" : r.no_gpu_reason));
  };
  if (!measured_run(base)) no_measurements(base, base_source);
  if (!measured_run(cur)) no_measurements(cur, cur_source);
  if (base.device && cur.device && base.device->name != cur.device->name) {
    const std::string msg =
        fmt::format("different GPU models: baseline {} ({}), current {} ({})", base.device->name,
                    base_source, cur.device->name, cur_source);
    if (o.allow_device_mismatch) {
      rep.file_notes.push_back(msg + " (--allow-device-mismatch)");
    } else {
      rep.file_problems.push_back(
          msg + ": compare runs of the same GPU model, or pass --allow-device-mismatch");
    }
  }
  auto setting = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) {
      rep.file_problems.push_back(
          fmt::format("settings differ: {} is {} in the baseline, {} in the current run; "
                      "the times are not comparable",
                      what, a, b));
    }
  };
  setting("l2", base.settings.l2, cur.settings.l2);
  setting("inputs", base.settings.inputs, cur.settings.inputs);
  setting("fp8_prequantized", base.settings.fp8_prequantized ? "true" : "false",
          cur.settings.fp8_prequantized ? "true" : "false");
  if (!cur.complete)
    rep.file_notes.push_back(cur_source + ": the run was interrupted (complete: false)");
  bool base_has_counters = false;
  for (const auto& c : base.configs) {
    for (const auto& v : c.results) base_has_counters |= !gated_counters(v).empty();
  }
  if (measured_run(base) && !base_has_counters) {
    rep.file_notes.push_back(
        "the baseline has no counters (--no-counters?): bytes and FLOPs are not gated");
  }

  // ---- rows ----
  // Mapped rows (--map-variant) first: they take the place of a current row of the baseline's name.
  std::map<Key, const VariantResult*> cur_rows;
  std::map<Key, std::string> cur_names;
  std::set<std::pair<std::string, std::string>> shadowed;  // (row, config) not compared
  for (const bool mapped_pass : {true, false}) {
    for (const auto& c : cur.configs) {
      for (const auto& v : c.results) {
        auto it = o.variant_map.find(v.variant);
        const bool mapped = it != o.variant_map.end();
        if (mapped != mapped_pass) continue;
        const std::string as = mapped ? it->second : v.variant;
        const Key k = key_of(c.shape, as);
        if (cur_rows.count(k)) {
          if (mapped) {
            rep.file_problems.push_back(
                fmt::format("{}: two rows map to baseline row {} {} (--map-variant)", cur_source,
                            as, config_label(c.shape)));
          } else {
            rep.file_notes.push_back(
                fmt::format("current row {} {} not compared: {} takes its place", v.variant,
                            config_label(c.shape), cur_names[k]));
            shadowed.insert({v.variant, config_label(c.shape)});
          }
          continue;
        }
        cur_rows[k] = &v;
        cur_names[k] = v.variant;
      }
    }
  }
  std::map<Key, bool> matched;
  const bool can_compare = measured_run(base) && measured_run(cur);  // else: reported above
  for (const auto& bc : can_compare ? base.configs : std::vector<ConfigResult>{}) {
    for (const auto& bv : bc.results) {
      GateRow row;
      row.base_variant = bv.variant;
      row.variant = bv.variant;
      row.shape = bc.shape;
      row.config_label = config_label(bc.shape);
      bool error = false, failed = false;
      const Key k = key_of(bc.shape, bv.variant);
      auto it = cur_rows.find(k);
      if (it != cur_rows.end()) {
        matched[k] = true;
        row.variant = cur_names[k];
      }
      if (bv.status != Status::ok) {
        if (bv.status == Status::failed || bv.status == Status::error) {
          row.problems.push_back(fmt::format("the baseline row is {} ({}): refresh the baseline",
                                             to_string(bv.status), bv.reason));
          error = true;
        } else {
          row.notes.push_back(
              fmt::format("not compared: the baseline row is {}", to_string(bv.status)));
          if (it == cur_rows.end()) continue;  // e.g. unsupported on both sides: nothing to say
        }
        finish_row(row, error, failed);
        rep.rows.push_back(std::move(row));
        continue;
      }
      if (it == cur_rows.end()) {
        const std::string msg = fmt::format("missing from the current run ({})", cur_source);
        if (o.allow_missing) {
          row.notes.push_back(msg + " (--allow-missing)");
          row.outcome = RowOutcome::warning;
        } else {
          row.problems.push_back(msg +
                                 ": run the baseline's command line, or pass --allow-missing");
          row.outcome = RowOutcome::error;
        }
        rep.rows.push_back(std::move(row));
        continue;
      }
      const VariantResult& cv = *it->second;
      if (cv.status == Status::failed || cv.status == Status::error) {
        row.problems.push_back(
            fmt::format("the current run's {} {}{}", cv.variant,
                        cv.status == Status::failed ? "failed verification" : "errored",
                        cv.reason.empty() ? "" : " (" + cv.reason + ")"));
        failed = true;
      } else if (cv.status != Status::ok) {
        const std::string msg =
            fmt::format("not measured in the current run (status {}{})", to_string(cv.status),
                        cv.reason.empty() ? "" : ": " + cv.reason);
        if (o.allow_missing) {
          row.notes.push_back(msg + " (--allow-missing)");
          row.outcome = RowOutcome::warning;
          rep.rows.push_back(std::move(row));
          continue;
        }
        row.problems.push_back(msg);
        error = true;
      } else {
        if (cv.tiles.block_q != bv.tiles.block_q || cv.tiles.block_kv != bv.tiles.block_kv) {
          row.notes.push_back(fmt::format("tiles {}x{} -> {}x{}", bv.tiles.block_q,
                                          bv.tiles.block_kv, cv.tiles.block_q, cv.tiles.block_kv));
        }
        if (bv.block_order != cv.block_order) {
          row.notes.push_back(fmt::format("block order {} -> {}", bv.block_order, cv.block_order));
        }
        row.cur_time = side_of(*cv.timing);
        row.cur_counters = gated_counters(cv);
        if (bv.timing && cv.timing) {
          row.time = compare_time(*bv.timing, *cv.timing, o);
          if (row.time->clock_flag) {
            row.notes.push_back(fmt::format(
                "SM clock differs: {} MHz (baseline) vs {} MHz (current), {:+.1f}%",
                row.time->base.clock_mhz, row.time->cur.clock_mhz, pct(row.time->clock_diff)));
          }
        }
        const auto bcnt = gated_counters(bv);
        const auto ccnt = gated_counters(cv);
        for (const char* name : kCounterOrder) {
          auto b = bcnt.find(name);
          if (b == bcnt.end()) continue;
          auto c = ccnt.find(name);
          if (c == ccnt.end()) {
            const std::string msg =
                fmt::format("{} counted in the baseline but not in the current run (counters {})",
                            name, cv.counters ? cv.counters->status : std::string("absent"));
            if (o.allow_missing) {
              row.notes.push_back(msg + " (--allow-missing)");
            } else {
              row.problems.push_back(msg);
              error = true;
            }
            continue;
          }
          CounterComparison cc;
          cc.name = name;
          cc.base = b->second;
          cc.cur = c->second;
          if (cc.base > 0) {
            cc.change = cc.cur / cc.base - 1;
            cc.regressed = cc.change > o.tolerance_for(name);
            cc.improved = cc.change < -o.tolerance_for(name);
          } else {
            cc.regressed = cc.cur > 0;  // from nothing to something
          }
          row.counters.push_back(cc);
        }
      }
      finish_row(row, error, failed);
      rep.rows.push_back(std::move(row));
    }
  }
  if (can_compare) {
    for (const auto& c : cur.configs) {
      for (const auto& v : c.results) {
        auto it = o.variant_map.find(v.variant);
        const Key k = key_of(c.shape, it == o.variant_map.end() ? v.variant : it->second);
        if (matched.count(k) || v.status != Status::ok) continue;
        if (shadowed.count({v.variant, config_label(c.shape)})) continue;
        GateRow row;
        row.variant = row.base_variant = v.variant;
        row.shape = c.shape;
        row.config_label = config_label(c.shape);
        row.outcome = RowOutcome::new_row;
        if (v.timing) row.cur_time = side_of(*v.timing);
        row.cur_counters = gated_counters(v);
        row.notes.push_back("not in the baseline: not gated (refresh the baseline to gate it)");
        rep.rows.push_back(std::move(row));
      }
    }
  }

  // ---- exit code ----
  bool errors = !rep.file_problems.empty(), fails = false;
  for (const auto& r : rep.rows) {
    errors |= r.outcome == RowOutcome::error && !r.problems.empty();
    fails |= r.outcome == RowOutcome::regression || r.outcome == RowOutcome::failed;
    fails |= o.strict && r.time && r.time->verdict == TimeVerdict::ambiguous;
  }
  rep.exit_code = errors ? 2 : fails ? 1 : 0;
  return rep;
}

}  // namespace fa::bench
