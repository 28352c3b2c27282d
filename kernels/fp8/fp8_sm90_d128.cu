// fp8's sm_90a kernels at head dimension 128: 128x128 tiles, two consumer warpgroups.
#include "kernels/fp8/fp8_sm90_kernel.cuh"

FP8_SM90_INSTANTIATE(128, 128, 128)
