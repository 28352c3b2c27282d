// Run planning: the configurations a run covers, in the order they run.
#pragma once

#include <vector>

#include "bench/options.hpp"
#include "kernels/problem.hpp"

namespace fa::bench {

// N outer, then d, then causal (off before on): a sweep's rows come out grouped by size.
std::vector<Shape> make_plan(const Options& options);

}  // namespace fa::bench
