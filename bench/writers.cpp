#include "bench/writers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace fa::bench {
namespace {

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b * 1e-9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b * 1e-6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b * 1e-3);
  return fmt::format("{:.0f} B", b);
}

std::string status_text(const VariantResult& r) {
  std::string s = r.status == Status::failed ? "FAILED" : to_string(r.status);
  // Reasons that already start with the status word ("unsupported: d=64 ...") are not repeated.
  if (!r.reason.empty()) s = r.reason.rfind(s, 0) == 0 ? r.reason : s + ": " + r.reason;
  return s;
}

}  // namespace

std::string placement_label(const VariantResult& r) {
  if (!r.placement || r.placement->bound.empty()) return "-";
  return fmt::format("{:.0f}% {}{}", 100 * r.placement->fraction, r.placement->bound,
                     r.placement->basis == "compulsory" ? " (c)" : "");
}

std::string verification_label(const VariantResult& r) {
  if (!r.verification) return "-";
  const Verification& v = *r.verification;
  if (v.metric == "row_ratio") return fmt::format("{:.2f}", v.worst_row_ratio);
  // Files from before the per-row rule.
  return fmt::format("{:.2e} / {:.1e}", v.metric == "rmse" ? v.rmse : v.max_abs_error, v.tolerance);
}

std::string energy_label(const VariantResult& r) {
  if (!r.energy || r.energy->status == "skipped") return "-";
  if (!r.energy->energy_per_launch_mj) return "n/a";
  const double mj = *r.energy->energy_per_launch_mj;
  return fmt::format("{:.{}f}", mj, mj >= 100 ? 0 : mj >= 10 ? 1 : 2);
}

namespace {

struct Row {
  std::string variant, time, spread, tflops, tflops_model, bytes, gbps, ai, roof, err, status;
  std::string energy = "-", energy_model = "-", power = "-", clock = "-";
  std::string dram = "-", dram_ratio = "-", l2_ratio = "-", tensor_ratio = "-";
  std::string vs_peer = "-";
};

Row make_row(const ConfigResult& c, const VariantResult& r) {
  Row row;
  row.variant = row_label(c, r) + (r.peer ? " (peer)" : "");
  row.bytes = human_bytes(r.model.bytes());
  row.ai = fmt::format("{:.1f}", r.model.arithmetic_intensity());
  row.time = row.spread = row.tflops = row.gbps = row.roof = "-";
  row.tflops_model = "-";
  if (r.timing && r.derived) {
    row.time = fmt::format("{:.4f}", r.timing->stats.median);
    row.spread = fmt::format("±{:.1f}%", 50.0 * r.timing->stats.relative_iqr());
    row.tflops = fmt::format("{:.1f}", r.derived->tflops_convention);
    row.tflops_model = fmt::format("{:.1f}", r.derived->tflops_model);
    row.gbps = fmt::format("{:.0f}", r.derived->effective_gbps);
    if (!r.derived->best_peer.empty())
      row.vs_peer = fmt::format("{:.2f}x", r.derived->speed_vs_best_peer);
  }
  row.roof = placement_label(r);
  row.energy = energy_label(r);
  if (r.energy_model) row.energy_model = fmt::format("{:.3g}", r.energy_model->total_mj());
  if (r.energy && r.energy->energy_per_launch_mj)
    row.power = fmt::format("{:.0f}", r.energy->power_w);
  if (r.energy && r.energy->clock_samples > 0)
    row.clock =
        fmt::format("{:.0f} / {:.0f}", r.energy->sm_clock_mean_mhz, r.energy->sm_clock_min_mhz);
  row.err = verification_label(r);
  row.status = status_text(r);
  if (r.measured) {
    row.dram = human_bytes(r.measured->dram_bytes);
    row.dram_ratio = fmt::format("{:.2f}", r.measured->dram_over_model);
    row.l2_ratio = fmt::format("{:.2f}", r.measured->l2_over_model);
    row.tensor_ratio = fmt::format("{:.3f}", r.measured->tensor_over_model);
  } else if (r.counters && r.counters->status != "ok") {
    row.dram = "n/a";
  }
  return row;
}

// One line per distinct reason a row's counters failed, naming its rows: a DRAM column that
// says "n/a" and nothing else hid a CUPTI failure from the console (H200, 2026-11-26:
// --stall-reasons' 10 passes against a guard of 6 left every row uncounted without a word).
std::string counter_failures(const ConfigResult& c) {
  std::vector<std::pair<std::string, std::vector<std::string>>> failures;  // reason -> rows
  for (const auto& r : c.results) {
    // "unavailable" (the whole run: said once at its start) and "skipped" (--no-counters) are not
    // a row's failure.
    if (!r.counters || r.counters->status != "error") continue;
    const std::string& why = r.counters->reason;
    auto it = std::find_if(failures.begin(), failures.end(),
                           [&](const auto& f) { return f.first == why; });
    if (it == failures.end()) it = failures.insert(failures.end(), {why, {}});
    it->second.push_back(row_label(c, r));
  }
  std::string out;
  for (const auto& [why, rows] : failures) {
    out += fmt::format("  counters not counted ({}): {}\n", fmt::join(rows, ", "), why);
  }
  return out;
}

// One line per distinct reason rows have no energy, naming them; one per set of clock-event
// reasons seen while the rows ran (power cap, thermal slowdown: their times and energies hold it).
std::string energy_notes(const ConfigResult& c, const char* prefix) {
  std::vector<std::pair<std::string, std::vector<std::string>>> lines;  // line -> rows
  auto add = [&](const std::string& line, const std::string& row) {
    auto it =
        std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == line; });
    if (it == lines.end()) it = lines.insert(lines.end(), {line, {}});
    it->second.push_back(row);
  };
  for (const auto& r : c.results) {
    if (!r.energy || r.energy->status == "skipped") continue;
    const std::string label = row_label(c, r);
    if (r.energy->status != "ok")
      add(fmt::format("energy {}: {}", r.energy->status, r.energy->reason), label);
    std::vector<std::string> held;
    for (const auto& why : r.energy->clock_event_reasons)
      if (why != "idle") held.push_back(why);
    if (!held.empty()) add(fmt::format("SM clock held down ({})", fmt::join(held, ", ")), label);
    if (r.energy->status == "ok" && !r.energy_model && !r.energy_model_reason.empty())
      add("no model figure: " + r.energy_model_reason, label);
  }
  std::string out;
  for (const auto& [line, rows] : lines)
    out += fmt::format("{}{} ({})\n", prefix, line, fmt::join(rows, ", "));
  return out;
}

}  // namespace

std::string energy_legend(const RunResult& r) {
  if (r.settings.energy_window_s <= 0) return "mJ: not measured (--no-energy)";
  std::string s = fmt::format(
      "mJ: energy per launch, NVML's energy counter over {:g} s of launches back to back after "
      "the timing (docs/energy.md); ",
      r.settings.energy_window_s);
  const auto& f = r.ceilings.energy_model;
  if (!f) return s + "no energy model (datasheet roofs: nothing measured)";
  if (f->status != "ok") return s + "no energy model: " + f->reason;
  const std::string fp8 =
      f->eps_flop8_pj ? fmt::format(", {:.3g} per fp8 FLOP", *f->eps_flop8_pj) : "";
  const std::string residuals = fmt::format("(calibration residuals: rms {:.1f}%, max {:.1f}%)",
                                            100 * f->residual_rms, 100 * f->residual_max);
  if (f->version < 2) {  // a file of an older fa-bench: no instruction term, no clock factor
    return s + fmt::format(
                   "energy model: {:.3g} pJ per bf16/fp16 FLOP{}, {:.3g} pJ per DRAM byte, {:.0f} "
                   "W constant {}",
                   f->eps_flop16_pj, fp8, f->eps_byte_pj, f->idle_w, residuals);
  }
  if (f->version < 3) {  // an older fa-bench's: one energy per FLOP, the clock's square
    return s + fmt::format(
                   "energy model: {:.3g} pJ per bf16/fp16 FLOP{}, {:.3g} pJ per warp instruction "
                   "(at {:.0f} MHz, scaled by the square of the row's SM clock), {:.3g} pJ per "
                   "DRAM byte, {:.0f} W constant {}",
                   f->eps_flop16_pj, fp8, f->eps_inst_pj, f->f_ref_mhz, f->eps_byte_pj, f->idle_w,
                   residuals);
  }
  auto pj = [](const std::optional<double>& x) {
    return x ? fmt::format("{:.3g}", *x) : std::string("-");
  };
  // Files before the L2 term (version 3): no L2 energy, no busy power, no clock floor.
  const bool v4 = f->version >= 4;
  const std::string floor = v4 && f->clock_knee_mhz > 0
                                ? fmt::format("max(row's SM clock, {:.0f} MHz)", f->clock_knee_mhz)
                                : std::string("row's SM clock");
  const std::string l2 = v4 ? pj(f->eps_l2_byte_pj) + " pJ per SM<->L2 byte, " : std::string();
  const std::string busy =
      v4 ? fmt::format(" + {:.0f} W with every SM busy", f->busy_w) : std::string();
  // Version 5: DRAM's active power beside its bytes.
  const std::string dram = f->version >= 5
                               ? fmt::format(" + {:.0f} W while moving them", f->dram_active_w)
                               : std::string();
  return s + fmt::format(
                 "energy model: pJ per FLOP bf16/fp16 {:.3g} (wgmma), {} (mma.sync); fp8 {} "
                 "(wgmma), {} (mma.sync); {:.3g} pJ per warp instruction; these at {:.0f} MHz, "
                 "scaled by ({} / {:.0f} MHz)^{:.2f} ({}); {}{:.3g} pJ per DRAM byte{}, {:.0f} W "
                 "constant{} {}",
                 f->eps_flop16_pj, pj(f->eps_mma16_pj), pj(f->eps_flop8_pj), pj(f->eps_mma8_pj),
                 f->eps_inst_pj, f->f_ref_mhz, floor, f->f_ref_mhz, f->clock_exponent,
                 f->clock_exponent_basis, l2, f->eps_byte_pj, dram, f->idle_w, busy, residuals);
}

std::string format_config_header(const ConfigResult& c) {
  const auto& s = c.shape;
  return fmt::format("{} causal={} {}", shape_text(s), s.causal ? "on" : "off", to_string(s.dtype));
}

std::string format_table(const ConfigResult& c) {
  std::string out = format_config_header(c) + "\n";
  constexpr const char* kRowFormat =
      "  {:<14} {:>9} {:>7} {:>8} {:>8} {:>7} {:>10} {:>10} {:>5} {:>5} {:>6} {:>7} {:>7} {:>6} "
      "{:>13} {:>19}  {}\n";
  std::string best_peer;
  for (const auto& r : c.results) {
    if (r.derived && !r.derived->best_peer.empty()) best_peer = r.derived->best_peer;
  }
  out += fmt::format(kRowFormat, "variant", "median ms", "spread", "TFLOP/s", "model",
                     best_peer.empty() ? "vs peer" : "vs " + best_peer.substr(0, 4), "HBM model",
                     "DRAM meas", "/mod", "L2/m", "TC/m", "GB/s", "FLOP/B", "mJ", "roofline",
                     "err/tol", "status");
  for (const auto& r : c.results) {
    const Row w = make_row(c, r);
    out += fmt::format(kRowFormat, w.variant, w.time, w.spread, w.tflops, w.tflops_model, w.vs_peer,
                       w.bytes, w.dram, w.dram_ratio, w.l2_ratio, w.tensor_ratio, w.gbps, w.ai,
                       w.energy, w.roof, w.err, w.status);
  }
  out += counter_failures(c);
  out += energy_notes(c, "  ");
  return out;
}

std::string to_csv(const RunResult& r) {
  std::string out =
      "B,H,N,d,causal,dtype,variant,peer,status,reason,median_ms,q1_ms,q3_ms,min_ms,max_ms,"
      "samples,tflops_convention,tflops_model,flops_matrix,flops_convention,model_bytes_read,"
      "model_bytes_written,model_bytes_compulsory,effective_gbps,arithmetic_intensity,"
      "roofline_basis,roofline_intensity_dram,roofline_intensity_l2,roofline_fraction,bound,"
      "verification_metric,verification_value,tolerance,max_abs_error,rmse,relative_rmse,"
      "best_peer,speed_vs_best_peer,energy_status,energy_reason,energy_per_launch_mj,"
      "sampled_energy_per_launch_mj,power_w,sm_clock_mean_mhz,sm_clock_min_mhz,clock_event_reasons,"
      "energy_seconds_per_launch,model_energy_mj,model_flop_mj,model_byte_mj,model_idle_mj,"
      "model_energy_bytes_basis,energy_temperature_mean_c,energy_temperature_max_c,model_inst_mj,"
      "model_instructions,model_clock_scale,model_energy_reason,model_l2_mj,model_l2_bytes,H_kv,N_"
      "kv,launch,page_size,kv_lengths\n";
  auto quote = [](std::string s) {
    std::string q = "\"";
    for (char ch : s) q += (ch == '"') ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const auto& c : r.configs) {
    for (const auto& v : c.results) {
      const auto& s = c.shape;
      std::string timing = ",,,,,", derived = ",,", roof = ",,,,";
      if (v.timing) {
        const auto& t = v.timing->stats;
        timing = fmt::format("{},{},{},{},{},{}", t.median, t.q1, t.q3, t.min, t.max, t.count);
      }
      if (v.derived) {
        derived = fmt::format("{},{}", v.derived->tflops_convention, v.derived->tflops_model);
      } else {
        derived = ",";
      }
      const std::string gbps = v.derived ? fmt::format("{}", v.derived->effective_gbps) : "";
      if (v.placement) {
        const Placement& p = *v.placement;
        roof = fmt::format("{},{},{},{},{}", p.basis, p.intensity_dram,
                           p.intensity_l2 > 0 ? fmt::format("{}", p.intensity_l2) : "", p.fraction,
                           p.bound);
      }
      // The judged value beside its own tolerance (row_ratio: the worst row over its tolerance, 1).
      std::string err = ",,,,,";
      if (v.verification) {
        const Verification& e = *v.verification;
        const double value = e.metric == "row_ratio" ? e.worst_row_ratio
                             : e.metric == "rmse"    ? e.rmse
                                                     : e.max_abs_error;
        err = fmt::format("{},{},{},{},{},{}", e.metric, value, e.tolerance, e.max_abs_error,
                          e.rmse, e.relative_rmse ? fmt::format("{}", *e.relative_rmse) : "");
      }
      const std::string vs_peer =
          v.derived && !v.derived->best_peer.empty()
              ? fmt::format("{},{}", v.derived->best_peer, v.derived->speed_vs_best_peer)
              : ",";
      auto opt = [](const std::optional<double>& x) { return x ? fmt::format("{}", *x) : ""; };
      std::string energy = ",,,,,,,,";
      if (v.energy) {
        const energy::Measurement& e = *v.energy;
        const bool sampled = e.clock_samples > 0;
        energy =
            fmt::format("{},{},{},{},{},{},{},{},{}", e.status, quote(e.reason),
                        opt(e.energy_per_launch_mj), opt(e.sampled_energy_per_launch_mj),
                        e.energy_per_launch_mj ? fmt::format("{}", e.power_w) : "",
                        sampled ? fmt::format("{}", e.sm_clock_mean_mhz) : "",
                        sampled ? fmt::format("{}", e.sm_clock_min_mhz) : "",
                        quote(fmt::format("{}", fmt::join(e.clock_event_reasons, "; "))),
                        e.seconds_per_launch > 0 ? fmt::format("{}", e.seconds_per_launch) : "");
      }
      std::string model = ",,,,";
      std::string later;  // the columns added after the first energy ones, at the end
      const bool heat = v.energy && v.energy->temperature_samples > 0;
      const std::string temperature =
          heat ? fmt::format("{},{}", v.energy->temperature_mean_c, v.energy->temperature_max_c)
               : ",";
      if (v.energy_model) {
        const energy::Breakdown& b = *v.energy_model;
        model = fmt::format("{},{},{},{},{}", b.total_mj(), b.flop_mj, b.byte_mj, b.idle_mj,
                            b.bytes_basis);
        const std::string l2 =
            b.version >= 3 ? fmt::format("{},{}", b.l2_mj, b.l2_bytes) : std::string(",");
        later = fmt::format("{},{},{},{},,{}", temperature, b.inst_mj, b.instructions,
                            b.clock_scale, l2);
      } else {
        later = fmt::format("{},,,,{},,", temperature, quote(v.energy_model_reason));
      }
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{"
          "}\n",
          s.B, s.H, s.N, s.d, s.causal ? 1 : 0, to_string(s.dtype), row_label(c, v), v.peer ? 1 : 0,
          to_string(v.status), quote(v.reason), timing, derived, v.model.flops_matrix,
          v.model.flops_convention, v.model.bytes_read, v.model.bytes_written,
          v.model.bytes_compulsory, gbps, v.model.arithmetic_intensity(), roof, err, vs_peer,
          energy, model, later, s.kv_heads(), s.kv_len(), v.timing ? v.timing->launch : "",
          s.page_size, s.ragged() ? quote(fmt::format("{}", fmt::join(s.kv_lengths, " "))) : "");
    }
  }
  return out;
}

std::string to_markdown(const RunResult& r) {
  std::string out = "# fa-bench results\n\n";
  out += fmt::format("- command: `{}`\n- device: {}\n- L2: {}\n- launch: {}\n\n", r.command_line,
                     r.device ? r.device->name : "none (" + r.no_gpu_reason + ")", r.settings.l2,
                     r.settings.launch);
  for (const auto& c : r.configs) {
    out += "## " + format_config_header(c) + "\n\n";
    out +=
        "| variant | median ms | spread | TFLOP/s | model TFLOP/s | speed vs best peer | HBM "
        "(model) "
        "| DRAM (measured) | DRAM/model | L2/model | tensor/model | GB/s | FLOP/B | energy mJ | "
        "model mJ | power W | SM clock MHz (mean / min) | roofline | worst row error / "
        "its tolerance | status |\n";
    out +=
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        "---:|---|\n";
    for (const auto& v : c.results) {
      const Row w = make_row(c, v);
      out += fmt::format(
          "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | "
          "{} "
          "| {} | {} |\n",
          w.variant, w.time, w.spread, w.tflops, w.tflops_model, w.vs_peer, w.bytes, w.dram,
          w.dram_ratio, w.l2_ratio, w.tensor_ratio, w.gbps, w.ai, w.energy, w.energy_model, w.power,
          w.clock, w.roof, w.err, w.status);
    }
    if (const std::string notes = energy_notes(c, "- "); !notes.empty()) out += "\n" + notes;
    out += "\n";
  }
  return out;
}

}  // namespace fa::bench
