// Built when cudnn_graph.h was not found at configure time: the cudnn row says why.
#include "kernels/cudnn/cudnn.hpp"

namespace fa {
namespace {

class UnavailableLauncher final : public Launcher {
 public:
  std::string run(const Shape&, const Tiles&, const DeviceBuffers&, cudaStream_t) override {
    return cudnn_library_status();
  }
};

}  // namespace

std::unique_ptr<Launcher> make_cudnn_launcher(bool) {
  return std::make_unique<UnavailableLauncher>();
}

std::string cudnn_shape_rule(const Shape&) {
  return "";
}

std::string cudnn_library_status() {
  return "cuDNN not available: fa-bench was built without cudnn_graph.h (install cuDNN 9 headers "
         "and rebuild)";
}

}  // namespace fa
