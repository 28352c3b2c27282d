// Human-facing writers of the result record: the terminal table (fmt), CSV and Markdown.
#pragma once

#include <string>

#include "bench/result.hpp"

namespace fa::bench {

// The row's roofline placement as every writer prints it: "41% dram", "63% compute", with "(c)"
// when placed on the compulsory bytes (no counters); "-" when not placed.
std::string placement_label(const VariantResult& r);
// The verification column: the worst sampled row's error as a fraction of its own tolerance
// ("0.42" passes, "3.10" fails), "-" when not verified.
std::string verification_label(const VariantResult& r);

// The energy column: the counter's mJ per launch ("41.2"), "n/a" when the row's energy was not
// measured (refused, unavailable, error: the reason is printed under the table), "-" when skipped
// or the row was not timed.
std::string energy_label(const VariantResult& r);

// The line under the tables that says what the mJ column is and which energy model the run used.
std::string energy_legend(const RunResult& r);

std::string format_config_header(const ConfigResult& c);
std::string format_table(const ConfigResult& c);  // one configuration
std::string to_csv(const RunResult& r);
std::string to_markdown(const RunResult& r);

}  // namespace fa::bench
