// fp8's sm_90a kernels at head dimension 64: 192x128 tiles, three consumer warpgroups.
#include "kernels/fp8/fp8_sm90_kernel.cuh"

FP8_SM90_INSTANTIATE(64, 192, 128)
