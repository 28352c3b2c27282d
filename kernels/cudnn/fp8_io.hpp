// FP8 inputs and output around cuDNN's FP8 attention (the cudnn-fp8 peer): per-tensor E4M3
// quantisation of Q, K, V before the graph, dequantisation of its E4M3 output to bf16 after.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/problem.hpp"

namespace fa {

// Scalars the graph reads and writes, one float each, in this order in device memory.
enum CudnnFp8Scalar {
  kAmaxQ,
  kAmaxK,
  kAmaxV,  // max |x| of the bf16 inputs
  kDescaleQ,
  kDescaleK,
  kDescaleV,  // amax / 448: back from E4M3 units
  kDescaleS,
  kScaleS,  // P in [0, 1] is stored as E4M3(448 P)
  kScaleO,
  kDescaleO,  // |O| <= max |V|: O stored as E4M3(448 O / amax_v)
  kAmaxS,
  kAmaxO,  // written by the graph
  kCudnnFp8Scalars
};

struct CudnnFp8Buffers {
  void* q8 = nullptr;  // [B, H, N, d] E4M3
  void* k8 = nullptr;
  void* v8 = nullptr;
  void* o8 = nullptr;
  float* scalars = nullptr;  // kCudnnFp8Scalars floats
};

std::size_t cudnn_fp8_workspace_bytes(const Shape& s);
CudnnFp8Buffers cudnn_fp8_carve(const Shape& s, void* workspace);
// amax of Q, K, V, the scales, and the E4M3 copies. Enqueued on `stream`.
cudaError_t cudnn_fp8_quantise_inputs(const Shape& s, const void* q, const void* k, const void* v,
                                      const CudnnFp8Buffers& w, cudaStream_t stream);
// O (bf16) = E4M3 output x descale_o.
cudaError_t cudnn_fp8_dequantise_output(const Shape& s, const CudnnFp8Buffers& w, void* o,
                                        cudaStream_t stream);

}  // namespace fa
