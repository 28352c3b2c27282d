// fa3's kernels at head dimension 256, 128 x 80 (tiles: Fa3Tiles in fa3.cu; the kernel:
// fa3_kernel.cuh).
// wgmma's n = 80 (Q K^T at Bc = 80) is one of CuTe's "extended" shapes: without them its selector
// would cover 80 columns with 5 atoms of n = 16. Only this file turns them on: they cost every
// translation unit that includes them about 45 s of nvcc, and the other tiles' n (64, 128, 192)
// select the same atoms either way (the widest n that divides the tile comes first). No
// instantiation is shared with the other files (their tile shapes differ), so they stay consistent.
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include "kernels/fa3/fa3_kernel.cuh"

FA3_INSTANTIATE(256, 128, 80)
