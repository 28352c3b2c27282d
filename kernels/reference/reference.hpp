// CPU references: the fp64 attention every GPU variant is checked against, a "plain
// same-precision" attention that sets the error budget, and fp64 tiled versions of the two
// loop orders whose IO the model describes.
//
// All take one head: q [rows][d] (the query rows to compute, with their positions), k, v
// [N_kv][d].
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/fp8_scheme.hpp"
#include "kernels/problem.hpp"

namespace fa::reference {

// One head's inputs in double precision, row-major: its N query rows and the N_kv key and value
// rows of the K/V head it reads. Causal is aligned bottom-right (kernels/problem.hpp). The
// forward rows (attention_row, plain_lowp_row, fp8_row) take N_kv != N; the FP8 quantisation,
// the tiled orders and the backward take square heads.
struct Head {
  std::int64_t N = 0;
  std::int64_t d = 0;
  std::int64_t N_kv = 0;        // 0: N
  std::vector<double> q, k, v;  // q N*d; k, v N_kv*d

  std::int64_t kv_len() const { return N_kv > 0 ? N_kv : N; }
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

// One head quantised by an FP8 scheme: E4M3 values (after the rotation, if any) and each row's
// descale (amax / 448 of its scale block).
struct Fp8Head {
  std::vector<float> q8, k8, v8;                        // each N*d
  std::vector<double> q_descale, k_descale, v_descale;  // each N
};

// The largest |x| of Q, K and V (Q and K after the rotation when `rotated`), as fp8_quantise
// scales them.
struct Fp8Amax {
  double q = 0, k = 0, v = 0;
};
// One head's: the maximum of these over every head of a tensor is that tensor's amax.
Fp8Amax fp8_amax(const Head& head, bool rotated);
// The larger of a and b, tensor by tensor.
Fp8Amax max(const Fp8Amax& a, const Fp8Amax& b);

// `tensor_amax` null: each scale block's own amax. Given: every row of Q, K and V takes
// tensor_amax's scale instead (the scheme's blocks are ignored), so a caller that passes the
// maximum of fp8_amax over all heads gets per-tensor scales, which an Fp8Scheme cannot say
// because they depend on the other heads (FlashAttention-3's plain FP8 baseline, issue 16).
Fp8Head fp8_quantise(const Head& head, const Fp8Scheme& scheme,
                     const Fp8Amax* tensor_amax = nullptr);

// x <- H S x for one row of d values (d a power of two): the rotation of Fp8Scheme::rotated.
void rotate_hadamard(double* x, std::int64_t d);

// Attention as an FP8 implementation of `scheme` computes it (`quantised` = fp8_quantise(head,
// scheme)): fp32 scores of the E4M3 Q, K times their descales, softmax in fp32 against the row's
// maximum, P rounded to E4M3 as 256 P, fp32 sum of P V times V's descale per key, output rounded
// to bf16. The lse is judged against `head`'s exact scores.
PlainLse fp8_row(const Head& head, const Fp8Head& quantised, std::int64_t row, bool causal,
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

// ---- Backward ----
//
// The gradients of O = softmax(scale Q K^T) V with respect to Q, K, V for an incoming dO:
//   P = softmax(scale Q K^T), dV = P^T dO, dP = dO V^T, D_i = rowsum(dO o O)_i,
//   dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q.
// dQ rows are query rows, dK and dV rows key rows. Every function takes the head's dO [N][d].

// The gradients on sampled rows: dq for `q_rows` (rows x d), dk and dv for `k_rows`.
struct GradRows {
  std::vector<double> dq, dk, dv;
};

// Exact (fp64). A key row's gradient sums over every query row, so the forward (lse and O of all
// N rows, for P and D) is computed first: O(N^2 d) per head. `threads` splits the rows.
GradRows attention_backward_rows(const Head& head, const std::vector<double>& d_o, bool causal,
                                 double scale, const std::vector<std::int64_t>& q_rows,
                                 const std::vector<std::int64_t>& k_rows, int threads = 1);

// The same as a plain implementation in `dtype` computes it (autograd through the plain forward
// of plain_lowp_row, PyTorch-style math): S, P and O rounded to dtype as that forward does;
// dP = fp32 dO V^T rounded to dtype; D = fp32 rowsum(dP o P) (PyTorch's softmax backward);
// dS = fp32 P (dP - D) rounded to dtype; dV = fp32 P^T dO, dQ = fp32 scale dS K, dK = fp32
// scale dS^T Q, each rounded to dtype. Its per-row error against attention_backward_rows() is the
// baseline of the backward rule (docs/accuracy.md).
GradRows plain_lowp_backward_rows(const Head& head, const std::vector<double>& d_o, bool causal,
                                  double scale, DType dtype,
                                  const std::vector<std::int64_t>& q_rows,
                                  const std::vector<std::int64_t>& k_rows, int threads = 1);

// Every row, the textbook way (full N x N matrices, fp64): the self-check of the two above
// (tests/test_reference.cpp) on tiny heads. Returns dq, dk, dv [N][d].
GradRows attention_backward_naive(const Head& head, const std::vector<double>& d_o, bool causal,
                                  double scale);

}  // namespace fa::reference
