#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

// fa3 declares option kOptionFa3Schedule (kernels/variant.hpp): which parts of FA3's schedule run
// (the ablation of the paper's Table 2, one row each): "full", "no-pingpong" (consumer warpgroups
// issue their products without taking turns), "no-overlap" (each warpgroup waits for Q K^T before
// its softmax and for P V before the next Q K^T).
std::vector<Tiles> fa3_tile_options(int d);  // default first
std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions& o = {});
// "" when the kernel is built, else why not (CuTe headers missing at configure time): the row's
// unsupported reason.
std::string fa3_shape_rule(const Shape& s);
// "" when the row's tiles have its schedule compiled (192-row tiles: no causal persistent).
std::string fa3_row_rule(const Shape& s, const RowSpec& row);
// One line for --list-variants: built for sm_90a with CuTe from <path>, or not built and why.
std::string fa3_build_status();

}  // namespace fa
