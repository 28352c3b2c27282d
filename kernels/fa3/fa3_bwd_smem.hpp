// fa3 backward's shared-memory layouts that code outside the kernel also reads: dS's tile, which
// the consumers store at hand-computed offsets (fa3_bwd_layout.hpp: ds_offset) and the dQ
// product's wgmma reads through CuTe's descriptors. Its own header so that the host test
// tests/fa3_bwd_cute_layout.cu checks the kernel's type, not a restatement of it. Needs CuTe.
#pragma once

#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace fa::fa3_bwd {

// dS as dQ's A operand (BR queries x BC keys, E 16-bit), queries contiguous, 128-byte swizzle;
// two buffers: one warpgroup may write block i+1's while the other still reads block i's.
template <typename E, int BR, int BC>
using SmemLayoutDsOf = decltype(cute::tile_to_shape(
    cute::GMMA::Layout_MN_SW128_Atom<E>{}, cute::Shape<cute::Int<BR>, cute::Int<BC>, cute::_2>{}));

}  // namespace fa::fa3_bwd
