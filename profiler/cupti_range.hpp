// Hardware counters for a stretch of GPU work, through CUPTI's Range Profiler (CUDA 12.6+/13).
//
// Metric names in (e.g. "dram__bytes_read.sum"), one value per metric out, for one user range.
// The work is replayed by the caller's callable (user replay) until CUPTI has seen every pass
// the metrics need; `before_pass` runs before each pass so the caller can flush L2 and restore
// any buffer the work overwrites.
//
//   auto s = fa::CounterSession::create(0, {"dram__bytes_read.sum", "gpu__time_duration.sum"});
//   if (!s.ok()) { puts(s.error().message.c_str()); return; }
//   auto v = s.measure("copy", [&] { copy<<<g, b>>>(dst, src, n); }, [&] { flusher.flush(0); });
//
// DRAM writes that repeat: a line the work wrote may still be dirty in the L2 when the range
// ends, and its write-back then lands outside every range (two identical collections on the H200
// differed by -87% in DRAM write bytes). So when the metrics include dram__bytes_write.sum, a
// second collection (one pass, that metric only) runs the work with the L2 evicted before the
// range and again inside it, after the work (a read of 4x the L2 size from a buffer of its own:
// clean lines only, so the eviction writes nothing of its own); its count replaces
// dram__bytes_write.sum, less what the eviction alone writes (measured once per session, ~0).
// set_dram_write_back(false) turns this off.
//
// The range profiler is enabled on the context only while a measurement runs (measure(),
// measure_within()) and disabled when it ends, failed or not; the host objects and the config
// images live as long as the session. Enabled for a whole run, it changed the power of the launches
// between measurements (H200: fp8-sm89 at N=4096 drew 522 W beside it, 501 W without; fa1 at
// N=8192 248 W against 217 W), so every energy window of a counters run read differently.
//
// Link: libcupti (CMake: CUDA::cupti). At run time libcupti loads libnvperf_host.so, which
// must sit beside it or on the loader's path. One session per process at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// Opaque CUPTI / driver handles, so that this header needs no CUDA include.
struct CUctx_st;
struct CUpti_Profiler_Host_Object;
struct CUpti_RangeProfiler_Object;

namespace fa {

class L2Flusher;  // profiler/timer.hpp

struct CounterError {
  enum Kind { none, no_permission, unsupported_metric, busy, other } kind = none;
  std::string message;  // one line, names the failing CUPTI call and what to do about it
};

// Thrown by CounterSession::measure when CUPTI fails mid-measurement.
struct CounterFailure : std::runtime_error {
  CounterError error;
  explicit CounterFailure(CounterError e) : std::runtime_error(e.message), error(std::move(e)) {}
};

class CounterSession {
 public:
  // Test seam: while `kind` is not none, create() fails as CUPTI would with the matching error
  // (no_permission: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, busy: CUPTI_ERROR_HARDWARE_BUSY), through
  // the same classification and message. Set by tests and by fa-bench's hidden
  // --test-force-counter-error (scripts/gpu_check.sh); never by the environment.
  static void force_error_for_tests(CounterError::Kind kind);

  // Sets up the profiler for CUDA device `device` (it becomes the calling thread's current
  // device) with these metrics. A name needs its rollup: "dram__bytes_read.sum", not
  // "dram__bytes_read". Never throws: on failure ok() is false and error() says why
  // (no_permission with a hint, unsupported_metric naming the metrics, busy, other).
  static CounterSession create(int device, const std::vector<std::string>& metrics);

  // The metrics the chip cannot collect. The `device` form asks the GPU (chip name and counter
  // availability); the `chip` form (e.g. "GH100") needs no GPU. Throws CounterFailure when
  // CUPTI itself fails.
  static std::vector<std::string> unsupported(int device, const std::vector<std::string>& metrics);
  static std::vector<std::string> unsupported(const std::string& chip,
                                              const std::vector<std::string>& metrics);
  // The replays CUPTI's host side schedules for these metrics on this chip (no GPU needed).
  // Throws CounterFailure when CUPTI itself fails or refuses a metric.
  static int passes(const std::string& chip, const std::vector<std::string>& metrics);

  bool ok() const { return error_.kind == CounterError::none; }
  const CounterError& error() const { return error_; }
  const std::string& chip() const { return chip_; }  // e.g. "GH100"
  int passes_needed() const { return passes_; }      // replays of `work` one measurement takes

  // The write-back collection for dram__bytes_write.sum (on by default when that metric is
  // collected and the session could set it up; why_not says otherwise).
  bool dram_write_back() const { return write_back_; }
  void set_dram_write_back(bool on) { write_back_ = on && wb_ready_; }
  const std::string& dram_write_back_why_not() const { return wb_why_not_; }
  // DRAM bytes the eviction pass writes on its own (subtracted); -1 until first measured.
  double write_back_cost_bytes() const { return wb_cost_bytes_; }

  // Measures `work` (enqueues GPU work on the device's primary context; called once per pass)
  // inside one user range named `name`. `before_pass` (may be empty) runs before each pass,
  // outside the range. Returns metric name -> value. Throws CounterFailure: a failed measurement
  // leaves the next one a fresh range profiler; one that cannot enable it leaves the session
  // unusable (ok() false, error() says why).
  std::map<std::string, double> measure(const std::string& name, const std::function<void()>& work,
                                        const std::function<void()>& before_pass);

  // The same, with the range placed by the work: `work(push, pop)` must push exactly one range
  // per pass, around part of what it runs (one kernel of a multi-kernel variant: on the H200
  // with CUDA 13.0 several user ranges in one pass lose the last one, one range never does).
  using RangeWork = std::function<void(const std::function<void(const char*)>& push,
                                       const std::function<void()>& pop)>;
  std::map<std::string, double> measure_within(const RangeWork& work,
                                               const std::function<void()>& before_pass);

  CounterSession(CounterSession&& other) noexcept;
  CounterSession& operator=(CounterSession&& other) noexcept;
  CounterSession(const CounterSession&) = delete;
  CounterSession& operator=(const CounterSession&) = delete;
  ~CounterSession();

 private:
  CounterSession() = default;
  void release() noexcept;
  std::map<std::string, double> measure_range(const RangeWork& work,
                                              const std::function<void()>& before_pass);
  std::map<std::string, double> collect(std::vector<std::uint8_t>& config,
                                        std::vector<std::uint8_t>& counter_data,
                                        const std::vector<std::string>& metrics, int passes,
                                        const RangeWork& work,
                                        const std::function<void()>& before_pass, bool evict);
  void evict_l2();  // the write-back pass: every dirty line of the L2 to DRAM
  void setup_write_back(const std::vector<std::uint8_t>& availability);

  int device_ = -1;
  CUctx_st* context_ = nullptr;
  std::string chip_;
  std::vector<std::string> metrics_;
  CUpti_Profiler_Host_Object* evaluator_ = nullptr;  // host object that turns counters into values
  CUpti_RangeProfiler_Object* profiler_ = nullptr;   // enabled on context_ while measuring
  std::vector<std::uint8_t> config_image_;           // which counters to program, pass by pass
  std::vector<std::uint8_t> counter_data_;           // where decoded counters land (one range)
  int passes_ = 0;
  CounterError error_;
  // The write-back collection (dram__bytes_write.sum only).
  bool write_back_ = false, wb_ready_ = false;
  std::string wb_why_not_ = "dram__bytes_write.sum not collected";
  std::vector<std::uint8_t> wb_config_image_, wb_counter_data_;
  int wb_passes_ = 0;
  std::unique_ptr<L2Flusher> evictor_;
  double wb_cost_bytes_ = -1;
};

}  // namespace fa
