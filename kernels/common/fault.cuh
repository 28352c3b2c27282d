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

// Fault slowdown: the calling block's thread 0 spins until the block has run (100 + percent)%
// of the cycles since t0 (clock64() at its start); the block's shared memory stays allocated
// until its last thread exits, so no other block takes its SM slot meanwhile.
__device__ inline void hold_sm_slot(int percent, long long t0) {
  if (percent > 0 && threadIdx.x == 0) {
    const long long now = clock64();
    const long long until = now + (now - t0) * percent / 100;
    while (clock64() < until) {
    }
  }
}

}  // namespace fa
