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
std::vector<Tiles> fa3_tile_options(int d);  // default first
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
