// Error handling for CUDA runtime calls: every call is checked, and the failing call is named.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace fa {

struct CudaError : std::runtime_error {
  cudaError_t code;
  CudaError(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
};

inline void cuda_check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e != cudaSuccess) {
    throw CudaError(e, std::string(expr) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

}  // namespace fa

#define FA_CUDA_CHECK(expr) ::fa::cuda_check((expr), #expr, __FILE__, __LINE__)
