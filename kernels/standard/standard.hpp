#pragma once

#include <memory>

#include "kernels/variant.hpp"

namespace fa {
std::unique_ptr<Launcher> make_standard_launcher(
    const LaunchOptions& o = {});  // o.fault: tests only
}
