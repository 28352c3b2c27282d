// fa3's 192x128 kernels at head dimension 64: three consumer warpgroups (tiles:
// Fa3Tiles in fa3.cu; the kernel: fa3_kernel.cuh).
#include "kernels/fa3/fa3_kernel.cuh"

FA3_INSTANTIATE(64, 192, 128)
