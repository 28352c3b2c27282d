// The FP8 kernels' register layouts on the CPU (kernels/fp8/fp8_layout.hpp): P goes from the S
// accumulators to the A operand of P V without moving a byte between threads, because V8's keys
// are stored permuted. The fragment layouts below are written out from the PTX ISA's figures
// (mma.m16n8k32 .e4m3 A and C fragments; wgmma m64nNk32 with 8-bit A in registers, whose 16-row
// slab per warp is the same), independently of the header; the sm_90a kernel also static_asserts
// CuTe's GMMA::ALayout_64x32 and CLayout_64x8 against the same formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "kernels/fp8/fp8_layout.hpp"
#include "kernels/reference/reference.hpp"

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

// The quantisation pass's rotation on the tensor cores (fp8_quant.cu): every 16 x 8
// block of Sylvester's H is the 8 x 8 base block or its negation, as hadamard_block_negative
// says (B of mma.m16n8k16 then needs two registers).
TEST(Fp8Layout, HadamardBlocksAreTheBaseBlockSigned) {
  for (int d : {64, 128}) {
    int mismatches = 0, mismatches_without_bit3 = 0;
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        const bool base = hadamard_negative(i % 8, j % 8);
        mismatches += (base != hadamard_block_negative(i / 16, j / 8, (i % 16) / 8)) !=
                      hadamard_negative(i, j);
        // The negative: without bit 3 of the row against bit 0 of nt the blocks are wrong.
        mismatches_without_bit3 +=
            (base != hadamard_negative(i / 16, (j / 8) >> 1)) != hadamard_negative(i, j);
      }
    }
    EXPECT_EQ(mismatches, 0) << "d=" << d;
    EXPECT_GT(mismatches_without_bit3, 0) << "d=" << d;
  }
}

// Q8's and K8's column order: a bijection of the row, each thread's columns (8 nt + 2 t + c)
// contiguous from rotated_row_offset.
TEST(Fp8Layout, RotatedColumnsArePermutedByThread) {
  for (int d : {64, 128}) {
    std::set<int> positions;
    for (int col = 0; col < d; ++col) {
      const int nt = col / 8, t = (col % 8) / 2, c = col % 2;
      const int pos = rotated_column_position(d, col);
      EXPECT_EQ(pos, rotated_row_offset(d, t) + 2 * nt + c) << "d=" << d << " col=" << col;
      EXPECT_GE(pos, 0);
      EXPECT_LT(pos, d);
      positions.insert(pos);
    }
    EXPECT_EQ(positions.size(), static_cast<std::size_t>(d));
  }
}

// The rotation as the pass computes it, block by block: (S x) times H's blocks from the base
// block and its signs, stored at rotated_column_position and scaled by 1/sqrt(d), equals the
// reference's butterflies (reference::rotate_hadamard) column for column; and Q K^T is the same
// for the permuted rows as for the reference's.
TEST(Fp8Layout, BlockRotationMatchesTheReference) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  for (int d : {64, 128}) {
    std::vector<double> q(d), k(d);
    for (double& v : q) v = normal(rng);
    for (double& v : k) v = normal(rng);
    auto rotate_by_blocks = [d](const std::vector<double>& x) {
      std::vector<double> stored(d, 0.0);
      for (int j = 0; j < d; ++j) {
        double y = 0.0;
        for (int kt = 0; kt < d / 16; ++kt) {
          for (int kk = 0; kk < 16; ++kk) {
            const int i = 16 * kt + kk;
            const double a = flip_sign(i) ? -x[i] : x[i];
            const bool negative =
                hadamard_negative(kk % 8, j % 8) != hadamard_block_negative(kt, j / 8, kk / 8);
            y += negative ? -a : a;
          }
        }
        stored[rotated_column_position(d, j)] = y / std::sqrt(static_cast<double>(d));
      }
      return stored;
    };
    const std::vector<double> q_blocks = rotate_by_blocks(q), k_blocks = rotate_by_blocks(k);
    std::vector<double> q_ref = q, k_ref = k;
    reference::rotate_hadamard(q_ref.data(), d);
    reference::rotate_hadamard(k_ref.data(), d);
    double dot_blocks = 0.0, dot_ref = 0.0, dot_plain = 0.0;
    for (int j = 0; j < d; ++j) {
      EXPECT_NEAR(q_blocks[rotated_column_position(d, j)], q_ref[j], 1e-12)
          << "d=" << d << " column " << j;
      dot_blocks += q_blocks[j] * k_blocks[j];
      dot_ref += q_ref[j] * k_ref[j];
      dot_plain += q[j] * k[j];
    }
    EXPECT_NEAR(dot_blocks, dot_ref, 1e-10) << "d=" << d;
    EXPECT_NEAR(dot_blocks, dot_plain, 1e-10) << "d=" << d;
  }
}

// The pass's factored rotation (fp8_tuning.hpp's kQuantMmaBlock = K): H_d = H_(d/K) (x) H_K, so the
// MMAs multiply each block of K input columns by H_K (its 16 x 8 blocks from the base block and
// hadamard_block_negative, as above) and log2(d/K) butterfly stages across the blocks finish the
// product. Against the reference's butterflies, column for column; the negative leaves the
// stages out (the block-diagonal product alone), which must differ.
TEST(Fp8Layout, FactoredRotationMatchesTheReference) {
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  for (int d : {64, 128}) {
    for (int K : {16, 32, 64, 128}) {
      if (K > d) continue;
      std::vector<double> x(d);
      for (double& v : x) v = normal(rng);
      std::vector<double> y(d, 0.0);  // Z_b: block b's columns b K + j0
      for (int b = 0; b < d / K; ++b) {
        for (int j0 = 0; j0 < K; ++j0) {
          for (int i0 = 0; i0 < K; ++i0) {
            const int i = b * K + i0;
            const double a = flip_sign(i) ? -x[i] : x[i];
            const bool negative = hadamard_negative(i0 % 8, j0 % 8) !=
                                  hadamard_block_negative(i0 / 16, j0 / 8, (i0 % 16) / 8);
            y[b * K + j0] += negative ? -a : a;
          }
        }
      }
      const std::vector<double> block_diagonal = y;
      for (int m = 1; m < d / K; m <<= 1) {
        for (int b = 0; b < d / K; ++b) {
          if (b & m) continue;
          for (int j0 = 0; j0 < K; ++j0) {
            const double z0 = y[b * K + j0], z1 = y[(b + m) * K + j0];
            y[b * K + j0] = z0 + z1;
            y[(b + m) * K + j0] = z0 - z1;
          }
        }
      }
      std::vector<double> ref = x;
      reference::rotate_hadamard(ref.data(), d);
      double worst = 0.0, worst_without_stages = 0.0;
      for (int j = 0; j < d; ++j) {
        const double norm = std::sqrt(static_cast<double>(d));
        worst = std::max(worst, std::fabs(y[j] / norm - ref[j]));
        worst_without_stages =
            std::max(worst_without_stages, std::fabs(block_diagonal[j] / norm - ref[j]));
      }
      EXPECT_LT(worst, 1e-12) << "d=" << d << " K=" << K;
      if (K < d) EXPECT_GT(worst_without_stages, 1e-3) << "d=" << d << " K=" << K;
    }
  }
}

}  // namespace
}  // namespace fa::fp8
