#pragma once

#include <memory>
#include <vector>

#include "kernels/registry.hpp"

namespace fa {
std::vector<Tiles> fa2_tile_options(int d);  // default first
// heads_interleaved: consecutive thread blocks walk heads instead of the query blocks of one head.
std::unique_ptr<Launcher> make_fa2_launcher(bool heads_interleaved = false);
}  // namespace fa
