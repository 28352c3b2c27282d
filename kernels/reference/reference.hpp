// CPU references: the fp64 attention every GPU variant is checked against, a "plain
// same-precision" attention that sets the error budget, and fp64 tiled versions of the two
// loop orders whose IO the model describes.
//
// All take one head: q [rows][d] (the query rows to compute, with their positions), k, v [N][d].
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/problem.hpp"

namespace fa::reference {

// One head's inputs in double precision, row-major.
struct Head {
  std::int64_t N = 0;
  std::int64_t d = 0;
  std::vector<double> q, k, v;  // each N*d
};

// Exact (fp64) attention output for query row `row` of `head`; out has d entries.
// Also returns the row's natural-log log-sum-exp of the scaled scores.
double attention_row(const Head& head, std::int64_t row, bool causal, double scale, double* out);

// What a plain low-precision computation makes of one row's log-sum-exp.
struct PlainLse {
  double lse = 0;  // its log-sum-exp (natural log) of the rounded scores
  // The size of the lse error that score errors of this row's size cause: with exact
  // probabilities p_j and score errors e_j, sqrt(sum p_j^2 e_j^2) (first order) plus
  // sum p_j e_j^2 / 2 (second order). A per-row yardstick that, unlike one realised error, does
  // not happen to be near zero (docs/accuracy.md).
  double error_scale = 0;
};

// Attention as a plain implementation in `dtype` would compute it (PyTorch-style math in the
// input precision): S = fp32 dot products rounded to dtype, softmax in fp32 with P rounded to
// dtype, O = fp32 sum of P*V rounded to dtype. Its error against attention_row() is the baseline
// of the verification rule (docs/accuracy.md).
PlainLse plain_lowp_row(const Head& head, std::int64_t row, bool causal, double scale, DType dtype,
                        double* out);

// Per-head FP8 scales, 448/amax of Q, K and V.
struct Fp8Scales {
  double q = 1, k = 1, v = 1;
};
Fp8Scales fp8_scales(const Head& head);

// Attention as a plain FP8 implementation computes it: Q, K, V scaled per head (`scales`) and
// rounded to E4M3, fp32 scores and softmax, P rounded to E4M3 as 256 P, fp32 sum of P V, output
// rounded to bf16. No rotation, no finer scales: the baseline of the fp8 rule (docs/accuracy.md).
PlainLse plain_fp8_row(const Head& head, const Fp8Scales& scales, std::int64_t row, bool causal,
                       double scale, double* out);

// Rounds x to the nearest E4M3 value (saturating at 448).
double round_to_e4m3(double x);

// Rounds x to the nearest value representable in dtype (round-to-nearest-even).
double round_to(double x, DType dtype);

// FlashAttention-1 loop order in fp64: K/V blocks outer, Q blocks inner, with O, l, m living
// "in HBM" (full-size arrays read and written back for every (j, i) block pair) and O kept
// normalised after every step. Returns O [N][d].
std::vector<double> tiled_kv_outer(const Head& head, bool causal, double scale, int block_q,
                                   int block_kv);

// FlashAttention-2 loop order in fp64: Q blocks outer, K/V blocks inner, unnormalised O with the
// 1/l rescale deferred to the end. Returns O [N][d]; lse (natural log) per row if non-null.
std::vector<double> tiled_q_outer(const Head& head, bool causal, double scale, int block_q,
                                  int block_kv, std::vector<double>* lse = nullptr);

}  // namespace fa::reference
