// fa3's 128x176 kernels at head dimension 128: FlashAttention-3's non-causal tile (tiles:
// Fa3Tiles in fa3.cu; the kernel: fa3_kernel.cuh).
#include "kernels/fa3/fa3_kernel.cuh"

FA3_INSTANTIATE(128, 128, 176)
