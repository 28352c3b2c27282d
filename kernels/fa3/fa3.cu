// fa3: the launcher and the variant's entry points. The kernel, its algorithm and its schedule:
// kernels/fa3/fa3_kernel.cuh; its instantiations, one tile shape per file: fa3_d64.cu,
// fa3_d64_192.cu, fa3_d128.cu, fa3_d256.cu (nvcc compiles one file on one core).
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
#include "kernels/fa3/fa3_bwd.hpp"
#include "kernels/fa3/fa3_launch.hpp"

namespace fa {
namespace {

// The compiled tile shapes (fa3_tiles.hpp); the first of each head dim is the default.
using fa3::kTileD128;
using fa3::kTileD256;
using fa3::kTileD64;
using fa3::kTileD64Small;
using Fa3Tiles = TileList<TileShape<64, kTileD64.block_q, kTileD64.block_kv>,
                          TileShape<64, kTileD64Small.block_q, kTileD64Small.block_kv>,
                          TileShape<128, kTileD128.block_q, kTileD128.block_kv>,
                          TileShape<256, kTileD256.block_q, kTileD256.block_kv>>;

// The schedule a launch runs: the one its options name, else the shape's default
// (fa3_default_schedule), so a launcher built without the option (the tests) runs what a planned
// row without --fa3-schedule runs.
class Fa3Launcher final : public Launcher {
 public:
  Fa3Launcher(std::optional<fa3::Schedule> named, const FaultInjection& fault)
      : named_(named), fault_(fault), backward_(fault) {}
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
    if (std::string e = needs_contiguous_cache(s, "fa3"); !e.empty()) return e;
    if (!s.square())
      return "unsupported: fa3 takes a K/V length equal to the query length (" + shape_text(s) +
             ")";
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
  // The backward pass (kernels/fa3/fa3_bwd_kernel.cuh).
  std::size_t backward_workspace_bytes(const Shape& s, const Tiles& t) const override {
    return backward_.workspace_bytes(s, t);
  }
  std::string prepare_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                               cudaStream_t) override {
    return backward_.prepare(s, t, b);
  }
  std::string run_backward(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                           cudaStream_t stream) override {
    if (std::string e = needs_square_mha(s, "fa3's backward"); !e.empty()) return e;
    return backward_.run(s, t, b, stream);
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
  Fa3Backward backward_;
};

// The option's values (kFa3Schedules, fa3.hpp) and the schedules they select.
struct NamedSchedule {
  const char* name;
  fa3::Schedule schedule;
};
constexpr NamedSchedule kSchedules[] = {
    {kFa3Schedules[0], fa3::Schedule::full},
    {kFa3Schedules[1], fa3::Schedule::no_pingpong},
    {kFa3Schedules[2], fa3::Schedule::no_overlap},
    {kFa3Schedules[3], fa3::Schedule::persistent},
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
  const int d = static_cast<int>(s.d);
  if (!fa3::schedule_built(n->schedule, d, s.dtype))
    return "unsupported: schedule " + *name + " is compiled for bf16 at d=64 and 128 alone (" +
           std::string(to_string(s.dtype)) + " at d=" + std::to_string(d) + " runs " +
           fa3::default_schedule(d) + ", its default)";
  const Tiles t = row.tiles();
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
  return "";
}

std::string fa3_build_status() {
  return "built for sm_90a with CuTe (nvidia-cutlass " FA_CUTLASS_VERSION ")";
}

}  // namespace fa
