#include "profiler/device_info.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>

namespace fa {
namespace {

// NVML is loaded at run time, so fa-bench starts on machines without the driver (CI) and the
// result still records clocks and the driver version where it exists. Only these few entry
// points of its stable C ABI are used.
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*handle_by_pci)(const char*, Device*) = nullptr;
  int (*clock_info)(Device, int, unsigned*) = nullptr;
  int (*max_clock_info)(Device, int, unsigned*) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  void* lib = nullptr;
  bool ok = false;

  static const Nvml& get() {
    static const Nvml nvml = [] {
      Nvml n;
      void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!lib) return n;
      n.lib = lib;
      n.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
      n.handle_by_pci = reinterpret_cast<int (*)(const char*, Device*)>(
          dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
      n.clock_info =
          reinterpret_cast<int (*)(Device, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
      n.max_clock_info = reinterpret_cast<int (*)(Device, int, unsigned*)>(
          dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
      n.driver_version =
          reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
      n.ok = n.init && n.handle_by_pci && n.clock_info && n.max_clock_info && n.driver_version &&
             n.init() == 0;
      return n;
    }();
    return nvml;
  }

  static constexpr int kClockSm = 1, kClockMem = 2;  // nvmlClockType_t
};

}  // namespace

std::optional<DeviceInfo> query_device(int index, std::string* why_not) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    if (why_not)
      *why_not = std::string(e == cudaErrorInsufficientDriver
                                 ? "no NVIDIA driver (or one older than this CUDA runtime)"
                                 : "no usable CUDA GPU") +
                 " (" + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return std::nullopt;
  }
  if (count == 0) {
    if (why_not) *why_not = "no CUDA GPU found";
    return std::nullopt;
  }
  if (index < 0 || index >= count) {
    if (why_not)
      *why_not = "--device " + std::to_string(index) + " out of range (found " +
                 std::to_string(count) + " GPU(s): 0.." + std::to_string(count - 1) + ")";
    return std::nullopt;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
    if (why_not) *why_not = "cudaGetDeviceProperties failed";
    return std::nullopt;
  }
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  d.uuid = uuid;
  char bus[32] = {0};
  cudaDeviceGetPCIBusId(bus, sizeof bus, index);
  d.pci_bus_id = bus;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  d.l2_bytes = p.l2CacheSize;
  d.smem_per_sm_bytes = static_cast<std::int64_t>(p.sharedMemPerMultiprocessor);
  d.smem_per_block_optin_bytes = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
  d.memory_bus_bits = p.memoryBusWidth;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess) {
    d.sm_clock_max_mhz = khz / 1000;
  }
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess) {
    d.mem_clock_max_mhz = khz / 1000;
  }
  cudaDriverGetVersion(&d.cuda_driver_version);
  cudaRuntimeGetVersion(&d.cuda_runtime_version);
  const Nvml& nvml = Nvml::get();
  if (nvml.ok) {
    char version[96] = {0};
    if (nvml.driver_version(version, sizeof version) == 0) d.driver_version = version;
    Nvml::Device h = nullptr;
    unsigned mhz = 0;
    if (nvml.handle_by_pci(bus, &h) == 0) {
      if (nvml.max_clock_info(h, Nvml::kClockSm, &mhz) == 0)
        d.sm_clock_max_mhz = static_cast<int>(mhz);
      if (nvml.max_clock_info(h, Nvml::kClockMem, &mhz) == 0)
        d.mem_clock_max_mhz = static_cast<int>(mhz);
    }
  }
  return d;
}

void* nvml_symbol(const char* name) {
  const Nvml& nvml = Nvml::get();
  return nvml.ok ? dlsym(nvml.lib, name) : nullptr;
}

int current_sm_clock_mhz(const DeviceInfo& device) {
  const Nvml& nvml = Nvml::get();
  if (!nvml.ok) return -1;
  Nvml::Device h = nullptr;
  unsigned mhz = 0;
  if (nvml.handle_by_pci(device.pci_bus_id.c_str(), &h) != 0) return -1;
  if (nvml.clock_info(h, Nvml::kClockSm, &mhz) != 0) return -1;
  return static_cast<int>(mhz);
}

}  // namespace fa
