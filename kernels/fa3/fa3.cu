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

// The compiled tile shapes; the first of each head dim is the default, chosen by measurement
// (docs/perf-notes.md, fa3 tiles: at d=64, 192x128 ran 1.03-1.14x 128x128 non-causal and
// 1.01-1.06x causal for N >= 4096; 0.89x causal at N=1024). 192 rows is FlashAttention-3's and
// ThunderKittens' d=64 choice (3 consumer warpgroups, setmaxnreg 32/160); with the mask-free
// main loop its kernels do not spill (nvcc 13.0) except the persistent causal one, not built.
using Fa3Tiles =
    TileList<TileShape<64, 192, 128>, TileShape<64, 128, 128>, TileShape<128, 128, 128>>;

class Fa3Launcher final : public Launcher {
 public:
  Fa3Launcher(fa3::Schedule schedule, const FaultInjection& fault)
      : schedule_(schedule), fault_(fault) {}
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (fault_.any()) {
      if (schedule_ != fa3::Schedule::full)
        return "fa3: fault injection is compiled for schedule=full";
      return launch<true>(Fa3Tiles{}, s, t, b, stream);
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

std::string fa3_row_rule(const Shape& s, const RowSpec& row) {
  const OptionValue* schedule = row.option(kOptionFa3Schedule);
  if (s.causal && row.tiles().block_q == 192 && schedule &&
      *schedule == OptionValue(std::string("persistent")))
    return "unsupported: causal schedule persistent is built for 128-row tiles only (the 192-row "
           "kernel spills); --block-q 128";
  return "";
}

std::string fa3_build_status() {
  return "built for sm_90a with CuTe (nvidia-cutlass " FA_CUTLASS_VERSION ")";
}

}  // namespace fa
