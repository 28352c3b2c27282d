#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {
// fp8: the sm_90a kernel (wgmma, TMA, warp specialisation: kernels/fp8/fp8_sm90_kernel.cuh);
// fp8-sm89: the portable mma.sync kernel (sm_89 and later: kernels/fp8/fp8.cu). Options of both:
// prequantized true: quantise once in prepare(), so run() times the attention kernel alone;
// fp8_scale block | head; o.fault: verification tests only.
// fp8 (sm_90a) also declares option kOptionFp8Schedule, one of kFp8Schedules: which grid and
// epilogue its kernel runs (kernels/fp8/fp8_sm90_launch.hpp, Schedule); its default depends on the
// shape (fp8_default_schedule).
inline constexpr const char* kFp8Schedules[] = {"tiles", "persistent-tma-store",
                                                "dynamic-tma-store"};
// fp8's default schedule for a shape, as measured on the H200. At d=128 (attention alone, fa-bench
// --fp8-schedule all --fp8-prequantized, tests/data/h200-fp8-schedules-pq-2026-11-23.json; the
// figures in docs/perf-notes.md) the persistent grid with the TMA store, +18% / +7% /
// +4% over tiles at N = 1024 / 4096 / 16384 non-causal and +21% / +8% causal at 1024 / 4096, but
// -6% causal at N=16384, where tiles stays. Causal N=8192, measured on 2026-11-27 (H200, one
// call): persistent 1.011x tiles with the pass timed, 1.024x the attention alone
// (tests/data/h200-fp8-d128-schedules-2026-11-27.txt), so persistent up to N=8192.
// At d=64 non-causal the dynamic grid with the TMA store, with the pass timed: 1.10-1.11 / 1.06 /
// 1.03 / 1.01 x tiles at N = 1024 / 2048 / 4096 / 8192, 0.997-0.998 x at 16384 (H200, two runs in
// one call, tests/data/h200-fp8-d64-schedules-{1,2}-2026-11-27.json; docs/perf-notes.md, "fp8's
// default schedules, again"). At d=64 causal tiles, the one grid the 192-row tile has; tiles
// too at any other head dim.
inline OptionValue fp8_default_schedule(const Shape& s) {
  if (s.d == 64 && !s.causal) return std::string("dynamic-tma-store");
  const bool persistent = s.d == 128 && (!s.causal || s.N <= 8192);
  return std::string(persistent ? "persistent-tma-store" : "tiles");
}
std::vector<Tiles> fp8_tile_options(int d);  // default first
std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions& o = {});
std::string fp8_build_status();
std::string fp8_shape_rule(const Shape& s);
// "" when the row's schedule is compiled for its tile (the causal 192-row tile has no persistent
// grid).
std::string fp8_row_rule(const Shape& s, const RowSpec& row);
std::vector<Tiles> fp8_sm89_tile_options(int d);  // default first
std::unique_ptr<Launcher> make_fp8_sm89_launcher(const LaunchOptions& o = {});
}  // namespace fa
