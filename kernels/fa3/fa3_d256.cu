// fa3's kernels at head dimension 256, 128 x 80 (tiles: Fa3Tiles in fa3.cu; the kernel:
// fa3_kernel.cuh).
#include "kernels/fa3/fa3_kernel.cuh"

FA3_INSTANTIATE(256, 128, 80)
