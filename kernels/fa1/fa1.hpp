#pragma once

#include <memory>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {
std::vector<Tiles> fa1_tile_options(int d);                                // default first
std::unique_ptr<Launcher> make_fa1_launcher(const LaunchOptions& o = {});  // o.fault: tests only
}  // namespace fa
