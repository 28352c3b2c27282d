// fa3 backward's dS addressing (kernels/fa3/fa3_bwd_layout.hpp: ds_offset) against the kernel's
// own CuTe layout for the tile (kernels/fa3/fa3_bwd_smem.hpp: the Traits' SmemLayoutDs at
// 64 x 128), evaluated on the host: the consumers store dS^T at ds_offset and the dQ product's
// wgmma reads it through CuTe's descriptors, so the two must agree on every element.
#include <cutlass/numeric_types.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/fa3/fa3_bwd_layout.hpp"
#include "kernels/fa3/fa3_bwd_smem.hpp"

namespace {

using namespace cute;

template <typename E>
void expect_ds_offsets_match_cute() {
  using Layout = fa::fa3_bwd::SmemLayoutDsOf<E, 64, 128>;  // the kernel's (Br, kBlockKv)
  alignas(1024) static E buffer[64 * 128 * 2];
  Tensor ds = make_tensor(make_smem_ptr(buffer), Layout{});
  const auto origin = reinterpret_cast<std::uintptr_t>(buffer);
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 128; ++k)
      for (int q = 0; q < 64; ++q) {
        const auto cute_at = reinterpret_cast<std::uintptr_t>(&ds(q, k, b)) - origin;
        ASSERT_EQ(cute_at, b * 64u * 128u * sizeof(E) + fa::fa3_bwd::ds_offset(q, k))
            << "q " << q << " k " << k << " buffer " << b;
      }
}

TEST(Fa3BwdCuteLayout, DsOffsetsAreCuteLayoutsBf16) {
  expect_ds_offsets_match_cute<cutlass::bfloat16_t>();
}
TEST(Fa3BwdCuteLayout, DsOffsetsAreCuteLayoutsFp16) {
  expect_ds_offsets_match_cute<cutlass::half_t>();
}

}  // namespace
