// fp8 (the sm_90a wgmma kernel) when CuTe was missing at configure time (CMakeLists.txt:
// FA_CUTLASS_INCLUDE): listed with its tiles, every row unsupported with the reason; fp8-sm89
// (the portable mma.sync kernel) is built regardless.
#include <string>

#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_tuning.hpp"

namespace fa {
namespace {

constexpr const char* kNotBuilt =
    "unsupported: fp8 (sm_90a) not built (CuTe headers not found at configure time: run "
    "scripts/setup.sh for the nvidia-cutlass wheel, or configure with "
    "-DFA_CUTLASS_INCLUDE=<dir>); fp8-sm89 runs the portable kernel";

class UnavailableLauncher final : public Launcher {
 public:
  std::string run(const Shape&, const Tiles&, const DeviceBuffers&, StreamHandle) override {
    return kNotBuilt;
  }
};

}  // namespace

// The tiles fp8_sm90.cu compiles (the IO model uses them).
std::vector<Tiles> fp8_tile_options(int d) {
  if (d == 64) return {fp8::tuning::kSm90TileD64};
  if (d == 128) return {fp8::tuning::kSm90TileD128};
  return {};
}

std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions&) {
  return std::make_unique<UnavailableLauncher>();
}

std::string fp8_build_status() {
  return kNotBuilt;
}

std::string fp8_shape_rule(const Shape&) {
  return kNotBuilt;
}

std::string fp8_row_rule(const Shape&, const RowSpec&) {
  return "";  // fp8_shape_rule already says unsupported
}

}  // namespace fa
