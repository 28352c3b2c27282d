// The energy model beside the IO model, after the energy roofline of Choi, Bedard, Fowler and
// Vuduc ("A roofline model of energy", IPDPS 2013), with the terms the attention kernels need
// (docs/energy.md says why, with the H200's figures): a launch costs
//   E = s * (eps16 * F16 + eps8 * F8 + mma16 * M16 + mma8 * M8 + eps_inst * I)
//       + eps_l2 * L + eps_byte * B + P_dram * t_B + (P0 + P_busy * a) * t,
//   s = (max(f, f_knee) / f_ref)^alpha,
// with eps16/eps8 per bf16/fp16 and fp8 tensor FLOP by wgmma (operands from shared memory),
// mma16/mma8 per tensor FLOP by warp-level mma.sync (operands loaded into registers first:
// ldmatrix and register-file traffic per FLOP), eps_inst per warp instruction issued (what
// sm__inst_executed.sum counts: the work on CUDA cores and the register file), eps_l2 per byte
// between the SMs and the L2 (the sectors L1TEX exchanges with the crossbar: loads, cp.async, TMA,
// stores), eps_byte per byte moved to or from HBM, P_dram the power HBM draws while it moves any
// (t_B: t where the launch moves DRAM bytes, else 0: out of its low-power states), P0 the power the
// device draws while a kernel runs whatever it does (the paper's pi_0; called idle power in the
// outputs) and P_busy what the SMs add while their warps issue at all (a the fraction of SMs that
// run the kernel's warps: 1 for an attention launch, 0 for a kernel that sleeps). The dynamic
// energies on the SM clock's voltage scale with the SM clock f (CMOS: C V^2 per operation, V rising
// with f under DVFS down to a floor at f_knee), quoted at f_ref, the device's highest SM clock;
// alpha and f_knee are fitted where the calibration windows ran at clocks far enough apart
// (power-capped GEMMs beside GEMMs on a part of the SMs), else alpha = 2 and no floor. The L2's and
// HBM's bytes stay unscaled: their own clocks. Everything is fitted once per device, by
// non-negative least squares on relative errors, from calibration kernels whose FLOPs,
// instructions, bytes, times and clocks are known (profiler/ceilings.cu); never from the attention
// rows themselves.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fa::energy {

// One calibration kernel's window: what it did per launch and what that cost.
struct CalibrationPoint {
  std::string kernel;   // "sleep 1 ms", "copy 1 GiB, 132 blocks", "bf16 GEMM 8192", ...
  double flops16 = 0;   // bf16/fp16 tensor FLOPs per launch by wgmma (operands from shared memory)
  double flops8 = 0;    // fp8 tensor FLOPs per launch by wgmma
  double bytes = 0;     // DRAM bytes per launch
  double seconds = 0;   // per launch
  double energy_j = 0;  // measured, per launch
  double instructions = 0;  // warp instructions per launch (as sm__inst_executed.sum counts them)
  double sm_clock_mhz = 0;  // the window's mean SM clock; 0: not read
  double temperature_c = 0, temperature_max_c = 0;  // the window's mean and max; 0: not read
  // Tensor FLOPs per launch by warp-level mma.sync, whose operands reach the tensor cores through
  // registers (ldmatrix from shared memory first): bf16/fp16 and fp8.
  double flops16_mma = 0, flops8_mma = 0;
  // Bytes between the SMs and the L2 per launch (counted: l1tex <-> xbar sectors x 32); 0 where
  // the calibration could not count them.
  double l2_bytes = 0;
  // The fraction of the SMs that run the kernel's warps (0 for the sleep kernel, whose warps
  // sleep; blocks / SMs for a grid of one block per SM on part of them).
  double active_sm_fraction = 1;
};

struct Fit {
  std::string status = "ok";  // ok | refused (degenerate or too few points) | unavailable
  std::string reason;
  // 5: this model. 4: a fit before DRAM's active power (P_dram = 0). 3: a fit before the L2 term,
  // the busy-SM power and the clock floor (eps_l2 = P_busy = 0, f_knee = 0). 2: a fit of an
  // fa-bench before the mma.sync terms and the fitted clock exponent (alpha = 2, one energy per
  // FLOP whatever the instruction). 1: before the instruction term and the clock factor (no
  // eps_inst_pj): kept for the record, never used to predict. The ceilings cache measures the
  // calibration again for any fit older than 5.
  int version = 5;
  double eps_flop16_pj = 0;            // pJ per bf16/fp16 wgmma FLOP at f_ref
  std::optional<double> eps_flop8_pj;  // pJ per fp8 wgmma FLOP at f_ref; none without fp8 points
  // pJ per mma.sync FLOP at f_ref (bf16/fp16, fp8); none without an mma.sync calibration point.
  std::optional<double> eps_mma16_pj, eps_mma8_pj;
  double eps_inst_pj = 0;  // pJ per warp instruction at f_ref
  // alpha and f_knee in s = (max(f, f_knee) / f_ref)^alpha, and how they were set: "fitted over
  // A-B MHz" or why alpha is 2 and there is no floor (f_knee 0).
  double clock_exponent = 2;
  double clock_knee_mhz = 0;
  std::string clock_exponent_basis;
  std::optional<double> eps_l2_byte_pj;  // pJ per SM <-> L2 byte; none where it was not counted
  double eps_byte_pj = 0;                // pJ per DRAM byte
  double idle_w = 0;                     // W while a kernel runs (the paper's constant power)
  double busy_w = 0;                     // W the SMs add while they run warps (all of them)
  double dram_active_w = 0;              // W HBM draws while it moves bytes, above idle_w
  double f_ref_mhz = 0;                  // the SM clock the dynamic energies are quoted at
  std::vector<CalibrationPoint> points;  // what it was fitted to
  std::vector<double> residuals;         // per point: model / measured - 1
  double residual_rms = 0, residual_max = 0;  // of |residuals|
};

// Fits the model to the points. `f_ref_mhz`: the device's highest SM clock; <= 0 takes the largest
// mean clock among the points. Refused (status, one-line reason) when the points cannot separate
// the unknowns: fewer points than unknowns, no point of a required kind (a duration, a GEMM, a
// copy, instructions), a point without its clock, or a term that moves in proportion with the
// others in every point.
Fit fit(const std::vector<CalibrationPoint>& points, double f_ref_mhz = 0);

// Whether a cached fit is to be made again: none, not ok, or made without the counters (no L2
// term) while the counters are on now (they may work: no permission then, or CUPTI taken).
bool fit_again(const std::optional<Fit>& cached, bool counters_on);

// (max(f, knee) / f_ref)^exponent: how the dynamic energies scale at the SM clock f.
double clock_scale(double sm_clock_mhz, double f_ref_mhz, double exponent, double knee_mhz = 0);

// What one launch did, for its model figure.
struct Launch {
  bool fp8 = false;         // its matrix FLOPs are fp8 (else bf16/fp16)
  double flops = 0;         // matrix FLOPs
  double bytes = 0;         // DRAM bytes
  double instructions = 0;  // warp instructions
  double seconds = 0;
  double sm_clock_mhz = 0;  // the mean SM clock of its energy window
  std::string bytes_basis;  // "counters" | "model"
  bool mma_sync = false;    // its matrix products run on mma.sync (else wgmma)
  double l2_bytes = 0;      // SM <-> L2 bytes (counted)
};

// The model's energy for one launch, in parts.
struct Breakdown {
  // byte_mj: DRAM's, its bytes and its active power (eps_byte x B + P_dram x t); idle_mj: the
  // constant power and the busy SMs' (P0 + P_busy) x t.
  double flop_mj = 0, inst_mj = 0, l2_mj = 0, byte_mj = 0, idle_mj = 0;
  double total_mj() const { return flop_mj + inst_mj + l2_mj + byte_mj + idle_mj; }
  std::string bytes_basis;  // "counters" (measured DRAM bytes) | "model" (the IO model's)
  // What it was computed from; clock_scale = (max(sm_clock_mhz, f_knee) / f_ref)^alpha.
  double flops = 0, bytes = 0, l2_bytes = 0, instructions = 0, seconds = 0;
  double sm_clock_mhz = 0, clock_scale = 1;
  std::string flop_instruction;  // which energy per FLOP priced it: "wgmma" | "mma.sync" | ""
  // 1: read from a file of an fa-bench before the instruction term and the clock factor (no
  // inst_mj there; written back without it). 2: before the L2 part (no l2_mj, l2_bytes,
  // flop_instruction). 3: this one.
  int version = 3;
};

// The launch's figure, or nullopt with `why_not` (one line): the fit not ok or of version 1, no
// energy per FLOP for the launch's precision and tensor instruction, no counted SM <-> L2 bytes
// where the fit prices them, no SM clock reading.
std::optional<Breakdown> predict(const Fit& f, const Launch& launch,
                                 std::string* why_not = nullptr);

namespace detail {
// The non-negative least squares fit() solves, on relative errors (each point's row divided by
// its target, against 1): at most 9 columns, one row per point. For the tests.
std::vector<double> nonnegative_least_squares(const std::vector<std::vector<double>>& rows,
                                              const std::vector<double>& target);
}  // namespace detail

}  // namespace fa::energy
