// fa3: the launcher and the variant's entry points. The kernel, its algorithm and its schedule:
// kernels/fa3/fa3_kernel.cuh; its instantiations, one head dimension per file: fa3_d64.cu,
// fa3_d64_192.cu, fa3_d128.cu, fa3_d128_176.cu, fa3_d256.cu (nvcc compiles one file on one core;
// the 40 kernels in one file took 4 minutes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <variant>
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
// 128x176 at d=128 is FlashAttention-3's non-causal tile (Bc = 176: 11 k-steps of P V, wgmma
// n176 for Q K^T); its shared memory (208 KB) leaves no room for the TMA-store epilogue's O. It is
// one of the alternatives (CMake FA_FA3_ALTERNATIVES, scripts/fa3_tune.sh).
// 128x80 at d=256 is FlashAttention-3's d=256 tile: O alone takes 128 of a consumer thread's 240
// registers (64 x 256 fp32 per warpgroup), so Bc is what is left (S 40, P 20); Q (64 KB) and the
// two-stage K/V ring (160 KB) fill the shared memory, so O leaves from registers.
// Defaults: the first tile of each head dim (a one-line reorder); the schedule's grid and
// epilogue per (d, causal): fa3::default_plan in fa3_launch.hpp.
#if FA3_ALTERNATIVES
using Fa3Tiles =
    TileList<TileShape<64, 192, 128>, TileShape<64, 128, 128>, TileShape<128, 128, 128>,
             TileShape<128, 128, 176>, TileShape<256, 128, 80>>;
#else
using Fa3Tiles = TileList<TileShape<64, 192, 128>, TileShape<64, 128, 128>,
                          TileShape<128, 128, 128>, TileShape<256, 128, 80>>;
#endif

// The schedule a launch runs: the one its options name, else the shape's default
// (fa3_default_schedule), so a launcher built without the option (the tests) runs what a planned
// row without --fa3-schedule runs.
class Fa3Launcher final : public Launcher {
 public:
  Fa3Launcher(std::optional<fa3::Schedule> named, const FaultInjection& fault)
      : named_(named), fault_(fault) {}
  // The dynamic grid's tile counter (kernels/fa3/fa3_launch.hpp).
  std::size_t workspace_bytes(const Shape& s, const Tiles& t) const override {
    const int d = static_cast<int>(s.d);
    const fa3::Plan plan = fa3::plan_of(schedule_for(s), d, t.block_kv, s.causal, t.block_q / 64,
                                        fa3::o_buffer_fits(d, t.block_q, t.block_kv));
    return plan.grid == fa3::Grid::dynamic ? fa3::kTileCounterBytes : 0;
  }
  // The TMA descriptors, the grid and the kernel's attribute for this (shape, tiles, buffers):
  // host work that Nsight Compute's range replay cannot capture, done before the measured runs.
  std::string prepare(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                      cudaStream_t) override {
    return prepared_.prepare(hopper::launch_key(s, t, b),
                             [&](hopper::Enqueue* out) { return encode(s, t, b, out); });
  }
  std::string run(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                  cudaStream_t stream) override {
    // The counter must be zero before the first launch on a workspace (callers poison it); every
    // launch leaves it zero, so later launches on the same workspace need no memset.
    if (b.workspace && b.workspace_bytes >= fa3::kTileCounterBytes &&
        b.workspace != zeroed_workspace_) {
      if (cudaMemsetAsync(b.workspace, 0, fa3::kTileCounterBytes, stream) != cudaSuccess)
        return "fa3: cannot clear the tile counter";
      zeroed_workspace_ = b.workspace;
    }
    return prepared_.run(
        hopper::launch_key(s, t, b), [&](hopper::Enqueue* out) { return encode(s, t, b, out); },
        stream);
  }

 private:
  // The launch prepared by the instantiation for (d, tiles, causal, dtype, faults).
  std::string encode(const Shape& s, const Tiles& t, const DeviceBuffers& b,
                     hopper::Enqueue* out) const {
    return dispatch_tiles<Fa3Tiles>("fa3", s, t, [&](auto shape, auto causal, auto type) {
      using S = decltype(shape);
      constexpr bool kCausal = decltype(causal)::value;
      using T = typename decltype(type)::type;
      return fault_.any() ? fa3::prepare_launch<S::D, S::BR, S::BC, kCausal, T, true>(
                                s, b, schedule_for(s), fault_, out)
                          : fa3::prepare_launch<S::D, S::BR, S::BC, kCausal, T, false>(
                                s, b, schedule_for(s), fault_, out);
    });
  }
  fa3::Schedule schedule_for(const Shape& s) const;

  std::optional<fa3::Schedule> named_;
  FaultInjection fault_;
  const void* zeroed_workspace_ = nullptr;
  hopper::PreparedLaunch prepared_;
};

// The option's values (kFa3Schedules, fa3.hpp) and the schedules they select.
struct NamedSchedule {
  const char* name;
  fa3::Schedule schedule;
  bool alternative;  // compiled for bf16 only
};
constexpr NamedSchedule kSchedules[] = {
    {kFa3Schedules[0], fa3::Schedule::full, false},
    {kFa3Schedules[1], fa3::Schedule::no_pingpong, false},
    {kFa3Schedules[2], fa3::Schedule::no_overlap, false},
    {kFa3Schedules[3], fa3::Schedule::persistent, false},
    {kFa3Schedules[4], fa3::Schedule::tma_store, true},
    {kFa3Schedules[5], fa3::Schedule::persistent_tma_store, true},
    {kFa3Schedules[6], fa3::Schedule::dynamic, true},
    {kFa3Schedules[7], fa3::Schedule::dynamic_tma_store, true},
};
static_assert(std::size(kSchedules) == std::size(kFa3Schedules));

const NamedSchedule* schedule_named(const std::string& name) {
  for (const NamedSchedule& n : kSchedules) {
    if (name == n.name) return &n;
  }
  return nullptr;
}

fa3::Schedule Fa3Launcher::schedule_for(const Shape& s) const {
  if (named_) return *named_;
  const OptionValue v = fa3_default_schedule(s);
  const std::string* name = std::get_if<std::string>(&v);
  const NamedSchedule* n = name ? schedule_named(*name) : nullptr;
  return n ? n->schedule : fa3::Schedule::full;
}

}  // namespace

std::vector<Tiles> fa3_tile_options(int d) {
  return Fa3Tiles::options(d);
}

bool fa3_alternatives_built() {
  return fa3::kAlternativesBuilt;
}

// Without a schedule option the launcher runs the shape's default (Fa3Launcher::schedule_for); a
// planned row always carries one (its shape's default where the run named none).
std::unique_ptr<Launcher> make_fa3_launcher(const LaunchOptions& o) {
  std::optional<fa3::Schedule> named;
  for (const NamedSchedule& n : kSchedules) {
    if (o.is(kOptionFa3Schedule, std::string(n.name))) named = n.schedule;
  }
  return std::make_unique<Fa3Launcher>(named, o.fault);
}

std::string fa3_shape_rule(const Shape&) {
  return "";
}

std::string fa3_row_rule(const Shape& s, const RowSpec& row) {
  const OptionValue* value = row.option(kOptionFa3Schedule);
  const std::string* name = value ? std::get_if<std::string>(value) : nullptr;
  const NamedSchedule* n = name ? schedule_named(*name) : nullptr;
  if (!n) return "";
  const Tiles t = row.tiles();
  const int d = static_cast<int>(s.d);
  if (n->alternative && !fa3::kAlternativesBuilt)
    return "unsupported: schedule " + *name +
           " not compiled (configured with -DFA_FA3_ALTERNATIVES=OFF)";
  if (n->alternative && s.dtype != DType::bf16)
    return "unsupported: schedule " + *name + " is compiled for bf16 only (the tuning runs)";
  const fa3::Plan plan = fa3::plan_of(n->schedule, d, t.block_kv, s.causal, t.block_q / 64,
                                      fa3::o_buffer_fits(d, t.block_q, t.block_kv));
  if (!fa3::grid_built(plan.grid, t.block_q, t.block_kv, s.causal)) {
    // A compiled tile of this head dim that has the grid, else the schedules that run this tile.
    std::string instead = "; schedules full, no-pingpong and no-overlap run this tile";
    for (const Tiles& other : Fa3Tiles::options(d)) {
      if (fa3::grid_built(plan.grid, other.block_q, other.block_kv, s.causal))
        instead = "; --block-q " + std::to_string(other.block_q) + " --block-kv " +
                  std::to_string(other.block_kv);
    }
    return "unsupported: schedule " + *name + " has no build for the " + std::to_string(t.block_q) +
           "x" + std::to_string(t.block_kv) + (s.causal ? " causal" : "") +
           " tile (its kernel spills)" + instead;
  }
  if (plan.epilogue == fa3::Epilogue::tma_store && !fa3::o_buffer_fits(d, t.block_q, t.block_kv))
    return "unsupported: schedule " + *name + " needs shared memory for O, which a " +
           std::to_string(t.block_q) + "x" + std::to_string(t.block_kv) +
           " tile at d=" + std::to_string(d) + " has not left";
  return "";
}

std::string fa3_build_status() {
  return "built for sm_90a with CuTe (nvidia-cutlass " FA_CUTLASS_VERSION ")";
}

}  // namespace fa
