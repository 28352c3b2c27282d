#pragma once

#include <memory>

#include "kernels/registry.hpp"

namespace fa {
Tiles fa2_tiles(int d);
std::unique_ptr<Launcher> make_fa2_launcher();
}  // namespace fa
