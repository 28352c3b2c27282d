// Built when the cuDNN peer cannot be compiled (CMakeLists.txt: cudnn_graph.h or the
// cudnn-frontend headers not found): every cudnn row says unsupported, with the reason CMake
// gave (FA_CUDNN_MISSING), and the other variants run.
#include "kernels/cudnn/cudnn.hpp"

#ifndef FA_CUDNN_MISSING
#define FA_CUDNN_MISSING "fa-bench was built without the cuDNN peer"
#endif

namespace fa {
namespace {

class UnavailableLauncher final : public Launcher {
 public:
  std::string run(const Shape&, const Tiles&, const DeviceBuffers&, StreamHandle) override {
    return cudnn_library_status();
  }
  std::string run_backward(const Shape&, const Tiles&, const BackwardBuffers&,
                           StreamHandle) override {
    return cudnn_library_status();
  }
};

}  // namespace

std::unique_ptr<Launcher> make_cudnn_launcher(const LaunchOptions&, bool) {
  return std::make_unique<UnavailableLauncher>();
}

std::string cudnn_shape_rule(const Shape&) {
  return "unsupported: " + cudnn_library_status();
}

std::string cudnn_library_status() {
  return "cuDNN peer not built: " FA_CUDNN_MISSING;
}

std::size_t cudnn_plans_built() {
  return 0;
}

}  // namespace fa
