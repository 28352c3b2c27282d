// CounterSession over CUPTI's Range Profiler (cupti_range_profiler.h, target side) and Profiler
// Host API (cupti_profiler_host.h: config images and metric evaluation). The steps, in order:
//
//   create():  chip name -> counter availability image -> config image (host API) ->
//              enable the range profiler on the context (refused here, not on the first row,
//              when counters are not allowed) -> counter data image -> disable it
//   measure(): enable the range profiler -> counter data image, reset -> set config (user range,
//              user replay) -> per pass: before_pass(); Start; PushRange; work(); PopRange; Stop
//              until Stop says every pass is submitted -> DecodeData -> evaluate (host API) ->
//              disable the range profiler (failed or not)
//
// Why enabled only while measuring: enabled for the whole run, the profiler changed the board
// power of the launches between measurements, so a row's energy depended on --no-counters (H200,
// same build, A B A B: fp8-sm89 N=4096 522 W with it against 501 W without; fa1 N=8192 248 W
// against 217 W; fa1 N=4096 277 W against 285 W). Disable destroys the profiler object that
// SetConfig and the counter data image were tied to, so every measurement sizes its counter data
// image and sets its configuration again on the object it enabled (collect() did both already).
#include "profiler/cupti_range.hpp"

#include <cuda.h>  // CUcontext, CUresult: types only, libcuda is not linked
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "profiler/timer.hpp"

namespace fa {
namespace {

// A CUPTI parameter struct: zeroed, with structSize set (CUPTI reads it to know the version).
template <class Params>
Params zeroed_with_size(size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}
#define CUPTI_PARAMS(Type) zeroed_with_size<Type>(Type##_STRUCT_SIZE)

// ---------------------------------------------------------------------------------------------
// Errors: every CUPTI call goes through check(), which throws CounterFailure naming the call.

CounterError::Kind kind_of(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return CounterError::no_permission;
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      return CounterError::unsupported_metric;
    case CUPTI_ERROR_HARDWARE_BUSY:                       // another client holds the counters
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:  // run under nsys / ncu / cuda-gdb
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return CounterError::busy;
    default:
      return CounterError::other;
  }
}

const char* hint_for(CounterError::Kind kind) {
  switch (kind) {
    case CounterError::no_permission:
      return " -- GPU counters are restricted to admin users: run as root, or load the nvidia "
             "module with NVreg_RestrictProfilingToAdminUsers=0 "
             "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
    case CounterError::busy:
      return " -- another profiler holds the GPU counters (Nsight Compute/Systems, DCGM "
             "profiling, another CUPTI session): stop it and retry";
    default:
      return "";
  }
}

std::string result_name(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) {
    return "CUptiResult " + std::to_string(static_cast<int>(r));
  }
  return s;
}

[[noreturn]] void fail(CounterError::Kind kind, std::string message) {
  throw CounterFailure(CounterError{kind, std::move(message)});
}

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const CounterError::Kind kind = kind_of(r);
  fail(kind, std::string(call) + " failed: " + result_name(r) + hint_for(kind));
}

// Fault injection for the failure paths no healthy machine takes on its own (documented in
// docs/io-model.md): set only by tests and by fa-bench's hidden --test-force-counter-error.
CounterError::Kind g_forced_error = CounterError::none;

void check_forced_error() {
  if (g_forced_error == CounterError::none) return;
  const CUptiResult r = g_forced_error == CounterError::no_permission
                            ? CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                        : g_forced_error == CounterError::busy ? CUPTI_ERROR_HARDWARE_BUSY
                                                               : CUPTI_ERROR_UNKNOWN;
  check(r, "cuptiProfilerInitialize (forced by --test-force-counter-error)");
}

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    fail(CounterError::other, std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                  cudaGetErrorString(e) + ")");
  }
}

// ---------------------------------------------------------------------------------------------
// Device side: the context to profile, the chip's name, which counters it can use now.

// CUPTI's profiler interface, set up once per process and left up: deinitialising it would
// break any other session or query that is still running.
void initialize_profiler_once() {
  static std::once_flag once;
  static CUptiResult result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    auto p = CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    result = cuptiProfilerInitialize(&p);
  });
  check(result, "cuptiProfilerInitialize");
}

// Makes `device` current, creates its primary context if needed, and returns that context.
// cuCtxGetCurrent is looked up through the runtime so that libcuda need not be linked.
CUcontext primary_context(int device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (creating the primary context)");
  using CtxGetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found),
      "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent)");
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    fail(CounterError::other, "cuCtxGetCurrent not found in the driver");
  }
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CtxGetCurrent>(fn)(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    fail(CounterError::other, "cuCtxGetCurrent returned no context");
  }
  return ctx;
}

// Refuses devices CUPTI cannot profile (MIG, vGPU without profiling, confidential compute, ...).
void require_profiling_support(int device) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
  p.cuDevice = device;
  p.api = CUPTI_PROFILER_RANGE_PROFILING;
  check(cuptiProfilerDeviceSupported(&p), "cuptiProfilerDeviceSupported");
  if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return;
  std::string why;
  auto note = [&](CUpti_Profiler_Support_Level level, const char* what) {
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += std::string(" ") + what;
  };
  note(p.architecture, "[architecture older than compute capability 7.5]");
  note(p.sli, "[SLI]");
  note(p.vGpu, "[vGPU without profiling enabled]");
  note(p.confidentialCompute, "[confidential computing]");
  note(p.cmp, "[crypto-mining processor]");
  note(p.wsl, "[WSL]");
  fail(CounterError::other, "cuptiProfilerDeviceSupported: device " + std::to_string(device) +
                                " cannot be profiled:" + (why.empty() ? " [unknown reason]" : why));
}

std::string chip_name(int device) {
  auto p = CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  p.deviceIndex = static_cast<size_t>(device);
  check(cuptiDeviceGetChipName(&p), "cuptiDeviceGetChipName");
  return p.pChipName;
}

// Which counters this GPU can program right now (size query, then the image itself).
std::vector<std::uint8_t> counter_availability(CUcontext ctx) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  p.ctx = ctx;
  check(cuptiProfilerGetCounterAvailability(&p), "cuptiProfilerGetCounterAvailability(size)");
  std::vector<std::uint8_t> image(p.counterAvailabilityImageSize);
  p.pCounterAvailabilityImage = image.data();
  check(cuptiProfilerGetCounterAvailability(&p), "cuptiProfilerGetCounterAvailability");
  return image;
}

std::vector<const char*> c_strings(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(n.c_str());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Host side (no GPU needed): a Profiler Host object for one chip.

CUpti_Profiler_Host_Object* host_initialize(const std::string& chip,
                                            const std::vector<std::uint8_t>& availability) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  p.pChipName = chip.c_str();
  p.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  check(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize");
  return p.pHostObject;
}

void host_deinitialize(CUpti_Profiler_Host_Object* host) noexcept {
  if (host == nullptr) return;
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
  p.pHostObject = host;
  cuptiProfilerHostDeinitialize(&p);
}

struct HostObject {
  CUpti_Profiler_Host_Object* ptr;
  HostObject(const std::string& chip, const std::vector<std::uint8_t>& availability)
      : ptr(host_initialize(chip, availability)) {}
  ~HostObject() { host_deinitialize(ptr); }
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;
};

CUptiResult add_metrics(CUpti_Profiler_Host_Object* host, const std::vector<std::string>& metrics) {
  std::vector<const char*> names = c_strings(metrics);
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  p.pHostObject = host;
  p.ppMetricNames = names.data();
  p.numMetrics = names.size();
  return cuptiProfilerHostConfigAddMetrics(&p);
}

// The metrics of `metrics` that a fresh host object for this chip refuses, tried one by one.
// CUPTI 13.0 answers an unknown name (or one without a rollup such as ".sum") with
// CUPTI_ERROR_INVALID_PARAMETER, not CUPTI_ERROR_INVALID_METRIC_NAME: both mean "refused" here.
std::vector<std::string> refused_metrics(const std::string& chip,
                                         const std::vector<std::uint8_t>& availability,
                                         const std::vector<std::string>& metrics) {
  std::vector<std::string> refused;
  for (const auto& m : metrics) {
    HostObject host(chip, availability);
    const CUptiResult r = add_metrics(host.ptr, {m});
    if (r == CUPTI_ERROR_INVALID_METRIC_NAME || r == CUPTI_ERROR_INVALID_PARAMETER) {
      refused.push_back(m);
    } else {
      check(r, "cuptiProfilerHostConfigAddMetrics");
    }
  }
  return refused;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Config image for the metrics: which counters to program in which pass.
std::vector<std::uint8_t> config_image(const std::string& chip,
                                       const std::vector<std::uint8_t>& availability,
                                       const std::vector<std::string>& metrics) {
  HostObject scheduler(chip, availability);
  const CUptiResult added = add_metrics(scheduler.ptr, metrics);
  if (added != CUPTI_SUCCESS) {
    const std::vector<std::string> refused = refused_metrics(chip, availability, metrics);
    if (!refused.empty()) {
      fail(CounterError::unsupported_metric, "cuptiProfilerHostConfigAddMetrics: chip " + chip +
                                                 " cannot collect: " + joined(refused));
    }
    check(added, "cuptiProfilerHostConfigAddMetrics");
  }

  auto size = CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  size.pHostObject = scheduler.ptr;
  check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");

  std::vector<std::uint8_t> image(size.configImageSize);
  auto get = CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
  get.pHostObject = scheduler.ptr;
  get.configImageSize = image.size();
  get.pConfigImage = image.data();
  check(cuptiProfilerHostGetConfigImage(&get), "cuptiProfilerHostGetConfigImage");
  return image;
}

int num_passes(std::vector<std::uint8_t>& config) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  p.configImageSize = config.size();
  p.pConfigImage = config.data();
  check(cuptiProfilerHostGetNumOfPasses(&p), "cuptiProfilerHostGetNumOfPasses");
  return static_cast<int>(p.numOfPasses);
}

// ---------------------------------------------------------------------------------------------
// Target side: the range profiler on one context.

CUpti_RangeProfiler_Object* enable_range_profiler(CUcontext ctx) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
  p.ctx = ctx;
  check(cuptiRangeProfilerEnable(&p), "cuptiRangeProfilerEnable");
  return p.pRangeProfilerObject;
}

void disable_range_profiler(CUpti_RangeProfiler_Object* profiler) noexcept {
  if (profiler == nullptr) return;
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
  p.pRangeProfilerObject = profiler;
  cuptiRangeProfilerDisable(&p);
}

// Room for exactly one range (one measurement) of these metrics.
std::vector<std::uint8_t> counter_data_image(CUpti_RangeProfiler_Object* profiler,
                                             const std::vector<std::string>& metrics) {
  std::vector<const char*> names = c_strings(metrics);
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  p.pRangeProfilerObject = profiler;
  p.pMetricNames = names.data();
  p.numMetrics = names.size();
  p.maxNumOfRanges = 1;
  p.maxNumRangeTreeNodes = 1;
  check(cuptiRangeProfilerGetCounterDataSize(&p), "cuptiRangeProfilerGetCounterDataSize");
  return std::vector<std::uint8_t>(p.counterDataSize);
}

void reset_counter_data(CUpti_RangeProfiler_Object* profiler, std::vector<std::uint8_t>& image) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  p.pRangeProfilerObject = profiler;
  p.counterDataSize = image.size();
  p.pCounterData = image.data();
  check(cuptiRangeProfilerCounterDataImageInitialize(&p),
        "cuptiRangeProfilerCounterDataImageInitialize");
}

// One user range per pass, one nesting level, passes replayed by us (user replay).
void set_config(CUpti_RangeProfiler_Object* profiler, const std::vector<std::uint8_t>& config,
                std::vector<std::uint8_t>& counter_data) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  p.pRangeProfilerObject = profiler;
  p.configSize = config.size();
  p.pConfig = config.data();
  p.counterDataImageSize = counter_data.size();
  p.pCounterDataImage = counter_data.data();
  p.range = CUPTI_UserRange;
  p.replayMode = CUPTI_UserReplay;
  p.maxRangesPerPass = 1;
  p.numNestingLevels = 1;
  p.minNestingLevel = 1;
  p.passIndex = 0;
  p.targetNestingLevel = 1;
  check(cuptiRangeProfilerSetConfig(&p), "cuptiRangeProfilerSetConfig");
}

void start(CUpti_RangeProfiler_Object* profiler) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
  p.pRangeProfilerObject = profiler;
  check(cuptiRangeProfilerStart(&p), "cuptiRangeProfilerStart");
}

void push_range(CUpti_RangeProfiler_Object* profiler, const std::string& name) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params);
  p.pRangeProfilerObject = profiler;
  p.pRangeName = name.c_str();
  check(cuptiRangeProfilerPushRange(&p), "cuptiRangeProfilerPushRange");
}

void pop_range(CUpti_RangeProfiler_Object* profiler) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params);
  p.pRangeProfilerObject = profiler;
  check(cuptiRangeProfilerPopRange(&p), "cuptiRangeProfilerPopRange");
}

// Ends a pass; true once CUPTI has every pass it needs.
bool stop(CUpti_RangeProfiler_Object* profiler) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
  p.pRangeProfilerObject = profiler;
  check(cuptiRangeProfilerStop(&p), "cuptiRangeProfilerStop");
  return p.isAllPassSubmitted != 0;
}

// Waits for the GPU and copies the collected counters into the counter data image.
void decode(CUpti_RangeProfiler_Object* profiler) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  p.pRangeProfilerObject = profiler;
  check(cuptiRangeProfilerDecodeData(&p), "cuptiRangeProfilerDecodeData");
  if (p.numOfRangeDropped != 0) {
    fail(CounterError::other, "cuptiRangeProfilerDecodeData dropped " +
                                  std::to_string(p.numOfRangeDropped) + " range(s)");
  }
}

size_t ranges_in(const std::vector<std::uint8_t>& counter_data) {
  auto p = CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  p.pCounterDataImage = counter_data.data();
  p.counterDataImageSize = counter_data.size();
  check(cuptiRangeProfilerGetCounterDataInfo(&p), "cuptiRangeProfilerGetCounterDataInfo");
  return p.numTotalRanges;
}

std::vector<double> evaluate(CUpti_Profiler_Host_Object* evaluator,
                             const std::vector<std::uint8_t>& counter_data, size_t range,
                             const std::vector<std::string>& metrics) {
  std::vector<const char*> names = c_strings(metrics);
  std::vector<double> values(metrics.size(), 0.0);
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
  p.pHostObject = evaluator;
  p.pCounterDataImage = counter_data.data();
  p.counterDataImageSize = counter_data.size();
  p.rangeIndex = range;
  p.ppMetricNames = names.data();
  p.numMetrics = names.size();
  p.pMetricValues = values.data();
  check(cuptiProfilerHostEvaluateToGpuValues(&p), "cuptiProfilerHostEvaluateToGpuValues");
  return values;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void CounterSession::force_error_for_tests(CounterError::Kind kind) {
  g_forced_error = kind;
}

CounterSession CounterSession::create(int device, const std::vector<std::string>& metrics) {
  CounterSession s;
  s.device_ = device;
  s.metrics_ = metrics;
  try {
    if (metrics.empty()) fail(CounterError::other, "CounterSession: no metrics given");
    check_forced_error();
    s.context_ = primary_context(device);
    initialize_profiler_once();
    require_profiling_support(device);
    s.chip_ = chip_name(device);
    const std::vector<std::uint8_t> availability = counter_availability(s.context_);

    s.config_image_ = config_image(s.chip_, availability, metrics);
    // The larger of two schedules: the one made with this GPU's counter availability said 1 pass
    // on the H200 (2026-11-26) for metrics that the chip-only one schedules in 4 (the defaults)
    // or 10 (with --stall-reasons' 18), and the replay loop's guard, sized from 1, stopped the
    // latter after 6 with every row uncounted.
    s.passes_ = std::max(num_passes(s.config_image_), passes(s.chip_, metrics));
    s.evaluator_ = host_initialize(s.chip_, availability);

    // Enabled once here so that a refusal (permissions, another profiler) is the session's, and
    // disabled until a measurement: see the top of this file.
    s.profiler_ = enable_range_profiler(s.context_);
    s.counter_data_ = counter_data_image(s.profiler_, metrics);
    s.setup_write_back(availability);
    disable_range_profiler(std::exchange(s.profiler_, nullptr));
  } catch (const CounterFailure& f) {
    s.release();
    s.error_ = f.error;
  }
  return s;
}

namespace {
const char* const kDramWrite = "dram__bytes_write.sum";
}  // namespace

void CounterSession::setup_write_back(const std::vector<std::uint8_t>& availability) {
  if (std::find(metrics_.begin(), metrics_.end(), kDramWrite) == metrics_.end()) return;
  try {
    wb_config_image_ = config_image(chip_, availability, {kDramWrite});
    // Its schedule says one pass; the replays it takes follow the main collection's (collect's
    // guard), so no second schedule is asked for here.
    wb_passes_ = num_passes(wb_config_image_);
    wb_counter_data_ = counter_data_image(profiler_, {kDramWrite});
    int l2 = 0;
    check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_),
               "cudaDeviceGetAttribute(L2 size)");
    if (l2 <= 0) fail(CounterError::other, "the device reports no L2 cache");
    evictor_ = std::make_unique<L2Flusher>(2 * static_cast<std::size_t>(l2));  // reads 4x the L2
    wb_ready_ = write_back_ = true;
    wb_why_not_.clear();
  } catch (const std::exception& e) {  // counters still work, with the in-range write count
    wb_why_not_ = e.what();
    wb_ready_ = write_back_ = false;
  }
}

void CounterSession::evict_l2() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before the L2 write-back)");
  evictor_->flush(nullptr);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (L2 write-back)");
}

std::map<std::string, double> CounterSession::measure(const std::string& name,
                                                      const std::function<void()>& work,
                                                      const std::function<void()>& before_pass) {
  if (!ok()) throw CounterFailure(error_);
  return measure_within(
      [&](const std::function<void(const char*)>& push, const std::function<void()>& pop) {
        push(name.c_str());
        try {
          work();
        } catch (...) {
          pop();
          throw;
        }
        pop();
      },
      before_pass);
}

std::map<std::string, double> CounterSession::measure_within(
    const RangeWork& work, const std::function<void()>& before_pass) {
  if (!ok()) throw CounterFailure(error_);
  // The range profiler on for this measurement only (the power of the launches between
  // measurements differed with it on: see the top of this file). A profiler that cannot be
  // enabled leaves the session unusable, saying why.
  try {
    profiler_ = enable_range_profiler(context_);
  } catch (const CounterFailure& f) {
    error_ = f.error;
    throw;
  }
  // Disabled when the measurement ends, failed or not: a CUPTI failure mid-measurement leaves the
  // next one a fresh profiler object.
  struct Disable {
    CUpti_RangeProfiler_Object*& profiler;
    ~Disable() { disable_range_profiler(std::exchange(profiler, nullptr)); }
  } disable{profiler_};
  return measure_range(work, before_pass);
}

std::map<std::string, double> CounterSession::measure_range(
    const RangeWork& work, const std::function<void()>& before_pass) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");  // work goes to the profiled context
  std::map<std::string, double> out =
      collect(config_image_, counter_data_, metrics_, passes_, work, before_pass, false);
  if (write_back_) {
    if (wb_cost_bytes_ < 0) {  // what the eviction writes on its own, with nothing before it
      const RangeWork nothing = [](const std::function<void(const char*)>& push,
                                   const std::function<void()>& pop) {
        push("l2-write-back-cost");
        pop();
      };
      // The median of five: one empty collection's count jitters by a few hundred kB like any
      // (H200, 2026-11-22: 64,768 B in one session, 345,344 B in another).
      std::vector<double> costs;
      for (int i = 0; i < 5; ++i) {
        costs.push_back(
            collect(wb_config_image_, wb_counter_data_, {kDramWrite}, wb_passes_, nothing, {}, true)
                .at(kDramWrite));
      }
      std::nth_element(costs.begin(), costs.begin() + 2, costs.end());
      wb_cost_bytes_ = costs[2];
    }
    const double written = collect(wb_config_image_, wb_counter_data_, {kDramWrite}, wb_passes_,
                                   work, before_pass, true)
                               .at(kDramWrite);
    out[kDramWrite] = std::max(0.0, written - wb_cost_bytes_);
  }
  return out;
}

std::map<std::string, double> CounterSession::collect(std::vector<std::uint8_t>& config,
                                                      std::vector<std::uint8_t>& counter_data,
                                                      const std::vector<std::string>& metrics,
                                                      int passes, const RangeWork& work,
                                                      const std::function<void()>& before_pass,
                                                      bool evict) {
  // 1. Empty counter data image, configuration for one user range replayed by us. The image is
  //    sized again for these metrics first: the range profiler keeps the metric list of its last
  //    cuptiRangeProfilerGetCounterDataSize call and decodes only those (H200, CUDA 13.0: after the
  //    write-back image was sized, every other metric of the main collection read NaN).
  counter_data = counter_data_image(profiler_, metrics);
  reset_counter_data(profiler_, counter_data);
  set_config(profiler_, config, counter_data);

  // 2. Passes: each programs a different set of counters around the same work. With `evict`, the
  //    L2 is written back before the range and, inside it, after the work.
  // CUPTI decides when every pass is in; this only guards against a loop, so it is generous: the
  // configuration's own pass count is no bound. On the H200 (2026-11-26, a diagnostic counting
  // launches) the write-back collection, one metric and one pass by its schedule, took as many
  // replays as the main collection before it: 4 + 4 with the default metrics, 10 + 10 with
  // --stall-reasons'. A guard of 2 x 1 + 4 stopped it on every row.
  const int max_passes = std::max(2 * passes + 4, 64);
  bool all_submitted = false;
  for (int pass = 0; !all_submitted; ++pass) {
    if (pass == max_passes) {
      fail(CounterError::other, "cuptiRangeProfilerStop: not all passes submitted after " +
                                    std::to_string(pass) + " passes (" + std::to_string(passes) +
                                    " expected)");
    }
    if (before_pass) before_pass();
    if (evict) evict_l2();
    start(profiler_);
    int pushed = 0;
    try {
      work([&](const char* range) { push_range(profiler_, range), ++pushed; },
           [&] {
             if (evict) evict_l2();
             pop_range(profiler_);
           });
    } catch (...) {  // close the pass, then pass the caller's error on
      try {
        stop(profiler_);
      } catch (...) {
      }
      throw;
    }
    all_submitted = stop(profiler_);
    if (pushed != 1) {
      fail(CounterError::other,
           "one user range per pass expected, the work pushed " + std::to_string(pushed));
    }
  }

  // 3. Counters off the GPU, then metric values for the one range.
  decode(profiler_);
  const size_t ranges = ranges_in(counter_data);
  if (ranges != 1) {
    fail(CounterError::other, "cuptiRangeProfilerGetCounterDataInfo: " + std::to_string(ranges) +
                                  " ranges in the counter data, expected 1");
  }
  const std::vector<double> values = evaluate(evaluator_, counter_data, 0, metrics);

  std::map<std::string, double> out;
  for (size_t i = 0; i < metrics.size(); ++i) out[metrics[i]] = values[i];
  return out;
}

std::vector<std::string> CounterSession::unsupported(int device,
                                                     const std::vector<std::string>& metrics) {
  const CUcontext ctx = primary_context(device);
  initialize_profiler_once();
  const std::string chip = chip_name(device);
  std::vector<std::uint8_t> availability;
  try {
    availability = counter_availability(ctx);
  } catch (const CounterFailure&) {
    // Fails while another session profiles this device: judge by the chip alone.
  }
  return refused_metrics(chip, availability, metrics);
}

std::vector<std::string> CounterSession::unsupported(const std::string& chip,
                                                     const std::vector<std::string>& metrics) {
  return refused_metrics(chip, {}, metrics);
}

int CounterSession::passes(const std::string& chip, const std::vector<std::string>& metrics) {
  std::vector<std::uint8_t> image = config_image(chip, {}, metrics);
  return num_passes(image);
}

void CounterSession::release() noexcept {
  disable_range_profiler(std::exchange(profiler_, nullptr));
  host_deinitialize(std::exchange(evaluator_, nullptr));
}

CounterSession::CounterSession(CounterSession&& other) noexcept {
  *this = std::move(other);
}

CounterSession& CounterSession::operator=(CounterSession&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    context_ = std::exchange(other.context_, nullptr);
    chip_ = std::move(other.chip_);
    metrics_ = std::move(other.metrics_);
    evaluator_ = std::exchange(other.evaluator_, nullptr);
    profiler_ = std::exchange(other.profiler_, nullptr);
    config_image_ = std::move(other.config_image_);
    counter_data_ = std::move(other.counter_data_);
    passes_ = other.passes_;
    write_back_ = other.write_back_;
    wb_ready_ = std::exchange(other.wb_ready_, false);
    other.write_back_ = false;
    wb_why_not_ = std::move(other.wb_why_not_);
    wb_config_image_ = std::move(other.wb_config_image_);
    wb_counter_data_ = std::move(other.wb_counter_data_);
    wb_passes_ = other.wb_passes_;
    evictor_ = std::move(other.evictor_);
    wb_cost_bytes_ = other.wb_cost_bytes_;
    error_ = std::exchange(other.error_, {CounterError::other, "CounterSession was moved from"});
  }
  return *this;
}

CounterSession::~CounterSession() {
  release();
}

}  // namespace fa
