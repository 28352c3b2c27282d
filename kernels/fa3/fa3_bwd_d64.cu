// fa3's backward kernels at head dimension 64 (the kernel: fa3_bwd_kernel.cuh).
#include "kernels/fa3/fa3_bwd_kernel.cuh"

FA3_BWD_INSTANTIATE(64, 64)
