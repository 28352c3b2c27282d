#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/fa3/fa3_tiles.hpp"
#include "kernels/variant.hpp"

namespace fa {

// fa3 declares option kOptionFa3Schedule (kernels/variant.hpp), one of kFa3Schedules:
//   "full", "no-pingpong", "no-overlap": FA3's ablation (the paper's Table 2, one row each): all of
//     the schedule; consumer warpgroups issue their products without taking turns; each
//     warpgroup waits for Q K^T before its softmax and for P V before the next Q K^T. They run
//     the default grid and epilogue for the shape (fa3::default_plan, fa3_tiles.hpp).
//   "persistent": the static persistent grid (one thread block per SM walks the tiles) with the
//     register epilogue.
inline constexpr const char* kFa3Schedules[] = {"full", "no-pingpong", "no-overlap", "persistent"};
// fa3's default schedule for a shape (OptionDecl::shape_default; a run that names --fa3-schedule
// gets what it names): fa3::default_schedule.
inline OptionValue fa3_default_schedule(const Shape& s) {
  return std::string(fa3::default_schedule(s.d));
}
std::vector<Tiles> fa3_tile_options(int d);  // default first
// The default tile where it depends on more than d (VariantInfo::shape_default_tiles; {0, 0}: the
// first of fa3_tile_options): fa3::shape_default_tiles. Both builds (with and without CuTe) plan
// with it.
inline Tiles fa3_shape_default_tiles(const Shape& s) {
  return fa3::shape_default_tiles(s);
}
std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions& o = {});
// "" when the kernel is built, else why not (CuTe headers missing at configure time): the row's
// unsupported reason.
std::string fa3_shape_rule(const Shape& s);
// "" when the row's tiles have its schedule compiled (192-row tiles: no causal persistent).
std::string fa3_row_rule(const Shape& s, const RowSpec& row);
// One line for --list-variants: built for sm_90a with CuTe from <path>, or not built and why.
std::string fa3_build_status();

}  // namespace fa
