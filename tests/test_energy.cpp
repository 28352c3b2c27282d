// The energy window on a scripted device (a virtual clock, a GPU that runs the enqueued launches
// back to back, a driver whose counter advances in steps), the NVML adapter on fake entry points,
// and the energy model's fit on synthetic calibrations. CPU only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/energy.hpp"
#include "profiler/energy_json.hpp"
#include "profiler/energy_model.hpp"

namespace fa::energy {
namespace {

// A GPU and its driver on a virtual clock. Launches take launch_s each and run back to back from
// the first enqueue; the board draws busy_w while they run and idle_w otherwise. The energy
// counter publishes the integral every update_s (in mJ); power reads return the instantaneous
// power times (1 + power_bias). Every driver call costs read_s of host time, every enqueued launch
// enqueue_s.
class FakeDevice final : public PowerSource, public LaunchQueue, public Clock {
 public:
  double t = 0;
  double launch_s = 0.001, busy_w = 400, idle_w = 100, update_s = 0.02, power_bias = 0;
  double read_s = 1e-4, enqueue_s = 1e-6;
  std::string energy_error, power_error, clock_error, reasons_error, launch_error;
  std::string temperature_error, max_clock_error;
  bool counter_stuck = false;
  std::uint64_t reasons = 0;
  std::uint64_t clock_mhz = 1980, max_clock_mhz = 1980;
  // Warms by 1 degree C per 100 ms of launches from 40: the window's mean and max differ.
  double temperature_start_c = 40, warming_c_per_s = 10;

  // Clock
  double now_s() override { return t; }
  void sleep_s(double s) override { t += s; }

  // LaunchQueue
  std::string enqueue(int launches) override {
    if (!launch_error.empty()) return launch_error;
    const double start = std::max(t, free_at_);
    if (first_ < 0) first_ = start;
    if (!busy_.empty() && busy_.back().second >= start) {
      busy_.back().second = start + launches * launch_s;
    } else {
      busy_.push_back({start, start + launches * launch_s});
    }
    free_at_ = start + launches * launch_s;
    ends_.push_back(free_at_);
    t += launches * enqueue_s;
    return "";
  }
  int in_flight() override {
    int n = 0;
    for (double e : ends_) n += e > t;
    return n;
  }
  double finish() override {
    t = std::max(t, free_at_);
    return first_ < 0 ? 0 : free_at_ - first_;
  }

  // PowerSource
  Reading total_energy_mj() override {
    t += read_s;
    if (!energy_error.empty()) return Reading::failed(energy_error);
    const double published = counter_stuck ? 0 : std::floor(t / update_s) * update_s;
    return Reading::of(static_cast<std::uint64_t>(1e3 * energy_j(published)));
  }
  Reading power_mw() override {
    t += read_s;
    if (!power_error.empty()) return Reading::failed(power_error);
    return Reading::of(static_cast<std::uint64_t>(1e3 * power_w(t) * (1 + power_bias)));
  }
  Reading sm_clock_mhz() override {
    t += read_s;
    if (!clock_error.empty()) return Reading::failed(clock_error);
    return Reading::of(clock_mhz);
  }
  Reading clock_event_reasons() override {
    t += read_s;
    if (!reasons_error.empty()) return Reading::failed(reasons_error);
    return Reading::of(reasons);
  }
  Reading temperature_c() override {
    t += read_s;
    if (!temperature_error.empty()) return Reading::failed(temperature_error);
    return Reading::of(
        static_cast<std::uint64_t>(temperature_start_c + warming_c_per_s * busy_until(t)));
  }
  Reading max_sm_clock_mhz() override {
    t += read_s;
    if (!max_clock_error.empty()) return Reading::failed(max_clock_error);
    return Reading::of(max_clock_mhz);
  }

 private:
  double busy_until(double x) const {
    double s = 0;
    for (const auto& [a, b] : busy_) s += std::max(0.0, std::min(b, x) - a);
    return s;
  }
  double energy_j(double x) const { return idle_w * x + (busy_w - idle_w) * busy_until(x); }
  double power_w(double x) const {
    for (const auto& [a, b] : busy_)
      if (a <= x && x < b) return busy_w;
    return idle_w;
  }

  double free_at_ = 0, first_ = -1;
  std::vector<std::pair<double, double>> busy_;
  std::vector<double> ends_;
};

// Settings for the virtual device: power settles at once (it is instantaneous there).
Settings fast_settings() {
  Settings s;
  s.power_averaging_s = 0;
  return s;
}

Measurement run(FakeDevice& dev, Settings s = fast_settings()) {
  return measure(dev, dev, dev, dev.launch_s, s);
}

TEST(EnergyWindow, CounterBetweenUpdatesGivesEnergyPerLaunch) {
  FakeDevice dev;
  dev.reasons = 0x4;  // power cap
  const Measurement m = run(dev);
  ASSERT_EQ(m.status, "ok") << m.reason;
  ASSERT_TRUE(m.energy_per_launch_mj);
  // 400 W for 1 ms: 400 mJ; the window's ends fall on counter updates, so its step does not enter.
  EXPECT_NEAR(*m.energy_per_launch_mj, 400.0, 4.0);
  EXPECT_NEAR(m.power_w, 400.0, 4.0);
  EXPECT_NEAR(m.seconds_per_launch, 1e-3, 1e-9);
  EXPECT_GE(m.window_s, 1.0);
  EXPECT_LT(m.window_s, 1.0 + 2 * dev.update_s);
  EXPECT_GE(m.counter_updates, 45);
  ASSERT_TRUE(m.counter_vs_sampled);
  EXPECT_LT(std::fabs(*m.counter_vs_sampled), 0.01);
  ASSERT_TRUE(m.sampled_energy_per_launch_mj);
  EXPECT_NEAR(*m.sampled_energy_per_launch_mj, 400.0, 4.0);
  EXPECT_EQ(m.sm_clock_mean_mhz, 1980);
  EXPECT_EQ(m.sm_clock_min_mhz, 1980);
  EXPECT_GT(m.clock_samples, 50);
  EXPECT_EQ(m.clock_event_reasons, std::vector<std::string>{"power cap"});
  EXPECT_TRUE(m.reason.empty()) << m.reason;
  // Sampled with the clock: warming from 40 degrees C at 10 per second of launches.
  EXPECT_EQ(m.temperature_samples, m.clock_samples);
  EXPECT_GE(m.temperature_mean_c, 45);
  EXPECT_LE(m.temperature_mean_c, 49);
  EXPECT_GE(m.temperature_max_c, 51);
  EXPECT_LE(m.temperature_max_c, 53);
}

TEST(EnergyWindow, NoTemperatureIsNoFailure) {
  FakeDevice dev;
  dev.temperature_error = "this driver's NVML has no nvmlDeviceGetTemperature";
  const Measurement m = run(dev);
  ASSERT_EQ(m.status, "ok") << m.reason;
  EXPECT_TRUE(m.reason.empty()) << m.reason;
  EXPECT_EQ(m.temperature_samples, 0);
  EXPECT_EQ(m.temperature_mean_c, 0);
  EXPECT_EQ(m.temperature_max_c, 0);
  EXPECT_NEAR(*m.energy_per_launch_mj, 400.0, 4.0);
}

TEST(EnergyWindow, IdleBeforeTheLaunchesIsNotCounted) {
  // The device idles 2 s first: a window that began before the launches would hold idle power.
  FakeDevice dev;
  dev.t = 2.0;
  const Measurement m = run(dev);
  ASSERT_EQ(m.status, "ok") << m.reason;
  EXPECT_NEAR(*m.energy_per_launch_mj, 400.0, 4.0);
}

TEST(EnergyWindow, TooCoarseACounterIsRefused) {
  FakeDevice dev;
  dev.update_s = 0.4;  // 2 or 3 updates in a 1 s window
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "refused");
  EXPECT_NE(m.reason.find("too coarse"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("--energy-window"), std::string::npos) << m.reason;
  EXPECT_FALSE(m.energy_per_launch_mj);
  // What was measured stays: the sampled power and the clock.
  EXPECT_NEAR(m.sampled_power_w, 400.0, 1.0);
}

TEST(EnergyWindow, CounterAndSampledPowerDisagreeingIsRefused) {
  FakeDevice dev;
  dev.power_bias = 0.25;
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "refused");
  EXPECT_NE(m.reason.find("differ by"), std::string::npos) << m.reason;
  EXPECT_NE(m.reason.find("bound 10%"), std::string::npos) << m.reason;
  ASSERT_TRUE(m.counter_vs_sampled);
  EXPECT_NEAR(*m.counter_vs_sampled, 1 / 1.25 - 1, 0.01);
  // Within the bound it stands.
  FakeDevice close;
  close.power_bias = 0.05;
  EXPECT_EQ(run(close).status, "ok");
}

TEST(EnergyWindow, MissingCounterKeepsPowerAndClock) {
  FakeDevice dev;
  dev.energy_error = "this driver's NVML has no nvmlDeviceGetTotalEnergyConsumption";
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "unavailable");
  EXPECT_NE(m.reason.find("nvmlDeviceGetTotalEnergyConsumption"), std::string::npos) << m.reason;
  EXPECT_FALSE(m.energy_per_launch_mj);
  EXPECT_NEAR(m.sampled_power_w, 400.0, 1.0);
  EXPECT_EQ(m.sm_clock_min_mhz, 1980);
  EXPECT_GT(m.launches, 0);
}

TEST(EnergyWindow, NoPermissionAnywhereLaunchesNothing) {
  FakeDevice dev;
  dev.energy_error = dev.power_error = dev.clock_error = "no permission (NVML_ERROR_NO_PERMISSION)";
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "unavailable");
  EXPECT_NE(m.reason.find("no permission"), std::string::npos) << m.reason;
  EXPECT_EQ(m.launches, 0);
}

TEST(EnergyWindow, StalledCounterIsRefused) {
  FakeDevice dev;
  dev.counter_stuck = true;
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "refused");
  EXPECT_NE(m.reason.find("did not advance"), std::string::npos) << m.reason;
}

TEST(EnergyWindow, CounterThatFailsMidWindowIsRefused) {
  // Readable at first, then not: a driver reset or a lost permission.
  struct Failing final : public PowerSource {
    FakeDevice& dev;
    int reads = 0;
    explicit Failing(FakeDevice& d) : dev(d) {}
    Reading total_energy_mj() override {
      return ++reads > 50 ? Reading::failed("GPU is lost") : dev.total_energy_mj();
    }
    Reading power_mw() override { return dev.power_mw(); }
    Reading sm_clock_mhz() override { return dev.sm_clock_mhz(); }
    Reading clock_event_reasons() override { return dev.clock_event_reasons(); }
    Reading temperature_c() override { return dev.temperature_c(); }
    Reading max_sm_clock_mhz() override { return dev.max_sm_clock_mhz(); }
  };
  FakeDevice dev;
  Failing source(dev);
  const Measurement m = measure(source, dev, dev, dev.launch_s, fast_settings());
  EXPECT_EQ(m.status, "refused");
  EXPECT_NE(m.reason.find("failed inside the window (GPU is lost)"), std::string::npos) << m.reason;
}

TEST(EnergyWindow, CounterThatGoesBackwardsIsRefusedWithoutAFigure) {
  // A driver reloaded mid-window starts its counter again from 0.
  struct Reloaded final : public PowerSource {
    FakeDevice& dev;
    int reads = 0;
    explicit Reloaded(FakeDevice& d) : dev(d) {}
    Reading total_energy_mj() override {
      const Reading r = dev.total_energy_mj();
      return ++reads > 800 ? Reading::of(r.value / 1000) : r;
    }
    Reading power_mw() override { return dev.power_mw(); }
    Reading sm_clock_mhz() override { return dev.sm_clock_mhz(); }
    Reading clock_event_reasons() override { return dev.clock_event_reasons(); }
    Reading temperature_c() override { return dev.temperature_c(); }
    Reading max_sm_clock_mhz() override { return dev.max_sm_clock_mhz(); }
  };
  FakeDevice dev;
  Reloaded source(dev);
  const Measurement m = measure(source, dev, dev, dev.launch_s, fast_settings());
  EXPECT_EQ(m.status, "refused");
  EXPECT_EQ(m.reason, "the energy counter went backwards");
  EXPECT_EQ(m.counter_mj, 0);  // no wrapped-around difference in the record
  EXPECT_EQ(m.power_w, 0);
}

TEST(EnergyWindow, HostThatCannotKeepTheGpuBusyIsRefused) {
  FakeDevice dev;
  dev.enqueue_s = 2e-3;  // enqueuing a launch takes twice as long as running it
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "refused");
  EXPECT_NE(m.reason.find("waited for the host"), std::string::npos) << m.reason;
}

TEST(EnergyWindow, LaunchErrorIsTheRowsError) {
  FakeDevice dev;
  dev.launch_error = "kernel failed: cudaErrorIllegalAddress";
  const Measurement m = run(dev);
  EXPECT_EQ(m.status, "error");
  EXPECT_EQ(m.reason, "kernel failed: cudaErrorIllegalAddress");
}

TEST(EnergyWindow, UnsettledPowerIsNotACheck) {
  // The driver averages power over 1 s: with a 0.5 s window nothing settles, and the counter's
  // figure stands unchecked, saying so.
  FakeDevice dev;
  Settings s;
  s.window_s = 0.5;
  const Measurement m = measure(dev, dev, dev, dev.launch_s, s);
  ASSERT_EQ(m.status, "ok") << m.reason;
  EXPECT_FALSE(m.counter_vs_sampled);
  EXPECT_NE(m.reason.find("not checked"), std::string::npos);
}

TEST(EnergyWindow, ClockEventReasonNames) {
  EXPECT_TRUE(clock_event_reason_names(0).empty());
  EXPECT_EQ(clock_event_reason_names(0x4 | 0x40),
            (std::vector<std::string>{"power cap", "thermal slowdown (hardware)"}));
  EXPECT_EQ(clock_event_reason_names(1ull << 20), std::vector<std::string>{"reason bit 20"});
}

TEST(EnergyWindow, ForcedDriverErrorsTakeTheUnavailablePaths) {
  // What fa-bench --test-force-energy-error does to the real source, on the scripted one.
  auto denied = failing_power_source(std::make_unique<FakeDevice>(), "no_permission");
  FakeDevice dev;
  Measurement m = measure(*denied, dev, dev, dev.launch_s, fast_settings());
  EXPECT_EQ(m.status, "unavailable");
  EXPECT_NE(m.reason.find("NVML_ERROR_NO_PERMISSION"), std::string::npos) << m.reason;
  EXPECT_EQ(m.launches, 0);
  auto no_counter = failing_power_source(std::make_unique<FakeDevice>(), "no_counter");
  m = measure(*no_counter, dev, dev, dev.launch_s, fast_settings());
  EXPECT_EQ(m.status, "unavailable");
  EXPECT_NE(m.reason.find("has no nvmlDeviceGetTotalEnergyConsumption"), std::string::npos);
  EXPECT_GT(m.clock_samples, 0);  // the clock is still read
}

// ---- the NVML adapter on fake entry points ----

std::map<std::string, int>& codes() {  // entry point -> the nvmlReturn_t it returns
  static std::map<std::string, int> c;
  return c;
}
int fake_init() {
  return codes()["init"];
}
int fake_handle(const char*, void** device) {
  *device = reinterpret_cast<void*>(0x1);
  return codes()["handle"];
}
int fake_energy(void*, unsigned long long* mj) {
  *mj = 123456;
  return codes()["energy"];
}
int fake_power(void*, unsigned* mw) {
  *mw = 350000;
  return codes()["power"];
}
int fake_clock(void*, int, unsigned* mhz) {
  *mhz = 1755;
  return codes()["clock"];
}
int fake_reasons(void*, unsigned long long* bits) {
  *bits = 0x20;
  return codes()["reasons"];
}
int fake_temperature(void*, int sensor, unsigned* c) {
  *c = sensor == 0 ? 57 : 0;  // NVML_TEMPERATURE_GPU
  return codes()["temperature"];
}
int fake_max_clock(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? 1980 : 0;  // NVML_CLOCK_SM
  return codes()["max_clock"];
}
const char* fake_error_string(int) {
  return "Unknown Error";
}

SymbolLookup lookup(std::vector<std::string> missing) {
  return [missing](const char* name) -> void* {
    for (const auto& m : missing)
      if (m == name) return nullptr;
    const std::map<std::string, void*> table{
        {"nvmlInit_v2", reinterpret_cast<void*>(&fake_init)},
        {"nvmlDeviceGetHandleByPciBusId_v2", reinterpret_cast<void*>(&fake_handle)},
        {"nvmlDeviceGetTotalEnergyConsumption", reinterpret_cast<void*>(&fake_energy)},
        {"nvmlDeviceGetPowerUsage", reinterpret_cast<void*>(&fake_power)},
        {"nvmlDeviceGetClockInfo", reinterpret_cast<void*>(&fake_clock)},
        {"nvmlDeviceGetCurrentClocksThrottleReasons", reinterpret_cast<void*>(&fake_reasons)},
        {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&fake_temperature)},
        {"nvmlDeviceGetMaxClockInfo", reinterpret_cast<void*>(&fake_max_clock)},
        {"nvmlErrorString", reinterpret_cast<void*>(&fake_error_string)}};
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
  };
}

TEST(EnergyNvml, ReadsThroughTheEntryPointsTheDriverHas) {
  codes().clear();
  std::string why;
  // No nvmlDeviceGetCurrentClocksEventReasons (a driver before 535): the old name serves.
  auto source = nvml_power_source("0000:01:00.0", lookup({}), &why);
  ASSERT_TRUE(source) << why;
  EXPECT_EQ(source->total_energy_mj().value, 123456u);
  EXPECT_EQ(source->power_mw().value, 350000u);
  EXPECT_EQ(source->sm_clock_mhz().value, 1755u);
  const Reading r = source->clock_event_reasons();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(clock_event_reason_names(r.value),
            std::vector<std::string>{"thermal slowdown (software)"});
  EXPECT_EQ(source->temperature_c().value, 57u);       // the GPU sensor, not another
  EXPECT_EQ(source->max_sm_clock_mhz().value, 1980u);  // the SM clock's maximum
}

TEST(EnergyNvml, TemperatureMissingOrRefusedIsNoTemperature) {
  codes().clear();
  std::string why;
  auto source = nvml_power_source(
      "0000:01:00.0", lookup({"nvmlDeviceGetTemperature", "nvmlDeviceGetMaxClockInfo"}), &why);
  ASSERT_TRUE(source) << why;
  EXPECT_EQ(source->temperature_c().error, "this driver's NVML has no nvmlDeviceGetTemperature");
  EXPECT_EQ(source->max_sm_clock_mhz().error,
            "this driver's NVML has no nvmlDeviceGetMaxClockInfo");
  // A window through it: the energy stands, with no temperature.
  FakeDevice dev;
  struct Timed final : public PowerSource {  // the fake NVML's readings on the device's clock
    PowerSource& nvml;
    FakeDevice& dev;
    Timed(PowerSource& n, FakeDevice& d) : nvml(n), dev(d) {}
    Reading total_energy_mj() override { return dev.total_energy_mj(); }
    Reading power_mw() override { return dev.power_mw(); }
    Reading sm_clock_mhz() override { return dev.sm_clock_mhz(); }
    Reading clock_event_reasons() override { return dev.clock_event_reasons(); }
    Reading temperature_c() override { return nvml.temperature_c(); }
    Reading max_sm_clock_mhz() override { return nvml.max_sm_clock_mhz(); }
  } timed(*source, dev);
  const Measurement m = measure(timed, dev, dev, dev.launch_s, fast_settings());
  ASSERT_EQ(m.status, "ok") << m.reason;
  EXPECT_EQ(m.temperature_samples, 0);
  // Present but refused (a GPU without the sensor): the same.
  auto with = nvml_power_source("0000:01:00.0", lookup({}), &why);
  codes()["temperature"] = 3;
  EXPECT_EQ(with->temperature_c().error, "not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)");
  Timed refused(*with, dev);
  EXPECT_EQ(measure(refused, dev, dev, dev.launch_s, fast_settings()).temperature_samples, 0);
  codes()["temperature"] = 0;
  Timed read(*with, dev);
  const Measurement warm = measure(read, dev, dev, dev.launch_s, fast_settings());
  EXPECT_GT(warm.temperature_samples, 0);
  EXPECT_EQ(warm.temperature_mean_c, 57);
  EXPECT_EQ(warm.temperature_max_c, 57);
  codes().clear();
}

TEST(EnergyNvml, MissingEntryPointsAndErrorsSayWhich) {
  codes().clear();
  std::string why;
  auto source = nvml_power_source(
      "0000:01:00.0",
      lookup({"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetCurrentClocksThrottleReasons"}),
      &why);
  ASSERT_TRUE(source) << why;
  const Reading e = source->total_energy_mj();
  EXPECT_FALSE(e.ok);
  EXPECT_EQ(e.error, "this driver's NVML has no nvmlDeviceGetTotalEnergyConsumption");
  EXPECT_NE(source->clock_event_reasons().error.find("nvmlDeviceGetCurrentClocksEventReasons"),
            std::string::npos);
  codes()["power"] = 4;
  EXPECT_EQ(source->power_mw().error, "no permission (NVML_ERROR_NO_PERMISSION)");
  codes()["clock"] = 3;
  EXPECT_EQ(source->sm_clock_mhz().error, "not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)");
  codes()["clock"] = 999;
  EXPECT_EQ(source->sm_clock_mhz().error, "Unknown Error (NVML 999)");
  codes().clear();
}

TEST(EnergyNvml, NoLibraryOrNoDeviceIsNoSource) {
  codes().clear();
  std::string why;
  EXPECT_FALSE(nvml_power_source("0000:01:00.0", lookup({"nvmlInit_v2"}), &why));
  EXPECT_NE(why.find("NVML not found"), std::string::npos) << why;
  codes()["handle"] = 4;
  EXPECT_FALSE(nvml_power_source("0000:01:00.0", lookup({}), &why));
  EXPECT_NE(why.find("no permission"), std::string::npos) << why;
  codes().clear();
}

TEST(EnergyNvml, FakeNvmlDrivesAWindowEndToEnd) {
  // A driver whose every read fails with NO_PERMISSION: the window says so and launches nothing.
  codes().clear();
  codes()["energy"] = codes()["power"] = codes()["clock"] = 4;
  std::string why;
  auto source = nvml_power_source("0000:01:00.0", lookup({}), &why);
  ASSERT_TRUE(source) << why;
  FakeDevice dev;
  const Measurement m = measure(*source, dev, dev, dev.launch_s, fast_settings());
  EXPECT_EQ(m.status, "unavailable");
  EXPECT_NE(m.reason.find("NVML_ERROR_NO_PERMISSION"), std::string::npos) << m.reason;
  EXPECT_EQ(m.launches, 0);
  codes().clear();
}

// ---- the energy model's fit ----

// The H200's figures from the offline fit over 70 attention rows (docs/energy.md).
// The mma.sync energies and the clock exponent: of the size the H200's calibration suggests.
// The L2 energy, busy-SM power and clock floor: of the size the H200's calibration suggests.
struct Truth {
  double eps16_pj = 1.05, eps8_pj = 0.52, eps_inst_pj = 460, eps_byte_pj = 103, idle_w = 146;
  double mma16_pj = 1.9, mma8_pj = 1.1, eps_l2_pj = 30, busy_w = 25, dram_w = 29;
  double exponent = 1.35;  // on the fit's grid of exponents (steps of 0.05)
  double knee_mhz = 1700;  // on the fit's grid of floors (10 MHz steps above the slowest clock)
  double f_ref_mhz = 1980;
  double energy_j(const CalibrationPoint& p) const {
    const double s = std::pow(std::max(p.sm_clock_mhz, knee_mhz) / f_ref_mhz, exponent);
    return 1e-12 * (s * (eps16_pj * p.flops16 + eps8_pj * p.flops8 + mma16_pj * p.flops16_mma +
                         mma8_pj * p.flops8_mma + eps_inst_pj * p.instructions) +
                    eps_l2_pj * p.l2_bytes + eps_byte_pj * p.bytes) +
           (idle_w + busy_w * p.active_sm_fraction + (p.bytes > 0 ? dram_w : 0)) * p.seconds;
  }
};

CalibrationPoint point(const char* name, double f16, double f8, double bytes, double seconds,
                       double instructions = 0, double clock_mhz = 1980,
                       double active_sm_fraction = 1, double l2_bytes = 0) {
  CalibrationPoint p;
  p.kernel = name;
  p.flops16 = f16;
  p.flops8 = f8;
  p.bytes = bytes;
  p.seconds = seconds;
  p.instructions = instructions;
  p.sm_clock_mhz = clock_mhz;
  p.active_sm_fraction = active_sm_fraction;
  p.l2_bytes = l2_bytes;
  return p;
}

CalibrationPoint mma_point(const char* name, double m16, double m8, double seconds,
                           double instructions, double active_sm_fraction = 1) {
  CalibrationPoint p = point(name, 0, 0, 0, seconds, instructions, 1980, active_sm_fraction);
  p.flops16_mma = m16;
  p.flops8_mma = m8;
  return p;
}

// What profiler/ceilings.cu runs, with an H200's rates and instruction counts: the copy at three
// rates, the FFMA kernel at two occupancies, the mma.sync kernels at two each, GEMMs
// (power-capped: lower clocks; on a quarter of the SMs: the highest), sleep, then the L2 stream
// at two rates, the L2 chase, and GEMMs on half and three quarters of the SMs (between the
// clocks). The SMs' L2 bytes: the copies' twice their bytes, a GEMM's about 0.01 per FLOP.
std::vector<CalibrationPoint> calibration(const Truth& t, double noise = 0) {
  const double gib2 = 2.0 * (1 << 30), f8192 = 2.0 * 8192 * 8192 * 8192,
               f4096 = 2.0 * 4096 * 4096 * 4096, mma = 4.5e11, l2 = 16e9;
  std::vector<CalibrationPoint> pts{
      point("copy full grid", 0, 0, gib2, gib2 / 4.2e12, 27.4e6, 1980, 1, gib2),
      point("copy 132 blocks", 0, 0, gib2, gib2 / 2.1e12, 27.3e6, 1980, 1, gib2),
      point("copy 33 blocks", 0, 0, gib2, gib2 / 0.6e12, 27.3e6, 1980, 0.25, gib2),
      point("FFMA, 264 blocks", 0, 0, 0, 2.1e-3, 2318638080.0, 1935),
      point("FFMA, 33 blocks", 0, 0, 0, 1.06e-3, 289829760.0, 1980, 0.25),
      mma_point("mma.sync bf16, 264 blocks", mma, 0, mma / 420e12, mma / 4096 * 2.2),
      mma_point("mma.sync bf16, 33 blocks", mma / 8, 0, mma / 8 / 70e12, mma / 8 / 4096 * 2.2,
                0.25),
      mma_point("mma.sync fp8, 264 blocks", 0, 2 * mma, 2 * mma / 800e12, mma / 4096 * 2.2),
      mma_point("mma.sync fp8, 33 blocks", 0, mma / 4, mma / 4 / 130e12, mma / 32768 * 2.2, 0.25),
      point("bf16 GEMM 8192", f8192, 0, 3 * 8192.0 * 8192 * 2, f8192 / 720e12, f8192 / 2e4, 1755, 1,
            0.011 * f8192),
      point("bf16 GEMM 4096", f4096, 0, 3 * 4096.0 * 4096 * 2, f4096 / 600e12, f4096 / 2e4, 1830, 1,
            0.012 * f4096),
      point("bf16 GEMM 8192 on 33 SMs", f8192, 0, 3 * 8192.0 * 8192 * 2, f8192 / 200e12,
            f8192 / 2e4, 1980, 0.25, 0.009 * f8192),
      point("fp8 GEMM 8192", 0, f8192, 8192.0 * 8192 * 4, f8192 / 1300e12, f8192 / 4e4, 1650, 1,
            0.006 * f8192),
      point("fp8 GEMM 4096", 0, f4096, 4096.0 * 4096 * 4, f4096 / 1000e12, f4096 / 4e4, 1800, 1,
            0.007 * f4096),
      point("fp8 GEMM 8192 on 33 SMs", 0, f8192, 8192.0 * 8192 * 4, f8192 / 380e12, f8192 / 4e4,
            1980, 0.25, 0.005 * f8192),
      point("sleep 1 ms", 0, 0, 0, 1e-3, 8448 * (22 + 9 * 900.0), 1980, 0),
      point("L2 to shared memory, 924 blocks", 0, 0, 0, l2 / 8e12, 60e6, 1980, 1, l2),
      point("L2 to shared memory, 33 blocks", 0, 0, 0, l2 / 32 / 1e12, 60e6 / 32, 1980, 0.25,
            l2 / 32),
      point("L2 pointer chase", 0, 0, 0, 4e-3, 3e6, 1980, 1, 1e8),
      point("bf16 GEMM 8192 on 66 SMs", f8192, 0, 3 * 8192.0 * 8192 * 2, f8192 / 380e12,
            f8192 / 2e4, 1880, 0.5, 0.01 * f8192),
      point("bf16 GEMM 8192 on 99 SMs", f8192, 0, 3 * 8192.0 * 8192 * 2, f8192 / 520e12,
            f8192 / 2e4, 1690, 0.75, 0.01 * f8192)};
  for (std::size_t i = 0; i < pts.size(); ++i) {
    // A fixed pattern of +-noise: reproducible, and not a multiple of any column.
    const double wiggle = noise * std::sin(1.0 + 2.3 * static_cast<double>(i));
    pts[i].energy_j = t.energy_j(pts[i]) * (1 + wiggle);
  }
  return pts;
}

void expect_recovers(const Fit& f, const Truth& t, double tolerance) {
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_NEAR(f.eps_flop16_pj, t.eps16_pj, tolerance * t.eps16_pj);
  ASSERT_TRUE(f.eps_flop8_pj);
  EXPECT_NEAR(*f.eps_flop8_pj, t.eps8_pj, tolerance * t.eps8_pj);
  EXPECT_NEAR(f.eps_inst_pj, t.eps_inst_pj, tolerance * t.eps_inst_pj);
  EXPECT_NEAR(f.eps_byte_pj, t.eps_byte_pj, tolerance * t.eps_byte_pj);
  EXPECT_NEAR(f.idle_w, t.idle_w, tolerance * t.idle_w);
  ASSERT_TRUE(f.eps_mma16_pj && f.eps_mma8_pj);
  EXPECT_NEAR(*f.eps_mma16_pj, t.mma16_pj, tolerance * t.mma16_pj);
  EXPECT_NEAR(*f.eps_mma8_pj, t.mma8_pj, tolerance * t.mma8_pj);
  ASSERT_TRUE(f.eps_l2_byte_pj);
  EXPECT_NEAR(*f.eps_l2_byte_pj, t.eps_l2_pj, tolerance * t.eps_l2_pj);
  EXPECT_NEAR(f.busy_w, t.busy_w, tolerance * t.busy_w);
  EXPECT_NEAR(f.dram_active_w, t.dram_w, tolerance * t.dram_w);
  EXPECT_NEAR(f.clock_exponent, t.exponent, 1e-9);
  EXPECT_NEAR(f.clock_knee_mhz, t.knee_mhz, 1e-9);
  EXPECT_NE(f.clock_exponent_basis.find("fitted over calibration clocks 1650-1980 MHz"),
            std::string::npos)
      << f.clock_exponent_basis;
}

TEST(EnergyFit, RecoversKnownEnergiesPerOperationAtVariedClocks) {
  const Truth t;
  const Fit f = fit(calibration(t), t.f_ref_mhz);
  expect_recovers(f, t, 1e-6);
  EXPECT_EQ(f.version, 5);
  EXPECT_NE(f.clock_exponent_basis.find("with a floor at 1700 MHz"), std::string::npos)
      << f.clock_exponent_basis;
  EXPECT_EQ(f.f_ref_mhz, 1980);
  EXPECT_LT(f.residual_max, 1e-9);
  EXPECT_EQ(f.residuals.size(), f.points.size());
}

TEST(EnergyFit, WithoutTheDriversMaximumClockTheFastestPointIsTheReference) {
  const Truth t;
  const Fit f = fit(calibration(t), 0);
  EXPECT_EQ(f.f_ref_mhz, 1980);  // the copies and the sleep ran at 1980 MHz
  expect_recovers(f, t, 1e-6);
}

TEST(EnergyFit, WithoutAFloorInTheDataTheFitHasNone) {
  // Energy per operation falling with the clock all the way down: no floor is found, and the
  // basis says so; the same law with a floor above the slowest clocks is told apart from it.
  Truth t;
  t.knee_mhz = 0;
  const Fit f = fit(calibration(t), t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_EQ(f.clock_knee_mhz, 0);
  EXPECT_NEAR(f.clock_exponent, t.exponent, 1e-9);
  EXPECT_NE(f.clock_exponent_basis.find("no floor"), std::string::npos) << f.clock_exponent_basis;
  EXPECT_LT(f.residual_max, 1e-9);
  t.knee_mhz = 1800;
  const Fit g = fit(calibration(t), t.f_ref_mhz);
  EXPECT_NEAR(g.clock_knee_mhz, 1800, 1e-9);
  EXPECT_LT(g.residual_max, 1e-9);
  // A launch below the floor costs what one at the floor does.
  Launch at{false, 1e12, 0, 1e9, 1e-3, 1800, "counters", false, 1e9};
  Launch below = at;
  below.sm_clock_mhz = 1500;
  EXPECT_DOUBLE_EQ(predict(g, below)->flop_mj, predict(g, at)->flop_mj);
  EXPECT_LT(predict(f, below)->flop_mj, predict(f, at)->flop_mj);
}

TEST(EnergyFit, BusyPowerIsATermOnlyWhereTheSmFractionsDiffer) {
  // Every point on every SM (no sleep kernel apart): busy power cannot be told from the constant
  // power, and is part of it.
  Truth t;
  t.busy_w = 0;
  auto pts = calibration(t);
  for (auto& p : pts) {
    p.active_sm_fraction = 1;
    p.energy_j = t.energy_j(p);
  }
  const Fit f = fit(pts, t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_EQ(f.busy_w, 0);
  EXPECT_NEAR(f.idle_w, t.idle_w, 1e-6 * t.idle_w);
}

TEST(EnergyFit, AFitWithoutTheCountersIsMadeAgainWhenTheyAreOn) {
  Fit counted;
  counted.eps_l2_byte_pj = 30;
  Fit uncounted;  // no L2 term: the counters were unavailable when it was made
  Fit failed;
  failed.status = "unavailable";
  EXPECT_TRUE(fit_again(std::nullopt, true));
  EXPECT_TRUE(fit_again(failed, false));
  EXPECT_FALSE(fit_again(counted, true));
  EXPECT_TRUE(fit_again(uncounted, true));
  EXPECT_FALSE(fit_again(uncounted, false));  // --no-counters: it is the best there is
}

TEST(EnergyFit, WithoutCountedL2BytesThereIsNoL2Term) {
  // The calibration's counters failed: no point has SM <-> L2 bytes, and the L2 kernels (whose
  // figures are counts) are missing. The model has no L2 term, and prices launches without it.
  Truth t;
  t.eps_l2_pj = 0;
  std::vector<CalibrationPoint> pts;
  for (auto p : calibration(t)) {
    if (p.kernel.rfind("L2 ", 0) == 0) continue;
    p.l2_bytes = 0;
    pts.push_back(p);
  }
  const Fit f = fit(pts, t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_FALSE(f.eps_l2_byte_pj);
  EXPECT_NEAR(f.busy_w, t.busy_w, 1e-6 * t.busy_w);  // the sleep kernel's idle SMs against the rest
  const auto b = predict(f, {false, 1e12, 0, 1e9, 1e-3, 1980, "counters", false, 0});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->l2_mj, 0);
  // With an L2 term, a launch whose L2 bytes were not counted gets no figure.
  const Fit g = fit(calibration(Truth{}), t.f_ref_mhz);
  std::string why;
  EXPECT_FALSE(predict(g, {false, 1e12, 0, 1e9, 1e-3, 1980, "counters", false, 0}, &why));
  EXPECT_NE(why.find("SM <-> L2 bytes"), std::string::npos) << why;
  // A fitted price of 0 per L2 byte needs none, and a breakdown keeps the counted bytes.
  Fit zero = g;
  zero.eps_l2_byte_pj = 0;
  EXPECT_TRUE(predict(zero, {false, 1e12, 0, 1e9, 1e-3, 1980, "counters", false, 0}));
  const auto kept = predict(f, {false, 1e12, 0, 1e9, 1e-3, 1980, "counters", false, 5e9});
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->l2_bytes, 5e9);
  EXPECT_EQ(kept->l2_mj, 0);
}

TEST(EnergyFit, TheClockFactorIsNeeded) {
  // The same points read as if every window ran at f_ref: the GEMMs' lower clocks unexplained,
  // the fit misses them by several percent.
  const Truth t;
  auto pts = calibration(t);
  for (auto& p : pts) p.sm_clock_mhz = t.f_ref_mhz;
  const Fit f = fit(pts, t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_GT(f.residual_max, 0.03);
  // One clock cannot tell how energy moves with it: the exponent is the CMOS default, and says so.
  EXPECT_EQ(f.clock_exponent, 2);
  EXPECT_EQ(f.clock_knee_mhz, 0);
  EXPECT_NE(f.clock_exponent_basis.find("not fitted"), std::string::npos) << f.clock_exponent_basis;
}

TEST(EnergyFit, MmaSyncLaunchesCostTheirOwnEnergyPerFlop) {
  const Truth t;
  const Fit f = fit(calibration(t), t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  Launch wgmma{false, 1e12, 0, 0, 1e-3, 1980, "counters", false, 1e9};
  Launch mma = wgmma;
  mma.mma_sync = true;
  const auto a = predict(f, wgmma), b = predict(f, mma);
  ASSERT_TRUE(a && b);
  EXPECT_NEAR(a->flop_mj, t.eps16_pj * 1e-9 * 1e12, 1e-6);
  EXPECT_NEAR(b->flop_mj, t.mma16_pj * 1e-9 * 1e12, 1e-6);
  EXPECT_EQ(a->flop_instruction, "wgmma");
  EXPECT_EQ(b->flop_instruction, "mma.sync");
  // At a lower clock (above the floor) the dynamic part scales with the fitted exponent.
  mma.sm_clock_mhz = 1782;
  EXPECT_NEAR(predict(f, mma)->clock_scale, std::pow(0.9, t.exponent), 1e-9);
  // A calibration without mma.sync kernels: an mma.sync launch gets no figure, and the reason.
  std::vector<CalibrationPoint> no_mma;
  for (const auto& p : calibration(t))
    if (p.flops16_mma == 0 && p.flops8_mma == 0) no_mma.push_back(p);
  const Fit g = fit(no_mma, t.f_ref_mhz);
  ASSERT_EQ(g.status, "ok") << g.reason;
  EXPECT_FALSE(g.eps_mma16_pj);
  std::string why;
  EXPECT_FALSE(predict(g, mma, &why));
  EXPECT_NE(why.find("no energy per bf16 mma.sync FLOP"), std::string::npos) << why;
  // A version-2 fit (an older fa-bench's): one energy per FLOP whatever the instruction.
  Fit old = g;
  old.version = 2;
  old.clock_exponent = 2;
  old.clock_knee_mhz = 0;
  old.eps_l2_byte_pj.reset();
  mma.sm_clock_mhz = 990;
  const auto c = predict(old, mma);
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->clock_scale, 0.25, 1e-12);
  EXPECT_NEAR(c->flop_mj, 0.25 * old.eps_flop16_pj * 1e-9 * 1e12, 1e-9);
}

TEST(EnergyFit, NoisyCalibrationStaysCloseAndShowsItsResiduals) {
  const Truth t;
  const Fit f = fit(calibration(t, 0.02), t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_NEAR(f.idle_w, t.idle_w, 0.1 * t.idle_w);
  EXPECT_NEAR(f.eps_byte_pj, t.eps_byte_pj, 0.15 * t.eps_byte_pj);
  EXPECT_NEAR(f.eps_flop16_pj, t.eps16_pj, 0.15 * t.eps16_pj);
  EXPECT_NEAR(f.eps_inst_pj, t.eps_inst_pj, 0.15 * t.eps_inst_pj);
  ASSERT_TRUE(f.eps_l2_byte_pj);
  EXPECT_NEAR(*f.eps_l2_byte_pj, t.eps_l2_pj, 0.3 * t.eps_l2_pj);
  EXPECT_GT(f.residual_rms, 1e-3);
  EXPECT_LE(f.residual_max, 0.04);
}

TEST(EnergyFit, EverythingAtOneRateIsDegenerate) {
  // Without the sleep kernel and with every copy at one rate, bytes and time move together:
  // energy per byte and constant power cannot be told apart.
  const Truth t;
  std::vector<CalibrationPoint> pts;
  for (double gib : {1.0, 2.0, 4.0}) {
    const double bytes = gib * (1 << 30);
    pts.push_back(point("copy", 0, 0, bytes, bytes / 4.2e12, bytes / 80));
  }
  for (double n : {4096.0, 8192.0}) {
    const double flops = 2 * n * n * n;
    pts.push_back(point("gemm", flops, 0, 0, flops / 700e12, flops / 2e4));
  }
  pts.push_back(point("FFMA", 0, 0, 0, 2e-3, 2e9));
  for (auto& p : pts) p.energy_j = t.energy_j(p);
  const Fit f = fit(pts, t.f_ref_mhz);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("degenerate"), std::string::npos) << f.reason;
}

TEST(EnergyFit, WithoutPointsOfTheirOwnInstructionsCannotBeFitted) {
  const Truth t;
  // No point issues instructions (an older calibration): refused, saying what is missing.
  auto none = calibration(t);
  for (auto& p : none) p.instructions = 0;
  for (auto& p : none) p.energy_j = t.energy_j(p);
  Fit f = fit(none, t.f_ref_mhz);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("no calibration point issues instructions (the softmax or FFMA kernel)"),
            std::string::npos)
      << f.reason;
  // Instructions only where the GEMMs' FLOPs are, in proportion to them (no FFMA kernel, none
  // counted for the copies and the sleep): they cannot be told from the FLOPs.
  std::vector<CalibrationPoint> gemm_only;
  for (auto p : calibration(t)) {
    if (p.kernel.rfind("FFMA", 0) == 0) continue;
    if (p.flops16 == 0 && p.flops8 == 0) p.instructions = 0;
    p.energy_j = t.energy_j(p);
    gemm_only.push_back(p);
  }
  f = fit(gemm_only, t.f_ref_mhz);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("degenerate calibration"), std::string::npos) << f.reason;
}

TEST(EnergyFit, TooFewOrImpossiblePointsAreRefused) {
  const Truth t;
  auto pts = calibration(t);
  pts.resize(3);
  EXPECT_EQ(fit(pts, t.f_ref_mhz).status, "refused");
  EXPECT_NE(fit({}).reason.find("duration"), std::string::npos);
  auto bad = calibration(t);
  bad[2].energy_j = -1;
  Fit f = fit(bad, t.f_ref_mhz);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("copy 33 blocks"), std::string::npos) << f.reason;
  auto unclocked = calibration(t);
  unclocked[9].sm_clock_mhz = 0;  // the driver gave no SM clock in that window
  f = fit(unclocked, t.f_ref_mhz);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("'bf16 GEMM 8192' has no SM clock reading"), std::string::npos)
      << f.reason;
}

TEST(EnergyFit, WithoutFp8PointsFp8IsUnknown) {
  const Truth t;
  std::vector<CalibrationPoint> pts;
  for (const auto& p : calibration(t))  // no fp8 GEMMs (a device without FP8 tensor cores)
    if (p.flops8 == 0) pts.push_back(p);
  const Fit f = fit(pts, t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_FALSE(f.eps_flop8_pj);
  Launch l{true, 1e12, 1e9, 1e8, 1e-3, 1980, "counters", false, 1e9};
  std::string why;
  EXPECT_FALSE(predict(f, l, &why));
  EXPECT_NE(why.find("no energy per fp8 wgmma FLOP"), std::string::npos) << why;
  l.fp8 = false;
  EXPECT_TRUE(predict(f, l));
}

TEST(EnergyFit, EnergiesPerOperationAreNeverNegative) {
  // Data no non-negative model explains exactly (bytes "cost" negative energy): the byte term is
  // held at 0 and the residuals say how badly the rest fits.
  Truth t;
  t.eps_byte_pj = -10;
  const Fit f = fit(calibration(t), t.f_ref_mhz);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_GE(f.eps_byte_pj, 0);
  EXPECT_GE(f.eps_flop16_pj, 0);
  EXPECT_GE(f.eps_inst_pj, 0);
  EXPECT_GE(f.idle_w, 0);
  EXPECT_GT(f.residual_max, 0.01);
}

// The relative squared error of x, and the best non-negative one by brute force: every subset of
// the columns solved unconstrained (fa-bench's fit before the active set), the feasible best.
double sse_of(const std::vector<std::vector<double>>& rows, const std::vector<double>& target,
              const std::vector<double>& x) {
  double sse = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double e = 0;
    for (std::size_t k = 0; k < x.size(); ++k) e += rows[i][k] * x[k];
    sse += (e / target[i] - 1) * (e / target[i] - 1);
  }
  return sse;
}

double brute_force_sse(const std::vector<std::vector<double>>& rows,
                       const std::vector<double>& target) {
  const std::size_t m = rows[0].size();
  double best = sse_of(rows, target, std::vector<double>(m, 0));
  for (unsigned mask = 1; mask < (1u << m); ++mask) {
    std::vector<std::size_t> idx;
    for (std::size_t k = 0; k < m; ++k)
      if (mask >> k & 1) idx.push_back(k);
    const std::size_t n = idx.size();
    std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::size_t r = 0; r < n; ++r) {
        const double ur = rows[i][idx[r]] / target[i];
        for (std::size_t c = 0; c < n; ++c) a[r][c] += ur * rows[i][idx[c]] / target[i];
        a[r][n] += ur;
      }
    }
    bool singular = false;
    for (std::size_t c = 0; c < n && !singular; ++c) {
      std::size_t p = c;
      for (std::size_t r = c + 1; r < n; ++r)
        if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
      std::swap(a[c], a[p]);
      if (std::fabs(a[c][c]) < 1e-12) singular = true;
      for (std::size_t r = 0; r < n && !singular; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (std::size_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
      }
    }
    if (singular) continue;
    std::vector<double> x(m, 0);
    bool feasible = true;
    for (std::size_t r = 0; r < n; ++r) {
      x[idx[r]] = a[r][n] / a[r][r];
      feasible = feasible && x[idx[r]] >= 0;
    }
    if (feasible) best = std::min(best, sse_of(rows, target, x));
  }
  return best;
}

TEST(EnergyFit, NonNegativeLeastSquaresFindsTheBestFeasibleFit) {
  // Random problems whose unconstrained optimum has negative coefficients (targets from a mix of
  // signs, plus noise), some with a near-duplicate column: the active set must reach the error of
  // the best feasible subset, every coefficient >= 0.
  std::uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1p-53;
  };
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t m = 3 + trial % 7, points = 12 + trial % 9;
    std::vector<double> truth(m);
    for (auto& t : truth) t = uniform() * 2 - 0.6;
    std::vector<std::vector<double>> rows(points, std::vector<double>(m));
    std::vector<double> target(points);
    for (std::size_t i = 0; i < points; ++i) {
      double e = 0.5;
      for (std::size_t k = 0; k < m; ++k) {
        rows[i][k] = uniform() * (1 + 3 * (k % 3));
        if (trial % 3 == 0 && k == m - 1) rows[i][k] = rows[i][0] * (1 + 1e-7 * uniform());
        e += truth[k] * rows[i][k];
      }
      target[i] = std::max(0.1, e) * (1 + 0.05 * (uniform() - 0.5));
    }
    const auto x = detail::nonnegative_least_squares(rows, target);
    ASSERT_EQ(x.size(), m);
    for (double v : x) EXPECT_GE(v, 0) << "trial " << trial;
    const double got = sse_of(rows, target, x), best = brute_force_sse(rows, target);
    EXPECT_LE(got, best * (1 + 1e-6) + 1e-12) << "trial " << trial << ": " << got << " > " << best;
  }
}

TEST(EnergyFit, PredictSplitsTheEnergyIntoItsParts) {
  Fit f;
  f.eps_flop16_pj = 0.5;
  f.eps_flop8_pj = 0.25;
  f.eps_inst_pj = 400;
  f.eps_byte_pj = 20;
  f.idle_w = 150;
  f.busy_w = 25;
  f.eps_l2_byte_pj = 10;
  f.f_ref_mhz = 2000;
  // At 1000 MHz, a quarter of f_ref's dynamic energy per operation.
  const auto b = predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 1000, "counters", false, 4e9});
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->clock_scale, 0.25);
  EXPECT_DOUBLE_EQ(b->flop_mj, 125);  // 1e12 x 0.5 pJ = 0.5 J, x 0.25
  EXPECT_DOUBLE_EQ(b->inst_mj, 100);  // 1e9 x 400 pJ = 0.4 J, x 0.25
  EXPECT_DOUBLE_EQ(b->l2_mj, 40);     // 4e9 x 10 pJ = 40 mJ, whatever the SM clock
  EXPECT_DOUBLE_EQ(b->byte_mj, 20);   // 1e9 x 20 pJ = 20 mJ, whatever the clock
  EXPECT_DOUBLE_EQ(b->idle_mj, 350);  // (150 + 25) W x 2 ms
  EXPECT_DOUBLE_EQ(b->total_mj(), 635);
  // DRAM's active power is part of its energy, paid for the launch's time when it moves bytes.
  f.dram_active_w = 10;
  EXPECT_DOUBLE_EQ(predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 1000, "counters", false, 4e9})->byte_mj,
                   40);  // 20 mJ of bytes + 10 W x 2 ms
  EXPECT_DOUBLE_EQ(predict(f, {false, 1e12, 0, 1e9, 2e-3, 1000, "counters", false, 4e9})->byte_mj,
                   0);
  f.dram_active_w = 0;
  EXPECT_DOUBLE_EQ(b->l2_bytes, 4e9);
  // With a floor at 1500 MHz, 1000 MHz costs what 1500 does.
  f.clock_knee_mhz = 1500;
  EXPECT_DOUBLE_EQ(
      predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 1000, "counters", false, 4e9})->clock_scale, 0.5625);
  f.clock_knee_mhz = 0;
  f.eps_l2_byte_pj.reset();
  f.busy_w = 0;
  EXPECT_EQ(b->bytes_basis, "counters");
  EXPECT_DOUBLE_EQ(b->instructions, 1e9);
  EXPECT_DOUBLE_EQ(b->sm_clock_mhz, 1000);
  EXPECT_DOUBLE_EQ(predict(f, {true, 1e12, 0, 0, 0, 2000, "model"})->flop_mj, 250);
  std::string why;
  EXPECT_FALSE(predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 0, "counters"}, &why));
  EXPECT_NE(why.find("no SM clock reading"), std::string::npos) << why;
  f.version = 1;  // a fit of the model before instructions and clocks: never used
  EXPECT_FALSE(predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 2000, "counters"}, &why));
  EXPECT_NE(why.find("older fa-bench"), std::string::npos) << why;
  f.version = 2;
  f.status = "refused";
  f.reason = "degenerate calibration";
  EXPECT_FALSE(predict(f, {false, 1e12, 1e9, 1e9, 2e-3, 2000, "model"}, &why));
  EXPECT_EQ(why, "no energy model: degenerate calibration");
}

// ---- JSON ----

TEST(EnergyJson, FitAndRowRoundTripAndImpossibleValuesAreRefused) {
  auto pts = calibration(Truth{});
  pts[0].temperature_c = 52.5;
  pts[0].temperature_max_c = 55;
  const Fit f = fit(pts, 1980);
  ASSERT_EQ(f.status, "ok") << f.reason;
  const Fit back = energy_fit_from_json(energy_fit_to_json(f));
  EXPECT_EQ(back.version, 5);
  EXPECT_DOUBLE_EQ(back.dram_active_w, f.dram_active_w);
  EXPECT_EQ(back.eps_l2_byte_pj, f.eps_l2_byte_pj);
  EXPECT_DOUBLE_EQ(back.busy_w, f.busy_w);
  EXPECT_DOUBLE_EQ(back.clock_knee_mhz, f.clock_knee_mhz);
  EXPECT_DOUBLE_EQ(back.points[0].l2_bytes, f.points[0].l2_bytes);
  EXPECT_DOUBLE_EQ(back.points[15].active_sm_fraction, 0);  // the sleep kernel
  EXPECT_DOUBLE_EQ(back.points[2].active_sm_fraction, 0.25);
  EXPECT_EQ(back.eps_mma16_pj, f.eps_mma16_pj);
  EXPECT_EQ(back.eps_mma8_pj, f.eps_mma8_pj);
  EXPECT_DOUBLE_EQ(back.clock_exponent, f.clock_exponent);
  EXPECT_EQ(back.clock_exponent_basis, f.clock_exponent_basis);
  auto no_basis = energy_fit_to_json(f);  // the basis is optional (the schema says so)
  no_basis.erase("clock_exponent_basis");
  EXPECT_EQ(energy_fit_from_json(no_basis).version, 5);
  EXPECT_EQ(energy_fit_from_json(no_basis).clock_exponent_basis, "");
  auto too_active = energy_fit_to_json(f);
  too_active["points"][0]["active_sm_fraction"] = 1.5;
  EXPECT_THROW(energy_fit_from_json(too_active), std::invalid_argument);
  EXPECT_DOUBLE_EQ(back.points[5].flops16_mma, f.points[5].flops16_mma);
  EXPECT_DOUBLE_EQ(back.points[7].flops8_mma, f.points[7].flops8_mma);
  EXPECT_DOUBLE_EQ(back.eps_byte_pj, f.eps_byte_pj);
  EXPECT_DOUBLE_EQ(back.eps_inst_pj, f.eps_inst_pj);
  EXPECT_DOUBLE_EQ(back.f_ref_mhz, 1980);
  EXPECT_EQ(back.eps_flop8_pj, f.eps_flop8_pj);
  ASSERT_EQ(back.points.size(), f.points.size());
  EXPECT_EQ(back.residuals.size(), f.residuals.size());
  EXPECT_DOUBLE_EQ(back.points[3].instructions, f.points[3].instructions);
  EXPECT_DOUBLE_EQ(back.points[3].sm_clock_mhz, 1935);
  EXPECT_DOUBLE_EQ(back.points[0].temperature_c, 52.5);
  EXPECT_DOUBLE_EQ(back.points[0].temperature_max_c, 55);
  EXPECT_TRUE(energy_fit_to_json(f)["points"][1]["temperature_c"].is_null());  // not read

  // A fit written by an fa-bench before the L2 term reads as version 3 (no L2 term, no busy
  // power, no floor), one before the mma.sync terms as version 2 (the exponent 2), one before
  // the instruction term as version 1; each is written back as it was.
  auto old = energy_fit_to_json(f);
  old.erase("dram_active_w");  // before DRAM's active power: version 4
  const Fit v4 = energy_fit_from_json(old);
  EXPECT_EQ(v4.version, 4);
  EXPECT_EQ(v4.dram_active_w, 0);
  EXPECT_EQ(energy_fit_to_json(v4), old);
  for (const char* key : {"eps_l2_byte_pj", "busy_w", "clock_knee_mhz"}) old.erase(key);
  for (auto& p : old["points"]) {
    p.erase("l2_bytes");
    p.erase("active_sm_fraction");
  }
  const Fit v3 = energy_fit_from_json(old);
  EXPECT_EQ(v3.version, 3);
  EXPECT_FALSE(v3.eps_l2_byte_pj);
  EXPECT_EQ(v3.busy_w, 0);
  EXPECT_EQ(v3.clock_knee_mhz, 0);
  EXPECT_EQ(energy_fit_to_json(v3), old);
  for (const char* key : {"eps_mma16_pj", "eps_mma8_pj", "clock_exponent", "clock_exponent_basis"})
    old.erase(key);
  for (auto& p : old["points"]) {
    p.erase("flops16_mma");
    p.erase("flops8_mma");
  }
  const Fit v2 = energy_fit_from_json(old);
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(v2.clock_exponent, 2);
  EXPECT_EQ(energy_fit_to_json(v2), old);
  old.erase("eps_inst_pj");
  old.erase("f_ref_mhz");
  for (auto& p : old["points"]) {
    p.erase("instructions");
    p.erase("sm_clock_mhz");
    p.erase("temperature_c");
  }
  const Fit v1 = energy_fit_from_json(old);
  EXPECT_EQ(v1.version, 1);
  EXPECT_EQ(energy_fit_to_json(v1), old);
  EXPECT_FALSE(predict(v1, {false, 1e12, 1e9, 1e9, 1e-3, 1980, "model"}));

  FakeDevice dev;
  dev.reasons = 0x40;
  const Measurement m = run(dev);
  const auto model =
      predict(f, {false, 1e12, 1e9, 3e8, m.seconds_per_launch, 1900, "counters", true, 2e9});
  ASSERT_TRUE(model);
  const auto j = row_energy_to_json(m, model);
  EXPECT_NEAR(j["model"]["model_over_measured"].get<double>(),
              model->total_mj() / *m.energy_per_launch_mj, 1e-12);
  EXPECT_FALSE(j.contains("model_reason"));
  Measurement m2;
  std::optional<Breakdown> model2;
  std::string reason2 = "stale";
  row_energy_from_json(j, &m2, &model2, &reason2);
  EXPECT_EQ(reason2, "");
  EXPECT_EQ(m2.energy_per_launch_mj, m.energy_per_launch_mj);
  EXPECT_EQ(m2.clock_event_reasons, m.clock_event_reasons);
  EXPECT_EQ(m2.temperature_samples, m.temperature_samples);
  EXPECT_DOUBLE_EQ(m2.temperature_mean_c, m.temperature_mean_c);
  EXPECT_DOUBLE_EQ(m2.temperature_max_c, m.temperature_max_c);
  ASSERT_TRUE(model2);
  EXPECT_DOUBLE_EQ(model2->total_mj(), model->total_mj());
  EXPECT_DOUBLE_EQ(model2->inst_mj, model->inst_mj);
  EXPECT_DOUBLE_EQ(model2->instructions, 3e8);
  EXPECT_DOUBLE_EQ(model2->sm_clock_mhz, 1900);
  EXPECT_DOUBLE_EQ(model2->clock_scale, model->clock_scale);
  EXPECT_DOUBLE_EQ(model2->l2_mj, model->l2_mj);
  EXPECT_DOUBLE_EQ(model2->l2_bytes, 2e9);
  EXPECT_EQ(model2->flop_instruction, "mma.sync");
  EXPECT_EQ(model2->version, 3);

  // No figure, with the reason; a record of an older fa-bench (no temperature, no instruction
  // part) reads with neither.
  const auto without = row_energy_to_json(m, std::nullopt,
                                          "the energy model needs the counted "
                                          "instructions: counters off "
                                          "(--no-counters)");
  row_energy_from_json(without, &m2, &model2, &reason2);
  EXPECT_FALSE(model2);
  EXPECT_EQ(reason2,
            "the energy model needs the counted instructions: counters off (--no-counters)");
  auto older = j;  // before the L2 part: version 2, written back without it
  for (const char* key : {"l2_mj", "l2_bytes", "flop_instruction"}) older["model"].erase(key);
  row_energy_from_json(older, &m2, &model2, &reason2);
  ASSERT_TRUE(model2);
  EXPECT_EQ(model2->version, 2);
  EXPECT_EQ(model2->l2_mj, 0);
  auto written = row_energy_to_json(m2, model2)["model"];
  EXPECT_FALSE(written.contains("l2_mj") || written.contains("flop_instruction"));
  for (const char* key : {"flop_mj", "inst_mj", "byte_mj", "idle_mj", "instructions"})
    EXPECT_EQ(written[key], older["model"][key]) << key;
  older.erase("temperature_c");
  for (const char* key : {"inst_mj", "instructions", "sm_clock_mhz", "clock_scale"})
    older["model"].erase(key);
  row_energy_from_json(older, &m2, &model2, &reason2);
  EXPECT_EQ(m2.temperature_samples, 0);
  ASSERT_TRUE(model2);
  EXPECT_EQ(model2->version, 1);
  EXPECT_EQ(model2->inst_mj, 0);
  EXPECT_DOUBLE_EQ(model2->total_mj(), model->flop_mj + model->byte_mj + model->idle_mj);
  EXPECT_FALSE(row_energy_to_json(m2, model2)["model"].contains("l2_mj"));
  EXPECT_FALSE(row_energy_to_json(m2, model2)["model"].contains("inst_mj"));  // as it was

  auto refused = [&](const char* key, const nlohmann::json& value, const char* mention) {
    auto bad = j;
    bad[key] = value;
    try {
      row_energy_from_json(bad, &m2, &model2);
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  };
  refused("energy_per_launch_mj", -1.0, "energy_per_launch_mj: impossible value -1");
  refused("energy_per_launch_mj", nullptr, "exactly when status is ok");
  refused("status", "maybe", "accepted: ok, refused");
  refused("counter_vs_sampled", -2.0, "counter_vs_sampled");
  refused("launches", 1.5, "launches");
  refused("temperature_c", nlohmann::json{{"mean", -5}, {"max", 40}, {"samples", 3}}, "mean");
  refused("model_reason", 3, "model_reason");
  auto bad_fit = energy_fit_to_json(f);
  bad_fit["eps_inst_pj"] = -1;
  EXPECT_THROW(energy_fit_from_json(bad_fit), std::invalid_argument);
}

}  // namespace
}  // namespace fa::energy
