// The energy window through the real NVML on the GPU: a copy's energy per launch is the counter's
// power times its time, agrees with the sampled power, and repeats; the energy model fits the
// device's calibration kernels. Skipped without a GPU, or (with the reason) where the driver
// gives no energy counter.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/common/cuda_check.hpp"
#include "kernels/common/device_buffer.hpp"
#include "profiler/ceilings.hpp"
#include "profiler/device_info.hpp"
#include "profiler/energy_queue.hpp"

namespace fa::energy {
namespace {

struct Gpu {
  DeviceInfo device;
  std::unique_ptr<PowerSource> power;
};

// The device and its NVML power source, or why the test cannot run.
std::optional<Gpu> gpu(std::string* why) {
  const auto device = query_device(0, why);
  if (!device) return std::nullopt;
  auto power = nvml_power_source(device->pci_bus_id, why);
  if (!power) return std::nullopt;
  if (const Reading r = power->total_energy_mj(); !r.ok) {
    *why = "no energy counter: " + r.error;
    return std::nullopt;
  }
  return Gpu{*device, std::move(power)};
}

// One window of a 1 GiB device-to-device copy (2 GiB of DRAM traffic per launch).
Measurement copy_window(Gpu& g, cudaStream_t stream) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceAllocation a(bytes), b(bytes);
  FA_CUDA_CHECK(cudaMemsetAsync(a.ptr, 1, bytes, stream));
  auto launch = [&] {
    const cudaError_t e = cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, stream);
    return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
  };
  for (int i = 0; i < 3; ++i) launch();
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  StreamLaunchQueue queue(stream, launch);
  // An estimate of a launch's time is enough to size the batches: 2 GiB at ~2 TB/s.
  return measure(*g.power, queue, steady_clock(), 1e-3, Settings{});
}

TEST(EnergyGpu, CopyWindowThroughNvml) {
  std::string why;
  auto g = gpu(&why);
  if (!g) GTEST_SKIP() << why;
  cudaStream_t stream;
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Measurement a = copy_window(*g, stream);
  ASSERT_EQ(a.status, "ok") << a.reason;
  // A board draws tens to a thousand watts; the energy is that power over a launch's time.
  EXPECT_GT(a.power_w, 30);
  EXPECT_LT(a.power_w, 1500);
  EXPECT_NEAR(*a.energy_per_launch_mj, a.power_w * a.seconds_per_launch * 1e3,
              1e-9 * *a.energy_per_launch_mj);
  EXPECT_GE(a.window_s, Settings{}.window_s);
  EXPECT_GE(a.counter_updates, kMinCounterUpdates);
  EXPECT_GT(a.sm_clock_min_mhz, 0);
  EXPECT_LE(a.sm_clock_min_mhz, a.sm_clock_mean_mhz);
  std::printf(
      "copy 1 GiB: %.2f mJ per launch, %.1f W (sampled %.1f W, %d samples), %.3f ms per "
      "launch, %d counter updates in %.2f s (every %.1f ms), SM clock %.0f / %.0f MHz\n",
      *a.energy_per_launch_mj, a.power_w, a.sampled_power_w, a.power_samples,
      a.seconds_per_launch * 1e3, a.counter_updates, a.window_s,
      1e3 * a.window_s / a.counter_updates, a.sm_clock_mean_mhz, a.sm_clock_min_mhz);
  // The same window again: the figure repeats (issue 43 asks 3% of three runs).
  const Measurement b = copy_window(*g, stream);
  ASSERT_EQ(b.status, "ok") << b.reason;
  EXPECT_NEAR(*b.energy_per_launch_mj / *a.energy_per_launch_mj, 1.0, 0.03);
  cudaStreamDestroy(stream);
}

TEST(EnergyGpu, ModelFitsTheCalibrationKernels) {
  std::string why;
  auto g = gpu(&why);
  if (!g) GTEST_SKIP() << why;
  const Fit f = measure_energy_model(g->device, *g->power, Settings{});
  ASSERT_EQ(f.status, "ok") << f.reason;
  std::printf(
      "energy model: pJ/FLOP bf16 %.3f (wgmma) %.3f (mma.sync), fp8 %.3f (wgmma) %.3f "
      "(mma.sync), %.1f pJ/warp instruction (at %.0f MHz, clock exponent %.2f, floor %.0f MHz: "
      "%s), %.2f pJ/L2 byte, %.2f pJ/DRAM byte, %.1f W constant + %.1f W busy SMs; residuals rms "
      "%.1f%%, max %.1f%%%s%s\n",
      f.eps_flop16_pj, f.eps_mma16_pj.value_or(NAN), f.eps_flop8_pj.value_or(NAN),
      f.eps_mma8_pj.value_or(NAN), f.eps_inst_pj, f.f_ref_mhz, f.clock_exponent, f.clock_knee_mhz,
      f.clock_exponent_basis.c_str(), f.eps_l2_byte_pj.value_or(NAN), f.eps_byte_pj, f.idle_w,
      f.busy_w, 100 * f.residual_rms, 100 * f.residual_max, f.reason.empty() ? "" : "; ",
      f.reason.c_str());
  for (std::size_t i = 0; i < f.points.size(); ++i) {
    const CalibrationPoint& p = f.points[i];
    std::printf(
        "  %-40s %8.3f ms %9.2f mJ %7.1f W %10.4g inst %10.4g L2 B %10.4g DRAM B %4.2f SMs %5.0f "
        "MHz %4.0f/%4.0f C  residual %+.1f%%\n",
        p.kernel.c_str(), p.seconds * 1e3, p.energy_j * 1e3, p.energy_j / p.seconds, p.instructions,
        p.l2_bytes, p.bytes, p.active_sm_fraction, p.sm_clock_mhz, p.temperature_c,
        p.temperature_max_c, 100 * f.residuals[i]);
  }
  EXPECT_GT(f.idle_w, 10);
  EXPECT_GT(f.eps_byte_pj, 0);
  EXPECT_GT(f.eps_flop16_pj, 0);
  EXPECT_GT(f.eps_inst_pj, 0);
  EXPECT_GT(f.f_ref_mhz, 0);
  EXPECT_TRUE(f.eps_mma16_pj) << "no mma.sync calibration point";
  // The GPU tests run where the counters are allowed: the SM <-> L2 bytes were counted.
  EXPECT_TRUE(f.eps_l2_byte_pj) << f.reason;
  EXPECT_TRUE(f.reason.empty()) << f.reason;
  // The sleep kernel runs last, on a GPU the GEMMs warmed (docs/energy.md).
  EXPECT_EQ(f.points.back().kernel, "sleep 1 ms");
  // The rows' model is held to 15%: the calibration it rests on must fit better than that.
  EXPECT_LT(f.residual_max, 0.10);
}

}  // namespace
}  // namespace fa::energy
