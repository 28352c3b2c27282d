// A device allocation that frees itself.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/common/cuda_check.hpp"

namespace fa {

struct DeviceAllocation {
  void* ptr = nullptr;
  DeviceAllocation() = default;
  // Allocates or throws CudaError.
  explicit DeviceAllocation(std::size_t bytes) {
    FA_CUDA_CHECK(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes));
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  ~DeviceAllocation() {
    if (ptr) cudaFree(ptr);
  }
  // Allocates without throwing: false (and the sticky error cleared) when memory is short, so a
  // caller can report "skipped: needs X GiB" instead of failing.
  bool allocate(std::size_t bytes) {
    if (cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) != cudaSuccess) {
      cudaGetLastError();
      ptr = nullptr;
      return false;
    }
    return true;
  }
};

}  // namespace fa
