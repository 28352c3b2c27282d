// A short reading of one configuration's counters, printed under its table: what the measured
// bytes say about each variant's IO pattern (docs/io-model.md has the long form). Generated
// from the numbers only: no sentence is written without the figure that supports it.
#pragma once

#include <map>
#include <string>

#include "bench/result.hpp"

namespace fa::bench {

std::string explain_counters(const ConfigResult& config);

// "; stalls per issued instruction: wait 2.21, short_scoreboard 0.72, ..." (the largest three)
// when a row's counters hold stall reasons (--stall-reasons), else "".
std::string stall_summary(const std::map<std::string, double>& values);

}  // namespace fa::bench
