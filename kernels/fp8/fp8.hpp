#pragma once

#include <memory>
#include <vector>

#include "kernels/registry.hpp"

namespace fa {
std::vector<Tiles> fp8_tile_options(int d);  // default first
// prequantized: quantise once in prepare(), so run() times the attention kernel alone.
std::unique_ptr<Launcher> make_fp8_launcher(bool prequantized);
}  // namespace fa
