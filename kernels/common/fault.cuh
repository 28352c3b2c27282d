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

// The K/V head that query head bh reads (`heads` = B H): bh / group, or interleaved
// (FaultInjection::kv_head_interleaved).
__device__ inline int faulty_kv_head(const FaultInjection& f, int bh, int group, int heads) {
  return f.kv_head_interleaved ? bh % (heads / group) : bh / group;
}

// Fault slowdown: note_block_start() at a block's start, hold_sm_slot() at its end, where thread 0
// spins until the block has run (100 + percent)% of the cycles since the start; the block's
// shared memory stays allocated until its last thread exits, so no other block takes its SM slot
// meanwhile. The start is kept in kFaultSmemBytes of shared memory past the kernel's own (the
// FAULTS instantiation's launch adds them), not in a register live across the whole kernel.
inline constexpr int kFaultSmemBytes = 8;
__device__ inline void note_block_start(unsigned char* slot) {
  if (threadIdx.x == 0) *reinterpret_cast<long long*>(slot) = clock64();
}
__device__ inline void hold_sm_slot(int percent, const unsigned char* slot) {
  if (percent > 0 && threadIdx.x == 0) {
    const long long now = clock64();
    const long long until = now + (now - *reinterpret_cast<const long long*>(slot)) * percent / 100;
    while (clock64() < until) {
    }
  }
}

}  // namespace fa
