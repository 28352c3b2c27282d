// The current UTC time, formatted: result files and the ceilings cache stamp themselves with it.
#pragma once

#include <string>

namespace fa {

std::string utc_time(const char* strftime_format);

}  // namespace fa
