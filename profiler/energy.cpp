#include "profiler/energy.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "profiler/device_info.hpp"

namespace fa::energy {
namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

// NVML's stable C ABI: nvmlReturn_t is an int, a device handle a pointer.
class NvmlPowerSource final : public PowerSource {
 public:
  using Device = void*;
  using EnergyFn = int (*)(Device, unsigned long long*);
  using PowerFn = int (*)(Device, unsigned*);
  using ClockFn = int (*)(Device, int, unsigned*);
  using ReasonsFn = int (*)(Device, unsigned long long*);
  using TemperatureFn = int (*)(Device, int, unsigned*);
  using ErrorStringFn = const char* (*)(int);

  NvmlPowerSource(Device device, const SymbolLookup& symbol) : device_(device) {
    energy_ = reinterpret_cast<EnergyFn>(symbol(kEnergyName));
    power_ = reinterpret_cast<PowerFn>(symbol(kPowerName));
    clock_ = reinterpret_cast<ClockFn>(symbol(kClockName));
    // Renamed in driver 535; older drivers have only the old name, with the same bits.
    reasons_ = reinterpret_cast<ReasonsFn>(symbol(kReasonsName));
    if (!reasons_) reasons_ = reinterpret_cast<ReasonsFn>(symbol(kReasonsOldName));
    temperature_ = reinterpret_cast<TemperatureFn>(symbol(kTemperatureName));
    max_clock_ = reinterpret_cast<ClockFn>(symbol(kMaxClockName));
    error_string_ = reinterpret_cast<ErrorStringFn>(symbol("nvmlErrorString"));
  }

  Reading total_energy_mj() override { return read<unsigned long long>(energy_, kEnergyName); }
  Reading power_mw() override { return read<unsigned>(power_, kPowerName); }
  Reading sm_clock_mhz() override { return read<unsigned>(clock_, kClockName, kClockSm); }
  Reading clock_event_reasons() override {
    return read<unsigned long long>(reasons_, kReasonsName);
  }
  Reading temperature_c() override {
    return read<unsigned>(temperature_, kTemperatureName, kTemperatureGpu);
  }
  Reading max_sm_clock_mhz() override {
    return read<unsigned>(max_clock_, kMaxClockName, kClockSm);
  }

 private:
  static constexpr const char* kEnergyName = "nvmlDeviceGetTotalEnergyConsumption";
  static constexpr const char* kPowerName = "nvmlDeviceGetPowerUsage";
  static constexpr const char* kClockName = "nvmlDeviceGetClockInfo";
  static constexpr const char* kReasonsName = "nvmlDeviceGetCurrentClocksEventReasons";
  static constexpr const char* kReasonsOldName = "nvmlDeviceGetCurrentClocksThrottleReasons";
  static constexpr const char* kTemperatureName = "nvmlDeviceGetTemperature";
  static constexpr const char* kMaxClockName = "nvmlDeviceGetMaxClockInfo";
  static constexpr int kClockSm = 1;         // NVML_CLOCK_SM
  static constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

  // One NVML getter, fn(device, args..., &value): its value, its error, or that the driver's
  // NVML lacks it (`name`).
  template <typename Value, typename Fn, typename... Args>
  Reading read(Fn fn, const char* name, Args... args) const {
    if (!fn) return Reading::failed(std::string("this driver's NVML has no ") + name);
    Value value = 0;
    const int code = fn(device_, args..., &value);
    return checked(code, value);
  }
  Reading checked(int code, std::uint64_t value) const {
    if (code == 0) return Reading::of(value);
    switch (code) {
      case 3:
        return Reading::failed("not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)");
      case 4:
        return Reading::failed("no permission (NVML_ERROR_NO_PERMISSION)");
      default:
        return Reading::failed(error_string_ ? std::string(error_string_(code)) + " (NVML " +
                                                   std::to_string(code) + ")"
                                             : "NVML error " + std::to_string(code));
    }
  }

  Device device_;
  EnergyFn energy_ = nullptr;
  PowerFn power_ = nullptr;
  ClockFn clock_ = nullptr;
  ReasonsFn reasons_ = nullptr;
  TemperatureFn temperature_ = nullptr;
  ClockFn max_clock_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
};

class FailingPowerSource final : public PowerSource {
 public:
  FailingPowerSource(std::unique_ptr<PowerSource> source, bool all)
      : source_(std::move(source)), all_(all) {}
  Reading total_energy_mj() override {
    return all_ ? denied()
                : Reading::failed("this driver's NVML has no nvmlDeviceGetTotalEnergyConsumption");
  }
  Reading power_mw() override { return all_ ? denied() : source_->power_mw(); }
  Reading sm_clock_mhz() override { return all_ ? denied() : source_->sm_clock_mhz(); }
  Reading clock_event_reasons() override {
    return all_ ? denied() : source_->clock_event_reasons();
  }
  Reading temperature_c() override { return all_ ? denied() : source_->temperature_c(); }
  Reading max_sm_clock_mhz() override { return all_ ? denied() : source_->max_sm_clock_mhz(); }

 private:
  static Reading denied() { return Reading::failed("no permission (NVML_ERROR_NO_PERMISSION)"); }
  std::unique_ptr<PowerSource> source_;
  bool all_;
};

class SteadyClock final : public Clock {
 public:
  double now_s() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void sleep_s(double s) override { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }
};

// What one window gathers before its figures are judged.
struct Gathered {
  double start = 0;               // the first batch enqueued
  double edge0 = -1, edge1 = -1;  // the window's bounds (host time)
  std::uint64_t e0 = 0, e1 = 0;   // the counter at those bounds
  std::string counter_problem;    // why the counter's figure cannot stand
  bool counter = false;           // the counter bounds the window
  bool starved = false;           // the GPU ran out of work inside the window
  std::string launch_error;
  std::vector<double> power_mw, clock_mhz, temperature_c;
  std::uint64_t reasons = 0;
};

// Power, SM clock, temperature and clock-event reasons at one instant inside the window; power only
// once it has settled (Settings::power_averaging_s after the first launch). A driver without the
// temperature (no entry point, not supported) leaves it unsampled: no temperature, no failure.
void sample(PowerSource& source, double now, const Settings& s, Gathered* g) {
  if (now - g->start >= s.power_averaging_s) {
    if (const Reading p = source.power_mw(); p.ok) g->power_mw.push_back(double(p.value));
  }
  if (const Reading c = source.sm_clock_mhz(); c.ok) g->clock_mhz.push_back(double(c.value));
  if (const Reading t = source.temperature_c(); t.ok) g->temperature_c.push_back(double(t.value));
  if (const Reading r = source.clock_event_reasons(); r.ok) g->reasons |= r.value;
}

// Launches run back to back while the counter is watched: the window opens at its first update
// after the preroll and closes at its first update once window_s has passed, so both ends fall on
// an update and the counter's step size does not enter the figure. Without a counter the window is
// timed by the host alone (power and clocks only).
void run_window(PowerSource& source, LaunchQueue& queue, Clock& clock, int batch, const Settings& s,
                std::uint64_t counter_start, Measurement* m, Gathered* g) {
  std::uint64_t last = counter_start;
  double next_sample = 0;
  g->start = clock.now_s();
  for (;;) {
    if (g->edge0 >= 0 && queue.in_flight() == 0) g->starved = true;
    // At most max_in_flight batches per turn: a host slower than the GPU must not loop here.
    for (int k = 0; k < s.max_in_flight && queue.in_flight() < s.max_in_flight; ++k) {
      g->launch_error = queue.enqueue(batch);
      if (!g->launch_error.empty()) return;
      m->launches += batch;
    }
    const double now = clock.now_s();
    const bool open = g->edge0 >= 0;
    if (g->counter) {
      const Reading r = source.total_energy_mj();
      if (!r.ok) {
        g->counter_problem = "the energy counter failed inside the window (" + r.error + ")";
        g->counter = false;
      } else if (r.value != last) {
        if (r.value < last) {  // a driver reload: nothing before it can be set against after
          g->counter_problem = "the energy counter went backwards";
          g->counter = false;
        }
        last = r.value;
        if (!open && now - g->start >= s.preroll_s) {
          g->edge0 = now;
          g->e0 = r.value;
        } else if (open) {
          ++m->counter_updates;
          if (now - g->edge0 >= s.window_s) {
            g->edge1 = now;
            g->e1 = r.value;
          }
        }
      }
    }
    if (!g->counter) {  // timed by the host
      if (!open && now - g->start >= s.preroll_s) g->edge0 = now;
      if (open && now - g->edge0 >= s.window_s) g->edge1 = now;
    }
    if (g->edge0 >= 0 && now >= next_sample) {
      sample(source, now, s, g);
      next_sample = now + s.sample_period_s;
    }
    if (g->edge1 >= 0) return;
    if (now - g->start > s.preroll_s + s.window_s + s.timeout_s) {
      g->counter_problem = format("the energy counter did not advance for %.1f s", s.timeout_s);
      if (g->edge0 < 0) g->edge0 = g->start;
      g->edge1 = now;
      g->counter = false;
      return;
    }
    clock.sleep_s(s.poll_s);
  }
}

double mean(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs) sum += x;
  return xs.empty() ? 0 : sum / static_cast<double>(xs.size());
}

// The figures of a finished window, and whether the counter's energy stands.
void judge(const Gathered& g, const Settings& s, bool counter_read, bool power_read,
           Measurement* m) {
  m->window_s = g.edge1 - g.edge0;
  m->seconds_per_launch = m->launches > 0 ? m->busy_s / m->launches : 0;
  if (!g.power_mw.empty()) {
    m->sampled_power_w = mean(g.power_mw) * 1e-3;
    m->power_samples = static_cast<int>(g.power_mw.size());
    m->sampled_energy_per_launch_mj = m->sampled_power_w * m->seconds_per_launch * 1e3;
  }
  if (!g.clock_mhz.empty()) {
    m->sm_clock_mean_mhz = mean(g.clock_mhz);
    m->sm_clock_min_mhz = *std::min_element(g.clock_mhz.begin(), g.clock_mhz.end());
    m->clock_samples = static_cast<int>(g.clock_mhz.size());
  }
  if (!g.temperature_c.empty()) {
    m->temperature_mean_c = mean(g.temperature_c);
    m->temperature_max_c = *std::max_element(g.temperature_c.begin(), g.temperature_c.end());
    m->temperature_samples = static_cast<int>(g.temperature_c.size());
  }
  m->clock_event_reasons = clock_event_reason_names(g.reasons);
  if (g.counter && m->window_s > 0) {
    m->counter_mj = static_cast<double>(g.e1 - g.e0);
    m->power_w = m->counter_mj * 1e-3 / m->window_s;
    if (m->sampled_power_w > 0) m->counter_vs_sampled = m->power_w / m->sampled_power_w - 1;
  }
  auto refuse = [&](std::string why) {
    m->status = "refused";
    m->reason = std::move(why);
  };
  if (!counter_read) {
    m->status = "unavailable";
    m->reason = g.counter_problem;
  } else if (!g.counter_problem.empty()) {
    refuse(g.counter_problem);
  } else if (g.starved) {
    refuse(
        "the GPU waited for the host inside the window: the energy per launch would hold idle "
        "time");
  } else if (m->counter_updates < s.min_counter_updates) {
    refuse(format(
        "the energy counter changed %.0f times in the %.2f s window (every %.0f ms or "
        "more): too coarse for it; a longer --energy-window",
        m->counter_updates, m->window_s, 1e3 * m->window_s / std::max(1, m->counter_updates)));
  } else if (m->counter_vs_sampled && std::fabs(*m->counter_vs_sampled) > s.max_disagreement) {
    refuse(format("the counter's %.1f W and the sampled power's %.1f W differ by %.1f%%",
                  m->power_w, m->sampled_power_w, 100 * *m->counter_vs_sampled) +
           format(" (bound %.0f%%)", 100 * s.max_disagreement));
  } else {
    m->status = "ok";
    m->energy_per_launch_mj = m->power_w * m->seconds_per_launch * 1e3;
    if (!m->counter_vs_sampled) {
      m->reason = power_read ? "not checked against sampled power: no sample settled (the window "
                               "ended within the driver's power averaging)"
                             : "not checked against sampled power (power not readable)";
    }
  }
  if (m->status != "ok") m->energy_per_launch_mj.reset();
}

}  // namespace

std::unique_ptr<PowerSource> nvml_power_source(const std::string& pci_bus_id,
                                               const SymbolLookup& symbol, std::string* why_not) {
  using HandleFn = int (*)(const char*, void**);
  auto* init = reinterpret_cast<int (*)()>(symbol("nvmlInit_v2"));
  auto* handle = reinterpret_cast<HandleFn>(symbol("nvmlDeviceGetHandleByPciBusId_v2"));
  if (!init || !handle) {
    if (why_not) *why_not = "NVML not found (no NVIDIA driver's libnvidia-ml.so.1)";
    return nullptr;
  }
  if (const int e = init(); e != 0) {
    if (why_not) *why_not = "NVML did not initialise (error " + std::to_string(e) + ")";
    return nullptr;
  }
  void* device = nullptr;
  if (const int e = handle(pci_bus_id.c_str(), &device); e != 0) {
    if (why_not)
      *why_not = "NVML does not know the GPU at " + pci_bus_id + " (error " + std::to_string(e) +
                 (e == 4 ? ": no permission)" : ")");
    return nullptr;
  }
  return std::make_unique<NvmlPowerSource>(device, symbol);
}

std::unique_ptr<PowerSource> nvml_power_source(const std::string& pci_bus_id,
                                               std::string* why_not) {
  return nvml_power_source(pci_bus_id, nvml_symbol, why_not);
}

std::unique_ptr<PowerSource> failing_power_source(std::unique_ptr<PowerSource> source,
                                                  const std::string& how) {
  if (how != "no_permission" && how != "no_counter") return source;
  return std::make_unique<FailingPowerSource>(std::move(source), how == "no_permission");
}

std::vector<std::string> clock_event_reason_names(std::uint64_t bits) {
  // nvmlClocksEventReason* (nvml.h), bit 0 upwards.
  static constexpr std::array<const char*, 9> kNames{"idle",
                                                     "application clocks setting",
                                                     "power cap",
                                                     "hardware slowdown",
                                                     "sync boost",
                                                     "thermal slowdown (software)",
                                                     "thermal slowdown (hardware)",
                                                     "power brake (hardware)",
                                                     "display clock setting"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < 64; ++i) {
    if (!(bits >> i & 1)) continue;
    out.push_back(i < kNames.size() ? kNames[i] : "reason bit " + std::to_string(i));
  }
  return out;
}

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

Measurement not_measured(std::string status, std::string reason) {
  Measurement m;
  m.status = std::move(status);
  m.reason = std::move(reason);
  return m;
}

Measurement measure(PowerSource& source, LaunchQueue& queue, Clock& clock, double launch_s,
                    const Settings& s) {
  const Reading counter = source.total_energy_mj();
  const Reading power = source.power_mw();
  const Reading sm_clock = source.sm_clock_mhz();
  if (!counter.ok && !power.ok && !sm_clock.ok) {
    return not_measured("unavailable", "energy counter: " + counter.error + "; power: " +
                                           power.error + "; SM clock: " + sm_clock.error);
  }
  // Enough launches per batch to keep the GPU busy batch_s while the host polls the driver.
  const double per_batch = s.batch_s / std::max(launch_s, 1e-7);
  const int batch = static_cast<int>(std::clamp(std::ceil(per_batch), 1.0, 1e6));
  Measurement m;
  Gathered g;
  g.counter = counter.ok;
  if (!counter.ok) g.counter_problem = "no energy counter: " + counter.error;
  run_window(source, queue, clock, batch, s, counter.value, &m, &g);
  m.busy_s = queue.finish();
  if (!g.launch_error.empty()) return not_measured("error", g.launch_error);
  judge(g, s, counter.ok, power.ok, &m);
  return m;
}

}  // namespace fa::energy
