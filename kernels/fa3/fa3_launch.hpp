// How the fa3 launcher (fa3.cu) reaches its kernels (fa3_kernel.cuh), which are compiled one head
// dimension per translation unit (fa3_d64.cu, fa3_d128.cu) and instantiated there explicitly.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/problem.hpp"

namespace fa::fa3 {

// Which parts of FA3's schedule run (option kOptionFa3Schedule; the ablation rows).
enum class Schedule { full, no_pingpong, no_overlap, persistent };

// Enqueues one forward pass of the (D, BR x BC) kernel; "" or a one-line reason.
template <int D, int BR, int BC, bool CAUSAL, typename T, bool FAULTS>
std::string launch(const Shape& s, const DeviceBuffers& b, cudaStream_t stream, Schedule schedule,
                   const FaultInjection& fault);

}  // namespace fa::fa3
