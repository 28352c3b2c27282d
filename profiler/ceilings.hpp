// Empirical roofline ceilings, measured once per device and cached: DRAM bandwidth (the faster
// of a large device-to-device copy, bytes read + written, and a read of it), L2 bandwidth (repeated
// reads of a buffer that fits in L2), tensor peaks for bf16, fp16 and fp8 (cuBLASLt GEMMs of 8192^3
// on random data), and the FP32 peak (independent FFMA chains). Datasheet figures stay beside them.
#pragma once

#include <optional>
#include <string>

#include "profiler/device_info.hpp"
#include "profiler/energy.hpp"
#include "profiler/energy_model.hpp"
#include "profiler/roofline.hpp"

namespace fa {

struct MeasuredCeilings {
  double dram_bytes_per_s = 0;
  double l2_bytes_per_s = 0;
  double fp32_flops_per_s = 0;
  double bf16_flops_per_s = 0;
  double fp16_flops_per_s = 0;
  double fp8_flops_per_s = 0;  // 0 when the device has no FP8 tensor cores
  // The energy model fitted on this device (measure_energy_model); absent when not measured.
  std::optional<energy::Fit> energy_model = std::nullopt;
  std::string measured_utc;
  std::string key;  // device UUID, driver and tool version: a cache entry is valid for this key
};

// Where the cache lives: $XDG_CACHE_HOME/fa-bench or ~/.cache/fa-bench, one file per key.
std::string ceilings_cache_path(const DeviceInfo& device, const std::string& tool_version);
std::string ceilings_cache_key(const DeviceInfo& device, const std::string& tool_version);

// Reads a cache file; nullopt when absent, unreadable, or written for another key.
std::optional<MeasuredCeilings> load_ceilings(const std::string& path, const std::string& key);
// Writes it atomically. Throws std::runtime_error.
void save_ceilings(const std::string& path, const MeasuredCeilings& c);

// Measures on the current device (about 2 s). Throws fa::CudaError / std::runtime_error.
MeasuredCeilings measure_ceilings(const DeviceInfo& device);

// The energy model's calibration (about 15 s): the copy at three grid sizes, an FFMA kernel on
// every SM and on a quarter of them, bf16 GEMMs of two sizes and fp8 ones where the device has FP8
// tensor cores, and last a kernel that sleeps on every SM, each in an energy window
// (profiler/energy.hpp) with its instructions per launch (counted from the SASS, by the sleep
// kernel itself, estimated for cuBLAS's GEMMs), fitted by energy::fit at the device's highest SM
// clock (`power`'s). Status unavailable, with the window's reason, when one could not be
// measured. Throws fa::CudaError / std::runtime_error.
energy::Fit measure_energy_model(const DeviceInfo& device, energy::PowerSource& power,
                                 const energy::Settings& settings);

// The roofs a run uses: measured values, with the datasheet's kept beside for display.
Ceilings to_ceilings(const MeasuredCeilings& m, const Ceilings& datasheet,
                     const std::string& origin);

}  // namespace fa
