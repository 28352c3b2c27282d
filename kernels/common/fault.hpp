// Deliberate faults, injected into a variant's launch by the verification tests (and by nothing
// else: the CLI has no way to set them). Each one is a bug a real kernel could have; the
// verification rule (bench/verify.cpp, docs/accuracy.md) must fail every one of them.
//
// Kernel-side faults reach the device code as one small struct in the kernel's parameters and
// are compiled only into a separate instantiation (template flag FAULTS), so the measured
// kernels are the same code with or without this file.
#pragma once

#include <cstdint>

namespace fa {

struct FaultInjection {
  // K/V block (in units of the variant's Bc; standard: 64 keys) whose contribution is dropped
  // from every row that would see it; -1: none.
  int drop_kv_block = -1;
  // K/V block whose V tile is replaced by the next block's (the previous one for the last
  // block); -1: none. Not for standard (cuBLAS reads V).
  int wrong_v_block = -1;
  // Causal mask keeps keys <= row + mask_shift (0 is right; +1 lets one future key in).
  int mask_shift = 0;
  // Multiplies the softmax scale (1.05: a wrong scale).
  float scale_factor = 1.0f;
  // exp taken where exp2 is meant (the scores, kept in log2 units, are exponentiated in the wrong
  // base): the effect is a scale multiplied by log2(e).
  bool natural_exp = false;
  // The last partial query block (N % Br rows; the last full one when Br divides N) is never
  // written.
  bool skip_last_query_block = false;
  // fa3 and fp8 on sm_90a only: O keeps its scale when a block moves the row max (l is rescaled,
  // O is not). fa3: the lazy rescale's skip (kRescaleThreshold, kernels/fa3/fa3_tiles.hpp)
  // taken where the update is due. Harmless on the first block (O is still 0); later, with the
  // threshold at 8, only a max that grows by more than 2^8 after O has taken weight shows it, which
  // the outlier inputs make and normal ones rarely do (tests/test_kernels_gpu.cpp:
  // Fa3.LazyRescaleFaultIsCaughtOnOutliers). fp8: its eager rescale (alpha and the V descale ratio)
  // skipped after every block (Fp8.SkippedRescaleFaultIsCaught).
  bool o_rescale_skipped = false;
  // fa2's forward only, and no wrong output: each thread block keeps its SM slot this many percent
  // of its own run time longer, so the timing tests have a known regression to catch
  // (tests/test_faults_gpu.cpp, Fa2Slowdown). The kernel slows by less than the hold where blocks
  // share an SM (the others run on meanwhile). Not among the verification faults: the output
  // stays right. One byte, in the struct's padding: the kernels' parameter layouts stay as they
  // were.
  std::uint8_t slowdown_percent = 0;
  // fa3's backward: D = rowsum(dO o O) multiplied by this (1.05: a wrong D).
  float delta_factor = 1.0f;
  // fa3's backward: the query block whose dQ contributions are lost (never added to the
  // accumulator) by every K/V block; -1: none.
  int drop_dq_block = -1;
  // Grouped-query heads: the heads of a group interleaved, where K/V head bh / g is meant (a
  // layout mistaken for another). fa3: query head bh reads K/V head bh % (B H_kv); decode: its
  // block of K/V head k takes the query heads h with h % H_kv = k. Harmless when g = 1.
  bool kv_head_interleaved = false;
  // decode: the split whose part the combine leaves out; -1: none.
  int drop_split = -1;
  // decode on a paged cache: each key read through the page table's next entry (wrapping at the
  // sequence's last), an index off by one.
  bool page_off_by_one = false;
  // decode on lengths per sequence: every sequence read to the cache's N_kv (its rows past L_b
  // taken as keys).
  bool kv_lengths_ignored = false;

  bool in_kernel() const {
    return drop_kv_block >= 0 || wrong_v_block >= 0 || mask_shift != 0 || o_rescale_skipped ||
           slowdown_percent > 0 || delta_factor != 1.0f || drop_dq_block >= 0 ||
           kv_head_interleaved || drop_split >= 0 || page_off_by_one || kv_lengths_ignored;
  }
  bool any() const {
    return in_kernel() || scale_factor != 1.0f || natural_exp || skip_last_query_block;
  }
  // The factor the launcher applies to the softmax scale.
  float scale_multiplier() const {
    return scale_factor * (natural_exp ? 1.4426950408889634f : 1.0f);
  }
};

// Query blocks a launcher puts in its grid: all of them, or one fewer (skip_last_query_block).
inline std::int64_t launched_query_blocks(std::int64_t N, std::int64_t block_q,
                                          const FaultInjection& f) {
  const std::int64_t blocks = (N + block_q - 1) / block_q;
  return f.skip_last_query_block && blocks > 0 ? blocks - 1 : blocks;
}

}  // namespace fa
