#include "bench/gate_outputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace fa::bench {
namespace {

using json = nlohmann::json;

const char* const kCounters[] = {"dram_bytes", "l2_bytes", "tensor_flops", "instructions"};
const char* const kCounterTitles[] = {"DRAM", "L2", "tensor", "inst"};

double pct(double x) {
  return 100.0 * x;
}

std::string time_cell(const GateRow& r) {
  if (!r.time || r.time->verdict == TimeVerdict::not_compared) return "-";
  return fmt::format("{:+.1f}% {}", pct(r.time->gap), to_string(r.time->verdict));
}

std::string counter_cell(const GateRow& r, const char* name) {
  for (const auto& c : r.counters) {
    if (c.name == name) {
      if (c.base <= 0) return c.regressed ? "new>0 !" : "0";
      return fmt::format("{:+.1f}%{}", pct(c.change), c.regressed ? " !" : "");
    }
  }
  return "-";
}

std::string ms(const std::optional<TimeComparison>& t, bool base) {
  if (!t) return "-";
  const TimeSide& s = base ? t->base : t->cur;
  return s.n ? fmt::format("{:.4f}", s.median) : "-";
}

std::string shorten(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// The lines under a row: why, what is wrong, what to know.
std::vector<std::string> details(const GateRow& r, const GateOptions& o) {
  std::vector<std::string> out;
  for (const auto& p : r.problems) out.push_back("error: " + p);
  if (r.time && r.time->verdict != TimeVerdict::same &&
      r.time->verdict != TimeVerdict::not_compared) {
    out.push_back(fmt::format("time: {} (n = {} / {}, tolerance {:.1f}%{})", r.time->why,
                              r.time->base.n, r.time->cur.n, pct(r.time->tolerance),
                              r.time->calibrated ? " calibrated" : ""));
    if (!r.time->rerun.empty()) out.push_back("to decide: " + r.time->rerun);
  }
  for (const auto& c : r.counters) {
    if (c.regressed || c.improved) {
      out.push_back(fmt::format("{}: {:.6g} -> {:.6g} ({:+.2f}%, tolerance {:.1f}%{})", c.name,
                                c.base, c.cur, pct(c.change), pct(c.tolerance),
                                c.calibrated ? " calibrated" : ""));
    }
  }
  for (const auto& n : r.notes) out.push_back("note: " + n);
  (void)o;
  return out;
}

std::string heading(const GateReport& r) {
  return fmt::format("baseline {} ({}, rev {}) vs current {} ({}, rev {})", r.baseline_source,
                     r.device_base, r.revision_base, r.current_source, r.device_cur,
                     r.revision_cur);
}

std::string rule_line(const GateOptions& o) {
  return fmt::format(
             "time: median ratio in time and in SM cycles, Mann-Whitney U p < {:g} and the {:.0f}% "
             "bootstrap interval beyond the tolerance {:.1f}%{}, >= {} samples; counters: "
             "tolerance "
             "{:.1f}%{}{}{}",
             o.alpha, 100 * o.confidence, pct(o.time_tolerance),
             o.calibration && !o.time_tolerance_given ? " (or the row's calibrated one)" : "",
             o.min_samples, pct(o.counter_tolerance),
             [&] {
               std::string s;
               for (const auto& [name, t] : o.counter_tolerance_for) {
                 s += fmt::format(", {} {:.1f}%", name, pct(t));
               }
               return s;
             }(),
             o.calibration && !o.counter_tolerance_given ? " (or the row's calibrated ones)" : "",
             o.time_only ? " (not compared: --time-only)" : "") +
         (o.gate_energy ? fmt::format("; energy per launch: tolerance {:.1f}%{} (--gate-energy)",
                                      pct(o.energy_tolerance),
                                      o.calibration && !o.energy_tolerance_given
                                          ? " (or the row's calibrated one)"
                                          : "")
                        : std::string("; energy not gated")) +
         (o.gate_peers ? "; peers gated (--gate-peers)" : "; peers not gated (sentinels)");
}

int ambiguous_count(const GateReport& r) {
  int n = 0;
  for (const auto& row : r.rows) {
    n += row.outcome == RowOutcome::warning && row.time &&
         row.time->verdict == TimeVerdict::ambiguous;
  }
  return n;
}

std::string summary_counts(const GateReport& r) {
  std::string s = fmt::format("{} rows", r.rows.size());
  const std::pair<RowOutcome, const char*> parts[] = {
      {RowOutcome::regression, "regressed"},
      {RowOutcome::failed, "failed"},
      {RowOutcome::error, "errors"},
      {RowOutcome::warning, "warnings"},
      {RowOutcome::improved, "improved"},
      {RowOutcome::pass, "pass"},
      {RowOutcome::new_row, "new"},
      {RowOutcome::environment, "environment changes (peers)"}};
  for (const auto& [o, name] : parts) {
    if (const int n = r.count(o)) s += fmt::format(", {} {}", n, name);
  }
  return s;
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') {
      out += "\\|";
    } else if (ch == '\n' || ch == '\r') {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

std::string row_name(const GateRow& r) {
  const std::string name =
      r.variant == r.base_variant ? r.variant : r.variant + " (as " + r.base_variant + ")";
  return r.peer ? name + " (peer)" : name;
}

}  // namespace

std::string gate_verdict_line(const GateReport& r) {
  if (r.exit_code == 2) {
    return "ERROR (exit 2): the comparison cannot be made; see the errors above";
  }
  const int amb = ambiguous_count(r);
  std::string rerun;
  if (amb) {
    std::string how = "rerun baseline and current with more repetitions";
    for (const auto& row : r.rows) {
      if (row.outcome == RowOutcome::warning && row.time && !row.time->rerun.empty()) {
        how = row.time->rerun;
        break;
      }
    }
    rerun = fmt::format(
        "; {} ambiguous (the data cannot tell): {}, back to back on a quiet "
        "runner (docs/ci-gates.md)",
        amb, how);
  }
  if (r.exit_code == 1) {
    std::string why;
    if (const int n = r.count(RowOutcome::regression)) why += fmt::format("{} regressed", n);
    if (const int n = r.count(RowOutcome::failed))
      why += fmt::format("{}{} failed", why.empty() ? "" : ", ", n);
    if (why.empty()) why = "ambiguous time under --strict";
    return fmt::format("FAIL (exit 1): {}{}", why, rerun);
  }
  return fmt::format("PASS (exit 0){}{}", r.count(RowOutcome::warning) ? " with warnings" : "",
                     rerun);
}

std::string gate_table(const GateReport& r, const GateOptions& o) {
  std::string out = "fa-bench gate: " + heading(r) + "\n" + rule_line(o) + "\n";
  for (const auto& p : r.file_problems) out += "error: " + p + "\n";
  for (const auto& n : r.file_notes) out += "note: " + n + "\n";
  for (const auto& e : r.environment) out += "environment: " + e + "\n";
  // The energy column only under --gate-energy: the table stays as it was otherwise.
  auto energy = [&](const std::string& cell) {
    return o.gate_energy ? fmt::format(" {:>8}", cell) : std::string();
  };
  if (!r.rows.empty()) {
    out += fmt::format("\n{:<34} {:<14} {:>9} {:>9}  {:<18} {:>8} {:>8} {:>8} {:>8}{}  {}\n",
                       "config", "variant", "base ms", "cur ms", "time", "DRAM", "L2", "tensor",
                       "inst", energy("energy"), "outcome");
  }
  for (const auto& row : r.rows) {
    out += fmt::format("{:<34} {:<14} {:>9} {:>9}  {:<18} {:>8} {:>8} {:>8} {:>8}{}  {}\n",
                       shorten(row.config_label, 34), shorten(row_name(row), 14),
                       ms(row.time, true), ms(row.time, false), time_cell(row),
                       counter_cell(row, kCounters[0]), counter_cell(row, kCounters[1]),
                       counter_cell(row, kCounters[2]), counter_cell(row, kCounters[3]),
                       energy(counter_cell(row, kGateEnergy)), to_string(row.outcome));
    if (row.outcome != RowOutcome::pass || !row.notes.empty()) {
      for (const auto& d : details(row, o)) out += "    " + d + "\n";
    }
  }
  out += "\n" + summary_counts(r) + "\n" + gate_verdict_line(r) + "\n";
  return out;
}

std::string gate_markdown(const GateReport& r, const GateOptions& o) {
  const char* title = r.exit_code == 2 ? "error" : r.exit_code == 1 ? "FAIL" : "pass";
  std::string out = fmt::format("## fa-bench gate: {}\n\n", title);
  out += md_cell(heading(r)) + "\n\n" + md_cell(rule_line(o)) + "\n\n";
  for (const auto& p : r.file_problems) out += "- **error:** " + md_cell(p) + "\n";
  for (const auto& n : r.file_notes) out += "- note: " + md_cell(n) + "\n";
  for (const auto& e : r.environment) out += "- environment: " + md_cell(e) + "\n";
  if (!r.file_problems.empty() || !r.file_notes.empty() || !r.environment.empty()) out += "\n";
  if (!r.rows.empty()) {
    out += "| config | variant | base ms | cur ms | time |";
    for (const char* t : kCounterTitles) out += fmt::format(" {} |", t);
    if (o.gate_energy) out += " energy |";
    out += fmt::format(" outcome |\n|---|---|---:|---:|---|---:|---:|---:|---:|{}---|\n",
                       o.gate_energy ? "---:|" : "");
    for (const auto& row : r.rows) {
      out += fmt::format("| {} | {} | {} | {} | {} |", md_cell(row.config_label),
                         md_cell(row_name(row)), ms(row.time, true), ms(row.time, false),
                         md_cell(time_cell(row)));
      for (const char* c : kCounters) out += " " + md_cell(counter_cell(row, c)) + " |";
      if (o.gate_energy) out += " " + md_cell(counter_cell(row, kGateEnergy)) + " |";
      const bool bad = row.outcome == RowOutcome::regression || row.outcome == RowOutcome::failed ||
                       row.outcome == RowOutcome::error;
      out += fmt::format(" {} |\n", bad ? "**" + std::string(to_string(row.outcome)) + "**"
                                        : std::string(to_string(row.outcome)));
    }
    out += "\n";
  }
  bool any = false;
  for (const auto& row : r.rows) {
    const auto d = details(row, o);
    if (d.empty() || row.outcome == RowOutcome::pass) continue;
    if (!any) out += "### Details\n\n";
    any = true;
    out += fmt::format("- **{}** {}:", md_cell(row_name(row)), md_cell(row.config_label));
    for (const auto& line : d) out += " " + md_cell(line) + ";";
    out += "\n";
  }
  if (any) out += "\n";
  out += summary_counts(r) + ". " + md_cell(gate_verdict_line(r)) + "\n";
  return out;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') break;  // not allowed in XML 1.0
        if (ch == 0x7f) break;
        out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string gate_junit(const GateReport& r, const GateOptions& o) {
  int failures = 0, errors = 0, skipped = 0;
  std::string cases;
  if (!r.file_problems.empty()) {
    ++errors;
    std::string text;
    for (const auto& p : r.file_problems) text += p + "\n";
    cases += fmt::format(
        "    <testcase classname=\"fa-bench.gate\" name=\"result files\">\n"
        "      <error message=\"{}\" type=\"bad input\">{}</error>\n    </testcase>\n",
        xml_escape(r.file_problems.front()), xml_escape(text));
  }
  for (const auto& row : r.rows) {
    const auto d = details(row, o);
    std::string text;
    for (const auto& line : d) text += line + "\n";
    const std::string first = d.empty() ? std::string(to_string(row.outcome)) : d.front();
    cases += fmt::format("    <testcase classname=\"fa-bench.gate.{}\" name=\"{}\">\n",
                         xml_escape(row.config_label), xml_escape(row_name(row)));
    const bool strict_fail = o.strict && row.outcome == RowOutcome::warning && row.time &&
                             row.time->verdict == TimeVerdict::ambiguous;
    if (row.outcome == RowOutcome::error) {
      ++errors;
      cases += fmt::format("      <error message=\"{}\" type=\"cannot compare\">{}</error>\n",
                           xml_escape(first), xml_escape(text));
    } else if (row.outcome == RowOutcome::regression || row.outcome == RowOutcome::failed ||
               strict_fail) {
      ++failures;
      cases +=
          fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml_escape(first),
                      strict_fail && row.outcome == RowOutcome::warning ? "ambiguous (--strict)"
                                                                        : to_string(row.outcome),
                      xml_escape(text));
    } else if (row.outcome == RowOutcome::new_row) {
      ++skipped;
      cases += "      <skipped message=\"not in the baseline\"/>\n";
    }
    if (!text.empty()) cases += "      <system-out>" + xml_escape(text) + "</system-out>\n";
    cases += "    </testcase>\n";
  }
  const int tests = static_cast<int>(r.rows.size()) + (r.file_problems.empty() ? 0 : 1);
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"fa-bench gate\" tests=\"{0}\" failures=\"{1}\" errors=\"{2}\" "
      "skipped=\"{3}\">\n"
      "  <testsuite name=\"fa-bench gate\" tests=\"{0}\" failures=\"{1}\" errors=\"{2}\" "
      "skipped=\"{3}\">\n"
      "    <properties>\n"
      "      <property name=\"baseline\" value=\"{4}\"/>\n"
      "      <property name=\"current\" value=\"{5}\"/>\n"
      "      <property name=\"rule\" value=\"{6}\"/>\n"
      "    </properties>\n{7}  </testsuite>\n</testsuites>\n",
      tests, failures, errors, skipped, xml_escape(r.baseline_source), xml_escape(r.current_source),
      xml_escape(rule_line(o)), cases);
}

namespace {

json finite(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

std::string bench_name(const GateRow& r) {
  return r.variant + " " + r.config_label;
}

}  // namespace

std::string gate_github_benchmark(const GateReport& r) {
  static const std::pair<const char*, const char*> kNames[] = {{"dram_bytes", "DRAM bytes"},
                                                               {"l2_bytes", "L2 bytes"},
                                                               {"tensor_flops", "tensor FLOPs"},
                                                               {"instructions", "instructions"},
                                                               {kGateEnergy, "energy per launch"}};
  json out = json::array();
  for (const auto& row : r.rows) {
    if (row.cur_time && row.cur_time->n) {
      const TimeSide& t = *row.cur_time;
      out.push_back({{"name", bench_name(row) + " time"},
                     {"unit", "ms"},
                     {"value", finite(t.median)},
                     {"range", fmt::format("± {:.4f}", (t.q3 - t.q1) / 2)},
                     {"extra", fmt::format("n={} min={:.4f} q1={:.4f} q3={:.4f} SM clock {} MHz",
                                           t.n, t.min, t.q1, t.q3, t.clock_mhz)}});
    }
    for (const auto& [key, title] : kNames) {
      auto it = row.cur_counters.find(key);
      if (it == row.cur_counters.end()) continue;
      out.push_back(
          {{"name", bench_name(row) + " " + title},
           {"unit", key == std::string("dram_bytes") || key == std::string("l2_bytes") ? "bytes"
                    : key == std::string(kGateEnergy)                                  ? "mJ"
                                                                                       : "count"},
           {"value", finite(it->second)}});
    }
  }
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string gate_bmf(const GateReport& r) {
  json out = json::object();
  for (const auto& row : r.rows) {
    json measures = json::object();
    if (row.cur_time && row.cur_time->n) {
      const TimeSide& t = *row.cur_time;  // Bencher's latency measure is in nanoseconds
      measures["latency"] = {{"value", finite(t.median * 1e6)},
                             {"lower_value", finite(t.q1 * 1e6)},
                             {"upper_value", finite(t.q3 * 1e6)}};
    }
    for (const char* key : {kCounters[0], kCounters[1], kCounters[2], kCounters[3], kGateEnergy}) {
      auto it = row.cur_counters.find(key);
      if (it == row.cur_counters.end()) continue;
      std::string slug = key;
      for (char& ch : slug) ch = ch == '_' ? '-' : ch;
      measures[slug] = {{"value", finite(it->second)}};
    }
    if (!measures.empty()) out[bench_name(row)] = measures;
  }
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace fa::bench
