#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

// fa3 declares option kOptionFa3Schedule (kernels/variant.hpp), one of kFa3Schedules:
//   "full", "no-pingpong", "no-overlap": FA3's ablation (the paper's Table 2, one row each): all of
//     the schedule; consumer warpgroups issue their products without taking turns; each
//     warpgroup waits for Q K^T before its softmax and for P V before the next Q K^T. They run
//     the default grid and epilogue for (d, causal) (fa3::default_plan, fa3_launch.hpp).
//   the alternatives, which pin the grid (tiles, persistent: a static persistent grid, dynamic:
//     a persistent grid fed by an atomic tile counter) and the epilogue (registers, or
//     tma-store: through shared memory and a TMA store): "persistent", "tma-store",
//     "persistent-tma-store", "dynamic", "dynamic-tma-store". scripts/fa3_tune.sh measures each
//     against the default and cudnn. The four new ones are compiled for bf16 only.
inline constexpr const char* kFa3Schedules[] = {
    "full",      "no-pingpong",          "no-overlap", "persistent",
    "tma-store", "persistent-tma-store", "dynamic",    "dynamic-tma-store"};
// fa3's default schedule for a shape (OptionDecl::shape_default; a run that names --fa3-schedule
// gets what it names): no-pingpong at d=64, full at d=128. With the lazy rescale
// (FA3_RESCALE_THRESHOLD 8) the d=64 softmax is short enough that the warpgroups' turns cost more
// than they hide: no-pingpong ran 1.006-1.044x of full on all 10 d=64 rows (N 1024-16384, causal
// both; H100, tests/data/h100-fa3-2026-11-25.json); at d=128 full stays (no-pingpong 0.98-1.02x of
// it); at d=256 full too (no-pingpong 0.98-1.01x of it on 10 rows, within noise; not tuned).
inline OptionValue fa3_default_schedule(const Shape& s) {
  return std::string(s.d == 64 ? "no-pingpong" : "full");
}
std::vector<Tiles> fa3_tile_options(int d);  // default first
// The default tile where it depends on more than d (VariantInfo::shape_default_tiles): 128x128 for
// d=64 causal at N <= 2048; {0, 0} elsewhere (the first of fa3_tile_options). Both builds (with
// and without CuTe) plan with it.
inline Tiles fa3_shape_default_tiles(const Shape& s) {
  // d=64 causal at N <= 2048: 128x128 on the dynamic grid (default_plan) ran 276.9 and 338.7
  // TFLOP/s at N = 1024 and 2048 against 219.7 and 324.8 for 192x128 on the tile grid (the
  // default there), 1.26x and 1.04x; at N = 4096 the two tie (380.8, 387.2) and 192 rows win
  // above (451.1 against 412.4 at 8192). H200, same run, docs/perf-notes.md "Fourth step"
  // (tests/data/h200-fa3-tune-2026-11-23.json).
  if (s.d == 64 && s.causal && s.N <= 2048) return Tiles{128, 128};
  return Tiles{};
}
// Whether the alternatives (the four schedules above and the 128x176 tile) are compiled (CMake
// FA_FA3_ALTERNATIVES; scripts/fa3_tune.sh turns it on).
bool fa3_alternatives_built();
std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions& o = {});
// "" when the kernel is built, else why not (CuTe headers missing at configure time): the row's
// unsupported reason.
std::string fa3_shape_rule(const Shape& s);
// "" when the row's tiles have its schedule compiled (192-row tiles: no causal persistent).
std::string fa3_row_rule(const Shape& s, const RowSpec& row);
// One line for --list-variants: built for sm_90a with CuTe from <path>, or not built and why.
std::string fa3_build_status();

}  // namespace fa
