#include "profiler/energy_json.hpp"

#include <cmath>
#include <stdexcept>

namespace fa::energy {
namespace {

using json = nlohmann::json;

const json& at(const json& j, const char* key) {
  if (!j.is_object()) throw std::invalid_argument("expected an object");
  auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument(std::string(key) + ": missing");
  return *it;
}

// Energies, powers, times, counts: finite and >= 0.
double figure(const json& j, const char* key) {
  const json& v = at(j, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    throw std::invalid_argument(std::string(key) + ": impossible value " + v.dump() +
                                " (accepted: a finite number >= 0)");
  return v.get<double>();
}

std::optional<double> optional_figure(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return figure(j, key);
}

// A signed ratio (model / measured - 1, counter / sampled - 1): finite and >= -1.
std::optional<double> optional_ratio(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& v = j[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -1)
    throw std::invalid_argument(std::string(key) + ": impossible value " + v.dump() +
                                " (accepted: a finite number >= -1)");
  return v.get<double>();
}

int count(const json& j, const char* key) {
  const json& v = at(j, key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > (1ll << 31))
    throw std::invalid_argument(std::string(key) + ": impossible value " + v.dump() +
                                " (accepted: an integer >= 0)");
  return static_cast<int>(v.get<std::int64_t>());
}

std::string text(const json& j, const char* key) {
  const json& v = at(j, key);
  if (!v.is_string()) throw std::invalid_argument(std::string(key) + ": expected a string");
  return v.get<std::string>();
}

std::string one_of(const json& j, const char* key, std::initializer_list<const char*> accepted) {
  const std::string s = text(j, key);
  std::string list;
  for (const char* a : accepted) {
    if (s == a) return s;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw std::invalid_argument(std::string(key) + ": unknown value '" + s + "' (accepted: " + list +
                              ")");
}

json opt(const std::optional<double>& x) {
  return x && std::isfinite(*x) ? json(*x) : json(nullptr);
}

// A calibration point's or a row's temperature: null when the driver gave none.
json temperature_json(double mean, double max) {
  return mean > 0 ? json{{"mean", mean}, {"max", max}} : json(nullptr);
}

}  // namespace

json energy_fit_to_json(const Fit& f) {
  json points = json::array();
  for (std::size_t i = 0; i < f.points.size(); ++i) {
    const CalibrationPoint& p = f.points[i];
    json pj{{"kernel", p.kernel}, {"flops16", p.flops16}, {"flops8", p.flops8},
            {"bytes", p.bytes},   {"seconds", p.seconds}, {"energy_j", p.energy_j}};
    if (f.version >= 3) {
      pj["flops16_mma"] = p.flops16_mma;
      pj["flops8_mma"] = p.flops8_mma;
    }
    if (f.version >= 4) {
      pj["l2_bytes"] = p.l2_bytes;
      pj["active_sm_fraction"] = p.active_sm_fraction;
    }
    if (f.version >= 2) {
      pj["instructions"] = p.instructions;
      pj["sm_clock_mhz"] = p.sm_clock_mhz;
      pj["temperature_c"] = temperature_json(p.temperature_c, p.temperature_max_c);
    }
    if (i < f.residuals.size()) pj["residual"] = f.residuals[i];
    points.push_back(std::move(pj));
  }
  json j{{"status", f.status},
         {"reason", f.reason},
         {"eps_flop16_pj", f.eps_flop16_pj},
         {"eps_flop8_pj", opt(f.eps_flop8_pj)},
         {"eps_byte_pj", f.eps_byte_pj},
         {"idle_w", f.idle_w},
         {"residual_rms", f.residual_rms},
         {"residual_max", f.residual_max},
         {"points", points}};
  if (f.version >= 2) {  // a version-1 fit read from an older file is written back as it was
    j["eps_inst_pj"] = f.eps_inst_pj;
    j["f_ref_mhz"] = f.f_ref_mhz;
  }
  if (f.version >= 3) {  // as is a version-2 fit (no mma.sync terms, the exponent 2)
    j["eps_mma16_pj"] = opt(f.eps_mma16_pj);
    j["eps_mma8_pj"] = opt(f.eps_mma8_pj);
    j["clock_exponent"] = f.clock_exponent;
    j["clock_exponent_basis"] = f.clock_exponent_basis;
  }
  if (f.version >= 4) {  // and a version-3 one (no L2 term, no busy power, no clock floor)
    j["eps_l2_byte_pj"] = opt(f.eps_l2_byte_pj);
    j["busy_w"] = f.busy_w;
    j["clock_knee_mhz"] = f.clock_knee_mhz;
  }
  if (f.version >= 5) j["dram_active_w"] = f.dram_active_w;  // and a version-4 one
  return j;
}

Fit energy_fit_from_json(const json& j) {
  Fit f;
  f.status = one_of(j, "status", {"ok", "refused", "unavailable"});
  f.reason = text(j, "reason");
  f.eps_flop16_pj = figure(j, "eps_flop16_pj");
  f.eps_flop8_pj = optional_figure(j, "eps_flop8_pj");
  f.eps_byte_pj = figure(j, "eps_byte_pj");
  f.idle_w = figure(j, "idle_w");
  f.residual_rms = figure(j, "residual_rms");
  f.residual_max = figure(j, "residual_max");
  const std::optional<double> eps_inst = optional_figure(j, "eps_inst_pj");
  const std::optional<double> exponent = optional_figure(j, "clock_exponent");
  const std::optional<double> knee = optional_figure(j, "clock_knee_mhz");
  const std::optional<double> dram_active = optional_figure(j, "dram_active_w");
  // Each version adds keys to the one before it (Fit::version).
  f.version = knee && exponent ? (dram_active ? 5 : 4) : exponent ? 3 : eps_inst ? 2 : 1;
  f.dram_active_w = f.version >= 5 ? *dram_active : 0;
  f.eps_inst_pj = eps_inst.value_or(0);
  f.clock_exponent = exponent.value_or(2);
  if (exponent) {
    f.eps_mma16_pj = optional_figure(j, "eps_mma16_pj");
    f.eps_mma8_pj = optional_figure(j, "eps_mma8_pj");
    if (j.contains("clock_exponent_basis"))
      f.clock_exponent_basis = text(j, "clock_exponent_basis");
  }
  if (f.version >= 4) {
    f.clock_knee_mhz = *knee;
    f.eps_l2_byte_pj = optional_figure(j, "eps_l2_byte_pj");
    f.busy_w = figure(j, "busy_w");
  }
  f.f_ref_mhz = optional_figure(j, "f_ref_mhz").value_or(0);
  const json& points = at(j, "points");
  if (!points.is_array()) throw std::invalid_argument("points: expected an array");
  for (const json& pj : points) {
    CalibrationPoint p;
    p.kernel = text(pj, "kernel");
    p.flops16 = figure(pj, "flops16");
    p.flops8 = figure(pj, "flops8");
    p.bytes = figure(pj, "bytes");
    p.seconds = figure(pj, "seconds");
    p.energy_j = figure(pj, "energy_j");
    p.flops16_mma = optional_figure(pj, "flops16_mma").value_or(0);
    p.flops8_mma = optional_figure(pj, "flops8_mma").value_or(0);
    p.instructions = optional_figure(pj, "instructions").value_or(0);
    p.l2_bytes = optional_figure(pj, "l2_bytes").value_or(0);
    if (const auto a = optional_figure(pj, "active_sm_fraction")) {
      if (*a > 1) throw std::invalid_argument("active_sm_fraction: above 1 (accepted: 0 to 1)");
      p.active_sm_fraction = *a;
    }
    p.sm_clock_mhz = optional_figure(pj, "sm_clock_mhz").value_or(0);
    if (pj.contains("temperature_c") && !pj["temperature_c"].is_null()) {
      p.temperature_c = figure(pj["temperature_c"], "mean");
      p.temperature_max_c = figure(pj["temperature_c"], "max");
    }
    if (pj.contains("residual")) {
      const std::optional<double> r = optional_ratio(pj, "residual");
      f.residuals.push_back(r.value_or(0));
    }
    f.points.push_back(std::move(p));
  }
  return f;
}

json row_energy_to_json(const Measurement& m, const std::optional<Breakdown>& model,
                        const std::string& model_reason) {
  json j{
      {"status", m.status},
      {"reason", m.reason},
      {"energy_per_launch_mj", opt(m.energy_per_launch_mj)},
      {"sampled_energy_per_launch_mj", opt(m.sampled_energy_per_launch_mj)},
      {"power_w", m.power_w},
      {"sampled_power_w", m.sampled_power_w},
      {"power_samples", m.power_samples},
      {"counter_vs_sampled", opt(m.counter_vs_sampled)},
      {"launches", m.launches},
      {"busy_s", m.busy_s},
      {"seconds_per_launch", m.seconds_per_launch},
      {"window_s", m.window_s},
      {"counter_mj", m.counter_mj},
      {"counter_updates", m.counter_updates},
      {"sm_clock_mhz",
       {{"mean", m.sm_clock_mean_mhz}, {"min", m.sm_clock_min_mhz}, {"samples", m.clock_samples}}},
      {"clock_event_reasons", m.clock_event_reasons}};
  if (m.temperature_samples > 0) {
    j["temperature_c"] = {{"mean", m.temperature_mean_c},
                          {"max", m.temperature_max_c},
                          {"samples", m.temperature_samples}};
  }
  if (model) {
    const Breakdown& b = *model;
    json mj{{"flop_mj", b.flop_mj},     {"byte_mj", b.byte_mj},         {"idle_mj", b.idle_mj},
            {"total_mj", b.total_mj()}, {"bytes_basis", b.bytes_basis}, {"flops", b.flops},
            {"bytes", b.bytes},         {"seconds", b.seconds}};
    if (b.version >= 2) {  // a breakdown read from an older file is written back as it was
      mj["inst_mj"] = b.inst_mj;
      mj["instructions"] = b.instructions;
      mj["sm_clock_mhz"] = b.sm_clock_mhz;
      mj["clock_scale"] = b.clock_scale;
    }
    if (b.version >= 3) {
      mj["l2_mj"] = b.l2_mj;
      mj["l2_bytes"] = b.l2_bytes;
      mj["flop_instruction"] = b.flop_instruction;
    }
    if (m.energy_per_launch_mj && *m.energy_per_launch_mj > 0)
      mj["model_over_measured"] = b.total_mj() / *m.energy_per_launch_mj;
    j["model"] = std::move(mj);
  } else if (!model_reason.empty()) {
    j["model_reason"] = model_reason;
  }
  return j;
}

void row_energy_from_json(const json& j, Measurement* m, std::optional<Breakdown>* model,
                          std::string* model_reason) {
  m->status = one_of(j, "status", {"ok", "refused", "unavailable", "error", "skipped"});
  m->reason = text(j, "reason");
  m->energy_per_launch_mj = optional_figure(j, "energy_per_launch_mj");
  if ((m->status == "ok") != m->energy_per_launch_mj.has_value())
    throw std::invalid_argument("energy_per_launch_mj: must be a number exactly when status is ok");
  m->sampled_energy_per_launch_mj = optional_figure(j, "sampled_energy_per_launch_mj");
  m->power_w = figure(j, "power_w");
  m->sampled_power_w = figure(j, "sampled_power_w");
  m->power_samples = count(j, "power_samples");
  m->counter_vs_sampled = optional_ratio(j, "counter_vs_sampled");
  m->launches = count(j, "launches");
  m->busy_s = figure(j, "busy_s");
  m->seconds_per_launch = figure(j, "seconds_per_launch");
  m->window_s = figure(j, "window_s");
  m->counter_mj = figure(j, "counter_mj");
  m->counter_updates = count(j, "counter_updates");
  const json& clock = at(j, "sm_clock_mhz");
  m->sm_clock_mean_mhz = figure(clock, "mean");
  m->sm_clock_min_mhz = figure(clock, "min");
  m->clock_samples = count(clock, "samples");
  const json& reasons = at(j, "clock_event_reasons");
  if (!reasons.is_array()) throw std::invalid_argument("clock_event_reasons: expected an array");
  m->clock_event_reasons.clear();
  for (const json& r : reasons) {
    if (!r.is_string())
      throw std::invalid_argument("clock_event_reasons: expected an array of strings");
    m->clock_event_reasons.push_back(r.get<std::string>());
  }
  m->temperature_mean_c = m->temperature_max_c = 0;
  m->temperature_samples = 0;
  if (j.contains("temperature_c") && !j["temperature_c"].is_null()) {  // optional: newer files
    const json& t = j["temperature_c"];
    m->temperature_mean_c = figure(t, "mean");
    m->temperature_max_c = figure(t, "max");
    m->temperature_samples = count(t, "samples");
  }
  const std::string reason =
      j.contains("model_reason") && !j["model_reason"].is_null() ? text(j, "model_reason") : "";
  if (model_reason) *model_reason = reason;
  model->reset();
  if (j.contains("model") && !j["model"].is_null()) {
    const json& mj = j["model"];
    Breakdown b;
    b.flop_mj = figure(mj, "flop_mj");
    b.byte_mj = figure(mj, "byte_mj");
    b.idle_mj = figure(mj, "idle_mj");
    b.bytes_basis = one_of(mj, "bytes_basis", {"counters", "model"});
    b.flops = figure(mj, "flops");
    b.bytes = figure(mj, "bytes");
    b.seconds = figure(mj, "seconds");
    // Files before the instruction term and the clock factor have none of these: their model had
    // no instruction part, and quoted its energies at whatever clock the row ran.
    const std::optional<double> inst_mj = optional_figure(mj, "inst_mj");
    const std::optional<double> l2_mj = optional_figure(mj, "l2_mj");
    b.version = l2_mj ? 3 : inst_mj ? 2 : 1;
    b.l2_mj = l2_mj.value_or(0);
    b.l2_bytes = optional_figure(mj, "l2_bytes").value_or(0);
    if (l2_mj) b.flop_instruction = one_of(mj, "flop_instruction", {"wgmma", "mma.sync"});
    b.inst_mj = inst_mj.value_or(0);
    b.instructions = optional_figure(mj, "instructions").value_or(0);
    b.sm_clock_mhz = optional_figure(mj, "sm_clock_mhz").value_or(0);
    b.clock_scale = optional_figure(mj, "clock_scale").value_or(1);
    *model = b;
  }
}

}  // namespace fa::energy
