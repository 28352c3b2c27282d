// fp8's tuning numbers in one place: the quantisation pass (fp8_quant.cu), the sm_90a attention
// kernel (fp8_sm90_kernel.cuh, its launcher fp8_sm90.cu) and the portable sm_89 kernel (fp8.cu).
// Each is the measured choice (docs/performance.md); changing one is an A/B, not a build option.
// Host-visible (pure C++): the registry plans with the tiles and default schedules below.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/variant.hpp"

namespace fa::fp8::tuning {

// ---- the quantisation pass (fp8_quant.cu, pipelined form) ------------------------------------

// Threads per block: 256 measured faster than 512 at both head dims (two blocks per SM either way).
inline constexpr int kQuantThreads = 256;
// Rows per work item at d=64 (d=128: one 128-row K/V scale block): 256 rows give each item 32 KB
// of bf16, as d=128's have, so the amax barrier and fixed work are paid per 32 KB.
inline constexpr int kQuantRowsD64 = 256;
// cp.async ring stages: at d=64 three of 32 KB, so two blocks fill sm_90's 227 KB (four left one
// block per SM, slower); at d=128 two (three measured no faster).
inline constexpr int kQuantStagesD64 = 3;
inline constexpr int kQuantStagesD128 = 2;
// The most blocks per SM the register cap aims at (fewer where shared memory allows fewer).
inline constexpr int kQuantMostBlocksD64 = 3;
inline constexpr int kQuantMostBlocksD128 = 2;
// Size of the Walsh-Hadamard factor multiplied on the tensor cores (the rest by butterflies
// across blocks in registers): 32 was the fastest of 16, 32, 64 and 128 at both head dims.
inline constexpr int kQuantMmaBlock = 32;

// ---- the sm_90a attention kernel (fp8_sm90_kernel.cuh) ---------------------------------------

// Tiles (query rows x keys): Bc = 128 is one K/V scale block. d=64 takes 3 consumer warpgroups
// (192 rows) as fa3's d=64 tile; d=128 two.
inline constexpr Tiles kSm90TileD64{192, 128};
inline constexpr Tiles kSm90TileD128{128, 128};
// K/V ring stages: three were no faster than two.
inline constexpr int kSm90Stages = 2;
// setmaxnreg: the producer warpgroup gives its registers to the consumers (FlashAttention-3's
// 24/240 with two consumer warpgroups, 32/160 with three).
constexpr int sm90_producer_regs(int consumer_warpgroups) {
  return consumer_warpgroups == 2 ? 24 : 32;
}
constexpr int sm90_consumer_regs(int consumer_warpgroups) {
  return consumer_warpgroups == 2 ? 240 : 160;
}
// The thread's softmax row max and row sum as trees instead of chains: at d=128 they cut the
// fixed-latency stalls; at d=64 (160 registers) their temporaries made the causal kernels spill.
constexpr bool sm90_softmax_tree(int d) {
  return d == 128;
}
// Persistent grids: the share of the L2 the K and V of a section's heads may take (fa3's).
inline constexpr std::int64_t kSm90L2ShareCausal = 2;
inline constexpr std::int64_t kSm90L2ShareNonCausal = 16;

// The default schedule (option fp8_schedule) per shape, the fastest measured on the H200: the
// persistent grid with the TMA store at d=128 (causal up to N = 8192; tiles beyond), the dynamic
// grid with the TMA store at d=64 non-causal, tiles elsewhere (the causal 192-row tile has no
// persistent build).
inline constexpr std::int64_t kSm90PersistentCausalMaxN = 8192;
inline const char* sm90_default_schedule(const Shape& s) {
  if (s.d == 64 && !s.causal) return "dynamic-tma-store";
  const bool persistent = s.d == 128 && (!s.causal || s.N <= kSm90PersistentCausalMaxN);
  return persistent ? "persistent-tma-store" : "tiles";
}

// ---- the portable kernel (fp8.cu, fp8-sm89) ---------------------------------------------------

// Tiles: 128 query rows (8 warps of 16) and Bc = 128, one K/V scale block.
inline constexpr Tiles kSm89TileD64{128, 128};
inline constexpr Tiles kSm89TileD128{128, 128};

}  // namespace fa::fp8::tuning
