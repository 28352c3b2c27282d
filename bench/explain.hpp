// A short reading of one configuration's counters, printed under its table: what the measured
// bytes say about each variant's IO pattern (docs/io-model.md has the long form). Generated
// from the numbers only: no sentence is written without the figure that supports it.
#pragma once

#include <string>

#include "bench/result.hpp"

namespace fa::bench {

std::string explain_counters(const ConfigResult& config);

}  // namespace fa::bench
