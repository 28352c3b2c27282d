// fa3 when CuTe was missing at configure time (CMakeLists.txt: FA_CUTLASS_INCLUDE): the variant
// stays listed with its tiles (the IO model and --list-variants work), and every row says
// unsupported with the reason.
#include <string>

#include "kernels/fa3/fa3.hpp"

namespace fa {
namespace {

constexpr const char* kNotBuilt =
    "unsupported: fa3 not built (CuTe headers not found at configure time: run scripts/setup.sh "
    "for the nvidia-cutlass wheel, or configure with -DFA_CUTLASS_INCLUDE=<dir>)";

class UnavailableLauncher final : public Launcher {
 public:
  std::string run(const Shape&, const Tiles&, const DeviceBuffers&, StreamHandle) override {
    return kNotBuilt;
  }
};

}  // namespace

// The tiles fa3.cu compiles (fa3_tiles.hpp), so the IO model and --model-only agree.
std::vector<Tiles> fa3_tile_options(int d) {
  if (d == 64) return {fa3::kTileD64, fa3::kTileD64Small};
  if (d == 128) return {fa3::kTileD128};
  if (d == 256) return {fa3::kTileD256};
  return {};
}

std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions&) {
  return std::make_unique<UnavailableLauncher>();
}

std::string fa3_shape_rule(const Shape&) {
  return kNotBuilt;
}

std::string fa3_row_rule(const Shape&, const RowSpec&) {
  return "";
}

std::string fa3_build_status() {
  return kNotBuilt;
}

}  // namespace fa
