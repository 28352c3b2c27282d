// What the result file records about the GPU: identity, sizes, clocks, driver and CUDA versions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fa {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_per_sm_bytes = 0;
  std::int64_t smem_per_block_optin_bytes = 0;
  int memory_bus_bits = 0;
  int sm_clock_max_mhz = 0;
  int mem_clock_max_mhz = 0;
  std::string driver_version;    // e.g. "580.159.04" (NVML); empty when NVML is unavailable
  int cuda_driver_version = 0;   // e.g. 13000
  int cuda_runtime_version = 0;  // e.g. 13000

  // Peak DRAM bandwidth from the bus: width x memory clock x 2 (double data rate).
  double bus_bandwidth_bytes_per_s() const {
    return static_cast<double>(memory_bus_bits) / 8.0 * mem_clock_max_mhz * 1e6 * 2.0;
  }
};

// The device, or nullopt with `why_not` saying what is missing (no driver, no GPU, bad index).
std::optional<DeviceInfo> query_device(int index, std::string* why_not);

// An NVML entry point by name, from the library loaded at run time; nullptr without NVML or where
// this driver lacks it.
void* nvml_symbol(const char* name);

// Current SM clock in MHz through NVML (loaded at run time); -1 when unavailable.
int current_sm_clock_mhz(const DeviceInfo& device);

}  // namespace fa
