// Pieces every sm_90a kernel uses (kernels/hopper/, fa3, fp8): the wgmma batch issue, the
// mbarrier wait and the once-per-device shared memory attribute. CuTe (the nvidia-cutlass wheel)
// must be on the include path.
#pragma once

// clang-format off
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
// clang-format on

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

namespace fa::hopper {

using namespace cute;

// Q, K (and 16-bit V, O) in global memory as (rows N, head dim D, batch*heads).
template <int D, typename E>
__host__ __device__ auto gmem_rows(E* p, int N, int heads) {
  return make_tensor(
      make_gmem_ptr(p), make_shape(N, Int<D>{}, heads),
      make_stride(static_cast<std::int64_t>(D), _1{}, static_cast<std::int64_t>(N) * D));
}

// A TMA load of ROWS x D boxes of such rows (E elements at p) into one stage of smem_layout.
template <typename E, int D, int ROWS, typename SmemLayout>
auto tma_load_rows(const void* p, int N, int heads, const SmemLayout& smem_layout) {
  return make_tma_copy(SM90_TMA_LOAD{}, gmem_rows<D>(static_cast<const E*>(p), N, heads),
                       smem_layout, cute::Shape<Int<ROWS>, Int<D>>{}, _1{});
}

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

// Waits for phase `parity` of an mbarrier. Built with CMake's FA_HOPPER_HANG_REPORT, a wait that
// has not completed after 2^33 SM cycles (about 4 s at the H200's 1.98 GHz) prints the thread
// block, the thread (lane 0 of each warp), the barrier's name (`name` and `what`: a ring and
// "full" or "empty"), index and parity, and traps: a protocol error (an expect-tx count, an
// arrival count, a parity) then ends the launch with an error that names the barrier, instead of
// a hang with no output. Off by default: the bounded loop reads the clock on every try.
__device__ __forceinline__ void wait_barrier(const std::uint64_t* barrier, std::uint32_t parity,
                                             const char* name, const char* what, int index) {
#if defined(FA_HOPPER_HANG_REPORT)
  const long long start = clock64();
  while (!cutlass::arch::ClusterBarrier::try_wait(barrier, parity)) {
    if (clock64() - start > (1LL << 33)) {
      if (threadIdx.x % 32 == 0)
        printf("hang report: block (%d,%d) thread %d waits on %s %s[%d] parity %u\n", blockIdx.x,
               blockIdx.y, threadIdx.x, name, what, index, parity);
      __trap();
    }
  }
#else
  (void)name;
  (void)what;
  (void)index;
  cutlass::arch::ClusterBarrier::wait(barrier, parity);
#endif
}
__device__ __forceinline__ void wait_barrier(const std::uint64_t* barrier, std::uint32_t parity,
                                             const char* name, int index) {
  wait_barrier(barrier, parity, name, "", index);
}

// cudaFuncSetAttribute(max dynamic shared memory) once per (kernel, device).
template <typename Kernel>
cudaError_t smem_attribute_once(Kernel kernel, int bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, cudaError_t> done;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  auto it = done.find(key);
  if (it == done.end() || device < 0) {
    const cudaError_t st =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    it = done.insert_or_assign(key, st).first;
  }
  return it->second;
}

}  // namespace fa::hopper
