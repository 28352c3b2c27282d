// Pieces of the sm_90a kernels that fa3 (kernels/fa3/fa3_kernel.cuh) and fp8
// (kernels/fp8/fp8_sm90_kernel.cuh) share: the wgmma batch issue and the once-per-device shared
// memory attribute. CuTe (the nvidia-cutlass wheel) must be on the include path.
#pragma once

// clang-format off
#include <cute/tensor.hpp>
// clang-format on

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

namespace fa::hopper {

using namespace cute;

// Issues one warpgroup's product acc (+)= A B over the K modes of A and B as one wgmma batch
// (committed, not waited for). A_REGS: A is a register fragment (P), not shared-memory
// descriptors.
template <bool ZERO_INIT, bool A_REGS, typename Mma, typename TA, typename TB, typename TC>
__device__ __forceinline__ void wgmma_issue(Mma& mma, TA& a, const TB& b, TC& acc) {
  warpgroup_fence_operand(acc);
  if constexpr (A_REGS) warpgroup_fence_operand(a);
  warpgroup_arrive();
  if constexpr (ZERO_INIT) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(acc);
  if constexpr (A_REGS) warpgroup_fence_operand(a);
}

// cudaFuncSetAttribute(max dynamic shared memory) once per (kernel, device).
template <typename Traits, typename Kernel>
cudaError_t smem_attribute_once(Kernel kernel) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, cudaError_t> done;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  auto it = done.find(key);
  if (it == done.end() || device < 0) {
    const cudaError_t st = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                Traits::kSmemBytes);
    it = done.insert_or_assign(key, st).first;
  }
  return it->second;
}

}  // namespace fa::hopper
