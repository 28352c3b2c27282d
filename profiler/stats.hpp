// Robust summary of timing samples: the median and the spread, not one number.
#pragma once

#include <vector>

namespace fa {

struct SampleStats {
  int count = 0;
  double median = 0, q1 = 0, q3 = 0, min = 0, max = 0, mean = 0, stddev = 0;
  // (q3 - q1) / median: the noise figure printed beside every time.
  double relative_iqr() const { return median > 0 ? (q3 - q1) / median : 0; }
};

// Quantiles by linear interpolation between order statistics (type 7, as numpy's default).
SampleStats summarize(std::vector<double> samples);

}  // namespace fa
