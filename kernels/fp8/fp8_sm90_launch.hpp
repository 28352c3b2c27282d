// How the fp8 launcher (fp8_sm90.cu) reaches its sm_90a kernels (fp8_sm90_kernel.cuh), compiled one
// head dimension per translation unit (fp8_sm90_d64.cu, fp8_sm90_d128.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/problem.hpp"

namespace fa::fp8::sm90 {

// Enqueues the attention of one forward pass of the (D, BR x BC) kernel on the quantised
// workspace (fp8_quant.hpp) of b; "" or a one-line reason.
template <int D, int BR, int BC, bool CAUSAL, bool FAULTS>
std::string launch(const Shape& s, const DeviceBuffers& b, cudaStream_t stream,
                   const FaultInjection& fault);

}  // namespace fa::fp8::sm90
