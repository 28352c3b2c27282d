// The softmax's polynomial exponential (kernels/common/fast_exp2.cuh, poly_exp2) on the CPU: the
// same float arithmetic the sm_90a kernels run (fused multiply-adds, round-to-nearest adds), held
// to the error its comment states and to the values the softmax depends on: 2^0 = 1, masked
// scores (-inf) and anything at or below -127 give +0 exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/common/fast_exp2.cuh"

namespace fa {
namespace {

// The largest relative error of poly_exp2 against exp2 in double over [lo, hi], step `step`.
double max_relative_error(double lo, double hi, double step) {
  double worst = 0.0;
  for (double x = lo; x <= hi; x += step) {
    const float xf = static_cast<float>(x);
    const double want = std::exp2(static_cast<double>(xf));
    worst = std::max(worst, std::abs(poly_exp2(xf) / want - 1.0));
  }
  return worst;
}

TEST(PolyExp2, RelativeErrorWithinTheStatedBound) {
  // Every rounding interval's shape repeats per integer: [-4, 0] finely, then the whole range of
  // normal results more coarsely.
  const double fine = max_relative_error(-4.0, 0.0, 1.0 / 4096);
  const double wide = max_relative_error(-125.5, 0.0, 1.0 / 64);
  EXPECT_LE(fine, 1.02e-4);
  EXPECT_LE(wide, 1.02e-4);
  EXPECT_GT(fine, 0.5e-4) << "the error measured here should be the polynomial's own";
}

TEST(PolyExp2, ExactWhereTheSoftmaxNeedsIt) {
  EXPECT_EQ(poly_exp2(0.0f), 1.0f);  // a row's maximum scores weight 1
  EXPECT_EQ(poly_exp2(-1.0f), 0.5f);
  EXPECT_EQ(poly_exp2(-10.0f), std::ldexp(1.0f, -10));
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, -1e30f, -200.0f, -127.0f}) {
    const float y = poly_exp2(x);
    EXPECT_EQ(y, 0.0f) << "x=" << x;
    EXPECT_FALSE(std::signbit(y)) << "x=" << x;
  }
  // Just below the normal range: 0 or a denormal no larger than 2^-126, never garbage.
  for (float x : {-126.9f, -126.5f, -126.2f}) {
    const float y = poly_exp2(x);
    EXPECT_GE(y, 0.0f) << "x=" << x;
    EXPECT_LE(y, std::ldexp(1.0f, -126)) << "x=" << x;
  }
  // Rounding of the exponent's scores past a softmax's maximum by an ulp stays finite and close.
  EXPECT_NEAR(poly_exp2(1e-6f), 1.0f, 2e-4f);
}

// Monotone where it matters for the softmax: a larger score never gets a smaller weight by more
// than the polynomial's error.
TEST(PolyExp2, NearlyMonotone) {
  float prev = poly_exp2(-20.0f);
  for (double x = -20.0; x <= 0.0; x += 1.0 / 1024) {
    const float y = poly_exp2(static_cast<float>(x));
    EXPECT_GE(y, prev * (1.0f - 2.1e-4f)) << "x=" << x;
    prev = y;
  }
}

}  // namespace
}  // namespace fa
