// The IO model, hand-checked on small cases, and its scaling laws.
#include <gtest/gtest.h>

#include "kernels/decode/decode.hpp"
#include "kernels/fa2/fa2.hpp"
#include "profiler/io_model.hpp"

namespace fa {
namespace {

Shape shape(std::int64_t N, std::int64_t d, bool causal = false, std::int64_t B = 1,
            std::int64_t H = 1) {
  Shape s;
  s.B = B;
  s.H = H;
  s.N = N;
  s.d = d;
  s.causal = causal;
  return s;
}

TEST(IoModel, StandardBytesByHand) {
  // N=4, d=2, bf16 (2 bytes): Q,K,V,O = 8 elements = 16 B each; S, P = 16 elements = 32 B each.
  // N % 8 != 0: the two-pass softmax reads S twice. lse: 4 rows of fp32.
  const auto m = model::io_model(Algorithm::standard, shape(4, 2), {}, 1024);
  EXPECT_DOUBLE_EQ(m.bytes_read, 16 + 16 + 2 * 32 + 32 + 16);  // Q, K, S twice, P, V
  EXPECT_DOUBLE_EQ(m.bytes_written, 32 + 32 + 16 + 16);        // S, P, O, lse
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4.0 * 16 * 2);
  EXPECT_DOUBLE_EQ(m.flops_convention, 4.0 * 16 * 2);
  EXPECT_DOUBLE_EQ(m.bytes_compulsory, 4 * 16 + 16);
}

TEST(IoModel, StandardCausalReadsOnlyTheLowerTriangleOfS) {
  const auto m = model::io_model(Algorithm::standard, shape(4, 2, true), {}, 1024);
  // S read (twice, N % 8 != 0): 4*5/2 = 10 elements = 20 B instead of 32.
  EXPECT_DOUBLE_EQ(m.bytes_read, 16 + 16 + 2 * 20 + 32 + 16);
  EXPECT_DOUBLE_EQ(m.flops_convention, 4.0 * 16 * 2 / 2);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4.0 * 16 * 2);  // cuBLAS still computes everything
}

TEST(IoModel, Fa2BytesByHand) {
  // N=8, d=2, Br=4, Bc=2: 2 query blocks, each reads all 8 K rows and 8 V rows.
  const auto m = model::io_model(Algorithm::fa2, shape(8, 2), {4, 2}, 1024);
  const double row = 2 * 2;  // d * 2 bytes
  EXPECT_DOUBLE_EQ(m.bytes_read, 8 * row + 2 * 8 * row + 2 * 8 * row);
  EXPECT_DOUBLE_EQ(m.bytes_written, 8 * row + 8 * 4);  // O and fp32 lse
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4.0 * 64 * 2);
}

TEST(IoModel, Fa2CausalVisitsBlocksUpToTheDiagonal) {
  // N=8, Br=4, Bc=2, causal: query block 0 (rows 0-3) visits K/V blocks 0,1; block 1 visits 0-3.
  const Shape s = shape(8, 2, true);
  EXPECT_EQ(model::kv_blocks_for_query_block(s, {4, 2}, 0), 2);
  EXPECT_EQ(model::kv_blocks_for_query_block(s, {4, 2}, 1), 4);
  const auto m = model::io_model(Algorithm::fa2, s, {4, 2}, 1024);
  const double row = 2 * 2;
  EXPECT_DOUBLE_EQ(m.bytes_read, 8 * row + 2 * (4 + 8) * row);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 6 * 4.0 * 4 * 2 * 2);  // 6 tile pairs of 4x2, d=2
}

TEST(IoModel, Fa2TailBlockReadsOnlyRealRows) {
  // N=5, Bc=4: the second K/V block has one real row.
  const auto m = model::io_model(Algorithm::fa2, shape(5, 2), {8, 4}, 1024);
  const double row = 2 * 2;
  EXPECT_DOUBLE_EQ(m.bytes_read, 5 * row + 2 * 5 * row);
}

TEST(IoModel, Fa2KvRereadsFollowTheQueryTile) {
  // fa2's 256-row tiles (kernels/fa2/fa2.cu, warps of 32 rows): K and V are read once per query
  // block, so at N=4096 twice the rows per block read K and V half as often as 128-row tiles.
  const Shape s = shape(4096, 64);
  const double qkv = 4096.0 * 64 * 2;  // one tensor, bf16
  const auto a = model::io_model(Algorithm::fa2, s, {128, 64}, 233472);
  const auto b = model::io_model(Algorithm::fa2, s, {256, 64}, 233472);
  EXPECT_DOUBLE_EQ(a.bytes_read, qkv + 2 * 32 * qkv);  // Q once, K and V 4096/128 = 32 times
  EXPECT_DOUBLE_EQ(b.bytes_read, qkv + 2 * 16 * qkv);  // 4096/256 = 16 times
  EXPECT_DOUBLE_EQ(a.flops_matrix, b.flops_matrix);
}

TEST(IoModel, Fa1BytesByHand) {
  // N=4, d=2, Br=2, Bc=2, fp32 O state, fp32 l and m: 2 K/V blocks x 2 query blocks of 2 rows.
  const auto m = model::io_model(Algorithm::fa1, shape(4, 2), {2, 2}, 1024);
  const double row = 2 * 2, state_row = 2 * 4 + 2 * 4;
  // K, V once (4 rows each); Q: 4 rows x 2 K/V blocks; state read at j=1 only: 4 rows.
  EXPECT_DOUBLE_EQ(m.bytes_read, 2 * 4 * row + 8 * row + 4 * state_row);
  // state written at j=0 only (j=1 is the last: O goes out in bf16, and lse in fp32).
  EXPECT_DOUBLE_EQ(m.bytes_written, 4 * state_row + 4 * row + 4 * 4);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4 * 4.0 * 2 * 2 * 2);
}

TEST(IoModel, Fa1CausalSkipsBlocksAboveTheDiagonal) {
  // N=4, Br=Bc=2, causal: query block 0 sees K/V block 0 only; block 1 sees 0 and 1.
  const auto m = model::io_model(Algorithm::fa1, shape(4, 2, true), {2, 2}, 1024);
  const double row = 2 * 2, state_row = 2 * 4 + 2 * 4;
  EXPECT_DOUBLE_EQ(m.bytes_read, 2 * 4 * row + 6 * row + 2 * state_row);
  EXPECT_DOUBLE_EQ(m.bytes_written, 2 * state_row + 4 * row + 4 * 4);
}

TEST(IoModel, Fa1StateTrafficGrowsWithNOverBc) {
  // The state crosses HBM ~N/Bc times: doubling N doubles it per row, so bytes go ~4x.
  const auto a = model::io_model(Algorithm::fa1, shape(2048, 64), {128, 64}, 233472);
  const auto b = model::io_model(Algorithm::fa1, shape(4096, 64), {128, 64}, 233472);
  EXPECT_NEAR(b.bytes() / a.bytes(), 4.0, 0.05);
  const auto fa2 = model::io_model(Algorithm::fa2, shape(4096, 64), {128, 64}, 233472);
  EXPECT_GT(b.bytes(), fa2.bytes());  // FA1's state traffic exceeds FA2's K/V re-reads
}

TEST(IoModel, Fp8IsFa2OnOneByteInputsPlusQuantisation) {
  const Shape s = shape(256, 64);
  const Tiles t{128, 128};
  model::ModelOptions pre;
  pre.fp8_quantisation_timed = false;
  const auto attention = model::io_model(Algorithm::fp8, s, t, 233472, pre);
  const auto fa2 = model::io_model(Algorithm::fa2, s, t, 233472);
  // Q, K, V reads in 1 byte instead of 2; O (bf16) and lse writes unchanged.
  EXPECT_DOUBLE_EQ(attention.bytes_read, fa2.bytes_read / 2);
  EXPECT_DOUBLE_EQ(attention.bytes_written, fa2.bytes_written);
  const auto timed = model::io_model(Algorithm::fp8, s, t, 233472);
  const double nd = 256.0 * 64;
  // Per-block scales (the default): one pass reads Q, K, V in bf16 and writes Q8, K8 and V8^T
  // (256 keys, no pad).
  EXPECT_DOUBLE_EQ(timed.bytes_read - attention.bytes_read, 3 * nd * 2);
  EXPECT_DOUBLE_EQ(timed.bytes_written - attention.bytes_written, 3 * nd);
  // Per-head scales: an amax pass reads them once more.
  model::ModelOptions head;
  head.fp8_amax_pass = true;
  const auto timed_head = model::io_model(Algorithm::fp8, s, t, 233472, head);
  EXPECT_DOUBLE_EQ(timed_head.bytes_read - attention.bytes_read, 2 * 3 * nd * 2);
}

TEST(IoModel, StandardScalesAsNSquared) {
  const auto a = model::io_model(Algorithm::standard, shape(4096, 64), {}, 233472);
  const auto b = model::io_model(Algorithm::standard, shape(8192, 64), {}, 233472);
  // Dominated by the 4 N^2 terms: doubling N gives close to 4x the bytes.
  EXPECT_NEAR(b.bytes() / a.bytes(), 4.0, 0.05);
}

TEST(IoModel, Fa2ScalesAsNSquaredDOverBr) {
  const Tiles t{128, 64};
  const auto a = model::io_model(Algorithm::fa2, shape(4096, 64), t, 233472);
  const auto b = model::io_model(Algorithm::fa2, shape(8192, 64), t, 233472);
  EXPECT_NEAR(b.bytes() / a.bytes(), 4.0, 0.1);
  // K/V bytes = 2 * (N/Br) * N * d * e: halving Br doubles them.
  const auto small = model::io_model(Algorithm::fa2, shape(4096, 64), {64, 64}, 233472);
  const double kv_big = a.bytes_read - 4096.0 * 64 * 2,
               kv_small = small.bytes_read - 4096.0 * 64 * 2;
  EXPECT_DOUBLE_EQ(kv_small / kv_big, 2.0);
  EXPECT_DOUBLE_EQ(kv_big, 2.0 * (4096 / 128) * 4096 * 64 * 2);
}

TEST(IoModel, SeedLawUsesTheKernelsTileBudget) {
  // fa2, d=64, Br=128, Bc=64: Q tile + double-buffered K and V = (128 + 4*64) * 64 * 2 bytes.
  const auto a = model::io_model(Algorithm::fa2, shape(4096, 64), {128, 64}, 233472);
  EXPECT_DOUBLE_EQ(a.onchip_budget_bytes, (128 + 4 * 64) * 64 * 2.0);
  // 8 N^2 d^2 / M elements: the paper's tiles of M/(4d) rows re-read K and V N/(M/4d) times.
  const double m_elements = a.onchip_budget_bytes / 2;
  EXPECT_DOUBLE_EQ(a.bytes_asymptotic, 8.0 * 4096 * 4096 * 64 * 64 / m_elements * 2);
  // The same d^2 law at the same budget: the law grows as d^2 ...
  const auto b = model::io_model(Algorithm::fa2, shape(4096, 128), {128, 64}, 233472);
  EXPECT_DOUBLE_EQ(b.onchip_budget_bytes, 2 * a.onchip_budget_bytes);  // our tiles grow with d
  EXPECT_DOUBLE_EQ(b.bytes_asymptotic / a.bytes_asymptotic,
                   2.0);  // so the law at our budget: 4 / 2
  // ... while the tile model, with Br fixed, grows as d: K/V bytes double from d=64 to d=128.
  const double kv_a = a.bytes_read - 4096.0 * 64 * 2, kv_b = b.bytes_read - 4096.0 * 128 * 2;
  EXPECT_DOUBLE_EQ(kv_b / kv_a, 2.0);
  // And the law sits in the tile model's order of magnitude (B = M/4d = 96 rows against Br = 128),
  // never under the compulsory bytes as the old "M = the SM's shared memory, constant 1" did.
  EXPECT_NEAR(a.bytes_asymptotic / kv_a, 128.0 / 96.0, 1e-12);
  EXPECT_GT(a.bytes_asymptotic, a.bytes_compulsory);
  // Doubling the budget (bigger tiles) halves the law: 1/M.
  const auto c = model::io_model(Algorithm::fa2, shape(4096, 64), {256, 128}, 233472);
  EXPECT_DOUBLE_EQ(a.bytes_asymptotic / c.bytes_asymptotic, 2.0);
}

TEST(IoModel, StandardTwoPassSoftmaxReadsSTwice) {
  // N % 8 != 0 or N > 16384: the two-pass softmax reads each row's unmasked part twice.
  const auto one = model::io_model(Algorithm::standard, shape(16384, 64), {}, 233472);
  const auto two = model::io_model(Algorithm::standard, shape(16392, 64), {}, 233472);
  const auto odd = model::io_model(Algorithm::standard, shape(1001, 64), {}, 233472);
  auto s_reads = [](const model::IoModel& m) {
    double b = 0;
    for (const auto& t : m.terms) {
      if (t.name.rfind("S read", 0) == 0) b += t.bytes;
    }
    return b;
  };
  EXPECT_DOUBLE_EQ(s_reads(one), 16384.0 * 16384 * 2);
  EXPECT_DOUBLE_EQ(s_reads(two), 2 * 16392.0 * 16392 * 2);
  EXPECT_DOUBLE_EQ(s_reads(odd), 2 * 1001.0 * 1001 * 2);
}

TEST(IoModel, TermsAddUpAndBatchHeadsMultiply) {
  const auto one = model::io_model(Algorithm::fa2, shape(1000, 128, true), {128, 64}, 233472);
  const auto many =
      model::io_model(Algorithm::fa2, shape(1000, 128, true, 3, 5), {128, 64}, 233472);
  double sum = 0;
  for (const auto& t : one.terms) sum += t.bytes;
  EXPECT_DOUBLE_EQ(sum, one.bytes());
  EXPECT_DOUBLE_EQ(many.bytes(), 15 * one.bytes());
  EXPECT_DOUBLE_EQ(many.flops_matrix, 15 * one.flops_matrix);
}

}  // namespace
}  // namespace fa

namespace fa {
namespace {

model::IoModel backward(Algorithm a, const Shape& s, Tiles t = {}) {
  model::ModelOptions mo;
  mo.direction = Direction::backward;
  return model::io_model(a, s, t, 1024, mo);
}

double term(const model::IoModel& m, const std::string& prefix) {
  double b = 0;
  for (const auto& t : m.terms)
    if (t.name.rfind(prefix, 0) == 0) b += t.bytes;
  return b;
}

TEST(IoModelBackward, FlopsConventionIsTwoAndAHalfForwards) {
  for (bool causal : {false, true}) {
    const Shape s = shape(256, 64, causal, 2, 3);
    model::ModelOptions fwd;
    const auto f = model::io_model(Algorithm::fa2, s, {64, 64}, 1024, fwd);
    EXPECT_DOUBLE_EQ(backward(Algorithm::fa2, s, {64, 64}).flops_convention,
                     2.5 * f.flops_convention);
    EXPECT_DOUBLE_EQ(backward(Algorithm::standard, s).flops_convention, 2.5 * f.flops_convention);
  }
}

TEST(IoModelBackward, StandardBytesByHand) {
  // N=4, d=2, bf16: N d = 16 B, N N = 32 B, per-row fp32 = 16 B.
  const auto m = backward(Algorithm::standard, shape(4, 2));
  // reads: dO, V (dP); dO, O (D); dP, P, D (dS); dS, K (dQ); dS, Q (dK); P, dO (dV)
  EXPECT_DOUBLE_EQ(m.bytes_read, 16 + 16 + 16 + 16 + 32 + 32 + 16 + 32 + 16 + 32 + 16 + 32 + 16);
  // writes: dP, D, dS, dQ, dK, dV
  EXPECT_DOUBLE_EQ(m.bytes_written, 32 + 16 + 32 + 16 + 16 + 16);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 8.0 * 16 * 2);
  // causal: the dS kernel reads 4*5/2 = 10 elements of dP and of P
  const auto c = backward(Algorithm::standard, shape(4, 2, true));
  EXPECT_DOUBLE_EQ(m.bytes_read - c.bytes_read, 2 * (32 - 20));
}

TEST(IoModelBackward, Fa2BytesByHand) {
  // N=8, d=2, Br=Bc=4, bf16: 2 K/V blocks, each sees both query blocks (non-causal): 16 Q rows.
  const auto m = backward(Algorithm::fa2, shape(8, 2), {4, 4});
  EXPECT_DOUBLE_EQ(term(m, "K read"), 8 * 2 * 2);
  EXPECT_DOUBLE_EQ(term(m, "Q read (once per K/V block)"), 16 * 2 * 2);
  EXPECT_DOUBLE_EQ(term(m, "dQ accumulator read (atomicAdd"), 16 * 2 * 4);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4 * 10.0 * 4 * 4 * 2);  // 4 block pairs, 5 products each
  // causal: block 0 sees query blocks 0, 1; block 1 sees block 1 only: 12 Q rows, 3 pairs.
  const auto c = backward(Algorithm::fa2, shape(8, 2, true), {4, 4});
  EXPECT_DOUBLE_EQ(term(c, "Q read (once per K/V block)"), 12 * 2 * 2);
  EXPECT_DOUBLE_EQ(c.flops_matrix, 3 * 10.0 * 4 * 4 * 2);
  EXPECT_EQ(model::q_blocks_for_kv_block(shape(8, 2, true), {4, 4}, 1), 1);
  // Br < Bc (d = 128's 32 x 64): K/V block 1 starts at key 64 = query block 2.
  EXPECT_EQ(model::q_blocks_for_kv_block(shape(200, 128, true), {32, 64}, 1), 7 - 2);
  // the terms add up to the totals
  double r = 0, w = 0;
  for (const auto& t : m.terms) (t.is_write ? w : r) += t.bytes;
  EXPECT_DOUBLE_EQ(r, m.bytes_read);
  EXPECT_DOUBLE_EQ(w, m.bytes_written);
  EXPECT_TRUE(model::has_backward_model(Algorithm::fa2));
  EXPECT_FALSE(model::has_backward_model(Algorithm::fa1));
}

model::IoModel backward_separate(const Shape& s, Tiles t) {
  model::ModelOptions mo;
  mo.direction = Direction::backward;
  mo.dq_separate = true;
  return model::io_model(Algorithm::fa2, s, t, 1024, mo);
}

TEST(IoModelBackward, Fa2DqSeparateBytesByHand) {
  // N=8, d=2, main tiles 4x4 (4 block pairs, 16 Q rows); the dQ kernel's tiles at d=2 are
  // 64x64 (kernels/fa2/fa2.hpp): one query block, which reads the 8 K and V rows once.
  const auto m = backward_separate(shape(8, 2), {4, 4});
  EXPECT_DOUBLE_EQ(term(m, "dQ accumulator"), 0);  // no accumulator, no atomics, no convert
  EXPECT_DOUBLE_EQ(term(m, "Q read (once per K/V block)"), 16 * 2 * 2);
  EXPECT_DOUBLE_EQ(term(m, "K read (dQ kernel, once per query block)"), 8 * 2 * 2);
  EXPECT_DOUBLE_EQ(term(m, "Q read (dQ kernel, once)"), 8 * 2 * 2);
  EXPECT_DOUBLE_EQ(term(m, "dQ written (dQ kernel, once)"), 8 * 2 * 2);
  // 4 main pairs x 4 products (8 Br Bc d), 1 dQ pair x 3 products (6 Br' Bc' d).
  EXPECT_DOUBLE_EQ(m.flops_matrix, 4 * 8.0 * 4 * 4 * 2 + 6.0 * 64 * 64 * 2);
  EXPECT_EQ(fa2_bwd_dq_block_q(2), 64);
  EXPECT_EQ(fa2_bwd_dq_block_kv(2), 64);
  double r = 0, w = 0;
  for (const auto& t : m.terms) (t.is_write ? w : r) += t.bytes;
  EXPECT_DOUBLE_EQ(r, m.bytes_read);
  EXPECT_DOUBLE_EQ(w, m.bytes_written);
  // The same row with the atomics moves the fp32 accumulator instead of a second read of Q, dO.
  const auto a = backward(Algorithm::fa2, shape(8, 2), {4, 4});
  EXPECT_GT(term(a, "dQ accumulator"), 0);
  EXPECT_NE(a.bytes(), m.bytes());
  // causal at d=128: the dQ kernel's 64-row query blocks see K/V blocks of 32 up to the diagonal.
  const auto c = backward_separate(shape(128, 128, true), {32, 64});
  // query block 0 sees keys 0..63 (2 blocks of 32), block 1 keys 0..127: 192 key rows.
  EXPECT_DOUBLE_EQ(term(c, "K read (dQ kernel, once per query block)"), 192 * 128 * 2);
}

// fa3's bulk-reduce path pads the accumulator to whole query blocks: the pre-pass zeroes the
// padding rows, the convert pass reads the N real rows only.
TEST(IoModelBackward, Fa3ConvertPassReadsTheRealRowsOnly) {
  model::ModelOptions mo;
  mo.direction = Direction::backward;
  mo.dq_accumulation = DqAccumulation::bulk_reduce;
  const Shape s = shape(100, 64);  // B = H = 1: 100 rows, padded to 128 by Br = 64
  // fa3's backward is Algorithm::fa2 with the bulk-reduce path (kernels/registry.cpp).
  const auto m = model::io_model(Algorithm::fa2, s, {64, 128}, 1024, mo);
  EXPECT_DOUBLE_EQ(term(m, "dQ accumulator zeroed"), 128.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(term(m, "dQ accumulator read (convert pass"), 100.0 * 64 * 4);
}

TEST(IoModelBackward, Fa2L2ViewCountsEachByteOncePerKernel) {
  // N=8, d=2, bf16, tiles 4x4: N d e = 32 B, fp32 rows 32 B, the fp32 accumulator 64 B.
  const auto m = backward(Algorithm::fa2, shape(8, 2), {4, 4});
  // O, dO, D, K, V, Q, dO, lse, D, dK, dV, dQ once (12 x 32); accumulator zeroed, read and
  // written by the atomics once, read by the convert pass (4 x 64).
  EXPECT_DOUBLE_EQ(m.bytes_l2_view, 12 * 32 + 4 * 64);
  EXPECT_LT(m.bytes_l2_view, m.bytes());
  const auto s = backward_separate(shape(8, 2), {4, 4});
  // pre-pass O, dO, D; main K, V, Q, dO, lse, D, dK, dV; dQ kernel Q, dO, lse, D, K, V, dQ.
  EXPECT_DOUBLE_EQ(s.bytes_l2_view, 18 * 32);
  // One block pair: nothing is re-read, so the view is the model (no term left out of it).
  for (const auto& one :
       {backward(Algorithm::fa2, shape(4, 2), {4, 4}), backward_separate(shape(4, 2), {4, 4})})
    EXPECT_DOUBLE_EQ(one.bytes_l2_view, one.bytes());
  // Forward rows and the standard backward have no L2 view.
  EXPECT_EQ(backward(Algorithm::standard, shape(8, 2)).bytes_l2_view, 0);
}

// Grouped-query heads: K and V are compulsory once per K/V head, while fa2's pattern reads them
// once per query block of every query head; FLOPs count query heads.
TEST(IoModel, GroupedHeadsShareKvInTheCompulsoryBytes) {
  Shape mha = shape(256, 64, false, 2, 8);
  Shape gqa = mha;
  gqa.H_kv = 2;
  const auto a = model::io_model(Algorithm::fa2, mha, {128, 64}, 1024);
  const auto b = model::io_model(Algorithm::fa2, gqa, {128, 64}, 1024);
  const double head = 256.0 * 64 * 2;  // one head's Q (or K, V, O) in bf16
  const double lse = 256.0 * 4;
  EXPECT_DOUBLE_EQ(a.bytes_compulsory, 16 * (4 * head + lse));
  EXPECT_DOUBLE_EQ(b.bytes_compulsory, 16 * (2 * head + lse) + 4 * 2 * head);
  EXPECT_DOUBLE_EQ(b.bytes_read, a.bytes_read);  // what the kernel issues: per query head
  EXPECT_DOUBLE_EQ(b.flops_matrix, a.flops_matrix);
  EXPECT_DOUBLE_EQ(b.flops_convention, 4.0 * 16 * 256 * 256 * 64);
}

// A K/V length apart: causal aligned bottom-right, and the convention's N N_kv - N^2/2 pairs.
TEST(IoModel, KvLengthApartCountsBottomRightPairs) {
  Shape s = shape(4, 2, true);
  s.N_kv = 12;  // row i sees keys 0 .. i + 8
  EXPECT_DOUBLE_EQ(s.unmasked_pairs(), 9 + 10 + 11 + 12);
  // Br=2, Bc=4: query block 0 (rows 0-1) sees keys up to 9: blocks 0-2; block 1 sees all three.
  EXPECT_EQ(model::kv_blocks_for_query_block(s, {2, 4}, 0), 3);
  EXPECT_EQ(model::kv_blocks_for_query_block(s, {2, 4}, 1), 3);
  const auto m = model::io_model(Algorithm::fa2, s, {2, 4}, 1024);
  EXPECT_DOUBLE_EQ(m.flops_convention, 4.0 * 2 * (4 * 12 - 4 * 4 / 2.0));
  const double row = 2 * 2;  // d * 2 bytes
  EXPECT_DOUBLE_EQ(m.bytes_compulsory, 2 * 4 * row + 4 * 4 + 2 * 12 * row);
  EXPECT_DOUBLE_EQ(m.bytes_read, 4 * row + 2 * 2 * 12 * row);  // Q once; K, V per query block
  // Decode, one query: the convention counts about N_kv pairs, not half of them.
  Shape decode = shape(1, 128, true);
  decode.N_kv = 4096;
  EXPECT_DOUBLE_EQ(decode.unmasked_pairs(), 4096);
  EXPECT_DOUBLE_EQ(model::io_model(Algorithm::fa2, decode, {64, 64}, 1024).flops_convention,
                   4.0 * 128 * (4096 - 0.5));
  // Square shapes keep their numbers.
  EXPECT_DOUBLE_EQ(shape(8, 2, true).unmasked_pairs(), 36);
}

// A library's assumed tiles on decode rows (grouped heads, N below the tile): the group's query
// heads packed into one tile, K and V read once per K/V head, FLOPs as the mask has them; our own
// tiles and prefill rows stay unpacked.
TEST(IoModel, LibraryTilesPackAGroupOnDecodeRows) {
  Shape s = shape(1, 128, false, 2, 32);
  s.H_kv = 8;
  s.N_kv = 4096;
  model::ModelOptions library;
  library.library_tiles = true;
  const auto packed = model::io_model(Algorithm::fa2, s, {128, 128}, 1024, library);
  const double kv = 2.0 * 8 * 4096 * 128 * 2;  // K (or V): B H_kv N_kv d e
  const double q = 2.0 * 32 * 128 * 2;
  EXPECT_DOUBLE_EQ(packed.bytes_read, q + 2 * kv);
  EXPECT_DOUBLE_EQ(packed.bytes(), packed.bytes_compulsory);
  EXPECT_DOUBLE_EQ(packed.flops_matrix, 4 * packed.flops_convention);  // 4 rows in an m16 tile
  const auto own = model::io_model(Algorithm::fa2, s, {128, 128}, 1024);
  EXPECT_DOUBLE_EQ(own.bytes_read, q + 2 * 4 * kv);  // per query head, one padded tile each
  // 128 rows per query head against 16 per K/V head.
  EXPECT_DOUBLE_EQ(own.flops_matrix, 32 * packed.flops_matrix);
  // Causal decode: the one query sees every key, the same numbers.
  s.causal = true;
  EXPECT_DOUBLE_EQ(model::io_model(Algorithm::fa2, s, {128, 128}, 1024, library).bytes_read,
                   q + 2 * kv);
  // Prefill with the library's tiles: unpacked, as its tensor counts say.
  Shape prefill = shape(4096, 128, true, 1, 32);
  prefill.H_kv = 8;
  EXPECT_DOUBLE_EQ(model::io_model(Algorithm::fa2, prefill, {128, 128}, 1024, library).bytes(),
                   model::io_model(Algorithm::fa2, prefill, {128, 128}, 1024).bytes());
}

// decode's split rule: the fewest splits within 85% of the best wave efficiency (264 slots on
// 132 SMs), none under 256 keys, whole 64-key tiles, none empty; one where the batch fills the GPU.
TEST(Decode, SplitsFollowTheLengths) {
  Shape s = shape(1, 128, false, 1, 32);
  s.H_kv = 8;
  s.N_kv = 4096;
  // At most 16 (256 keys each): 8 x 16 = 128 blocks fill 48% of the 264 slots, the fullest.
  EXPECT_EQ(decode_splits(s, 132), 16);
  s.N_kv = 131072;
  EXPECT_EQ(decode_splits(s, 132), 32);  // 8 x 32 = 256 of 264 slots (29: 232, below 95%)
  EXPECT_EQ(decode_split_keys(s, 32), 64 * 64);
  s.N_kv = 100;
  EXPECT_EQ(decode_splits(s, 132), 1);
  s.N_kv = 16384;
  s.B = 64;
  EXPECT_EQ(decode_splits(s, 132), 1);  // 512 blocks: two waves at 97%
  s.B = 16;
  EXPECT_EQ(decode_splits(s, 132), 2);  // 128 blocks: 256 of 264 slots, where 3 took 1.45 waves
  for (std::int64_t n_kv : {64, 65, 1000, 4097, 100000}) {
    s.N_kv = n_kv;
    s.B = 1;
    const int splits = decode_splits(s, 132);
    const std::int64_t keys = decode_split_keys(s, splits);
    EXPECT_EQ(keys % 64, 0);
    EXPECT_GT(n_kv, (splits - 1) * keys) << n_kv;  // the last split has keys
    EXPECT_GE(splits * keys, n_kv) << n_kv;
  }
}

// The split-K/V model: K and V once per K/V head, the parts' O and lse written and read back with
// several splits, nothing of them with one; FLOPs of whole 16 x 64 tiles.
TEST(IoModel, SplitKvReadsKvOncePerKvHead) {
  Shape s = shape(1, 128, false, 1, 32);
  s.H_kv = 8;
  s.N_kv = 4096;
  model::ModelOptions one, sixteen;
  sixteen.kv_splits = 16;
  const auto a = model::io_model(Algorithm::split_kv, s, {16, 64}, 1024, one);
  const auto b = model::io_model(Algorithm::split_kv, s, {16, 64}, 1024, sixteen);
  EXPECT_DOUBLE_EQ(a.bytes(), a.bytes_compulsory);
  const double parts = 16.0 * 32 * 1 * (128 + 1) * 4;
  EXPECT_DOUBLE_EQ(b.bytes(), a.bytes() + 2 * parts);
  EXPECT_DOUBLE_EQ(a.flops_matrix, 8.0 * 64 * 4 * 16 * 64 * 128);  // 8 K/V heads x 64 tiles
  EXPECT_DOUBLE_EQ(a.flops_convention, 4.0 * 32 * 4096 * 128);
}

// A paged cache with each sequence at its own length: K and V once per K/V head over each
// sequence's own rows, the table entries covering them once per K/V head (once in the compulsory
// bytes), the parts per sequence (the splits its keys reach), the convention's pairs per sequence.
TEST(IoModel, PagedRaggedCacheCountsEachSequencesRows) {
  Shape s = shape(1, 128, false, 3, 32);
  s.H_kv = 8;
  s.N_kv = 4096;
  s.page_size = 64;
  s.kv_lengths = {4096, 100, 1000};
  model::ModelOptions four;
  four.kv_splits = 4;  // C = 1024 keys: parts 4, 1, 1
  const auto m = model::io_model(Algorithm::split_kv, s, {16, 64}, 1024, four);
  const double e = 2, d = 128, rows = 4096 + 100 + 1000;
  const double entries = 64 + 2 + 16;  // ceil(L_b / 64)
  auto term = [&](const std::string& name) {
    for (const auto& t : m.terms)
      if (t.name == name) return t.bytes;
    ADD_FAILURE() << "no term " << name;
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(term("K read (once per K/V head)"), 8 * rows * d * e);
  EXPECT_DOUBLE_EQ(term("page table read (once per K/V head)"), 8 * entries * 4);
  EXPECT_DOUBLE_EQ(term("parts' O / l and lse written (fp32, once per split)"),
                   (4 + 1 + 1) * 32 * (d + 1) * 4);
  const double qo = 3 * 32 * d * e;
  EXPECT_DOUBLE_EQ(m.bytes_compulsory, 2 * qo + 3 * 32 * 4 + 2 * 8 * rows * d * e + entries * 4);
  EXPECT_DOUBLE_EQ(m.flops_convention, 4.0 * 32 * d * rows);
  EXPECT_DOUBLE_EQ(m.flops_matrix, 8.0 * (64 + 2 + 16) * 4 * 16 * 64 * d);
  // The asymptotic law over each sequence's own length: the sum of the sequences' own laws, not
  // three times the cache's.
  // Sequence b alone: B = 1, its own length, a contiguous cache.
  auto alone = [&](std::int64_t len) {
    Shape one = s;
    one.B = 1;
    one.N_kv = len;
    one.kv_lengths.clear();
    one.page_size = 0;
    return one;
  };
  double law = 0;
  for (std::int64_t len : s.kv_lengths)
    law += model::io_model(Algorithm::split_kv, alone(len), {16, 64}, 1024, four).bytes_asymptotic;
  EXPECT_GT(law, 0);
  EXPECT_DOUBLE_EQ(m.bytes_asymptotic, law);
  // A library's rows: the sum of each sequence's own model, and the table's entries.
  model::ModelOptions library;
  library.library_tiles = true;
  const auto lib = model::io_model(Algorithm::fa2, s, {128, 128}, 1024, library);
  double bytes = entries * 4 * 8;
  for (std::int64_t len : s.kv_lengths)
    bytes += model::io_model(Algorithm::fa2, alone(len), {128, 128}, 1024, library).bytes();
  EXPECT_DOUBLE_EQ(lib.bytes(), bytes);
  EXPECT_DOUBLE_EQ(lib.flops_convention, m.flops_convention);
  // Causal: each sequence's bottom-right pairs (N = 1: all L_b keys).
  s.causal = true;
  EXPECT_DOUBLE_EQ(model::io_model(Algorithm::split_kv, s, {16, 64}, 1024, four).flops_convention,
                   4.0 * 32 * d * (rows - 3 * 0.5));
}

// The split count from the lengths given: a batch of short sequences and one long one fills the
// GPU with fewer splits than the long one alone would take.
TEST(Decode, SplitsFollowEachSequencesLength) {
  Shape s = shape(1, 128, false, 8, 32);
  s.H_kv = 8;
  s.N_kv = 65536;
  const int full = decode_splits(s, 132);
  s.kv_lengths = {65536, 512, 512, 512, 512, 512, 512, 512};
  const int ragged = decode_splits(s, 132);
  EXPECT_NE(ragged, full);
  const std::int64_t keys = decode_split_keys(s, ragged);
  EXPECT_EQ(keys % 64, 0);
  EXPECT_GE(ragged * keys, 65536);
}

}  // namespace
}  // namespace fa
