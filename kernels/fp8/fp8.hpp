#pragma once

#include <memory>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {
std::vector<Tiles> fp8_tile_options(int d);  // default first
// Option prequantized true: quantise once in prepare(), so run() times the attention kernel alone;
// o.fault: verification tests only.
std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions& o = {});
}  // namespace fa
