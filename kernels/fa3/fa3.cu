// fa3: the launcher and the variant's entry points. The kernel, its algorithm and its schedule:
// kernels/fa3/fa3_kernel.cuh; its instantiations, one head dimension per file: fa3_d64.cu,
// fa3_d128.cu (nvcc compiles one file on one core; the 40 kernels in one file took 4 minutes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/common/launch.hpp"
#include "kernels/fa3/fa3.hpp"
#include "kernels/fa3/fa3_launch.hpp"

namespace fa {
namespace {

// The compiled tile shapes; the first of each head dim is the default. 192x128 at d=64 is
// FlashAttention-3's and ThunderKittens' d=64 row count (3 consumer warpgroups, setmaxnreg
// 32/160); with the mask-free main loop its kernels no longer spill (nvcc 13.0), except the
// fault and persistent-causal builds, which it lacks.
using Fa3Tiles =
    TileList<TileShape<64, 128, 128>, TileShape<64, 192, 128>, TileShape<128, 128, 128>>;
// The fault-injection build (verification tests): the 128-row tiles only.
using Fa3FaultTiles = TileList<TileShape<64, 128, 128>, TileShape<128, 128, 128>>;

class Fa3Launcher final : public Launcher {
 public:
  Fa3Launcher(fa3::Schedule schedule, const FaultInjection& fault)
      : schedule_(schedule), fault_(fault) {}
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (fault_.any()) {
      if (schedule_ != fa3::Schedule::full)
        return "fa3: fault injection is compiled for schedule=full";
      return launch<true>(Fa3FaultTiles{}, s, t, b, stream);
    }
    return launch<false>(Fa3Tiles{}, s, t, b, stream);
  }

 private:
  template <bool FAULTS, typename List>
  std::string launch(List, const Shape& s, const Tiles& t, const DeviceBuffers& b,
                     cudaStream_t stream) const {
    return dispatch_tiles<List>("fa3", s, t, [&](auto shape, auto causal, auto type) {
      using S = decltype(shape);
      return fa3::launch<S::D, S::BR, S::BC, decltype(causal)::value, typename decltype(type)::type,
                         FAULTS>(s, b, stream, schedule_, fault_);
    });
  }

  fa3::Schedule schedule_;
  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fa3_tile_options(int d) {
  return Fa3Tiles::options(d);
}

std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions& o) {
  fa3::Schedule schedule = fa3::Schedule::full;
  if (o.is(kOptionFa3Schedule, std::string("no-pingpong"))) schedule = fa3::Schedule::no_pingpong;
  if (o.is(kOptionFa3Schedule, std::string("no-overlap"))) schedule = fa3::Schedule::no_overlap;
  if (o.is(kOptionFa3Schedule, std::string("persistent"))) schedule = fa3::Schedule::persistent;
  return std::make_unique<Fa3Launcher>(schedule, o.fault);
}

std::string fa3_shape_rule(const Shape&) {
  return "";
}

std::string fa3_build_status() {
  return "built for sm_90a with CuTe (nvidia-cutlass " FA_CUTLASS_VERSION ")";
}

}  // namespace fa
