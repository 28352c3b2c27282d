// Device side of the verification tests' fault injection (kernels/common/fault.hpp).
#pragma once

#include <cstdint>

#include "kernels/common/fault.hpp"

namespace fa {

// First key row of the V tile loaded for K/V block j: block j's own, or, for the faulty block,
// the next block's (the previous one's when it is the last).
template <int BC>
__device__ inline std::int64_t faulty_v_row(const FaultInjection& f, int j, int total_kv) {
  if (j != f.wrong_v_block) return static_cast<std::int64_t>(j) * BC;
  const int other = j + 1 < total_kv ? j + 1 : (j > 0 ? j - 1 : j);
  return static_cast<std::int64_t>(other) * BC;
}

}  // namespace fa
