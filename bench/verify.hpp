// Verification of a variant's output against the fp64 reference, on fresh random inputs, with
// the outputs and the workspace poisoned before the run. The rule (docs/accuracy.md) judges every
// sampled row on its own, against what a plain computation in the same precision makes of that
// row, so a late causal row (|O| ~ 0.03) is held to its own size, not to the first rows' (|O| ~ 1):
//   same precision  max_c |O - ref| <= 2 x (the plain same-precision row's max error)
//                                      + one ulp of the dtype at the row's largest |ref|
//   fp8             rms_c(O - ref) / rms_c(ref) <= 2 x max(the modelled FP8 row's, the median
//                   row's) + 2^-8, where the model quantises as the variant does (its
//                   Fp8Scheme: rotation, scale blocks), and over all sampled rows <= 1.5 x the
//                   plain per-head FP8 figure + 2^-9
//   lse (all)       |lse - ref| <= 2 x (the plain row's lse error) + 5 x its error scale
//                                  + 1e-5 max(1, |ref|)   (fp8: the modelled row's)
// and every output element finite, and Q, K, V unchanged by the run.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bench/result.hpp"
#include "kernels/problem.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/variant.hpp"

namespace fa::bench {

// The fp64 reference on a sample of rows of a sample of heads, computed once per configuration
// from the inputs as they are before any variant runs.
class ReferenceSample {
 public:
  // Copies the sampled heads' inputs from the device and computes the reference rows (the FP8
  // baselines follow at the first fp8 check that needs them).
  ReferenceSample(const Shape& shape, const DeviceBuffers& inputs, std::uint64_t seed);
  // The same from host inputs: `heads(bh)` gives head bh's inputs (CPU tests of the rule).
  ReferenceSample(const Shape& shape, const std::function<reference::Head(std::int64_t bh)>& heads,
                  std::uint64_t seed);

  struct Rule {
    AccuracyRule accuracy = AccuracyRule::same_precision;
    bool check_lse = false;  // the variant writes the log-sum-exp: judged per row
    Fp8Scheme fp8_scheme{};  // fp8 rows: how the variant quantises (the modelled baseline's)
  };
  // The rule a row of `info` with these option values is judged by.
  static Rule rule_for(const VariantInfo& info, const OptionValues& values);
  // Checks a variant's output now in `o` (and `lse`), and that Q, K, V are unchanged.
  Verification check(const DeviceBuffers& outputs, const Rule& rule) const;

  // The host half of check(): the output at (bh, row, column) and the lse at (bh, row) (null: no
  // lse), with the count of non-finite elements in the whole output.
  using OutputAt = std::function<double(std::int64_t bh, std::int64_t row, std::int64_t col)>;
  using LseAt = std::function<double(std::int64_t bh, std::int64_t row)>;
  Verification judge(const OutputAt& o, const LseAt* lse, std::int64_t nonfinite_count,
                     const Rule& rule) const;

  // Plain FP8 with one scale per whole tensor (the amax of each of Q, K, V over every head, the
  // baseline of FlashAttention-3's Table 3 and of issue 16's outlier bar), as the relative RMSE
  // over the sampled rows. The rule does not use it (its plain baseline is per head, stricter);
  // `heads(bh)` gives head bh's inputs, every head of the shape, as the constructors take them.
  double fp8_per_tensor_relative_rmse(
      const std::function<reference::Head(std::int64_t bh)>& heads) const;
  // The same, reading every head of Q, K, V from the device.
  double fp8_per_tensor_relative_rmse(const DeviceBuffers& inputs) const;

  // The sampled (batch*head) indices and, per head, the sampled rows.
  std::vector<std::int64_t> sampled_heads() const;
  const std::vector<std::int64_t>& sampled_rows(std::int64_t bh) const;

 private:
  struct HeadSample {
    std::int64_t bh = 0;
    std::vector<std::int64_t> rows;
    std::vector<double> ref;        // rows x d
    std::vector<double> lse;        // rows
    std::vector<double> plain_err;  // rows: max_c |plain - ref| (same precision)
    std::vector<double> plain_lse_err, plain_lse_scale;  // rows
    std::vector<std::uint16_t> q_bits, k_bits, v_bits;   // the inputs, to check they are unchanged
  };
  // What an FP8 computation of one scheme (reference::fp8_row) makes of the sampled rows.
  struct Fp8Baseline {
    std::vector<std::vector<double>> rel;        // [head][row]: rms_c(FP8 - ref) / rms_c(ref)
    std::vector<std::vector<double>> lse_err;    // [head][row]
    std::vector<std::vector<double>> lse_scale;  // [head][row]
    double max_abs_error = 0, rmse = 0, relative_rmse = 0;
    double typical_row_relative = 0;  // median over the sampled rows of rel
    double typical_lse_error = 0;     // median over the sampled rows of lse_err
  };
  void build(const std::function<reference::Head(std::int64_t)>& heads, std::uint64_t seed);
  reference::Head head_inputs(const HeadSample& hs) const;
  // The baseline of `scheme`, computed at its first use (every fp8 check needs the plain one and
  // its variant's), then kept.
  const Fp8Baseline& fp8_baseline(const Fp8Scheme& scheme) const;
  // tensor_amax: per-tensor scales (reference::fp8_quantise); null: the scheme's blocks.
  Fp8Baseline compute_fp8_baseline(const Fp8Scheme& scheme,
                                   const reference::Fp8Amax* tensor_amax = nullptr) const;
  Shape shape_;
  std::vector<std::int32_t> page_table_;  // a paged cache's table, as the device had it
  std::vector<HeadSample> heads_;
  double baseline_max_abs_error_ = 0, baseline_rmse_ = 0;  // plain same-precision
  mutable std::mutex fp8_mutex_;
  mutable std::map<Fp8Scheme, Fp8Baseline> fp8_baselines_;
};

// The backward pass's check (docs/accuracy.md, "Backward"): dQ on sampled query rows, dK and dV
// on sampled key rows (the same row set), each row against fp64 with the same-precision rule:
//   max_c |G - ref| <= 2 x (the plain same-precision backward's max error on that row of G)
//                      + one ulp of the dtype at the row's largest |ref|
// (the plain backward: reference::plain_lowp_backward_rows), every element of dQ, dK, dV finite,
// and Q, K, V, O, dO and the lse unchanged by the run.
class BackwardReferenceSample {
 public:
  struct HeadInputs {
    reference::Head head;     // Q, K, V
    std::vector<double> d_o;  // dO [N][d]
    std::vector<double> o;    // O and lse as the backward is given them (checked unchanged)
    std::vector<float> lse;
  };
  // From the device buffers (Q, K, V, O, dO, lse) before any backward runs.
  BackwardReferenceSample(const Shape& shape, const BackwardBuffers& inputs, std::uint64_t seed);
  // From host inputs (CPU tests of the rule).
  BackwardReferenceSample(const Shape& shape,
                          const std::function<HeadInputs(std::int64_t bh)>& heads,
                          std::uint64_t seed);

  enum Gradient { dq = 0, dk = 1, dv = 2 };
  static const char* name(Gradient g);
  // Checks the dQ, dK, dV now in `outputs`, and that the inputs are unchanged. `worst` (if
  // non-null) names the gradient of the worst row.
  Verification check(const BackwardBuffers& outputs, std::string* worst = nullptr) const;
  // The host half: the gradient g at (bh, row, col), and the non-finite count of all three.
  using GradAt =
      std::function<double(Gradient g, std::int64_t bh, std::int64_t row, std::int64_t col)>;
  Verification judge(const GradAt& at, std::int64_t nonfinite, std::string* worst = nullptr) const;

  std::vector<std::int64_t> sampled_heads() const;
  const std::vector<std::int64_t>& sampled_rows(std::int64_t bh) const;
  // The heads sampled for a backward check: 4, or the first and last only when one head's
  // reference costs more than 2^34 multiply-adds (N^2 d: N > 16384 at d = 64, N > 11585 at 128).
  static int max_heads(const Shape& shape);

 private:
  struct HeadSample {
    std::int64_t bh = 0;
    std::vector<std::int64_t> rows;
    reference::GradRows ref;
    std::array<std::vector<double>, 3> plain_err;  // per gradient, per row
    std::vector<std::uint16_t> q_bits, k_bits, v_bits, o_bits, do_bits;
    std::vector<float> lse;
  };
  void build(const std::function<HeadInputs(std::int64_t)>& heads, std::uint64_t seed);
  const std::vector<double>& ref_of(const HeadSample& hs, Gradient g) const;
  Shape shape_;
  std::vector<HeadSample> heads_;
  double baseline_max_abs_error_ = 0, baseline_rmse_ = 0;
};

// Rows checked in a head of N rows: all when N <= 48; otherwise the first and last rows, the
// first and last row of every 64-row block (a spread of 256 blocks past N = 16384: tiles of
// 64 and 128 rows end there, and so do causal diagonals), the first rows of a partial last block
// of 64 or 128 rows, and random rows up to 48.
std::vector<std::int64_t> verification_rows(std::int64_t N, std::uint64_t seed);

// The backward rule's parts (docs/accuracy.md "Backward"). The typical row: the median over a
// head's sampled rows of the plain backward's row error relative to the row's largest |ref|.
double typical_relative_error(const std::vector<double>& plain_err,
                              const std::vector<double>& row_ref_max);
// A row's tolerance: 2 x the larger of the plain backward's error on that row and the typical
// row's relative error at this row's scale, plus one ulp at the larger of the row's and the
// head's scale (ulp_floor).
double backward_row_tolerance(double plain_err, double row_ref_max, double typical_relative,
                              double ulp_floor, DType dtype);

// One ulp of `dtype` at magnitude x (x > 0).
double ulp_of(double x, DType dtype);

// Host value of one stored 16-bit element.
double half_bits_to_double(std::uint16_t bits, DType dtype);

// The backward row's one-line reason ("" when it passed); `worst` names the worst gradient.
std::string backward_failure_reason(const Verification& v, const std::string& worst);

// The row's one-line reason when verification failed ("" when it passed).
std::string verification_failure_reason(const Verification& v);

}  // namespace fa::bench
