// The FP8 kernels' register layouts on the CPU (kernels/fp8/fp8_layout.hpp): P goes from the S
// accumulators to the A operand of P V without moving a byte between threads, because V8's keys
// are stored permuted. The fragment layouts below are written out from the PTX ISA's figures
// (mma.m16n8k32 .e4m3 A and C fragments; wgmma m64nNk32 with 8-bit A in registers, whose 16-row
// slab per warp is the same), independently of the header; the sm_90a kernel also static_asserts
// CuTe's GMMA::ALayout_64x32 and CLayout_64x8 against the same formulas.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "kernels/fp8/fp8_layout.hpp"

namespace fa::fp8 {
namespace {

// A operand, 8-bit, k = 32: lane (g, t), register a (0..3), byte b -> (row, k).
struct RowCol {
  int row, col;
};
RowCol a_fragment(int lane, int reg, int byte) {
  const int g = lane / 4, t = lane % 4;
  return {g + 8 * (reg % 2), 16 * (reg / 2) + 4 * t + byte};
}
// C (accumulator) fragment of an m16n8 tile: lane (g, t), element e -> (row, column).
RowCol c_fragment(int lane, int e) {
  const int g = lane / 4, t = lane % 4;
  return {g + 8 * (e / 2), 2 * t + e % 2};
}

// True when, for every lane, every P register byte (kc, h, r, b) of a BC-key block holds the score
// of the key that V8 stores at that byte's k position (key_at: V8's position -> key), in the
// same row: the product sum_pos P[row][key_at(pos)] V[key_at(pos)] is then P V.
bool p_matches_v(int bc, const std::function<int(int)>& key_at) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int kc = 0; kc < bc / 32; ++kc) {
      for (int h = 0; h < 2; ++h) {
        for (int r = 0; r < 2; ++r) {
          for (int b = 0; b < 4; ++b) {
            const RowCol a = a_fragment(lane, 2 * h + r, b);  // register 2h + r (the header's)
            const AccElement src = p_source(kc, h, r, b);
            const RowCol c = c_fragment(lane, src.e);
            const int key = 8 * src.n + c.col;
            if (c.row != a.row) return false;
            if (key_at(32 * kc + a.col) != key) return false;
          }
        }
      }
    }
  }
  return true;
}

TEST(Fp8Layout, PermutedKeysMatchTheARegisters) {
  EXPECT_TRUE(p_matches_v(128, [](int p) { return permuted_key(p); }));
  EXPECT_TRUE(p_matches_v(64, [](int p) { return permuted_key(p); }));
}

// The negative: V stored in plain key order does not match (the check can fail).
TEST(Fp8Layout, PlainKeyOrderDoesNotMatch) {
  EXPECT_FALSE(p_matches_v(128, [](int p) { return p; }));
  // Nor does a permutation off by one group position.
  EXPECT_FALSE(p_matches_v(128, [](int p) { return permuted_key(p ^ 1); }));
}

TEST(Fp8Layout, PermutationIsABijectionInsideEachGroupOf16) {
  for (int g = 0; g < 8; ++g) {
    std::set<int> keys;
    for (int p = 16 * g; p < 16 * g + 16; ++p) {
      const int k = permuted_key(p);
      EXPECT_GE(k, 16 * g);
      EXPECT_LT(k, 16 * g + 16);
      keys.insert(k);
      EXPECT_EQ(key_position(k), p);
    }
    EXPECT_EQ(keys.size(), 16u);
  }
}

TEST(Fp8Layout, ScaleBlocksAndPadding) {
  EXPECT_EQ(padded(1), 128);
  EXPECT_EQ(padded(128), 128);
  EXPECT_EQ(padded(129), 256);
  EXPECT_EQ(q_scale_blocks(65), 2);
  EXPECT_EQ(kv_scale_blocks(129), 2);
  EXPECT_EQ(kv_scale_blocks(4096) * kKvScaleRows, padded(4096));
}

}  // namespace
}  // namespace fa::fp8
