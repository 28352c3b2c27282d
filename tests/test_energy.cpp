// The energy window on a scripted device (a virtual clock, a GPU that runs the enqueued launches
// back to back, a driver whose counter advances in steps), the NVML adapter on fake entry points,
// and the energy model's fit on synthetic calibrations. CPU only.
#include <gtest/gtest.h>

#include <cmath>
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
  bool counter_stuck = false;
  std::uint64_t reasons = 0;
  std::uint64_t clock_mhz = 1980;

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

struct Truth {
  double eps16_pj = 0.6, eps8_pj = 0.35, eps_byte_pj = 22, idle_w = 160;
  double energy_j(const CalibrationPoint& p) const {
    return 1e-12 * (eps16_pj * p.flops16 + eps8_pj * p.flops8 + eps_byte_pj * p.bytes) +
           idle_w * p.seconds;
  }
};

CalibrationPoint point(const char* name, double f16, double f8, double bytes, double seconds) {
  CalibrationPoint p;
  p.kernel = name;
  p.flops16 = f16;
  p.flops8 = f8;
  p.bytes = bytes;
  p.seconds = seconds;
  return p;
}

// What profiler/ceilings.cu runs, with an H200's rates: sleep, the copy at three rates, GEMMs.
std::vector<CalibrationPoint> calibration(const Truth& t, double noise = 0) {
  const double gib2 = 2.0 * (1 << 30), f8192 = 2.0 * 8192 * 8192 * 8192,
               f4096 = 2.0 * 4096 * 4096 * 4096;
  std::vector<CalibrationPoint> pts{
      point("sleep 1 ms", 0, 0, 0, 1e-3),
      point("copy full grid", 0, 0, gib2, gib2 / 4.2e12),
      point("copy 132 blocks", 0, 0, gib2, gib2 / 2.1e12),
      point("copy 33 blocks", 0, 0, gib2, gib2 / 0.6e12),
      point("bf16 GEMM 8192", f8192, 0, 3 * 8192.0 * 8192 * 2, f8192 / 720e12),
      point("bf16 GEMM 4096", f4096, 0, 3 * 4096.0 * 4096 * 2, f4096 / 600e12),
      point("fp8 GEMM 8192", 0, f8192, 8192.0 * 8192 * 4, f8192 / 1300e12),
      point("fp8 GEMM 4096", 0, f4096, 4096.0 * 4096 * 4, f4096 / 1000e12)};
  for (std::size_t i = 0; i < pts.size(); ++i) {
    // A fixed pattern of +-noise: reproducible, and not a multiple of any column.
    const double wiggle = noise * std::sin(1.0 + 2.3 * static_cast<double>(i));
    pts[i].energy_j = t.energy_j(pts[i]) * (1 + wiggle);
  }
  return pts;
}

TEST(EnergyFit, RecoversKnownEnergiesPerOperation) {
  const Truth t;
  const Fit f = fit(calibration(t));
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_NEAR(f.eps_flop16_pj, t.eps16_pj, 1e-6 * t.eps16_pj);
  ASSERT_TRUE(f.eps_flop8_pj);
  EXPECT_NEAR(*f.eps_flop8_pj, t.eps8_pj, 1e-6 * t.eps8_pj);
  EXPECT_NEAR(f.eps_byte_pj, t.eps_byte_pj, 1e-6 * t.eps_byte_pj);
  EXPECT_NEAR(f.idle_w, t.idle_w, 1e-6 * t.idle_w);
  EXPECT_LT(f.residual_max, 1e-9);
  EXPECT_EQ(f.residuals.size(), f.points.size());
}

TEST(EnergyFit, NoisyCalibrationStaysCloseAndShowsItsResiduals) {
  const Truth t;
  const Fit f = fit(calibration(t, 0.02));
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_NEAR(f.idle_w, t.idle_w, 0.05 * t.idle_w);
  EXPECT_NEAR(f.eps_byte_pj, t.eps_byte_pj, 0.15 * t.eps_byte_pj);
  EXPECT_NEAR(f.eps_flop16_pj, t.eps16_pj, 0.15 * t.eps16_pj);
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
    pts.push_back(point("copy", 0, 0, bytes, bytes / 4.2e12));
  }
  for (double n : {4096.0, 8192.0}) {
    const double flops = 2 * n * n * n;
    pts.push_back(point("gemm", flops, 0, 0, flops / 700e12));
  }
  for (auto& p : pts) p.energy_j = t.energy_j(p);
  const Fit f = fit(pts);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("degenerate"), std::string::npos) << f.reason;
}

TEST(EnergyFit, TooFewOrImpossiblePointsAreRefused) {
  const Truth t;
  auto pts = calibration(t);
  pts.resize(3);
  EXPECT_EQ(fit(pts).status, "refused");
  EXPECT_NE(fit({}).reason.find("duration"), std::string::npos);
  auto bad = calibration(t);
  bad[2].energy_j = -1;
  const Fit f = fit(bad);
  EXPECT_EQ(f.status, "refused");
  EXPECT_NE(f.reason.find("copy 132 blocks"), std::string::npos) << f.reason;
}

TEST(EnergyFit, WithoutFp8PointsFp8IsUnknown) {
  const Truth t;
  auto pts = calibration(t);
  pts.resize(6);  // no fp8 GEMMs (a device without FP8 tensor cores)
  const Fit f = fit(pts);
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_FALSE(f.eps_flop8_pj);
  EXPECT_FALSE(predict(f, true, 1e12, 1e9, 1e-3, "model"));
  EXPECT_TRUE(predict(f, false, 1e12, 1e9, 1e-3, "model"));
}

TEST(EnergyFit, EnergiesPerOperationAreNeverNegative) {
  // Data no non-negative model explains exactly (bytes "cost" negative energy): the byte term is
  // held at 0 and the residuals say how badly the rest fits.
  Truth t;
  t.eps_byte_pj = -10;
  const Fit f = fit(calibration(t));
  ASSERT_EQ(f.status, "ok") << f.reason;
  EXPECT_GE(f.eps_byte_pj, 0);
  EXPECT_GE(f.eps_flop16_pj, 0);
  EXPECT_GE(f.idle_w, 0);
  EXPECT_GT(f.residual_max, 0.01);
}

TEST(EnergyFit, PredictSplitsTheEnergyIntoItsParts) {
  Fit f;
  f.eps_flop16_pj = 0.5;
  f.eps_flop8_pj = 0.25;
  f.eps_byte_pj = 20;
  f.idle_w = 150;
  const auto b = predict(f, false, 1e12, 1e9, 2e-3, "counters");
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->flop_mj, 500);  // 1e12 x 0.5 pJ = 0.5 J
  EXPECT_DOUBLE_EQ(b->byte_mj, 20);   // 1e9 x 20 pJ = 20 mJ
  EXPECT_DOUBLE_EQ(b->idle_mj, 300);  // 150 W x 2 ms
  EXPECT_DOUBLE_EQ(b->total_mj(), 820);
  EXPECT_EQ(b->bytes_basis, "counters");
  EXPECT_DOUBLE_EQ(predict(f, true, 1e12, 0, 0, "model")->flop_mj, 250);
  f.status = "refused";
  EXPECT_FALSE(predict(f, false, 1e12, 1e9, 2e-3, "model"));
}

// ---- JSON ----

TEST(EnergyJson, FitAndRowRoundTripAndImpossibleValuesAreRefused) {
  const Fit f = fit(calibration(Truth{}));
  const Fit back = energy_fit_from_json(energy_fit_to_json(f));
  EXPECT_DOUBLE_EQ(back.eps_byte_pj, f.eps_byte_pj);
  EXPECT_EQ(back.eps_flop8_pj, f.eps_flop8_pj);
  EXPECT_EQ(back.points.size(), f.points.size());
  EXPECT_EQ(back.residuals.size(), f.residuals.size());

  FakeDevice dev;
  dev.reasons = 0x40;
  const Measurement m = run(dev);
  const auto model = predict(f, false, 1e12, 1e9, m.seconds_per_launch, "model");
  const auto j = row_energy_to_json(m, model);
  EXPECT_NEAR(j["model"]["model_over_measured"].get<double>(),
              model->total_mj() / *m.energy_per_launch_mj, 1e-12);
  Measurement m2;
  std::optional<Breakdown> model2;
  row_energy_from_json(j, &m2, &model2);
  EXPECT_EQ(m2.energy_per_launch_mj, m.energy_per_launch_mj);
  EXPECT_EQ(m2.clock_event_reasons, m.clock_event_reasons);
  ASSERT_TRUE(model2);
  EXPECT_DOUBLE_EQ(model2->total_mj(), model->total_mj());

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
}

}  // namespace
}  // namespace fa::energy
