// Verification of a variant's output against the fp64 reference, on fresh random inputs, with
// the output poisoned (NaN) before the run. Rule (docs/accuracy.md): every output element
// finite, and max |out - ref| <= 2 x (max error of a plain same-precision implementation on the
// same rows) + 1e-3.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "bench/result.hpp"
#include "kernels/problem.hpp"
#include "kernels/registry.hpp"

namespace fa::bench {

// The fp64 reference on a sample of rows of a sample of heads, computed once per configuration.
class ReferenceSample {
 public:
  // Copies the sampled heads' inputs from the device and computes the reference rows, and the
  // plain-FP8 baseline when `fp8_baseline` (an fp8 row will be checked against it).
  ReferenceSample(const Shape& shape, const DeviceBuffers& inputs, std::uint64_t seed,
                  bool fp8_baseline = true);

  struct Rule {
    AccuracyRule accuracy = AccuracyRule::same_precision;
    bool check_lse = false;   // the variant writes the log-sum-exp: it must match fp64 to 1e-3
    double rmse_bar = 1e-2;   // fp8_rmse: the RMSE bar for these inputs
  };
  // Checks a variant's output now in `o` (and `lse`).
  Verification check(const DeviceBuffers& outputs, const Rule& rule) const;

 private:
  struct HeadSample {
    std::int64_t bh = 0;
    std::vector<std::int64_t> rows;
    std::vector<double> ref;   // rows x d
    std::vector<double> lse;   // rows
  };
  Shape shape_;
  std::vector<HeadSample> heads_;
  double baseline_max_abs_error_ = 0;  // plain same-precision implementation
  double baseline_rmse_ = 0;
  double fp8_baseline_max_abs_error_ = 0;  // plain per-head FP8 implementation (bf16 inputs)
  double fp8_baseline_rmse_ = 0;
};

// RMSE bar of the fp8 rule for an input distribution ("normal" or "outliers").
double fp8_rmse_bar(const std::string& inputs);

// Host value of one stored 16-bit element.
double half_bits_to_double(std::uint16_t bits, DType dtype);

}  // namespace fa::bench
