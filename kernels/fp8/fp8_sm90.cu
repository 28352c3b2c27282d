// fp8 (sm_90a): the launcher. Quantisation: kernels/fp8/fp8_quant.cu (shared with fp8-sm89); the
// attention kernel, its layouts and schedule: kernels/fp8/fp8_sm90_kernel.cuh; its instantiations:
// fp8_sm90_d64.cu, fp8_sm90_d128.cu.
#include <iterator>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kernels/common/launch.hpp"
#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/fp8/fp8_sm90_launch.hpp"
#include "kernels/fp8/fp8_tuning.hpp"

namespace fa {
namespace {

// The compiled tiles, one per head dim (fp8_tuning.hpp).
using fp8::tuning::kSm90TileD128;
using fp8::tuning::kSm90TileD64;
using Fp8Sm90Tiles = TileList<TileShape<64, kSm90TileD64.block_q, kSm90TileD64.block_kv>,
                              TileShape<128, kSm90TileD128.block_q, kSm90TileD128.block_kv>>;

// The schedule an option value names (kFp8Schedules, in the order of fp8::sm90::Schedule); the
// default for a value that names none.
fp8::sm90::Schedule schedule_named(const std::string& name) {
  for (std::size_t i = 0; i < std::size(kFp8Schedules); ++i) {
    if (name == kFp8Schedules[i]) return static_cast<fp8::sm90::Schedule>(i);
  }
  return fp8::sm90::Schedule::tiles;
}

class Fp8Sm90Launcher final : public fp8::QuantisingLauncher {
 public:
  explicit Fp8Sm90Launcher(const LaunchOptions& o)
      : QuantisingLauncher(o), schedule_(schedule_option(o)), fault_(o.fault) {}

  // The quantisation's workspace, and after it the dynamic grid's tile counter.
  std::size_t workspace_bytes(const Shape& s, const Tiles& t) const override {
    if (fp8::sm90::plan_of(schedule_).grid != hopper::Grid::dynamic)
      return QuantisingLauncher::workspace_bytes(s, t);
    return fp8::sm90::tile_counter_offset(s) + hopper::kTileCounterBytes;
  }

  // The quantisation where prequantized, then the attention's TMA descriptors, grid and kernel
  // attribute for this (shape, tiles, buffers): host work that Nsight Compute's range replay
  // cannot capture, done before the measured runs.
  std::string prepare(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                      cudaStream_t stream) override {
    if (std::string e = QuantisingLauncher::prepare(s, t, b, stream); !e.empty()) return e;
    return prepared_.prepare(hopper::launch_key(s, t, b),
                             [&](hopper::Enqueue* out) { return encode(s, t, b, out); });
  }

  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fp8"); !e.empty()) return e;
    if (std::string e = zero_tile_counter(s, b, stream); !e.empty()) return e;
    if (std::string e = quantise_step(s, b, stream); !e.empty()) return e;
    phase_begin("attention (E4M3 wgmma)");
    std::string e = prepared_.run(
        hopper::launch_key(s, t, b), [&](hopper::Enqueue* out) { return encode(s, t, b, out); },
        stream);
    phase_end();
    return e;
  }

 private:
  // The attention's launch prepared by the instantiation for (d, tiles, causal, faults).
  std::string encode(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                     hopper::Enqueue* out) const {
    return Fp8Sm90Tiles::dispatch("fp8", s.d, t, [&](auto shape) {
      using S = decltype(shape);
      return with_causal(s.causal, [&](auto causal) {
        constexpr bool kCausal = decltype(causal)::value;
        return fault_.any() ? fp8::sm90::prepare_launch<S::D, S::BR, S::BC, kCausal, true>(
                                  s, b, schedule_, fault_, out)
                            : fp8::sm90::prepare_launch<S::D, S::BR, S::BC, kCausal, false>(
                                  s, b, schedule_, fault_, out);
      });
    });
  }

  static fp8::sm90::Schedule schedule_option(const LaunchOptions& o) {
    const auto it = o.options.find(kOptionFp8Schedule);
    const std::string* name =
        it == o.options.end() ? nullptr : std::get_if<std::string>(&it->second);
    return name ? schedule_named(*name) : fp8::sm90::Schedule::tiles;
  }

  // The counter must be zero before the first launch on a workspace (callers poison it); every
  // launch leaves it zero, so later launches on the same workspace need no memset (fa3's rule).
  std::string zero_tile_counter(const Shape& s, const DeviceBuffers& b, cudaStream_t stream) {
    if (fp8::sm90::plan_of(schedule_).grid != hopper::Grid::dynamic) return "";
    const std::size_t offset = fp8::sm90::tile_counter_offset(s);
    if (!b.workspace || b.workspace_bytes < offset + hopper::kTileCounterBytes)
      return "fp8: workspace too small for the tile counter";
    if (b.workspace == zeroed_workspace_) return "";
    if (cudaMemsetAsync(static_cast<unsigned char*>(b.workspace) + offset, 0,
                        hopper::kTileCounterBytes, stream) != cudaSuccess)
      return "fp8: cannot clear the tile counter";
    zeroed_workspace_ = b.workspace;
    return "";
  }

  fp8::sm90::Schedule schedule_;
  FaultInjection fault_;
  const void* zeroed_workspace_ = nullptr;
  hopper::PreparedLaunch prepared_;
};

// The option's values, in the order of fp8::sm90::Schedule.
static_assert(std::size(kFp8Schedules) == 3 &&
              static_cast<int>(fp8::sm90::Schedule::dynamic_tma_store) == 2);

}  // namespace

std::size_t fp8::sm90::tile_counter_offset(const Shape& s) {
  return (fp8::workspace_bytes(s) + 15) / 16 * 16;
}

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

std::string fp8_row_rule(const Shape& s, const RowSpec& row) {
  const OptionValue* value = row.option(kOptionFp8Schedule);
  const std::string* name = value ? std::get_if<std::string>(value) : nullptr;
  if (!name) return "";
  const int block_q = row.tiles().block_q;
  if (!fp8::sm90::grid_built(fp8::sm90::plan_of(schedule_named(*name)).grid, block_q, s.causal))
    return "unsupported: fp8 schedule " + *name + " has no build for the causal " +
           std::to_string(block_q) + "-row tile (its kernel spills)";
  return "";
}

}  // namespace fa
