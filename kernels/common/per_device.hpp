// Per-device state for host code: a value computed once per CUDA device (the calling thread's
// current one), not once per process. A kernel's cudaFuncSetAttribute, a library handle: both
// belong to one device's context, so a process-wide static set on the first device would be
// wrong on the next (fa-bench --device 1 after a test on device 0, two GPUs in one process).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

namespace fa {

template <typename T>
class PerDevice {
 public:
  static constexpr int kMaxDevices = 64;

  // The value for the current device: make() on the first call on that device, the stored value
  // after. With no current device (cudaGetDevice fails), or past kMaxDevices, make() every time.
  template <typename Make>
  T get(Make&& make) {
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
      return make();
    }
    std::call_once(once_[device], [&] { values_[device] = make(); });
    return values_[device];
  }

 private:
  std::array<std::once_flag, kMaxDevices> once_;
  std::array<T, kMaxDevices> values_{};
};

}  // namespace fa
