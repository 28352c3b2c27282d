#pragma once

#include <memory>
#include <vector>

#include "kernels/registry.hpp"

namespace fa {
std::vector<Tiles> fa2_tile_options(int d);  // default first
// o.fa2_heads_interleaved: consecutive thread blocks walk heads instead of the query blocks of
// one head; o.fault: verification tests only.
std::unique_ptr<Launcher> make_fa2_launcher(const LaunchOptions& o = {});
}  // namespace fa
