// Human-facing writers of the result record: the terminal table (fmt), CSV and Markdown.
#pragma once

#include <string>

#include "bench/result.hpp"

namespace fa::bench {

std::string format_config_header(const ConfigResult& c);
std::string format_table(const ConfigResult& c);  // one configuration
std::string to_csv(const RunResult& r);
std::string to_markdown(const RunResult& r);

}  // namespace fa::bench
