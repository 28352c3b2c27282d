// The energy model beside the IO model, after the energy roofline of Choi, Bedard, Fowler and
// Vuduc ("A roofline model of energy", IPDPS 2013): a launch costs
//   E = eps_flop[precision] * FLOPs + eps_byte * DRAM bytes + P_const * t,
// with eps_flop per tensor precision (bf16/fp16 share one, fp8 its own), eps_byte per byte moved
// to or from HBM and P_const the power the device draws while a kernel runs whatever it does
// (the paper's pi_0; called idle power in the outputs). The four are fitted once per device, by
// non-negative least squares on relative errors, from calibration kernels whose FLOPs, bytes and
// times are known (profiler/ceilings.cu); docs/energy.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fa::energy {

// One calibration kernel's window: what it did per launch and what that cost.
struct CalibrationPoint {
  std::string kernel;   // "spin", "copy 1/4 grid", "bf16 GEMM 8192", ...
  double flops16 = 0;   // bf16/fp16 tensor FLOPs per launch
  double flops8 = 0;    // fp8 tensor FLOPs per launch
  double bytes = 0;     // DRAM bytes per launch
  double seconds = 0;   // per launch
  double energy_j = 0;  // measured, per launch
};

struct Fit {
  std::string status = "ok";  // ok | refused (degenerate or too few points) | unavailable
  std::string reason;
  double eps_flop16_pj = 0;                   // pJ per bf16/fp16 FLOP
  std::optional<double> eps_flop8_pj;         // pJ per fp8 FLOP; none without fp8 calibration
  double eps_byte_pj = 0;                     // pJ per DRAM byte
  double idle_w = 0;                          // W while a kernel runs (the paper's constant power)
  std::vector<CalibrationPoint> points;       // what it was fitted to
  std::vector<double> residuals;              // per point: model / measured - 1
  double residual_rms = 0, residual_max = 0;  // of |residuals|
};

// Fits the model to the points. Refused (status, one-line reason) when the points cannot separate
// the unknowns: fewer points than unknowns, or a term that moves in proportion with the others
// in every point.
Fit fit(const std::vector<CalibrationPoint>& points);

// The model's energy for one launch, in parts.
struct Breakdown {
  double flop_mj = 0, byte_mj = 0, idle_mj = 0;
  double total_mj() const { return flop_mj + byte_mj + idle_mj; }
  std::string bytes_basis;  // "counters" (measured DRAM bytes) | "model" (the IO model's)
  double flops = 0, bytes = 0, seconds = 0;  // what it was computed from
};

// A launch of `flops` tensor FLOPs (fp8 or bf16/fp16), `bytes` DRAM bytes and `seconds`. nullopt
// when the fit is not ok or has no eps for fp8.
std::optional<Breakdown> predict(const Fit& f, bool fp8, double flops, double bytes, double seconds,
                                 const std::string& bytes_basis);

}  // namespace fa::energy
