#include "profiler/utc_time.hpp"

#include <ctime>

namespace fa {

std::string utc_time(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[128];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace fa
