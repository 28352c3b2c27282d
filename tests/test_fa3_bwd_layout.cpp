// fa3 backward's dQ share layout (kernels/fa3/fa3_bwd_layout.hpp) on the CPU: every element has
// one place, the consumers' stores are free of bank conflicts, the post-pass's float4 reads stay
// whole, and the stores' one-base addressing lands where dq_share_index says. The kernels' own
// check is the backward GPU tests (a misplaced dQ element fails dQ's verification).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "kernels/fa3/fa3_bwd_layout.hpp"

namespace fa::fa3_bwd {
namespace {

constexpr int kRows = 64;
constexpr int kColsOptions[] = {32, 64};  // d = 64 and 128 (two column groups)

TEST(Fa3BwdLayout, EveryElementHasItsOwnPlace) {
  for (int cols : kColsOptions) {
    std::set<int> seen;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < cols; ++c) {
        const int at = dq_share_index(r, c, cols);
        ASSERT_GE(at, 0);
        ASSERT_LT(at, kRows * cols);
        ASSERT_TRUE(seen.insert(at).second) << "cols " << cols << " row " << r << " col " << c;
      }
  }
}

// A half-warp's float2 stores (lanes 0-15 or 16-31: g in 4 rows, t in 4 column pairs) of one tile
// cover 32 distinct banks.
TEST(Fa3BwdLayout, ConsumerStoresAreFreeOfBankConflicts) {
  for (int cols : kColsOptions)
    for (int warp = 0; warp < 4; ++warp)
      for (int half = 0; half < 2; ++half)
        for (int lower = 0; lower < 2; ++lower)
          for (int n = 0; n < cols / 8; ++n) {
            std::set<int> banks;
            for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
              const int g = lane / 4, t = lane % 4, r = 16 * warp + g + 8 * lower;
              const int at = dq_share_index(r, 8 * n + 2 * t, cols);
              banks.insert(at % 32);
              banks.insert((at + 1) % 32);
            }
            EXPECT_EQ(banks.size(), 32u) << "cols " << cols << " warp " << warp << " tile " << n;
          }
}

TEST(Fa3BwdLayout, FourAdjacentColumnsStayAdjacent) {
  for (int cols : kColsOptions)
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < cols; c += 4) {
        const int at = dq_share_index(r, c, cols);
        EXPECT_EQ(at % 4, 0);
        for (int k = 1; k < 4; ++k) EXPECT_EQ(dq_share_index(r, c + k, cols), at + k);
      }
}

// The kernel's stores: base XOR 32 n, and 32 cols bytes further for the row 8 below, from a share
// base aligned to 4 cols bytes or more (the kernel's: 1024; shown at 0 and an odd multiple).
TEST(Fa3BwdLayout, OneBasePerThreadAddressesEveryTile) {
  for (int cols : kColsOptions)
    for (std::uint32_t share : {0u, 1024u * 37u})
      for (int warp = 0; warp < 4; ++warp)
        for (int g = 0; g < 8; ++g)
          for (int t = 0; t < 4; ++t) {
            const int r = 16 * warp + g;
            const std::uint32_t base = share + dq_share_thread_base(r, t, cols);
            for (int n = 0; n < cols / 8; ++n) {
              const std::uint32_t upper = base ^ (32u * n), lower = upper + 32u * cols;
              EXPECT_EQ(upper, share + 4u * dq_share_index(r, 8 * n + 2 * t, cols));
              EXPECT_EQ(lower, share + 4u * dq_share_index(r + 8, 8 * n + 2 * t, cols));
            }
          }
}

// dS: every (query pair, key) of a 64 x 128 buffer has its own 4 bytes.
TEST(Fa3BwdLayout, DsPairsHaveTheirOwnPlace) {
  std::set<std::uint32_t> seen;
  for (int k = 0; k < 128; ++k)
    for (int q = 0; q < 64; q += 2) {
      const std::uint32_t at = ds_offset(q, k);
      ASSERT_EQ(at % 4, 0u);
      ASSERT_LT(at, 64u * 128u * 2u);
      ASSERT_TRUE(seen.insert(at).second) << "q " << q << " k " << k;
      ASSERT_EQ(ds_offset(q + 1, k), at + 2);
    }
}

// A consumer thread (warp w of the two warpgroups, lane g, t: key_a = 16 w + g): tile n's pair at
// base XOR 16 n, key_a + 8's 1 KB further, where ds_offset puts them; a warp's 32 stores of one
// tile hit 32 distinct banks.
TEST(Fa3BwdLayout, DsStoresFromOneBaseAreConflictFree) {
  for (int w = 0; w < 8; ++w)
    for (int n = 0; n < 8; ++n)
      for (int lower = 0; lower < 2; ++lower) {
        std::set<std::uint32_t> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4, key_a = 16 * w + g;
          const std::uint32_t at = (ds_thread_base(key_a, t) ^ (16u * n)) + 1024u * lower;
          EXPECT_EQ(at, ds_offset(8 * n + 2 * t, key_a + 8 * lower));
          banks.insert(at / 4 % 32);
        }
        EXPECT_EQ(banks.size(), 32u) << "warp " << w << " tile " << n;
      }
}

}  // namespace
}  // namespace fa::fa3_bwd
