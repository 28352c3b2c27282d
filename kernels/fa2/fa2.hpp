#pragma once

#include <memory>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {
std::vector<Tiles> fa2_tile_options(int d);  // default first
// Option block_order "heads": consecutive thread blocks walk heads instead of the query blocks of
// one head; o.fault: verification tests only.
std::unique_ptr<Launcher> make_fa2_launcher(const LaunchOptions& o = {});
}  // namespace fa
