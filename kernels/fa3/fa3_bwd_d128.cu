// fa3's backward kernels at head dimension 128 (the kernel: fa3_bwd_kernel.cuh).
#include "kernels/fa3/fa3_bwd_kernel.cuh"

FA3_BWD_INSTANTIATE(128, 64)
