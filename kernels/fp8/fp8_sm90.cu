// fp8 (sm_90a): the launcher. Quantisation: kernels/fp8/fp8_quant.cu (shared with fp8-sm89); the
// attention kernel, its layouts and schedule: kernels/fp8/fp8_sm90_kernel.cuh; its instantiations:
// fp8_sm90_d64.cu, fp8_sm90_d128.cu.
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/launch.hpp"
#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/fp8/fp8_sm90_launch.hpp"

namespace fa {
namespace {

// The compiled tiles: FlashAttention-3's FP8 kernels use 192x160 (d=64) and 128x224 (d=128);
// these are the first step (Bc = 128: one scale block per K/V block).
using Fp8Sm90Tiles = TileList<TileShape<64, 192, 128>, TileShape<128, 128, 128>>;

class Fp8Sm90Launcher final : public fp8::QuantisingLauncher {
 public:
  explicit Fp8Sm90Launcher(const LaunchOptions& o) : QuantisingLauncher(o), fault_(o.fault) {}

  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = quantise_step(s, b, stream); !e.empty()) return e;
    phase_begin("attention (E4M3 wgmma)");
    std::string e = Fp8Sm90Tiles::dispatch("fp8", s.d, t, [&](auto shape) {
      using S = decltype(shape);
      return with_causal(s.causal, [&](auto causal) {
        constexpr bool kCausal = decltype(causal)::value;
        return fault_.any()
                   ? fp8::sm90::launch<S::D, S::BR, S::BC, kCausal, true>(s, b, stream, fault_)
                   : fp8::sm90::launch<S::D, S::BR, S::BC, kCausal, false>(s, b, stream, fault_);
      });
    });
    phase_end();
    return e;
  }

 private:
  FaultInjection fault_;
};

}  // namespace

std::vector<Tiles> fp8_tile_options(int d) {
  return Fp8Sm90Tiles::options(d);
}

std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions& o) {
  return std::make_unique<Fp8Sm90Launcher>(o);
}

std::string fp8_build_status() {
  return "built for sm_90a with CuTe (nvidia-cutlass " FA_CUTLASS_VERSION ")";
}

std::string fp8_shape_rule(const Shape&) {
  return "";
}

}  // namespace fa
