// Hopper-only device code (sm_90a: wgmma, setmaxnreg) lives in kernels/hopper/ and builds for its
// own architecture list, FA_HOPPER_ARCHITECTURES (CMakeLists.txt, target fa_kernels_hopper),
// while the portable kernels keep FA_CUDA_ARCHITECTURES. No Hopper kernel exists yet: this unit
// proves the wiring. Its guard stops a build that compiles it for anything but sm_90a (a test,
// hopper_arch_guard, compiles it for sm_80 and expects this line), and its kernel uses an
// sm_90a-only instruction, so ptxas refuses it on any other target too. Never launched.
// (CMake passes -gencode arch=compute_90a,code=[compute_90a,sm_90a]; a bare nvcc -arch=sm_90a
// would also embed compute_90 PTX, which this guard refuses.)
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "kernels/hopper: sm_90a-only source compiled for another architecture (FA_HOPPER_ARCHITECTURES)"
#endif

namespace fa::hopper {

// The fence a wgmma sequence starts with (warpgroup-level, sm_90a only).
__global__ void __launch_bounds__(128) sm90a_probe_kernel() {
#if defined(__CUDA_ARCH__)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

}  // namespace fa::hopper
