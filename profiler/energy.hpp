// Energy per launch from the driver (NVML): the device's total-energy counter read across a window
// of launches run back to back, checked against the board power sampled during it, with the SM
// clock, the GPU's temperature and the reasons the driver gives for holding the clock down.
// docs/energy.md explains the window. Everything here is plain C++: the driver, the GPU and the
// clock come in through interfaces, so the CPU tests drive the window with a scripted device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fa::energy {

// One reading from the driver: a value, or why there is none.
struct Reading {
  bool ok = false;
  std::uint64_t value = 0;
  std::string error;  // "" when ok

  static Reading of(std::uint64_t v) { return {true, v, ""}; }
  static Reading failed(std::string why) { return {false, 0, std::move(why)}; }
};

// What the driver tells about one GPU's power.
class PowerSource {
 public:
  virtual ~PowerSource() = default;
  virtual Reading total_energy_mj() = 0;      // mJ since the driver loaded
  virtual Reading power_mw() = 0;             // board power (Ampere and newer: a 1 s average)
  virtual Reading sm_clock_mhz() = 0;         // current SM clock
  virtual Reading clock_event_reasons() = 0;  // nvmlClocksEventReason* bits
  virtual Reading temperature_c() = 0;        // the GPU's die temperature (NVML_TEMPERATURE_GPU)
  virtual Reading max_sm_clock_mhz() = 0;     // the highest SM clock the device runs at
};

// NVML's entry points by name (dlsym on the loaded library; tests pass fakes).
using SymbolLookup = std::function<void*(const char*)>;

// The power source of the GPU at `pci_bus_id` through NVML, or nullptr with `why_not`. Entry points
// a driver lacks make their readings fail with a reason; the others still work.
std::unique_ptr<PowerSource> nvml_power_source(const std::string& pci_bus_id,
                                               const SymbolLookup& symbol, std::string* why_not);
// The same through the process's NVML (profiler/device_info.cpp loads it at run time).
std::unique_ptr<PowerSource> nvml_power_source(const std::string& pci_bus_id, std::string* why_not);

// `source` with readings failing as a driver's would: "no_permission" (every reading), "no_counter"
// (the energy counter's entry point missing). For the unavailable paths on a healthy machine
// (fa-bench --test-force-energy-error); any other `how` leaves the source as it is.
std::unique_ptr<PowerSource> failing_power_source(std::unique_ptr<PowerSource> source,
                                                  const std::string& how);

// "power cap", "thermal slowdown (hardware)", ...: the names of the set bits, in bit order.
std::vector<std::string> clock_event_reason_names(std::uint64_t bits);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_s() = 0;
  virtual void sleep_s(double s) = 0;
};
Clock& steady_clock();

// The GPU side of a window: launches enqueued back to back, in batches.
class LaunchQueue {
 public:
  virtual ~LaunchQueue() = default;
  // Enqueues one batch of `launches` after what is queued; "" or the launch's error.
  virtual std::string enqueue(int launches) = 0;
  // Batches enqueued and not yet finished on the GPU.
  virtual int in_flight() = 0;
  // Waits for every batch; seconds of GPU time from the first batch's start to the last's end.
  virtual double finish() = 0;
};

// The window's defaults: what `fa-bench --energy-window` and the docs name.
inline constexpr double kDefaultWindowS = 1.0;
// Ampere and newer report board power as a one-second average (nvidia-smi's power.draw): samples
// taken sooner after the launches start still hold the idle time before them.
inline constexpr double kPowerAveragingS = 1.0;
// The counter and the sampled power may differ by this much before the counter is refused.
inline constexpr double kMaxDisagreement = 0.10;
// Fewer counter updates than this inside the window: the counter is too coarse for it.
inline constexpr int kMinCounterUpdates = 5;

struct Settings {
  double window_s = kDefaultWindowS;  // between the two counter updates that bound the window
  double preroll_s = 0.25;            // launches before the window: clocks and power settle
  double sample_period_s = 0.005;     // power, SM clock, temperature, clock-event reasons
  double poll_s = 0.0005;             // how often the counter is read for its next update
  // GPU time per enqueued batch, and batches queued ahead: 60 to 80 ms of work waits on the GPU,
  // so a slow driver call on the host does not leave it idle.
  double batch_s = 0.02;
  int max_in_flight = 4;
  double max_disagreement = kMaxDisagreement;
  double power_averaging_s = kPowerAveragingS;
  int min_counter_updates = kMinCounterUpdates;
  double timeout_s = 5.0;  // past the window's end without a counter update: refused
};

// One window's result. `status`: ok (energy_per_launch_mj set) | refused (the counter's figure is
// not trusted: too coarse, disagrees with the sampled power, stalled) | unavailable (no counter, no
// NVML, no permission) | error (a launch failed) | skipped (--no-energy).
struct Measurement {
  std::string status = "ok";
  std::string reason;
  int launches = 0;
  double busy_s = 0;              // GPU time of the launches (CUDA events)
  double seconds_per_launch = 0;  // busy_s / launches: back to back, L2 not flushed
  double window_s = 0;            // between the counter updates that bound it
  double counter_mj = 0;          // the counter's advance across the window
  int counter_updates = 0;        // how often it changed inside the window
  double power_w = 0;             // counter_mj / window_s; 0 without a counter
  double sampled_power_w = 0;     // mean of the settled power samples; 0 when none
  int power_samples = 0;          // settled samples (power_averaging_s after the first launch)
  std::optional<double> counter_vs_sampled;    // power_w / sampled_power_w - 1, when both exist
  std::optional<double> energy_per_launch_mj;  // the counter's (status ok)
  std::optional<double> sampled_energy_per_launch_mj;  // the sampled power's
  double sm_clock_mean_mhz = 0, sm_clock_min_mhz = 0;  // 0: not sampled
  int clock_samples = 0;
  // Sampled with the clock; leakage, and so the constant power, grows with it (docs/energy.md).
  double temperature_mean_c = 0, temperature_max_c = 0;  // 0: not sampled
  int temperature_samples = 0;                           // 0: the driver gives no temperature
  std::vector<std::string> clock_event_reasons;          // every reason seen in the window
};

// Runs one window: `launch_s` (a launch's time, from the timed samples) sizes the batches.
Measurement measure(PowerSource& source, LaunchQueue& queue, Clock& clock, double launch_s,
                    const Settings& settings);

// A row that was not measured: `status` and `reason` only.
Measurement not_measured(std::string status, std::string reason);

}  // namespace fa::energy
