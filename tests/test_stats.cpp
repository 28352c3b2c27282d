#include <gtest/gtest.h>

#include "profiler/stats.hpp"

TEST(Stats, QuantilesInterpolateLikeNumpy) {
  // numpy.percentile([1,2,3,4,10], [25,50,75]) = [2, 3, 4]
  const auto s = fa::summarize({10, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 4);
  EXPECT_NEAR(s.stddev, 3.5355339059327378, 1e-12);
  // numpy.percentile([1,2,3,4], 25) = 1.75
  EXPECT_DOUBLE_EQ(fa::summarize({4, 3, 2, 1}).q1, 1.75);
  EXPECT_EQ(fa::summarize({}).count, 0);
}
